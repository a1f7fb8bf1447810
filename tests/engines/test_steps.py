"""Per-iteration bookkeeping (step rows), the iteration times and the step-law calibration."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from llmqueue.engines.calibration import (
    calibration_batches,
    fit_calibration,
    iteration_times,
    saturation_capacity,
    slice_steps,
)
from llmqueue.engines.steplog import (
    STEP_COLUMNS,
    STEP_LOG_COLUMNS,
    ScheduledRequest,
    StepLogWriter,
    core_facts_path,
    step_row,
    write_core_facts,
)
from llmqueue.errors import InputError


def test_step_row_classifies_decode_prefill_and_recompute() -> None:
    reqs = [
        # decode: 40 prompt + 3 output tokens known, 42 cached before, 43 after
        ScheduledRequest("a", 1, 43, 43, 3),
        # first prefill chunk 0 -> 100 of a 300-token prompt
        ScheduledRequest("b", 100, 100, 300, 0),
        # last prefill chunk 200 -> 300: completes the prompt, first token comes from this step
        ScheduledRequest("c", 100, 300, 300, 0),
        # a preempted request recomputing its prompt and 5 outputs (60 + 5 tokens) in one go
        ScheduledRequest("d", 64, 64, 65, 5),
        # a prompt of one token: its only chunk completes it
        ScheduledRequest("e", 1, 1, 1, 0),
    ]
    row = step_row(
        7, 1.0, 1.001, 1.05, reqs, running=5, waiting=2, preempted=1, kv_usage=0.5,
        preempted_ids=["z"], finished_ids=["y", "x"],
    )  # fmt: skip
    assert set(row) == set(STEP_LOG_COLUMNS) and set(STEP_COLUMNS) <= set(row)
    # from an empty cache: b (first chunk), d (recomputing after a preemption), e; not c (second chunk)
    assert row["admitted_ids"] == "b|d|e"
    assert (row["preempted_ids"], row["finished_ids"]) == ("z", "x|y")
    assert row["decode_seqs"] == 1
    assert row["prefill_reqs"] == 4
    assert row["prefill_tokens"] == 100 + 100 + 64 + 1
    assert row["context_tokens"] == 43 + 100 + 300 + 64 + 1
    assert row["decode_context_tokens"] == 43
    assert row["first_token_ids"] == "c|e"
    assert row["scheduled_reqs"] == 5


def test_step_log_writer_appends_with_one_header(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "steps.csv"
    reqs = [ScheduledRequest("a", 1, 10, 10, 2)]
    w = StepLogWriter(path)
    w.write(step_row(1, 1.0, 1.0001, 1.02, reqs, 1, 0, 0, 0.1))
    w.close()
    w = StepLogWriter(path)  # a second writer (e.g. a restarted engine) appends
    w.write(step_row(2, 1.02, 1.0201, 1.04, reqs, 1, 0, 0, 0.1))
    w.close()
    df = pd.read_csv(path)
    assert list(df.columns) == STEP_LOG_COLUMNS and df["step"].tolist() == [1, 2]
    write_core_facts(core_facts_path(path), {"kv_blocks_free_at_start": 127})
    assert (tmp_path / "steps.csv.core.json").read_text().startswith("{")


def steps_frame(t_sched: list[float], t_done: list[float]) -> pd.DataFrame:
    n = len(t_sched)
    return pd.DataFrame(
        {"t_sched_s": t_sched, "t_planned_s": t_sched, "t_done_s": t_done, "step": range(n)}
    )


def test_iteration_times_count_gaps_of_back_to_back_steps_only() -> None:
    # steps 0-1-2 back to back (gaps 0.1 ms and 0.3 ms), then the engine idles 1 s
    df = steps_frame([0.0, 0.0201, 0.0505, 1.5], [0.02, 0.0502, 0.08, 1.53])
    t = iteration_times(df, max_gap_s=0.002)
    med_gap = np.median([0.0001, 0.0003])
    assert t.tolist() == pytest.approx([0.0201, 0.0304, 0.0295 + med_gap, 0.03 + med_gap])
    with pytest.raises(InputError):
        iteration_times(steps_frame([0.0, 0.1], [0.05, 0.04]))


def synthetic_steps(c0: float, c_tok: float, c_ctx: float, noise: float, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    d = rng.integers(0, 64, n)
    p = np.where(rng.random(n) < 0.3, rng.integers(1, 257, n), 0)
    d[(d == 0) & (p == 0)] = 1
    c = d * rng.integers(16, 600, n) + p
    dur = (c0 + c_tok * (d + p) + c_ctx * c) * (1 + noise * rng.standard_normal(n))
    t_sched = np.concatenate([[0.0], np.cumsum(dur)[:-1]])
    return pd.DataFrame(
        {
            "t_sched_s": t_sched,
            "t_planned_s": t_sched,
            "t_done_s": t_sched + dur,
            "decode_seqs": d,
            "prefill_tokens": p,
            "context_tokens": c,
        }
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_recovers_a_known_law(seed: int) -> None:
    df = synthetic_steps(0.02, 0.0011, 4e-6, 0.0, seed)
    fit, rows = fit_calibration(df)
    assert fit.c0_s == pytest.approx(0.02, rel=1e-6)
    assert fit.c_tok_s == pytest.approx(0.0011, rel=1e-6)
    assert fit.c_ctx_s == pytest.approx(4e-6, rel=1e-6)
    assert fit.r2 == pytest.approx(1.0)
    assert np.allclose(rows["fitted_s"], rows["time_s"])
    # 5% multiplicative noise per iteration: the per-token cost is still found within 3%
    noisy, _ = fit_calibration(synthetic_steps(0.02, 0.0011, 4e-6, 0.05, seed))
    assert noisy.c_tok_s == pytest.approx(0.0011, rel=0.03)
    assert 0.9 < noisy.r2 < 1.0


def test_capacity_of_a_steady_burst() -> None:
    # 100 completions every 0.25 s after a 2 s ramp: 4 requests/s in between
    rec = pd.DataFrame({"finish_s": 2.0 + 0.25 * np.arange(100)})
    cap = saturation_capacity(rec, 0.1, 0.9)
    assert cap["capacity_per_s"] == pytest.approx(4.0)
    with pytest.raises(InputError):
        saturation_capacity(rec.iloc[:5])


def test_slice_rebases_times() -> None:
    df = steps_frame([10.0, 11.0, 12.0], [10.5, 11.5, 12.5])
    s = slice_steps(df, 10.5, 12.0, t0=10.0)
    assert s["t_sched_s"].tolist() == [1.0, 2.0] and s["t_done_s"].tolist() == [1.5, 2.5]


def test_calibration_batches_must_fit_the_engine() -> None:
    assert calibration_batches([[2, 16, 8]], 64, 4)[0].batch == 2
    with pytest.raises(InputError, match="max_model_len"):
        calibration_batches([[2, 60, 8]], 64, 4)
    with pytest.raises(InputError, match="max_num_seqs"):
        calibration_batches([[8, 16, 8]], 64, 4)
    with pytest.raises(InputError, match=r"batches\[0\]"):
        calibration_batches([[2, 16]], 64, 4)
