"""The run replayed at its own per-window speed (:mod:`llmqueue.studies.validation.timewarp`):
work time and wall time are inverse maps, a constant speed is the law scaled by it (the same
schedule, event for event), and the trace reads each window's speed from the iterations."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.studies.validation.tables import simulate_table
from llmqueue.studies.validation.timewarp import (
    MIN_TRACE_ITERATIONS,
    SpeedTrace,
    speed_trace,
    to_wall,
    to_work,
    warped_simulation,
)

LAW = StepLaw(0.01, 0.001, 1e-6, name="t")


@settings(max_examples=60, derandomize=True, deadline=None)
@given(
    widths=st.lists(st.floats(0.5, 30.0), min_size=1, max_size=6),
    speeds=st.lists(st.floats(0.5, 2.0), min_size=6, max_size=6),
    x=st.lists(st.floats(-50.0, 300.0), min_size=1, max_size=20),
)
def test_work_and_wall_time_are_inverse_and_increasing(
    widths: list[float], speeds: list[float], x: list[float]
) -> None:
    edges = np.concatenate([[0.0], np.cumsum(widths)])
    tr = SpeedTrace(edges, np.asarray(speeds[: len(widths)]))
    t = np.sort(np.asarray(x))
    w = to_work(t, tr)
    assert np.all(np.diff(w) >= -1e-12)
    np.testing.assert_allclose(to_wall(w, tr), t, rtol=1e-9, atol=1e-9)


def test_work_time_integrates_one_over_speed() -> None:
    tr = SpeedTrace(np.array([0.0, 10.0, 20.0]), np.array([2.0, 0.5]))
    np.testing.assert_allclose(to_work([0.0, 10.0, 15.0, 20.0, 30.0, -4.0], tr),
                               [0.0, 5.0, 15.0, 25.0, 45.0, -2.0])  # fmt: skip


def requests(n: int = 60, rate: float = 20.0) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    arr = np.cumsum(rng.exponential(1 / rate, n))
    return pd.DataFrame({
        "request_id": [f"r{i}" for i in range(n)], "arrival_s": arr,
        "prompt_tokens": rng.integers(8, 64, n), "output_tokens": rng.integers(2, 40, n),
    })  # fmt: skip


def test_a_constant_speed_is_the_scaled_law() -> None:
    req = requests()
    pol = Policy("continuous", bmax=8)
    tr = SpeedTrace(np.array([0.0, 1e4]), np.array([1.3]))
    warped = warped_simulation(req, pol, LAW, tr, seed=1)
    scaled = simulate_table(req, pol, LAW.scaled(1.3), seed=1)
    np.testing.assert_allclose(warped.to_numpy(), scaled.to_numpy(), rtol=1e-9, atol=1e-9)


def test_a_slower_window_delays_what_runs_in_it() -> None:
    req = requests()
    pol = Policy("continuous", bmax=8)
    end = float(req["arrival_s"].max()) + 100.0
    flat = SpeedTrace(np.array([0.0, end]), np.array([1.0]))
    slow = SpeedTrace(np.array([0.0, 1.0, end]), np.array([1.0, 3.0]))
    a = warped_simulation(req, pol, LAW, flat, seed=1)
    b = warped_simulation(req, pol, LAW, slow, seed=1)
    early = (a["finish_s"] < 1.0).to_numpy()
    np.testing.assert_allclose(a["finish_s"][early], b["finish_s"][early])
    assert (b["finish_s"][~early] > a["finish_s"][~early]).all()


def test_the_trace_reads_each_windows_speed() -> None:
    n = 2 * MIN_TRACE_ITERATIONS
    law_t = float(LAW.step(np.array([4]), np.array([0]), np.array([100]))[0])
    dur = np.concatenate([np.full(n, 1.5 * law_t), np.full(n, 0.8 * law_t)])
    start = np.concatenate([[0.0], np.cumsum(dur)[:-1]])
    steps = pd.DataFrame({
        "t_sched_s": start, "t_done_s": start + dur, "decode_seqs": 4, "prefill_tokens": 0,
        "context_tokens": 100,
    })  # fmt: skip
    window = n * 1.5 * law_t  # the first window holds exactly the slow iterations
    tr = speed_trace(steps, LAW, 0.002, window * (1 - 1e-9))
    assert tr.factors[0] == pytest.approx(1.5, rel=1e-6)
    assert tr.factors[1] == pytest.approx(0.8, rel=1e-6)


def test_bad_traces_are_refused() -> None:
    with pytest.raises(InputError):
        SpeedTrace(np.array([0.0, 0.0]), np.array([1.0]))
    with pytest.raises(InputError):
        SpeedTrace(np.array([0.0, 1.0]), np.array([0.0]))
    with pytest.raises(InputError):
        SpeedTrace(np.array([0.0, 1.0, 2.0]), np.array([1.0]))
