"""The held-out matrix judged against its targets, one row per target (issue on the real-engine
protocol, "Targets"): the unconditional prediction's median and largest |mean JCT error|, its
median |p90 JCT| and |mean TTFT| errors; the probe-scaled prediction's and the run-speed
diagnosis's median |mean JCT error|; SJF's and SSJF's mean-JCT reductions against FCFS (the
alternating blocks' mean over the rounds where the matrix has them, else the back-to-back runs'
largest miss); the groups whose errors share a sign beyond 2 sigma in every repeat.

Inputs are the matrix table's own outputs (``summary.csv``, ``block_summary.csv`` or
``reductions.csv``, the defect groups of :func:`~llmqueue.studies.validation.protocol.judged_in_sigma`);
a target whose statistic the matrix cannot give (a variant it was not measured for) is reported
with a NaN value and verdict ``n/a``, never as met. Errors are fractions; reductions in
percentage points."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from llmqueue.studies.validation.matrix_spec import MatrixTargets

__all__ = ["VERDICT_COLUMNS", "judge_targets"]

VERDICT_COLUMNS = ("target", "variant", "statistic", "value", "limit", "unit", "detail", "verdict")


def _summary_value(
    summary: pd.DataFrame, variant: str, metric: str, column: str
) -> tuple[float, str]:
    row = summary[(summary["variant"] == variant) & (summary["metric"] == metric)]
    if row.empty:
        return math.nan, ""
    r = row.iloc[0]
    detail = str(r["worst_run"]) if column == "max_abs_rel_error" else f"{int(r['runs'])} runs"
    return float(r[column]), detail


def _verdict(value: float, limit: float) -> str:
    if not math.isfinite(value):
        return "n/a"
    return "met" if value <= limit else "missed"


def judge_targets(
    summary: pd.DataFrame,
    blocks: pd.DataFrame,
    reductions: pd.DataFrame,
    defects: Sequence[str],
    targets: MatrixTargets,
) -> pd.DataFrame:
    """One row per target (:data:`VERDICT_COLUMNS`): what is judged, the variant, the statistic,
    its value, the limit, the unit (``fraction``, ``pp`` or ``groups``), a detail (runs, worst
    run, rounds, group names) and ``met`` / ``missed`` / ``n/a``.

    `summary`: :func:`~llmqueue.studies.validation.matrix_summary.summary_rows` over every variant;
    `blocks`: :func:`~llmqueue.studies.validation.protocol.block_summary` (may be empty);
    `reductions`: :func:`~llmqueue.studies.validation.matrix_summary.priority_reductions` (read only when
    `blocks` has no prediction rows); `defects`: the groups beyond 2 sigma in every repeat."""
    rows: list[dict[str, object]] = []

    def add(target: str, variant: str, statistic: str, value: float, limit: float, unit: str,
            detail: str) -> None:  # fmt: skip
        rows.append({
            "target": target, "variant": variant, "statistic": statistic, "value": value,
            "limit": limit, "unit": unit, "detail": detail, "verdict": _verdict(value, limit),
        })  # fmt: skip

    for variant, metric, column, limit, target in (
        ("prediction", "jct_mean", "median_abs_rel_error", targets.jct_mean_median, "mean JCT"),
        ("prediction", "jct_mean", "max_abs_rel_error", targets.jct_mean_max, "mean JCT"),
        ("prediction", "jct_p90", "median_abs_rel_error", targets.jct_p90_median, "p90 JCT"),
        ("prediction", "ttft_mean", "median_abs_rel_error", targets.ttft_mean_median, "mean TTFT"),
        ("probe_scaled", "jct_mean", "median_abs_rel_error", targets.probe_jct_mean_median,
         "mean JCT"),
        ("run_speed", "jct_mean", "median_abs_rel_error", targets.run_speed_jct_mean_median,
         "mean JCT"),
    ):  # fmt: skip
        value, detail = _summary_value(summary, variant, metric, column)
        statistic = "largest abs. error" if column == "max_abs_rel_error" else "median abs. error"
        add(target, variant, statistic, value, limit, "fraction", detail)

    pred_blocks = blocks[blocks["variant"] == "prediction"] if len(blocks) else blocks
    if len(pred_blocks):
        for _, r in pred_blocks.iterrows():
            add(f"{r['priority']} reduction against FCFS", "prediction",
                "abs. error of the mean over alternating blocks", abs(float(r["error_pp"])),
                targets.reduction_pp, "pp", f"{r['group']}: {int(r['rounds'])} rounds")  # fmt: skip
    elif len(reductions):
        for prio, g in reductions.groupby("priority", sort=False):
            worst = g.iloc[int(np.argmax(g["error_pp"].abs().to_numpy(dtype=float)))]
            add(f"{prio} reduction against FCFS", "prediction",
                "largest abs. error over back-to-back runs", abs(float(worst["error_pp"])),
                targets.reduction_pp, "pp", f"{worst['group']}/{worst['run']}")  # fmt: skip
    add(
        "same-signed error beyond 2 sigma in every repeat",
        "prediction",
        "groups",
        float(len(defects)),
        0.0,
        "groups",
        ", ".join(defects) or "none",
    )
    return pd.DataFrame(rows, columns=list(VERDICT_COLUMNS))
