"""Calibration of the step law from an engine's own iterations, and its measured capacity.

The calibration run sends controlled batches (``batch`` requests of ``prompt_tokens`` tokens,
each asking ``output_tokens`` tokens, all at once, one batch after the other) and the engine's
per-iteration record (:mod:`llmqueue.engines.steplog`) gives, for every iteration, its
composition and its clock times. Batches larger than the token budget are prefilled in chunks
beside the decodes of their first requests, so the iterations cover pure prefill, pure decode
and mixed steps, over a range of context sizes.

- :func:`iteration_times`: the duration of each iteration as the serving model counts it, the
  time from its start to the start of the next one when the engine went straight on (the gap
  between them, output hand-off and input polling, belongs to the iteration), else its own
  busy time plus the median such gap.
- :func:`fit_calibration`: :func:`llmqueue.latency_fits.fit_step_law` on those iterations, with the
  fitted time and relative residual of every point.
- :func:`saturation_capacity`: requests/s a burst of requests completes at, between the 10%
  and 90% completion times (the ramp-up and drain left out).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.latency_fits import StepLawFit, fit_step_law

__all__ = [
    "CalibrationBatch",
    "calibration_batches",
    "iteration_times",
    "measured_and_law",
    "fit_calibration",
    "calibration_rows",
    "fit_calibration_rows",
    "saturation_capacity",
    "slice_steps",
    "fit_summary",
]


@dataclass(frozen=True)
class CalibrationBatch:
    batch: int
    prompt_tokens: int
    output_tokens: int


def calibration_batches(
    items: Sequence[Sequence[int]], max_model_len: int, max_num_seqs: int
) -> list[CalibrationBatch]:
    """Config ``validation.vllm.calibration.batches`` ([batch, prompt, output] triples) checked
    against the engine: each request must fit the context, each batch the sequence limit."""
    out = []
    for k, item in enumerate(items):
        if len(item) != 3 or min(int(v) for v in item) < 1:
            raise InputError(
                f"validation.vllm.calibration.batches[{k}]: {list(item)} must be [batch, prompt, output], all >= 1"
            )
        b, p, n = (int(v) for v in item)
        if p + n > max_model_len:
            raise InputError(
                f"validation.vllm.calibration.batches[{k}]: prompt {p} + output {n} exceeds max_model_len {max_model_len}"
            )
        if b > max_num_seqs:
            raise InputError(
                f"validation.vllm.calibration.batches[{k}]: batch {b} exceeds max_num_seqs {max_num_seqs}"
            )
        out.append(CalibrationBatch(b, p, n))
    if not out:
        raise InputError("validation.vllm.calibration.batches: at least one batch is needed")
    return out


def iteration_times(steps: pd.DataFrame, max_gap_s: float = 0.002) -> pd.Series:
    """Seconds each iteration took, as the serving model counts it (see the module doc).

    `steps` holds ``t_sched_s`` and ``t_done_s`` in step order. An iteration whose successor
    started within `max_gap_s` of its end lasted until that start; any other (the engine then
    waited for work, or it is the last) lasted its busy time plus the median of those gaps.
    """
    if len(steps) == 0:
        return pd.Series([], dtype=float)
    t_s = steps["t_sched_s"].to_numpy(dtype=float)
    t_d = steps["t_done_s"].to_numpy(dtype=float)
    if np.any(t_d < t_s) or np.any(np.diff(t_s) < 0):
        raise InputError("step log: times must satisfy t_sched <= t_done and increase step by step")
    nxt = np.append(t_s[1:], np.nan)
    gap = nxt - t_d
    straight = gap <= max_gap_s
    med_gap = float(np.median(gap[straight])) if straight.any() else 0.0
    dur = np.where(straight, nxt - t_s, t_d - t_s + med_gap)
    return pd.Series(dur, index=steps.index, name="time_s")


def measured_and_law(
    steps: pd.DataFrame, law: Any, max_gap_s: float = 0.002
) -> tuple[np.ndarray, np.ndarray]:
    """Each iteration's measured time (:func:`iteration_times`) and the time `law` (a
    :class:`llmqueue.latency.StepLaw`) gives it, s, as two arrays in step order."""
    t = iteration_times(steps, max_gap_s).to_numpy(dtype=float)
    f = np.asarray(
        law.step(steps["decode_seqs"], steps["prefill_tokens"], steps["context_tokens"]),
        dtype=float,
    )
    return t, f


def calibration_rows(steps: pd.DataFrame, max_gap_s: float = 0.002) -> pd.DataFrame:
    """Calibration iterations of one phase (one engine session's consecutive steps) with
    ``time_s`` (:func:`iteration_times`) and ``tokens`` (decode_seqs + prefill_tokens) added."""
    df = steps.copy()
    df["time_s"] = iteration_times(df, max_gap_s)
    df["tokens"] = df["decode_seqs"] + df["prefill_tokens"]
    return df


def fit_calibration_rows(rows: pd.DataFrame) -> tuple[StepLawFit, pd.DataFrame]:
    """Fit the step law to calibration rows that hold ``time_s`` and ``tokens``
    (:func:`calibration_rows`, one phase or several pooled); returns the fit and the rows with
    ``fitted_s`` and ``rel_residual`` added."""
    df = rows.copy()
    fit = fit_step_law(df["decode_seqs"], df["prefill_tokens"], df["context_tokens"], df["time_s"])
    df["fitted_s"] = fit.c0_s + fit.c_tok_s * df["tokens"] + fit.c_ctx_s * df["context_tokens"]
    df["rel_residual"] = np.asarray(fit.rel_residuals)
    return fit, df


def fit_calibration(
    steps: pd.DataFrame, max_gap_s: float = 0.002
) -> tuple[StepLawFit, pd.DataFrame]:
    """Fit the step law to the calibration iterations of one phase; returns the fit and `steps`
    with ``time_s``, ``tokens`` (decode_seqs + prefill_tokens), ``fitted_s`` and
    ``rel_residual`` added."""
    return fit_calibration_rows(calibration_rows(steps, max_gap_s))


def saturation_capacity(records: pd.DataFrame, lo: float = 0.1, hi: float = 0.9) -> dict[str, Any]:
    """Completion rate (requests/s) of a burst between its `lo` and `hi` completion quantiles.

    Under a burst the engine stays full from the first completions to the drain, so the rate in
    between is its capacity for this request mix (at its sequence and KV limits).
    """
    if not (0 <= lo < hi <= 1):
        raise InputError(f"capacity quantiles must satisfy 0 <= lo < hi <= 1, got {lo}, {hi}")
    t = np.sort(records["finish_s"].to_numpy(dtype=float))
    n = t.size
    i, j = int(np.floor(lo * (n - 1))), int(np.ceil(hi * (n - 1)))
    if n < 10 or j <= i or t[j] <= t[i]:
        raise InputError(f"capacity needs >= 10 completed requests spread in time, got {n}")
    return {
        "capacity_per_s": float((j - i) / (t[j] - t[i])),
        "window_s": [float(t[i]), float(t[j])],
        "requests": int(n),
        "quantiles": [lo, hi],
    }


def slice_steps(steps: pd.DataFrame, t_start: float, t_end: float, t0: float) -> pd.DataFrame:
    """The iterations that started in [t_start, t_end] (clock seconds), their times made
    relative to `t0` (a run's start)."""
    sel = steps[(steps["t_sched_s"] >= t_start) & (steps["t_sched_s"] <= t_end)].copy()
    for col in ("t_sched_s", "t_planned_s", "t_done_s"):
        sel[col] = sel[col] - t0
    return sel.reset_index(drop=True)


def fit_summary(fit: StepLawFit, label: str) -> Mapping[str, Any]:
    """The JSON form of a fit, with the points' residual range, labelled."""
    d = dict(fit.to_dict())
    rr = np.asarray(fit.rel_residuals)
    d["rel_residual_range"] = [float(rr.min()), float(rr.max())] if rr.size else []
    d["rel_residual_p5_p95"] = (
        [float(np.percentile(rr, 5)), float(np.percentile(rr, 95))] if rr.size else []
    )
    d.pop("rel_residuals", None)
    d["label"] = label
    return d
