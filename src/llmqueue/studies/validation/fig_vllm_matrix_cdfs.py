"""The held-out validation matrix per policy: measured and predicted JCT and TTFT distributions.

One column per group (FCFS continuous batching, no batching with token limits, the paper's
dynamic batching, continuous batching under KV pressure, vLLM's priority scheduling with FCFS /
SJF / SSJF, a second model shape on the code trace), top row JCT, bottom row TTFT: the empirical
CDFs of every session-1 run of the group, measured (vLLM, solid) and predicted (the serving
simulator replaying the same requests with the calibration law, dashed), measured requests only.
Data: ``llmqueue.studies.validation.matrix.compare_group``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from llmqueue import figstyle as style

METRICS = (("jct", "JCT (s)"), ("ttft", "TTFT (s)"))


def _ecdf(ax: Axes, x: np.ndarray, i: int, ls: str) -> None:
    xs = np.sort(x[np.isfinite(x)])
    if xs.size:
        ax.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", color=style.color(i), ls=ls,
                lw=1.0)  # fmt: skip


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    pred: pd.DataFrame = inputs["predictions"]
    table: pd.DataFrame = inputs["table"]
    main = table[(table["variant"] == "prediction") & (table["session"] == 1)]
    groups = list(dict.fromkeys(main["group"]))
    p = pred[(pred["variant"] == "prediction") & ~pred["warmup"].astype(bool)]
    fig, axes = style.new_figure((7.2, 3.6), ncols=len(groups), nrows=2, squeeze=False)
    for col, g in enumerate(groups):
        runs = main[main["group"] == g]
        for row, (metric, label) in enumerate(METRICS):
            ax = axes[row, col]
            for i, (_, r) in enumerate(runs.iterrows()):
                x = p[(p["group"] == g) & (p["run"] == r["run"])]
                _ecdf(ax, x[f"measured_{metric}_s"].to_numpy(dtype=float), i, "-")
                _ecdf(ax, x[f"predicted_{metric}_s"].to_numpy(dtype=float), i, "--")
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(label, fontsize=6.5)
            ax.set_ylim(0, 1.02)
            ax.tick_params(labelsize=5.5)
            if col == 0:
                ax.set_ylabel("fraction of requests", fontsize=6.5)
            if row == 0:
                ax.set_title(f"{g} ({runs.iloc[0]['policy']})", fontsize=7)
                handles = [
                    Line2D(
                        [],
                        [],
                        color=style.color(i),
                        label=f"{r['run']} {100 * r['jct_mean_rel_error']:+.0f}%",
                    )  # fmt: skip
                    for i, (_, r) in enumerate(runs.iterrows())
                ]
                ax.legend(handles=handles, fontsize=4.8, loc="lower right", handlelength=1.2,
                          frameon=True, framealpha=0.85, edgecolor="none")  # fmt: skip
    handles = [
        Line2D([], [], color="0.2", ls="-", label="vLLM (measured)"),
        Line2D([], [], color="0.2", ls="--", label="serving simulator (predicted)"),
    ]
    fig.legend(handles=handles, loc="outside upper center", ncols=2)
    style.source_note(
        fig,
        "Session-1 runs of every group; legend: run and the prediction's mean-JCT error. "
        "Predictions use each group's calibration only.",
    )
    return fig
