"""The committed validation matrix (data/validation/matrix-*/<group>/) is whole and does what its
group says: the scheduler subclass admitted batches only between batches (checked on the
recorded iterations), one request at a time ran one at a time, the token limits and priorities
reached the engine, KV pressure preempted; and the comparison, recomputed here from the committed
files by the library, is the committed error table (figures/table_vllm_matrix.csv)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.admission import check_batch_queue
from llmqueue.studies.validation.matrix import compare_group
from llmqueue.studies.validation.matrix_spec import (
    MatrixCompareSettings,
    check_group_folder,
    engine_section,
    read_group,
)
from llmqueue.studies.validation.matrix_summary import summary_rows

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SECTION = engine_section(CONFIG["validation"]["matrix_compare"], "vllm")
FOLDER = ROOT / SECTION["dir"]
GROUPS = list(SECTION["groups"])
TABLE = ROOT / "figures" / "table_vllm_matrix.csv"


def _ids(cell: object) -> list[str]:
    """Request ids of a step-log cell (vLLM's suffix ``-<hex>`` dropped)."""
    if not isinstance(cell, str) or not cell:
        return []
    return [x.rsplit("-", 1)[0] for x in cell.split("|")]


def _meta(group: str) -> dict:  # type: ignore[type-arg]
    return json.loads((FOLDER / group / "meta.json").read_text())  # type: ignore[no-any-return]


def test_every_group_folder_is_whole() -> None:
    judged = [r for g in GROUPS for r in check_group_folder(FOLDER / g)]
    assert len(judged) >= 16
    repeated = [r for r in judged if "_r" in r]
    assert len(repeated) >= 4 and "load85_r2" in check_group_folder(FOLDER / "fcfs")


@pytest.mark.parametrize("group", GROUPS)
def test_each_run_was_measured_on_a_quiet_machine_or_is_flagged(group: str) -> None:
    """Every judged run records its contention and achieved load; a flag names what exceeded
    its threshold (recomputed here from the recorded shares)."""
    meta = _meta(group)
    th = meta["contention_thresholds"]
    for name, run in meta["runs"].items():
        if run["kind"] != "judged":
            continue
        c = run["contention"]
        assert ("steal" in c["flags"]) == (c["steal_share"] > th["steal_share"])
        assert ("other_processes" in c["flags"]) == (c["other_cpu_share"] > th["other_cpu_share"])
        assert run["achieved_load"] == pytest.approx(
            run["measured_rate_per_s"] / meta["capacity"][run["capacity_table"]]["capacity_per_s"]
        )
        assert 0.3 * run["load"] < run["achieved_load"] < 1.5 * run["load"], name


def test_the_batch_queue_admitted_only_between_batches() -> None:
    """The dynamic group's recorded iterations (vLLM with the scheduler subclass) obey the batch
    queue; the FCFS group's (vLLM's own scheduler) do not: the check can fail."""
    data = read_group(FOLDER / "dynamic")
    b_max = int(data.settings["max_num_seqs"])
    for name, steps in data.steps.items():
        admitted = [_ids(x) for x in steps["admitted_ids"]]
        finished = [set(_ids(x)) for x in steps["finished_ids"]]
        assert check_batch_queue(admitted, finished, b_max) == [], name
        assert steps["running"].max() <= b_max
    # the calibration's batches were admitted whole, each behind its gate (meta.json), so the
    # calibration saw b_max sequences decode
    cal = data.calibration
    gate = _meta("dynamic")["calibration"]["batch_queue_gate"]
    assert gate and gate["prompt_tokens"] > 0
    # under the protocol each calibration round is its own sequence of batches
    keys = [k for k in ("session", "round") if k in cal]
    for _, part in cal.groupby(keys, sort=False) if keys else [(None, cal)]:
        assert check_batch_queue(
            [_ids(x) for x in part["admitted_ids"]], [set(_ids(x)) for x in part["finished_ids"]],
            b_max,
        ) == []  # fmt: skip
    assert int(cal["decode_seqs"].max()) == b_max
    fcfs = read_group(FOLDER / "fcfs", ["load85"]).steps["load85"]
    problems = check_batch_queue(
        [_ids(x) for x in fcfs["admitted_ids"]], [set(_ids(x)) for x in fcfs["finished_ids"]], 64
    )
    assert problems


def test_one_request_at_a_time_and_the_token_limits() -> None:
    data = read_group(FOLDER / "nobatch")
    for name, req in data.requests.items():
        assert data.steps[name]["running"].max() == 1
        lim = int(req["token_limit"].iloc[0])
        want = req["requested_tokens"] if lim < 0 else np.minimum(req["requested_tokens"], lim)
        assert (req["output_tokens"] == want).all()
        assert (req["prompt_tokens"] == 64).all()
    clipped = [
        float((r["requested_tokens"] > r["token_limit"]).mean())
        for r in data.requests.values() if r["token_limit"].iloc[0] > 0
    ]  # fmt: skip
    assert any(0.1 <= c <= 0.3 for c in clipped), clipped


def test_priorities_reached_the_engine_on_the_same_arrivals() -> None:
    """Within each block (the whole group when it was measured without alternation) FCFS, SJF
    and SSJF served the same arrivals with their own priorities."""
    data = read_group(FOLDER / "priority")
    blocks: dict[int, dict[str, pd.DataFrame]] = {}
    for t in data.judged:
        m = data.run_meta(t)
        blocks.setdefault(int(m.get("block", 0)), {})[str(m["run"])] = data.requests[t]
    for runs in blocks.values():
        assert set(runs) == {"fcfs", "sjf", "ssjf"}
        base = runs["fcfs"]["planned_s"].to_numpy()
        for req in runs.values():
            assert np.array_equal(req["planned_s"].to_numpy(), base)
        assert (runs["fcfs"]["priority"] == 0).all()
        assert (runs["sjf"]["priority"] == runs["sjf"]["output_tokens"]).all()
        assert (runs["ssjf"]["priority"] == np.rint(runs["ssjf"]["predicted_tokens"])).all()
    if len(blocks) > 1:  # alternating blocks, each on its own arrivals
        firsts = {float(b["fcfs"]["planned_s"].iloc[-1]) for b in blocks.values()}
        assert len(firsts) == len(blocks)
    assert data.settings["scheduling_policy"] == "priority"


def test_kv_pressure_preempted() -> None:
    meta = _meta("kvpressure")
    shares = [r["preempted_share"] for r in meta["runs"].values() if r["kind"] == "judged"]
    assert max(shares) >= 0.05


def test_the_deep_model_ran_the_code_trace_without_chunked_prefill() -> None:
    data = read_group(FOLDER / "shape", [])
    assert data.settings["enable_chunked_prefill"] is False
    assert data.group["model"] == "deep" and data.group["trace"]["name"] == "code"


@pytest.mark.parametrize("group", ["nobatch", "dynamic", "priority"])
def test_comparison_recomputes_to_the_committed_table(group: str) -> None:
    """The error table's rows of a group, recomputed from the committed group folder with the
    committed config: the same numbers (the prediction is deterministic by seed)."""
    cfg = MatrixCompareSettings.from_config(SECTION, int(CONFIG["seed"]))
    comp, _, _ = compare_group(read_group(FOLDER / group), cfg)
    committed = pd.read_csv(TABLE)
    committed = committed[committed["group"] == group].reset_index(drop=True)
    assert list(comp["run"]) == list(committed["run"])
    assert {"prediction", "warmup_speed", "run_speed", "in_situ_law"} <= set(comp["variant"])
    for col in ("measured_jct_mean_s", "predicted_jct_mean_s", "predicted_ttft_p90_s",
                "predicted_wait_mean_s", "achieved_load"):  # fmt: skip
        np.testing.assert_allclose(comp[col].to_numpy(dtype=float),
                                   committed[col].to_numpy(dtype=float), rtol=1e-9)  # fmt: skip


def test_summary_recomputes_from_the_table() -> None:
    table = pd.read_csv(TABLE)
    s = summary_rows(table).set_index("metric")
    main = table[table["variant"] == "prediction"]
    e = np.abs(main["jct_mean_rel_error"].to_numpy(dtype=float))
    assert s.loc["jct_mean", "median_abs_rel_error"] == pytest.approx(float(np.median(e)))
    assert s.loc["jct_mean", "runs"] == len(main) >= 16


def test_the_generated_blocks_render_from_the_committed_table() -> None:
    """Each docs block of the matrix renders from the committed error table (read as text, as
    the docs rule reads it) and says whether each target is met."""
    from llmqueue import docgen

    text = pd.read_csv(TABLE, dtype=str, keep_default_na=False)
    summary = summary_rows(pd.read_csv(TABLE)).astype(str)
    published = pd.read_csv(ROOT / "data" / "reference" / "validation_published.csv", dtype=str,
                            keep_default_na=False)  # fmt: skip
    table = docgen.render("validation_matrix", table=text)
    assert table.count("\n") == 1 + len(text[text["variant"] == "prediction"])
    full = docgen.render("validation_matrix_summary", summary=summary, published=published,
                         targets=SECTION.get("targets", {}))  # fmt: skip
    assert "BLIS" in full and ("met" in full or "missed" in full)
    assert "fcfs / load30" in docgen.render("validation_matrix_laws", table=text)
    speed = docgen.render("validation_matrix_speed", table=text, window_s=15)
    assert "fcfs / load30" in speed and "15-s windows" in speed
