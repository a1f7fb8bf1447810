"""The held-out validation matrix in one figure: how far the serving model's prediction is from
vLLM, run by run and metric by metric.

Top: every judged run a point per metric (relative error of the prediction, predicted /
measured - 1, in %), coloured by group, the median over runs as a black bar; the targets as
bands (config ``validation.matrix_compare.targets``: the largest and the median mean-JCT error,
the median p90-JCT and mean-TTFT errors). Bottom left: each run's mean-JCT error against the prediction's step law
on the run's own iterations (its total time / their measured total - 1): where the engine ran
slower or faster than its calibration said, and how the queue amplifies that with the load.
Bottom middle: the median |error| per metric for each variant (the prediction's law, the other
calibration law, the paper's own model where it applies, the prediction's law at the speed the
engine had in the run's warm-up, and two diagnoses that read the judged run: that law at the run's
own mean speed, and the law fitted on the run's own iterations), so one sees what the machine's
speed, the step law and the scheduler model each account for.
Bottom right: SJF's and SSJF's mean-JCT reduction against FCFS on the same arrivals, measured
against predicted (alternating blocks: the mean over the rounds with its 95% CI), with the target
band of ``reduction_pp`` points.
Data: ``llmqueue.studies.validation.matrix``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from llmqueue import figstyle as style
from llmqueue.policy import SJF_ORDER

METRICS = (
    ("jct_mean", "JCT\nmean"),
    ("jct_p50", "JCT\np50"),
    ("jct_p90", "JCT\np90"),
    ("jct_p99", "JCT\np99"),
    ("ttft_mean", "TTFT\nmean"),
    ("ttft_p90", "TTFT\np90"),
    ("tpot_mean", "TPOT\nmean"),
)
VARIANT_LABELS = {
    "prediction": "prediction",
    "linear_law": "linear step law",
    "shaped_law": "shaped step law",
    "paper": "paper's model",
    "warmup_speed": "law at the warm-up's speed",
    "probe_scaled": "law at the probe's speed before the run",
    "session_law": "law of the run's own session (diagnosis)",
    "run_speed": "law at the run's speed (diagnosis)",
    "window_speed": "law at each window's speed (diagnosis)",
    "in_situ_law": "in-situ law (diagnosis)",
}


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    table: pd.DataFrame = inputs["table"]
    summary: pd.DataFrame = inputs["summary"]
    red: pd.DataFrame = inputs["reductions"]
    targets: Mapping[str, float] = params["targets"]
    style.apply_style()
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(7.2, 5.6), layout="constrained")
    mosaic = fig.subplot_mosaic([["m", "m", "m"], ["l", "v", "r"]], height_ratios=[1.1, 1.0])
    ax = mosaic["m"]
    main = table[table["variant"] == "prediction"]
    groups = list(dict.fromkeys(main["group"]))
    rng = np.random.default_rng(0)  # jitter only
    # target bands (drawn first, under the points)
    band = {"jct_mean": targets["jct_mean_max"], "jct_p90": targets["jct_p90_median"],
            "ttft_mean": targets["ttft_mean_median"]}  # fmt: skip
    for k, (m, _) in enumerate(METRICS):
        if m in band:
            ax.add_patch(
                Rectangle((k - 0.42, -100 * band[m]), 0.84, 200 * band[m], color="0.88", lw=0)
            )
        if m == "jct_mean":
            h = 100 * targets["jct_mean_median"]
            ax.add_patch(Rectangle((k - 0.42, -h), 0.84, 2 * h, color="0.75", lw=0))
    for k, (m, _) in enumerate(METRICS):
        e = 100 * main[f"{m}_rel_error"].to_numpy(dtype=float)
        for gi, g in enumerate(groups):
            sel = (main["group"] == g).to_numpy()
            x = k + (gi - (len(groups) - 1) / 2) * 0.1 + rng.uniform(-0.02, 0.02, sel.sum())
            ax.plot(x, e[sel], "o", ms=3, mfc="none", mew=0.8, color=style.color(gi), zorder=3)
        ok = np.isfinite(e)
        if ok.any():
            ax.plot([k - 0.38, k + 0.38], [np.median(e[ok])] * 2, "-", color="k", lw=1.4, zorder=4)
    ax.axhline(0, color="0.3", lw=0.6)
    ax.set_xticks(range(len(METRICS)), [lab for _, lab in METRICS])
    ax.set_xlim(-0.5, len(METRICS) - 0.5)
    ax.set_ylabel("prediction error (%)\npredicted / measured - 1")
    ax.set_title(f"{len(main)} judged runs, step law: {params['law']}")
    handles: list[Any] = [
        Line2D([], [], ls="none", marker="o", mfc="none", color=style.color(i), label=g)
        for i, g in enumerate(groups)
    ]
    handles += [
        Line2D([], [], color="k", lw=1.4, label="median (signed)"),
        Patch(color="0.88", label="target band (largest / median)"),
    ]
    ax.legend(handles=handles, loc="lower left", fontsize=5.5, ncols=4)
    # bottom left: the JCT error against the law's error on the run's own iterations
    ax = mosaic["l"]
    for gi, g in enumerate(groups):
        x = main[main["group"] == g]
        ax.scatter(100 * x["law_total_rel_error"], 100 * x["jct_mean_rel_error"],
                   s=12 + 40 * x["planned_load"] ** 2, facecolors="none",
                   edgecolors=[style.color(gi)], linewidths=0.8)  # fmt: skip
    ax.axhline(0, color="0.3", lw=0.6)
    ax.axvline(0, color="0.3", lw=0.6)
    ax.set_xlabel("step law on the run's iterations (%)\nlaw / measured - 1", fontsize=6.5)
    ax.set_ylabel("mean JCT error (%)", fontsize=6.5)
    ax.set_title("speed, not schedule (size: load)", fontsize=7)
    # bottom middle: median |error| per variant
    ax = mosaic["v"]
    variants = [v for v in VARIANT_LABELS if v in set(summary["variant"])]
    w = 0.8 / max(len(variants), 1)
    names = ["jct_mean", "jct_p90", "ttft_mean", "tpot_mean"]
    for vi, v in enumerate(variants):
        s = summary[summary["variant"] == v].set_index("metric")
        y = [
            100 * float(s.at[m, "median_abs_rel_error"]) if m in s.index else np.nan  # type: ignore[arg-type]
            for m in names
        ]
        ax.bar(np.arange(len(names)) + (vi - (len(variants) - 1) / 2) * w, y, w,
               color=style.color(vi + 5),
               label=f"{VARIANT_LABELS[v]} ({int(s['runs'].max())} runs)")  # fmt: skip
    ax.set_xticks(range(len(names)), [dict(METRICS)[m] for m in names], fontsize=5.5)
    ax.set_ylabel("median |error| over runs (%)", fontsize=6.5)
    ax.set_title("by variant", fontsize=7)
    top = float(np.nanmax(ax.dataLim.y1)) if ax.has_data() else 1.0
    ax.set_ylim(0, 2.0 * top)  # room above the bars for the legend
    ax.legend(fontsize=4.6, loc="upper left")
    # bottom right: SJF / SSJF reductions
    ax = mosaic["r"]
    # a repeat is set against the FCFS run of the first engine session; drawn only when it falls
    # inside the range of the first session's runs, else named in the corner; orders measured in
    # alternating blocks (the protocol) as the mean over their rounds with the measured 95% CI
    same = red[red["session"] == 1] if len(red) else red
    points: list[tuple[str, float, float, float, str, str | None]] = [
        (str(r["run"]), 100 * r["measured_reduction"], 100 * r["predicted_reduction"], 0.0,
         "s" if r["priority"] == SJF_ORDER.name else "D", "none")
        for _, r in same.iterrows()
    ]  # fmt: skip
    blocks = inputs.get("blocks")
    if blocks is not None and len(blocks):
        for _, r in blocks[blocks["variant"].isin(["prediction", "probe_scaled"])].iterrows():
            probe = r["variant"] == "probe_scaled"
            points.append((
                f"{r['priority']} blocks{' (probe)' if probe else ''}",
                100 * r["measured_reduction"], 100 * r["predicted_reduction"],
                100 * float(r["measured_reduction_ci95"]) if np.isfinite(r["measured_reduction_ci95"]) else 0.0,
                "s" if r["priority"] == SJF_ORDER.name else "D", "none" if probe else None,
            ))  # fmt: skip
    if points:
        for i, (label, px, py, pe, mk, mfc) in enumerate(points):
            c = style.color(i)
            ax.errorbar(px, py, xerr=pe or None, fmt=mk, ms=4, mew=0.9, color=c,
                        mfc=c if mfc is None else mfc, elinewidth=0.7, capsize=1.5)  # fmt: skip
            ax.annotate(label, (px, py), fontsize=5.5, xytext=(3, -3), textcoords="offset points")
        xs_all = np.array([[x - e, x + e, y] for _, x, y, e, _, _ in points], dtype=float)
        pp = float(targets["reduction_pp"])
        lo, hi = min(0.0, float(xs_all.min())) - pp - 2, float(xs_all.max()) + pp + 2
        xs = np.array([lo, hi])
        ax.fill_between(xs, xs - pp, xs + pp, color="0.88", lw=0, zorder=0)
        ax.plot(xs, xs, "-", color="0.3", lw=0.7)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        other = red[red["session"] != 1] if len(red) else red
        if len(other):
            ax.text(0.03, 0.97, "\n".join(
                f"{r['run']} (session {int(r['session'])}): measured "
                f"{100 * r['measured_reduction']:+.0f}%,\npredicted {100 * r['predicted_reduction']:+.0f}%"
                for _, r in other.iterrows()), transform=ax.transAxes, va="top", fontsize=4.8)  # fmt: skip
    ax.set_xlabel("measured JCT reduction (%)", fontsize=6.5)
    ax.set_ylabel("predicted (%)", fontsize=6.5)
    ax.set_title("SJF / SSJF vs FCFS", fontsize=7)
    style.source_note(
        fig,
        "vLLM's CPU build on 2 cores; every prediction from the group's calibration batches only "
        "(never a judged run); warm-up requests left out. Bands: the issue's targets.",
    )
    return fig
