"""The machine-speed run: the worker's forward-pass record, the per-cycle table and its summary,
the committed run read back, the command's refusals."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.engine import EngineSettings, engine_environment
from llmqueue.engines.steplog import (
    MODEL_LOG_COLUMNS,
    MODEL_LOG_ENV,
    ForwardTimer,
    StepLogWriter,
    model_row,
)
from llmqueue.errors import InputError
from llmqueue.studies.validation.docs import render_validation_machine_speed
from llmqueue.studies.validation.machine_speed import (
    SERIES,
    cycle_table,
    read_speed_run,
    speed_summary,
)

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config/config.yaml").read_text())
COMMITTED = ROOT / CONFIG["validation"]["machine_speed_compare"]["dir"]


def test_model_row_and_its_file(tmp_path: Path) -> None:
    row = model_row(1.0, 1.02, 0.001, 0.019, 4, 4)
    assert row == {"t_start_s": 1.0, "t_end_s": 1.02, "wait_s": 0.001, "cpu_s": 0.019,
                   "tokens": 4, "requests": 4}  # fmt: skip
    with pytest.raises(ValueError, match="before t_start_s"):
        model_row(1.0, 0.9, 0.0, 0.0, 1, 1)
    with pytest.raises(ValueError, match="wait_s"):
        model_row(1.0, 1.1, 0.2, 0.0, 1, 1)
    with pytest.raises(ValueError, match=">= 0"):
        model_row(1.0, 1.1, 0.0, -0.1, 1, 1)
    path = tmp_path / "model.csv"
    w = StepLogWriter(path, MODEL_LOG_COLUMNS)
    w.write(row)
    w.write(model_row(2.0, 2.5, 0.0, 0.5, 16, 1))
    w.close()
    StepLogWriter(path, MODEL_LOG_COLUMNS).close()  # reopening appends, no second header
    back = pd.read_csv(path)
    assert list(back.columns) == MODEL_LOG_COLUMNS and len(back) == 2
    assert back["tokens"].tolist() == [4, 16]


class _Clock:
    """A clock that returns the values it is given, one per call."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)

    def __call__(self) -> float:
        return self.values.pop(0)


class _Rows:
    def __init__(self) -> None:
        self.rows: list[dict] = []  # type: ignore[type-arg]

    def write(self, row: dict) -> None:  # type: ignore[type-arg]
        self.rows.append(row)


def test_forward_timer_pairs_the_two_calls_and_leaves_out_the_wait() -> None:
    out = _Rows()
    # execute_model 10.000-10.020, the worker waits to 10.023, sample_tokens to 10.024
    t = ForwardTimer(out, _Clock(10.0, 10.020, 10.023, 10.024), _Clock(1.0, 1.0235))
    t.begin(4, 4)
    t.executed(has_output=False)
    assert out.rows == []
    t.sampling()
    t.sampled()
    (row,) = out.rows
    assert row["t_start_s"] == 10.0 and row["t_end_s"] == 10.024
    assert row["wait_s"] == pytest.approx(0.003) and row["cpu_s"] == pytest.approx(0.0235)
    assert (row["tokens"], row["requests"]) == (4, 4)
    # the output with the forward pass: one row, no wait; a later sample call adds nothing
    t = ForwardTimer(out, _Clock(20.0, 20.02, 20.021), _Clock(2.0, 2.02))
    t.begin(16, 1)
    t.executed(has_output=True)
    t.sampling()
    t.sampled()
    assert len(out.rows) == 2 and out.rows[1]["wait_s"] == 0.0
    assert out.rows[1]["t_end_s"] == 20.021
    # an iteration with no scheduled token is not recorded
    t = ForwardTimer(out, _Clock(30.0, 30.1, 30.2, 30.3), _Clock(3.0, 3.1))
    t.begin(0, 0)
    t.executed(has_output=False)
    t.sampling()
    t.sampled()
    assert len(out.rows) == 2


def test_timing_worker_records_through_vllms_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TimingWorker on a stand-in for vLLM's CPUWorker: execute_model returning nothing, then
    sample_tokens, gives one row; without the environment variable nothing is written."""
    import importlib
    import types

    class CPUWorker:
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.calls: list[str] = []

        def execute_model(self, scheduler_output: object) -> object:
            self.calls.append("execute")
            return None

        def sample_tokens(self, grammar_output: object) -> object:
            self.calls.append("sample")
            return "tokens"

    names = ["vllm", "vllm.v1", "vllm.v1.worker", "vllm.v1.worker.cpu_worker"]
    for name in names:
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    sys.modules["vllm.v1.worker.cpu_worker"].CPUWorker = CPUWorker  # type: ignore[attr-defined]
    monkeypatch.delitem(sys.modules, "llmqueue.engines.worker", raising=False)
    worker_mod = importlib.import_module("llmqueue.engines.worker")
    try:
        sched = types.SimpleNamespace(total_num_scheduled_tokens=4,
                                      num_scheduled_tokens={"a": 1, "b": 1, "c": 1, "d": 1})  # fmt: skip
        log = tmp_path / "model.csv"
        monkeypatch.setenv(MODEL_LOG_ENV, str(log))
        w = worker_mod.TimingWorker()
        assert w.execute_model(sched) is None
        assert w.sample_tokens(None) == "tokens"
        assert w.calls == ["execute", "sample"]
        back = pd.read_csv(log)
        assert len(back) == 1 and back["tokens"].iloc[0] == 4 and back["requests"].iloc[0] == 4
        assert 0 <= back["wait_s"].iloc[0] <= back["t_end_s"].iloc[0] - back["t_start_s"].iloc[0]
        monkeypatch.delenv(MODEL_LOG_ENV)
        quiet = worker_mod.TimingWorker()
        quiet.execute_model(sched)
        quiet.sample_tokens(None)
        assert len(pd.read_csv(log)) == 1
    finally:
        sys.modules.pop("llmqueue.engines.worker", None)


def test_the_model_log_reaches_the_engine_only_when_asked(tmp_path: Path) -> None:
    s = EngineSettings.from_config(CONFIG["validation"]["vllm"]["engine"])
    assert MODEL_LOG_ENV not in engine_environment(s, tmp_path / "steps.csv")
    env = engine_environment(s, tmp_path / "steps.csv", tmp_path / "model.csv")
    assert env[MODEL_LOG_ENV] == str(tmp_path / "model.csv")


def _synthetic(step_s: list[float], model_s: list[float], batch: int = 4, n: int = 20):
    """Cycles of `n` decode iterations each (plus one prefill iteration that must be ignored),
    iteration c taking step_s[c] and its forward pass model_s[c]."""
    cycles, steps, model = [], [], []
    t = 0.0
    for c, (st, mo) in enumerate(zip(step_s, model_s, strict=True)):
        t0 = t
        steps.append({"t_sched_s": t, "t_done_s": t + 0.05, "decode_seqs": 1, "prefill_reqs": 3})
        model.append({"t_start_s": t, "t_end_s": t + 0.04, "wait_s": 0.0, "tokens": 49,
                      "requests": 4})  # fmt: skip
        t += 0.05
        for _ in range(n):
            steps.append({"t_sched_s": t, "t_done_s": t + st, "decode_seqs": batch,
                          "prefill_reqs": 0})  # fmt: skip
            model.append({"t_start_s": t + 0.0002, "t_end_s": t + 0.0004 + mo, "wait_s": 0.0002,
                          "tokens": batch, "requests": batch})  # fmt: skip
            t += st + 0.0005
        cycles.append({"cycle": c, "t_start_s": t0, "t_end_s": t, "stream_s": 0.025 * (1 + c / 10),
                       "compute_s": 170e-6 * (1 + (c % 2) / 20), "steal_share": 0.001 * c,
                       "other_cpu_share": 0.002})  # fmt: skip
        t += 3.0
    return pd.DataFrame(cycles), pd.DataFrame(steps), pd.DataFrame(model)


def test_cycle_table_takes_medians_of_the_batch_decode_iterations() -> None:
    c, s, m = _synthetic([0.020, 0.024, 0.030], [0.019, 0.0225, 0.028])
    t = cycle_table(c, s, m, 4)
    assert t["iterations"].tolist() == [20, 20, 20]
    np.testing.assert_allclose(t["step_ms"], [20.0, 24.0, 30.0])
    np.testing.assert_allclose(t["model_ms"], [19.0, 22.5, 28.0])
    np.testing.assert_allclose(t["engine_ms"], [1.0, 1.5, 2.0])
    np.testing.assert_allclose(t["stream_ms"], [25.0, 27.5, 30.0])
    np.testing.assert_allclose(t["compute_us"], [170.0, 178.5, 170.0])
    np.testing.assert_allclose(t["steal_share"], [0.0, 0.001, 0.002])
    with pytest.raises(InputError, match="scheduler 0, worker 0"):
        cycle_table(c, s, m, 8)
    # a worker row lost: the records disagree
    with pytest.raises(InputError, match="scheduler 20, worker 19"):
        cycle_table(c, s, m.drop(index=5), 4)
    with pytest.raises(InputError, match="batch must be >= 1"):
        cycle_table(c, s, m, 0)


def test_speed_summary_spread_and_correlation() -> None:
    step = [0.020, 0.024, 0.030, 0.022]
    c, s, m = _synthetic(step, [x - 0.001 for x in step])
    t = cycle_table(c, s, m, 4)
    out = speed_summary(t).set_index("series")
    assert list(out.index) == list(SERIES)
    assert out.loc["step_ms", "corr_model"] == pytest.approx(1.0)
    assert out.loc["step_ms", "max_over_min"] == pytest.approx(1.5)
    x = np.array(step) * 1e3
    assert out.loc["step_ms", "cv"] == pytest.approx(x.std(ddof=1) / x.mean())
    assert out.loc["step_ms", "median"] == pytest.approx(23.0)
    # the stream probe and the steal grow with the cycle number, the steps do not
    assert out.loc["stream_ms", "corr_model"] < 0.9
    assert out.loc["stream_ms", "corr_steal"] == pytest.approx(1.0)
    assert out.loc["step_ms", "corr_steal"] < 0.9
    with pytest.raises(InputError, match="at least 3 cycles"):
        speed_summary(t.iloc[:2])


def test_committed_run_reads_back_consistently() -> None:
    meta = json.loads((COMMITTED / "meta.json").read_text())
    ms = meta["machine_speed"]
    cycles, steps, model = read_speed_run(COMMITTED)
    t = cycle_table(cycles, steps, model, int(ms["batch"]))
    assert len(t) == ms["cycles"] == len(cycles)
    # every cycle decoded its batch to the end: about one decode iteration per output token
    assert (t["iterations"] >= ms["output_tokens"] - 3).all()
    # every worker row lies inside the scheduler's iteration that planned it
    rows = pd.merge_asof(
        model.sort_values("t_start_s"), steps.sort_values("t_sched_s"),
        left_on="t_start_s", right_on="t_sched_s", direction="backward",
    )  # fmt: skip
    assert rows["t_sched_s"].notna().all()
    assert (rows["t_end_s"] <= rows["t_done_s"] + 1e-6).all()
    assert (rows["wait_s"] >= 0).all() and (t["engine_ms"] > 0).all()
    summary = speed_summary(t)
    assert np.isfinite(summary[["median", "cv", "max_over_min", "corr_model"]].to_numpy()).all()
    assert meta["kernels"]["stream_bytes"] == pytest.approx(ms["stream_mb"] * 1e6, rel=0.01)


def test_committed_run_block_renders() -> None:
    meta = json.loads((COMMITTED / "meta.json").read_text())
    cycles, steps, model = read_speed_run(COMMITTED)
    table = cycle_table(cycles, steps, model, int(meta["machine_speed"]["batch"]))
    text = render_validation_machine_speed(
        speed_summary(table).astype(str), table.astype(str), meta
    )
    for label in SERIES.values():
        assert label in text
    assert f"{meta['machine_speed']['cycles']} cycles" in text


def _cli(tmp_path: Path, cfg: dict, *argv: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return subprocess.run(
        [sys.executable, "-m", "llmqueue", "validate", "machine-speed", "--config", str(path),
         "--out", str(tmp_path / "out"), *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


@pytest.mark.parametrize(
    "change, argv, needle",
    [
        ({}, ("--cycles", "1"), "--cycles must be in 3..1000, got 1"),
        ({"batch": 100}, (), "validation.vllm.machine_speed.batch: 100 exceeds"),
        ({"batch": 8, "output_tokens": 1000}, (), "KV blocks exceed"),
        ({"compute_size": 1024}, (), "validation.vllm.machine_speed.compute_size"),
        ({"prompt_tokens": 1}, (), "validation.vllm.machine_speed.prompt_tokens"),
        ({"batch": 64, "output_tokens": 1020}, (), "prompt_tokens + output_tokens"),
        ({"stream_s": 0}, (), "validation.vllm.machine_speed.stream_s"),
        (None, (), "no 'validation.vllm.machine_speed' section"),
    ],
)
def test_bad_input_is_refused_in_one_line(
    tmp_path: Path, change: dict | None, argv: tuple[str, ...], needle: str
) -> None:
    cfg = copy.deepcopy(CONFIG)
    if change is None:
        del cfg["validation"]["vllm"]["machine_speed"]
    else:
        cfg["validation"]["vllm"]["machine_speed"].update(change)
    done = _cli(tmp_path, cfg, *argv)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmqueue validate: error: ")
    assert needle in lines[0]
    assert not (tmp_path / "out").exists()
