"""What the measurement protocol's records say (:mod:`llmqueue.engines.protocol`): the speed
probes beside the judged runs, the calibration's own noise over its rounds, the queue orders'
gains in alternating blocks, and the noise floor that every run's error is read against.

All of it is computed from a committed group folder (:class:`GroupData`) and the step law fitted
on the group's calibration rounds pooled; a folder measured before the protocol has no probes
and no rounds, and every function here then returns nothing (empty tables, NaN factors).

- **Probe factor** (:func:`probe_factors`): a probe's measured iteration times over the law's
  price of the same iterations (1: the machine ran at the calibration's mean speed; 1.1: 10%
  slower). The factor of the probe *before* a run is known before the run starts: the
  probe-scaled prediction is the law times it; the probe *after* gives the drift during the run
  (after / before - 1).
- **Calibration noise** (:func:`calibration_rounds`, :func:`calibration_knots`): per round, the
  same ratio over the round's iterations (the speed state the round saw); their spread is the
  calibration's noise, and the 95% CI of their mean the level's uncertainty; per decode count of
  the grid, each round's median decode-only step time, with its mean and 95% CI over rounds
  (the knots of the shaped law).
- **Alternating blocks** (:func:`block_reductions`): per round of an alternating group, each
  order's mean-JCT reduction against the FCFS block of the same round (same arrivals), measured
  and predicted by each variant; :func:`block_summary` gives their mean over the rounds with a
  95% CI and the prediction's error in percentage points.
- **Noise floor** (:func:`noise_floor`): for every configuration served in several engine
  sessions, the spread of the measured log mean JCT over the sessions (the run's own noise,
  without the calibration's) and the spread of the error when each session is predicted with
  the law of its own session's calibration rounds (``session_law``: with the calibration's
  noise). :func:`judged_in_sigma` reads every run's error in units of the pooled sigma and names
  a group whose errors share a sign beyond 2 sigma in all its repeats.

Units: factors and errors are ratios (dimensionless), reductions fractions, times s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.engines.calibration import measured_and_law
from llmqueue.engines.requests import FCFS_PRIORITY

__all__ = [
    "speed_factor",
    "probe_factors",
    "run_probe_factors",
    "calibration_rounds",
    "calibration_knots",
    "calibration_noise",
    "pooled_sigma",
    "probe_columns",
    "session_calibration",
    "block_reductions",
    "reductions_against",
    "block_summary",
    "noise_floor",
    "judged_in_sigma",
]


def _t95(n: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, n - 1)) if n >= 2 else math.nan


def speed_factor(
    steps: pd.DataFrame, law: Any, max_gap_s: float, until_s: float | None = None
) -> tuple[float, int]:
    """How much slower the engine ran than `law` says: the measured total time of the run's
    iterations (as the calibration counts them) over the law's, for the iterations that ended
    before `until_s` (s on the run's clock) when given, else all; returns (factor, iterations),
    factor NaN when no iteration qualifies. ``law.scaled(factor)`` then prices that speed."""
    t, f = measured_and_law(steps, law, max_gap_s)
    keep = np.ones(t.size, dtype=bool)
    if until_s is not None:
        keep = steps["t_done_s"].to_numpy(dtype=float) < float(until_s)
    n = int(keep.sum())
    if n == 0:
        return math.nan, 0
    return float(t[keep].sum() / f[keep].sum()), n


def probe_factors(probes: pd.DataFrame | None, law: Any, max_gap_s: float) -> pd.DataFrame:
    """One row per probe (``probe_steps.csv``): its session, judged run, position, iterations and
    speed factor against `law` (module docstring). Empty without probes."""
    cols = ["probe", "session", "run", "position", "iterations", "factor"]
    if probes is None or len(probes) == 0:
        return pd.DataFrame(columns=cols)
    out = []
    for name, p in probes.groupby("probe", sort=False):
        k, n = speed_factor(p.reset_index(drop=True), law, max_gap_s)
        out.append({
            "probe": name, "session": int(p["session"].iloc[0]), "run": str(p["run"].iloc[0]),
            "position": str(p["position"].iloc[0]), "iterations": n, "factor": k,
        })  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def run_probe_factors(factors: pd.DataFrame, run: str) -> tuple[float, float]:
    """(before, after) probe factors of judged run `run` (NaN where there is none)."""

    def one(position: str) -> float:
        m = factors[(factors["run"] == run) & (factors["position"] == position)]
        return float(m["factor"].iloc[0]) if len(m) else math.nan

    return one("before"), one("after")


def calibration_rounds(calibration: pd.DataFrame, law: Any) -> pd.DataFrame:
    """Per calibration round (``round`` column of calibration_steps.csv): its session, iterations,
    wall time and speed factor against `law` over the round's iterations (``time_s`` as recorded).
    Empty for a calibration of one pass (no ``round`` column)."""
    cols = ["round", "session", "iterations", "busy_s", "factor"]
    if "round" not in calibration:
        return pd.DataFrame(columns=cols)
    out = []
    for r, part in calibration.groupby("round", sort=True):
        t = part["time_s"].to_numpy(dtype=float)
        f = np.asarray(
            law.step(part["decode_seqs"], part["prefill_tokens"], part["context_tokens"]),
            dtype=float,
        )
        out.append({
            "round": int(str(r)), "session": int(part["session"].iloc[0]),
            "iterations": int(t.size),
            "busy_s": float(t.sum()), "factor": float(t.sum() / f.sum()) if f.sum() > 0 else math.nan,
        })  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def calibration_noise(rounds: pd.DataFrame) -> dict[str, float]:
    """The calibration's noise from its rounds' factors: how many, their coefficient of
    variation, largest over smallest, and the 95% CI half-width of their mean (relative): the
    uncertainty of the law's level. NaN without rounds."""
    k = rounds["factor"].to_numpy(dtype=float) if len(rounds) else np.array([])
    k = k[np.isfinite(k)]
    if k.size < 2:
        return {
            "rounds": float(k.size),
            "cv": math.nan,
            "max_over_min": math.nan,
            "ci95_rel": math.nan,
        }
    cv = float(k.std(ddof=1) / k.mean())
    return {
        "rounds": float(k.size),
        "cv": cv,
        "max_over_min": float(k.max() / k.min()),
        "ci95_rel": _t95(k.size) * cv / math.sqrt(k.size),
    }


def calibration_knots(calibration: pd.DataFrame) -> pd.DataFrame:
    """Per decode count b (decode-only iterations of the calibration, no prefill): the median
    step time in each round, and over the rounds their mean, 95% CI half-width and coefficient
    of variation (s). Empty without rounds."""
    cols = ["decode_seqs", "rounds", "mean_s", "ci95_s", "cv"]
    if "round" not in calibration:
        return pd.DataFrame(columns=cols)
    dec = calibration[calibration["prefill_tokens"] == 0]
    out = []
    for b, part in dec.groupby("decode_seqs", sort=True):
        med = part.groupby("round")["time_s"].median().to_numpy(dtype=float)
        if med.size < 2:
            continue
        sd = float(med.std(ddof=1))
        out.append({
            "decode_seqs": int(str(b)), "rounds": int(med.size), "mean_s": float(med.mean()),
            "ci95_s": _t95(med.size) * sd / math.sqrt(med.size), "cv": sd / float(med.mean()),
        })  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def block_reductions(comparison: pd.DataFrame) -> pd.DataFrame:
    """Per alternating round (``block`` > 0) and non-FCFS order: the mean-JCT reduction against
    the FCFS block of the same group and round, measured and predicted, per variant."""
    cols = ["group", "block", "run", "priority", "session", "variant", "against",
            "measured_reduction", "predicted_reduction", "error_pp"]  # fmt: skip
    if "block" not in comparison:
        return pd.DataFrame(columns=cols)
    c = comparison[comparison["block"].fillna(0).astype(int) > 0]
    out = []
    for (group, block, variant), g in c.groupby(["group", "block", "variant"], sort=False):
        fcfs = g[g["priority"] == FCFS_PRIORITY]
        if fcfs.empty:
            continue
        for row in reductions_against(fcfs.iloc[0], g[g["priority"] != FCFS_PRIORITY]):
            out.append({"group": group, "block": int(str(block)), "variant": variant, **row})
    return pd.DataFrame(out, columns=cols)


def reductions_against(fcfs: pd.Series, others: pd.DataFrame) -> list[dict[str, Any]]:
    """Each row of `others` (error-table rows) against the FCFS row `fcfs` on the same arrivals:
    its run, priority, session, the FCFS run, the measured and predicted mean-JCT reduction
    (1 - JCT / JCT_fcfs) and the prediction's error in percentage points."""
    out = []
    for _, r in others.iterrows():
        m = 1.0 - r["measured_jct_mean_s"] / fcfs["measured_jct_mean_s"]
        p = 1.0 - r["predicted_jct_mean_s"] / fcfs["predicted_jct_mean_s"]
        out.append({
            "run": r["run"], "priority": r["priority"], "session": r["session"],
            "against": fcfs["run"], "measured_reduction": m, "predicted_reduction": p,
            "error_pp": 100.0 * (p - m),
        })  # fmt: skip
    return out


def block_summary(blocks: pd.DataFrame) -> pd.DataFrame:
    """Per group, order and variant over the alternating rounds: the mean measured and predicted
    reduction, the measured one's 95% CI half-width over the rounds, the error of the means (pp)
    and how many rounds."""
    cols = ["group", "priority", "variant", "rounds", "measured_reduction",
            "measured_reduction_ci95", "predicted_reduction", "error_pp"]  # fmt: skip
    out = []
    for (group, prio, variant), g in blocks.groupby(["group", "priority", "variant"], sort=False):
        m = g["measured_reduction"].to_numpy(dtype=float)
        p = g["predicted_reduction"].to_numpy(dtype=float)
        half = _t95(m.size) * float(m.std(ddof=1)) / math.sqrt(m.size) if m.size >= 2 else math.nan
        out.append({
            "group": group, "priority": prio, "variant": variant, "rounds": int(m.size),
            "measured_reduction": float(m.mean()), "measured_reduction_ci95": half,
            "predicted_reduction": float(p.mean()), "error_pp": 100.0 * float(p.mean() - m.mean()),
        })  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def noise_floor(comparison: pd.DataFrame, metric: str = "jct_mean") -> pd.DataFrame:
    """Per configuration served in >= 2 engine sessions (repeats; not alternating blocks): the
    sessions, the SD of the log measured `metric` over them (``sigma_measured``: the run's own
    noise, without the calibration's), the SD of log(1 + error) with each session predicted by
    its own session's calibration (``sigma_session_law``: with the calibration's noise; NaN
    without per-session laws) and with the pooled law (``sigma_prediction``)."""
    cols = ["group", "config_run", "sessions", "sigma_measured", "sigma_prediction",
            "sigma_session_law"]  # fmt: skip
    block = comparison["block"].fillna(0).astype(int) if "block" in comparison else 0
    c = comparison[block == 0]
    out = []
    pred = c[c["variant"] == "prediction"]
    for (group, run), g in pred.groupby(["group", "config_run"], sort=False):
        if g["session"].nunique() < 2:
            continue
        meas = np.log(g[f"measured_{metric}_s"].to_numpy(dtype=float))
        err = np.log1p(g[f"{metric}_rel_error"].to_numpy(dtype=float))
        ses = c[(c["variant"] == "session_law") & (c["group"] == group) & (c["config_run"] == run)]
        s_err = np.log1p(ses[f"{metric}_rel_error"].to_numpy(dtype=float))
        out.append({
            "group": group, "config_run": run, "sessions": int(g["session"].nunique()),
            "sigma_measured": float(meas.std(ddof=1)),
            "sigma_prediction": float(err.std(ddof=1)),
            "sigma_session_law": float(s_err.std(ddof=1)) if s_err.size >= 2 else math.nan,
        })  # fmt: skip
    return pd.DataFrame(out, columns=cols)


def pooled_sigma(floor: pd.DataFrame, column: str) -> float:
    """The root mean square of a sigma column over the repeated configurations (NaN if none)."""
    s = floor[column].to_numpy(dtype=float) if len(floor) else np.array([])
    s = s[np.isfinite(s)]
    return float(np.sqrt(np.mean(s**2))) if s.size else math.nan


def judged_in_sigma(
    comparison: pd.DataFrame, sigma: float, metric: str = "jct_mean", variant: str = "prediction"
) -> tuple[pd.DataFrame, list[str]]:
    """Every judged run's `metric` error in units of `sigma` (log scale: log(1 + error) / sigma),
    and the groups with a configuration served in several sessions whose errors all lie beyond
    2 sigma on the same side (a model defect to be named, module docstring)."""
    c = comparison[comparison["variant"] == variant].copy()
    c["error_sigma"] = np.log1p(c[f"{metric}_rel_error"].to_numpy(dtype=float)) / sigma
    defects: list[str] = []
    if math.isfinite(sigma) and sigma > 0:
        for (group, _run), g in c.groupby(["group", "config_run"], sort=False):
            e = g["error_sigma"].to_numpy(dtype=float)
            if g["session"].nunique() >= 2 and (np.all(e > 2) or np.all(e < -2)):
                defects.append(str(group))
    return c[["group", "run", "config_run", "session", "error_sigma"]], sorted(set(defects))


def probe_columns(factors: pd.DataFrame, run: str) -> Mapping[str, float]:
    """The probe factors of a judged run as the error table's columns."""
    before, after = run_probe_factors(factors, run)
    drift = after / before - 1.0 if math.isfinite(before) and math.isfinite(after) else math.nan
    return {"probe_before_factor": before, "probe_after_factor": after, "probe_drift": drift}


def session_calibration(calibration: pd.DataFrame, session: int) -> pd.DataFrame | None:
    """The calibration rows of one engine session's rounds (None without per-session rounds or
    with fewer than 2 rounds in that session)."""
    if "session" not in calibration:
        return None
    part = calibration[calibration["session"] == int(session)]
    if part["round"].nunique() < 2:
        return None
    return part
