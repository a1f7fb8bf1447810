"""SSJF study: the starvation trade-off. Mean wait against the largest (left) and the 99th
percentile (right) wait of FCFS, SJF and SSJF, each of SJF and SSJF without a guard and with
SSJF's starvation guard at several bounds (a request that has waited longer is served by age
first): the guard buys a bounded tail with a higher mean."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from llmqueue import figstyle as style

POLICIES = ("FCFS", "SJF", "SSJF")
MODE_NAMES = {
    "none": "no batching",
    "dynamic": "dynamic batching",
    "continuous": "continuous batching",
}


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    df = inputs["data"]
    fig, axes = style.new_figure((7.2, 3.0), ncols=2)
    panels = (("wait_max_s", "largest"), ("wait_p99_s", "99th-percentile"))
    for ax, (col, label) in zip(axes, panels, strict=True):
        for i, name in enumerate(POLICIES):
            s = df[df["policy"] == name].copy()
            if s.empty:
                continue
            s["order_key"] = s["guard_s"].fillna(np.inf)
            s = s.sort_values("order_key", ascending=False)
            ax.plot(
                s["wait_mean_s"],
                s[col],
                "-o" if name != "FCFS" else "D",
                color=style.color(i),
                mfc="none",
                lw=0.9,
                label=name,
            )
            # one label per distinct point (a guard that never fires repeats the no-guard
            # point), alternately above and below so that neighbours stay legible
            points: dict[tuple[float, float], list[str]] = {}
            for _, r in s.iterrows():
                g = "no guard" if not np.isfinite(r["guard_s"]) else f"{r['guard_s']:g} s"
                key = (round(float(r["wait_mean_s"]), 6), round(float(r[col]), 6))
                points.setdefault(key, []).append("FCFS" if name == "FCFS" else g)
            for j, ((x, y), labs) in enumerate(points.items()):
                ax.annotate(
                    " = ".join(labs),
                    (x, y),
                    xytext=(-4, -10)
                    if name == "FCFS"
                    else ((3, 3) if (j + i) % 2 == 0 else (3, -8)),
                    textcoords="offset points",
                    fontsize=5,
                    color=style.color(i),
                )
        ax.set_yscale("log")
        plain = FuncFormatter(lambda v, _: f"{v:g}")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.tick_params(axis="y", which="minor", labelsize=5.5)
        ax.set_xlabel("mean wait (s)")
        ax.set_ylabel(f"{label} wait (s)")
        ax.legend(loc="upper right")
    r0 = df.iloc[0]
    fig.suptitle(
        f"Starvation guard trade-off: {r0['setting']}, {MODE_NAMES.get(r0['mode'], r0['mode'])}, load "
        f"{r0['load']:g} ({r0['rate_per_s']:.3g} req/s)",
        fontsize=8,
    )
    style.source_note(
        fig,
        "each point one simulation (Poisson arrivals, held-out trace rows, the same requests "
        "for every policy); labels: the guard bound; SSJF: the learned predictor",
    )
    return fig
