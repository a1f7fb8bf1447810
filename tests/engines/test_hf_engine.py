"""The transformers engine (llmqueue.engines.hf_engine) without transformers: its settings
checked by key, its steps counted as the vLLM runs' step log counts them (from stand-ins for
transformers' request states), the step recorder's preempted and finished ids, and the refusal,
in one line naming the environment file, when the package is missing."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from llmqueue.engines.environment import ENGINE_ENVS, require_engine
from llmqueue.engines.hf_engine import HFEngineSettings, StepRecorder, scheduled_request
from llmqueue.engines.single_run import ENGINES, engine_settings
from llmqueue.engines.steplog import STEP_LOG_COLUMNS
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SECTION = CONFIG["validation"]["transformers"]["engine"]


def test_the_project_settings_are_valid_and_match_the_vllm_workload() -> None:
    s = HFEngineSettings.from_config(SECTION)
    vllm = CONFIG["validation"]["vllm"]["engine"]
    # the same KV capacity, budget and cap as the vLLM runs, so the two engines serve alike
    assert s.kv_tokens == vllm["kv_blocks"] * vllm["block_size"]
    assert s.max_batch_tokens == vllm["max_num_batched_tokens"]
    assert s.max_requests_per_batch == vllm["max_num_seqs"]
    assert s.to_dict() == dict(SECTION)
    assert set(ENGINES) == set(ENGINE_ENVS)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"num_blocks": 0}, "num_blocks"),
        ({"page_size": 2.5}, "page_size"),
        ({"max_requests_per_batch": True}, "max_requests_per_batch"),
        ({"scheduler_type": "sjf"}, "scheduler_type"),
        ({"attn_implementation": "flash_attention_2"}, "attn_implementation"),
        ({"threads": -1}, "threads"),
        ({"num_blocks": 4}, "max_model_len"),  # 4 x 32 tokens cannot hold 1024
        ({"bogus": 1}, "bogus"),
    ],
)
def test_bad_settings_are_refused_by_key(change: dict[str, Any], key: str) -> None:
    bad = {**SECTION, **change}
    with pytest.raises(InputError, match=key) as err:
        HFEngineSettings.from_config(bad)
    assert "\n" not in str(err.value)


def test_a_missing_section_or_key_is_named() -> None:
    cfg = copy.deepcopy(CONFIG)
    del cfg["validation"]["transformers"]
    with pytest.raises(InputError, match="validation.transformers.engine"):
        engine_settings(cfg, cfg["validation"]["vllm"], "transformers")
    short = {k: v for k, v in SECTION.items() if k != "seed"}
    with pytest.raises(InputError, match=r"missing \['seed'\]"):
        HFEngineSettings.from_config(short)
    with pytest.raises(InputError, match="--engine must be one of"):
        engine_settings(CONFIG, CONFIG["validation"]["vllm"], "tgi")


def _state(rid: str, prompt: int, generated: int, offset: int, true_initial: int = 0) -> Any:
    """A stand-in for transformers' RequestState: ``initial_tokens`` (after a soft reset: the
    prompt and the earlier output), ``generated_tokens``, ``position_offset`` as the step's
    tensors leave it, ``_true_initial_tokens`` (the true prompt after a reset, else 0)."""
    return SimpleNamespace(request_id=rid, initial_tokens=[0] * prompt,
                           generated_tokens=[0] * generated, position_offset=offset,
                           _true_initial_tokens=true_initial)  # fmt: skip


def test_each_kind_of_scheduled_request_is_counted_as_vllm_counts_it() -> None:
    # the first chunk of a 100-token prompt (64 of the budget): admitted, no first token yet
    first = scheduled_request(_state("a", 100, 0, 64), 64)
    assert first.starts_from_empty and not first.completes_prompt and not first.is_decode
    # the last 36 tokens: the prompt completes, the step samples the first output token
    last = scheduled_request(_state("a", 100, 0, 100), 36)
    assert last.completes_prompt and not last.starts_from_empty and not last.is_decode
    # a decode with 3 tokens out: the last one is fed, the cache then holds prompt + 3
    dec = scheduled_request(_state("a", 100, 3, 103), 1)
    assert dec.is_decode and dec.computed_after == 103 and dec.output_tokens == 3
    # a soft reset after 3 tokens: prompt + output re-prefilled from an empty cache, neither a
    # first token nor a decode
    redo = scheduled_request(_state("a", 103, 0, 103, true_initial=100), 103)
    assert redo.starts_from_empty and not redo.completes_prompt and not redo.is_decode
    assert redo.output_tokens == 3


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def write(self, row: dict[str, Any]) -> None:
        self.rows.append(row)


def test_the_recorder_writes_one_row_per_step_with_preempted_and_finished_ids() -> None:
    rows = _Rows()
    tick = itertools.count()
    rec = StepRecorder(rows, clock=lambda: float(next(tick)))
    # step 1: a (prefill, completes) and b (decode); both active
    rec.planning([])
    rec.planned([(_state("a", 10, 0, 10), 10), (_state("b", 5, 2, 7), 1)], ["a", "b"], 1, 0.5)
    rec.done(["a"])  # b finished in the update
    # step 2: c was active before planning and is preempted; b's finish is reported now
    rec.planning(["a", "c"])
    rec.planned([(_state("a", 10, 1, 11), 1)], ["a"], 2, 0.25)
    rec.done(["a"])
    rec.done(["a"])  # an update without a planned step writes nothing
    rec.planning(["a"])
    rec.planned([(_state("a", 10, 2, 12), 1)], ["a"], 0, 0.25)
    rec.done([], t_done=100.0)  # stamped before the update delivered the tokens
    assert rows.rows[-1]["t_done_s"] == 100.0 and rows.rows[-1]["step"] == 3
    rows.rows.pop()
    assert [r["step"] for r in rows.rows] == [1, 2]
    one, two = rows.rows
    assert set(one) == set(STEP_LOG_COLUMNS)
    assert (one["decode_seqs"], one["prefill_tokens"], one["context_tokens"]) == (1, 10, 17)
    assert one["first_token_ids"] == "a" and one["admitted_ids"] == "a"
    assert (one["running"], one["waiting"], one["finished_ids"]) == (2, 1, "")
    assert (one["t_sched_s"], one["t_planned_s"], one["t_done_s"]) == (0.0, 1.0, 2.0)
    assert (two["preempted"], two["preempted_ids"], two["finished_ids"]) == (1, "c", "b")
    assert two["decode_seqs"] == 1 and two["kv_usage"] == 0.25


def test_a_missing_package_is_refused_in_one_line_naming_the_environment_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "transformers" else real(name, *a))  # fmt: skip
    with pytest.raises(InputError) as err:
        require_engine("measure", engine="transformers")
    msg = str(err.value)
    assert "envs/transformers-cpu.txt" in msg and ".venv-transformers" in msg and "\n" not in msg
    with pytest.raises(InputError, match="--engine must be one of"):
        require_engine("measure", engine="tgi")


def test_the_cli_refuses_bad_engine_settings_by_key_before_any_model(tmp_path: Path) -> None:
    """``llmqueue validate measure --engine transformers`` with a bad setting: exit 2, one line
    naming the key, nothing written (the config is checked before the environment and the
    model)."""
    import contextlib
    import io
    import os

    from llmqueue.cli import main

    cfg = copy.deepcopy(CONFIG)
    cfg["validation"]["vllm"]["model"]["dir"] = str(tmp_path / "model")
    cfg["validation"]["vllm"]["out"] = str(tmp_path / "out")
    cfg["validation"]["transformers"]["engine"]["scheduler_type"] = "sjf"
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["validate", "measure", "--engine", "transformers", "--config", str(path)])
    finally:
        os.chdir(cwd)
    lines = [x for x in err.getvalue().splitlines() if x.strip()]
    assert code == 2 and len(lines) == 1, err.getvalue()
    assert "scheduler_type" in lines[0] and "Traceback" not in err.getvalue()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]
