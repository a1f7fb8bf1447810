"""The validation matrix across its runs: the queue orders' reductions against FCFS, the repeats'
spread, the error summary per metric, the medians per engine and machine, and the Markdown
report of one engine's matrix (``figures/table_<engine>_matrix.md``). Reads the per-run
comparison rows :func:`llmqueue.studies.validation.matrix.compare_group` writes; relative errors
are predicted / measured - 1."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.engines.requests import FCFS_PRIORITY
from llmqueue.markdown import md_table
from llmqueue.studies.validation.matrix import ERROR_METRICS
from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings
from llmqueue.studies.validation.protocol import reductions_against

__all__ = [
    "priority_reductions",
    "repeat_spread",
    "summary_rows",
    "markdown_matrix",
    "ENGINE_TITLES",
    "ENGINE_VARIANTS",
    "engine_medians",
    "markdown_engines",
]


# ---- across runs -----------------------------------------------------------------------------
def priority_reductions(comparison: pd.DataFrame) -> pd.DataFrame:
    """SJF's and SSJF's mean-JCT reduction against FCFS on the same arrivals, measured and
    predicted (1 - JCT / JCT_fcfs, the prediction variant), per session: a repeat of a priority
    run is set against the FCFS run of session 1."""
    c = comparison[comparison["variant"] == "prediction"]
    if "block" in c:  # alternating blocks are paired within their round (protocol.block_reductions)
        c = c[c["block"].fillna(0).astype(int) == 0]
    out = []
    for group, g in c.groupby("group", sort=False):
        fcfs = g[(g["priority"] == FCFS_PRIORITY) & (g["session"] == 1)]
        if fcfs.empty:
            continue
        out += [{"group": group, **row}
                for row in reductions_against(fcfs.iloc[0], g[g["priority"] != FCFS_PRIORITY])]  # fmt: skip
    cols = ["group", "run", "priority", "session", "against", "measured_reduction",
            "predicted_reduction", "error_pp"]  # fmt: skip
    return pd.DataFrame(out, columns=cols)  # header only where every order ran in blocks


def repeat_spread(comparison: pd.DataFrame) -> pd.DataFrame:
    """Run-to-run spread of the repeated configurations: per repeated run and metric, the
    measured values of every session, their relative spread (max / min - 1) and the model's
    errors, so that model error and measurement noise can be told apart. Alternating blocks
    (``block`` > 0) serve each round on arrivals of its own: they are not repeats."""
    c = comparison[comparison["variant"] == "prediction"]
    if "block" in c:
        c = c[c["block"].fillna(0).astype(int) == 0]
    out = []
    for (group, run), g in c.groupby(["group", "config_run"], sort=False):
        if len(g) < 2:
            continue
        for m in ("jct_mean", "jct_p90", "ttft_mean"):
            vals = g[f"measured_{m}_s"].to_numpy(dtype=float)
            errs = g[f"{m}_rel_error"].to_numpy(dtype=float)
            out.append({
                "group": group, "run": run, "metric": m, "sessions": len(g),
                "measured_s": "|".join(f"{v:.4g}" for v in vals),
                "spread": float(vals.max() / vals.min() - 1.0),
                "errors": "|".join(f"{e:+.4f}" for e in errs),
                "error_range": float(errs.max() - errs.min()),
            })  # fmt: skip
    return pd.DataFrame(out)


def summary_rows(comparison: pd.DataFrame, variant: str = "prediction") -> pd.DataFrame:
    """Per metric of :data:`ERROR_METRICS` over the judged runs of `variant`: the median and the
    largest |relative error|, the run with the largest, and how many runs (BLIS's format)."""
    c = comparison[comparison["variant"] == variant]
    out = []
    for m in ERROR_METRICS:
        e = c[f"{m}_rel_error"].to_numpy(dtype=float)
        ok = np.isfinite(e)
        if not ok.any():
            continue
        a = np.abs(e[ok])
        worst = c[ok].iloc[int(np.argmax(a))]
        out.append({
            "variant": variant, "metric": m, "runs": int(ok.sum()),
            "median_abs_rel_error": float(np.median(a)), "max_abs_rel_error": float(a.max()),
            "worst_run": f"{worst['group']}/{worst['run']}",
        })  # fmt: skip
    return pd.DataFrame(out)


# each engine's name in titles (config validation.matrix_compare.matrices)
ENGINE_TITLES = {"vllm": "vLLM", "transformers": "transformers' continuous batching"}

# the variants whose median mean-JCT error the engines' table sets side by side
ENGINE_VARIANTS = ("prediction", "probe_scaled", "run_speed", "in_situ_law")


def engine_medians(table: pd.DataFrame, targets: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every engine's matrix side by side (issue on a second engine): per engine and machine
    (hardware id) over its judged runs, the groups and runs, the prediction's median and largest
    |mean JCT error| and its median |p90 JCT| and |mean TTFT| errors, the median |mean JCT error|
    of each diagnosis of :data:`ENGINE_VARIANTS`, and, given the engines' target verdicts
    (:func:`llmqueue.studies.validation.verdict.judge_targets` with an ``engine`` column), how many
    targets were met of those judged. Fractions; NaN where an engine has no such variant."""

    def med(x: pd.Series) -> float:
        a = np.abs(x.to_numpy(dtype=float))
        a = a[np.isfinite(a)]
        return float(np.median(a)) if a.size else math.nan

    out = []
    for (engine, machine), g in table.groupby(["engine", "machine"], sort=False):
        pred = g[g["variant"] == "prediction"]
        row: dict[str, Any] = {
            "engine": engine, "machine": machine, "groups": int(pred["group"].nunique()),
            "runs": len(pred),
            "jct_mean_median_abs_rel_error": med(pred["jct_mean_rel_error"]),
            "jct_mean_max_abs_rel_error": float(np.nanmax(np.abs(pred["jct_mean_rel_error"]))),
            "jct_p90_median_abs_rel_error": med(pred["jct_p90_rel_error"]),
            "ttft_mean_median_abs_rel_error": med(pred["ttft_mean_rel_error"]),
        }  # fmt: skip
        for v in ENGINE_VARIANTS[1:]:
            row[f"{v}_jct_mean_median_abs_rel_error"] = med(
                g.loc[g["variant"] == v, "jct_mean_rel_error"]
            )
        if targets is not None:
            t = targets[(targets["engine"] == engine) & (targets["verdict"] != "n/a")]
            row["targets_met"] = int((t["verdict"] == "met").sum())
            row["targets_judged"] = len(t)
        out.append(row)
    return pd.DataFrame(out)


def markdown_engines(medians: pd.DataFrame) -> str:
    """:func:`engine_medians` as a Markdown table: one row per engine and machine."""
    head = ["engine", "machine", "groups / runs", "mean JCT: median", "largest", "p90 JCT",
            "mean TTFT", "probe-scaled", "at the run's speed", "in-situ law", "targets met"]  # fmt: skip
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _, r in medians.iterrows():
        met = (
            f"{int(r['targets_met'])} of {int(r['targets_judged'])}"
            if "targets_met" in r and math.isfinite(float(r["targets_met"]))
            else "-"
        )
        cells = [
            ENGINE_TITLES.get(str(r["engine"]), str(r["engine"])), str(r["machine"]),
            f"{int(r['groups'])} / {int(r['runs'])}",
            *(_abs(r[c]) for c in (
                "jct_mean_median_abs_rel_error", "jct_mean_max_abs_rel_error",
                "jct_p90_median_abs_rel_error", "ttft_mean_median_abs_rel_error",
                *(f"{v}_jct_mean_median_abs_rel_error" for v in ENGINE_VARIANTS[1:]),
            )),
            met,
        ]  # fmt: skip
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def _abs(x: Any) -> str:
    v = float(x) if x is not None else math.nan
    return "n/a" if not math.isfinite(v) else f"{100 * abs(v):.1f}%"


# ---- the Markdown table ---------------------------------------------------------------------
def _pct(x: Any) -> str:
    v = float(x) if x is not None else math.nan
    return "n/a" if not math.isfinite(v) else f"{100 * v:+.1f}%"


def _s(x: Any) -> str:
    v = float(x) if x is not None else math.nan
    return "n/a" if not math.isfinite(v) else f"{v:.3g}"


def markdown_matrix(
    comparison: pd.DataFrame,
    summary: pd.DataFrame,
    reductions: pd.DataFrame,
    spread: pd.DataFrame,
    closed: pd.DataFrame,
    cfg: MatrixCompareSettings,
) -> str:
    """The error table as Markdown: every judged run (the prediction), the summary per metric
    beside the targets, SJF/SSJF reductions, closed forms, the run-to-run spread and the other
    variants' summaries."""
    t = cfg.targets
    engine = ENGINE_TITLES.get(cfg.engine, cfg.engine)
    out = [
        f"# The serving model against {engine}: the held-out validation matrix",
        "",
        f"Prediction: the serving simulator with the {cfg.law} step law fitted on each group's "
        "calibration only; relative errors predicted / measured - 1 over the measured requests.",
        "",
    ]
    main = comparison[comparison["variant"] == "prediction"]
    rows = [
        [f"{r['group']}", f"{r['run']}", f"{r['policy']}",
         f"{r['planned_load']:.2f} / {r['achieved_load']:.2f}", f"{r['requests']}",
         f"{_s(r['measured_jct_mean_s'])} / {_s(r['predicted_jct_mean_s'])}",
         *(_pct(r[f"{c}_rel_error"]) for c in ("jct_mean", "jct_p50", "jct_p90", "jct_p99",
                                                "ttft_mean", "ttft_p90", "tpot_mean")),
         f"{r['jct_pearson']:.3f}", r["flags"] if isinstance(r["flags"], str) else ""]
        for _, r in main.iterrows()
    ]  # fmt: skip
    out.append(md_table(["group", "run", "policy", "load planned / achieved", "n",
                         "mean JCT (s) measured / predicted", "mean", "p50", "p90", "p99",
                         "TTFT mean", "TTFT p90", "TPOT mean", "JCT Pearson", "flags"], rows))  # fmt: skip
    targets = {
        "jct_mean": f"median <= {100 * t.jct_mean_median:g}%, every run <= {100 * t.jct_mean_max:g}%",
        "jct_p90": f"median <= {100 * t.jct_p90_median:g}%",
        "ttft_mean": f"median <= {100 * t.ttft_mean_median:g}%",
    }
    out += ["", "## Over all judged runs (median and largest |error|)", ""]
    rows = [
        [f"{r['variant']}", f"{r['metric']}", f"{r['runs']}",
         f"{100 * r['median_abs_rel_error']:.1f}%", f"{100 * r['max_abs_rel_error']:.1f}%",
         f"{r['worst_run']}",
         targets.get(r["metric"], "-") if r["variant"] == "prediction" else "-"]
        for _, r in summary.iterrows()
    ]  # fmt: skip
    out.append(md_table(["variant", "metric", "runs", "median abs. error", "largest",
                         "worst run", "target"], rows))  # fmt: skip
    if len(reductions):
        out += ["", "## Queue order: mean-JCT reduction against FCFS on the same arrivals", ""]
        rows = [
            [f"{r['group']}/{r['run']}", f"{r['priority']}",
             f"{100 * r['measured_reduction']:.1f}%", f"{100 * r['predicted_reduction']:.1f}%",
             f"{r['error_pp']:+.1f}"]
            for _, r in reductions.iterrows()
        ]  # fmt: skip
        out.append(md_table(["run", "priority", "measured", "predicted",
                             f"error (pp; target {t.reduction_pp:g})"], rows))  # fmt: skip
    if len(closed):
        out += ["", "## Closed forms (the paper's models at the planned rate)", ""]
        rows = [
            [f"{r['group']}/{r['run']}", f"{r['model']}", f"{r['rho']:.3f}",
             f"{_s(r['measured_wait_mean_s'])} +- {_s(r['measured_wait_mean_ci95_s'])}",
             _s(r["exact_wait_mean_s"]), "yes" if r["exact_wait_in_ci"] is True else "no",
             f"{_s(r['measured_jct_mean_s'])} +- {_s(r['measured_jct_mean_ci95_s'])}",
             _s(r["exact_jct_mean_s"]), _s(r.get("bound16_jct_mean_s", math.nan))]
            for _, r in closed.iterrows()
        ]  # fmt: skip
        out.append(md_table(["run", "model", "rho", "mean wait measured (95% CI)", "closed form",
                             "in CI", "mean JCT measured (95% CI)", "closed form", "bound (16)"],
                            rows))  # fmt: skip
    if len(spread):
        out += ["", "## Repeats on a fresh engine: measurement noise beside model error", ""]
        rows = [
            [f"{r['group']}/{r['run']}", f"{r['metric']}", f"{r['measured_s']}",
             f"{100 * r['spread']:.1f}%", f"{r['errors']}"]
            for _, r in spread.iterrows()
        ]  # fmt: skip
        out.append(md_table(["run", "metric", "measured per session (s)", "spread",
                             "model errors"], rows))  # fmt: skip
    out.append("")
    return "\n".join(out)
