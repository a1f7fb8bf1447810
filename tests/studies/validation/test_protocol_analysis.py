"""What the protocol's records say (:mod:`llmqueue.studies.validation.protocol`), checked on
iterations built with known speeds: a probe run 1.2x slower than the law reads 1.2; rounds at
known speeds give their spread and CI; alternating blocks pair each order with the FCFS block of
its own round; the noise floor and the sigma units follow their definitions; a folder measured
without the protocol gives empty tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from llmqueue.latency import StepLaw
from llmqueue.studies.validation.protocol import (
    block_reductions,
    block_summary,
    calibration_knots,
    calibration_noise,
    calibration_rounds,
    judged_in_sigma,
    noise_floor,
    pooled_sigma,
    probe_columns,
    probe_factors,
    run_probe_factors,
    session_calibration,
)

LAW = StepLaw(0.010, 0.002, 1e-6, name="test")
GAP = 0.002


def back_to_back(
    decode: list[int], context: list[int], speed: float, t0: float = 0.0
) -> pd.DataFrame:
    """Iterations one straight after the other, each `speed` times the law's time."""
    dec = np.asarray(decode, dtype=float)
    ctx = np.asarray(context, dtype=float)
    dur = speed * np.asarray(LAW.step(dec, np.zeros_like(dec), ctx), dtype=float)
    start = t0 + np.concatenate([[0.0], np.cumsum(dur)[:-1]])
    return pd.DataFrame({
        "step": np.arange(dec.size), "t_sched_s": start, "t_planned_s": start,
        "t_done_s": start + dur, "decode_seqs": dec.astype(int),
        "prefill_tokens": np.zeros(dec.size, dtype=int), "context_tokens": ctx.astype(int),
    })  # fmt: skip


def probe_rows(name: str, run: str, position: str, speed: float) -> pd.DataFrame:
    p = back_to_back([4] * 30, list(range(64, 94)), speed)
    p.insert(0, "probe", name)
    p.insert(1, "session", 1)
    p.insert(2, "run", run)
    p.insert(3, "position", position)
    return p


def test_probe_factor_reads_the_speed_against_the_law() -> None:
    probes = pd.concat([
        probe_rows("probe_a_before", "a", "before", 1.2),
        probe_rows("probe_a_after", "a", "after", 0.9),
    ], ignore_index=True)  # fmt: skip
    f = probe_factors(probes, LAW, GAP)
    assert list(f["probe"]) == ["probe_a_before", "probe_a_after"]
    before, after = run_probe_factors(f, "a")
    # the last iteration of each probe is counted as its busy time plus the median gap (0)
    assert before == pytest.approx(1.2, rel=1e-9)
    assert after == pytest.approx(0.9, rel=1e-9)
    v = probe_columns(f, "a")
    assert v["probe_drift"] == pytest.approx(0.9 / 1.2 - 1.0)
    assert all(math.isnan(x) for x in run_probe_factors(f, "b"))


def test_no_probes_no_rows() -> None:
    assert probe_factors(None, LAW, GAP).empty
    assert math.isnan(probe_columns(probe_factors(None, LAW, GAP), "a")["probe_before_factor"])


def rounds_table(speeds: list[float], sessions: list[int]) -> pd.DataFrame:
    parts = []
    for k, (sp, ses) in enumerate(zip(speeds, sessions, strict=True), start=1):
        it = back_to_back([1, 1, 2, 2, 4, 4, 8, 8], [16, 17, 32, 34, 64, 68, 128, 136], sp)
        it["time_s"] = sp * np.asarray(
            LAW.step(it["decode_seqs"], it["prefill_tokens"], it["context_tokens"])
        )
        it.insert(0, "round", k)
        it.insert(0, "session", ses)
        parts.append(it)
    return pd.concat(parts, ignore_index=True)


def test_calibration_rounds_give_the_speed_each_round_saw() -> None:
    speeds = [1.0, 1.1, 0.95, 1.05, 1.2]
    cal = rounds_table(speeds, [1, 2, 1, 2, 1])
    r = calibration_rounds(cal, LAW)
    assert list(r["round"]) == [1, 2, 3, 4, 5]
    np.testing.assert_allclose(r["factor"], speeds, rtol=1e-12)
    noise = calibration_noise(r)
    k = np.asarray(speeds)
    assert noise["cv"] == pytest.approx(k.std(ddof=1) / k.mean())
    assert noise["max_over_min"] == pytest.approx(1.2 / 0.95)
    assert noise["ci95_rel"] == pytest.approx(2.7764451 * noise["cv"] / math.sqrt(5), rel=1e-6)
    knots = calibration_knots(cal)
    assert list(knots["decode_seqs"]) == [1, 2, 4, 8]
    assert (knots["rounds"] == 5).all()
    # the knot at b = 1: the median of two iterations per round, times each round's speed
    base = float(np.median(LAW.step(np.array([1, 1]), np.zeros(2), np.array([16, 17]))))
    assert knots["mean_s"].iloc[0] == pytest.approx(base * k.mean())
    assert knots["cv"].iloc[0] == pytest.approx(k.std(ddof=1) / k.mean())
    s1 = session_calibration(cal, 1)
    assert s1 is not None and set(s1["round"]) == {1, 3, 5}
    assert session_calibration(cal.drop(columns=["session"]), 1) is None


def test_one_calibration_pass_has_no_rounds() -> None:
    cal = rounds_table([1.0], [1]).drop(columns=["round", "session"])
    assert calibration_rounds(cal, LAW).empty
    assert calibration_knots(cal).empty
    assert math.isnan(calibration_noise(calibration_rounds(cal, LAW))["cv"])


def comparison_rows(rows: list[tuple[str, str, int, int, str, float, float]]) -> pd.DataFrame:
    """(group, run, session, block, priority, measured mean JCT, predicted mean JCT) rows of the
    prediction variant."""
    out = []
    for group, run, session, block, prio, m, p in rows:
        out.append({
            "group": group, "run": run, "config_run": run.split("_")[0], "session": session,
            "block": block, "priority": prio, "variant": "prediction",
            "measured_jct_mean_s": m, "predicted_jct_mean_s": p, "jct_mean_rel_error": p / m - 1,
        })  # fmt: skip
    return pd.DataFrame(out)


def test_alternating_blocks_pair_each_order_with_its_rounds_fcfs() -> None:
    c = comparison_rows([
        ("pri", "fcfs_b1", 1, 1, "fcfs", 2.0, 2.0), ("pri", "sjf_b1", 1, 1, "sjf", 1.5, 1.6),
        ("pri", "fcfs_b2", 1, 2, "fcfs", 4.0, 3.0), ("pri", "sjf_b2", 1, 2, "sjf", 3.0, 2.4),
        ("fc", "load30", 1, 0, "fcfs", 1.0, 1.0),
    ])  # fmt: skip
    b = block_reductions(c)
    assert list(b["run"]) == ["sjf_b1", "sjf_b2"]
    assert list(b["against"]) == ["fcfs_b1", "fcfs_b2"]
    np.testing.assert_allclose(b["measured_reduction"], [0.25, 0.25])
    np.testing.assert_allclose(b["predicted_reduction"], [0.2, 0.2])
    s = block_summary(b)
    assert len(s) == 1 and s["rounds"].iloc[0] == 2
    assert s["error_pp"].iloc[0] == pytest.approx(-5.0)
    assert s["measured_reduction_ci95"].iloc[0] == pytest.approx(0.0)
    assert block_reductions(c.drop(columns=["block"])).empty


def test_noise_floor_and_sigma_units() -> None:
    c = comparison_rows([
        ("g", "load85", 1, 0, "fcfs", 2.0, 2.2), ("g", "load85_r2", 2, 0, "fcfs", 2.5, 2.2),
        ("h", "load80", 1, 0, "fcfs", 1.0, 1.5), ("h", "load80_r2", 2, 0, "fcfs", 1.1, 1.6),
        ("h", "load50", 1, 0, "fcfs", 1.0, 1.0),
    ])  # fmt: skip
    own = c.copy()
    own["variant"] = "session_law"
    own["jct_mean_rel_error"] = [0.0, 0.2, 0.4, 0.6, 0.0]
    floor = noise_floor(pd.concat([c, own], ignore_index=True))
    assert list(floor["config_run"]) == ["load85", "load80"]
    assert floor["sigma_measured"].iloc[0] == pytest.approx(np.std(np.log([2.0, 2.5]), ddof=1))
    assert floor["sigma_prediction"].iloc[0] == pytest.approx(
        np.std(np.log([2.2 / 2.0, 2.2 / 2.5]), ddof=1)
    )
    assert floor["sigma_session_law"].iloc[1] == pytest.approx(np.std(np.log([1.4, 1.6]), ddof=1))
    sigma = pooled_sigma(floor, "sigma_session_law")
    assert sigma == pytest.approx(math.sqrt(np.mean(np.asarray(floor["sigma_session_law"]) ** 2)))
    z, defects = judged_in_sigma(c, 0.1)
    assert z["error_sigma"].iloc[0] == pytest.approx(math.log(1.1) / 0.1)
    # h's repeated load80 errs by +50% and +45% in both sessions: beyond 2 sigma, one sign
    assert defects == ["h"]
    assert judged_in_sigma(c, math.nan)[1] == []
