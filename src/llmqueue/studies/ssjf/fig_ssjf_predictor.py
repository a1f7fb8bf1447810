"""SSJF study: mean-JCT gain over FCFS against predictor quality (Kendall's tau between predicted
and true output lengths on the held-out rows), from the oracle (SJF, tau = 1) down to a
size-blind predictor (tau = 0), one curve per batching mode; the learned predictors marked.
Simulation markers; with no batching the exact gain (Cobham's formula with classes by
prediction) as a line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.policy import FCFS_ORDER

MODES = ("none", "dynamic", "continuous")
MARKERS = {"oracle": "D", "noisy": "o", "buckets": "^", "size-blind": "v", "learned": "*"}


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    df = inputs["data"]
    df = df[df["kind"] != FCFS_ORDER.name]
    fig, ax = style.new_figure((5.0, 3.4))
    for i, mode in enumerate(MODES):
        d = df[df["mode"] == mode].sort_values("kendall_tau")
        if d.empty:
            continue
        ok = d["gain_pct"].notna()
        ax.plot(d.loc[ok, "kendall_tau"], d.loc[ok, "gain_pct"], ":", lw=0.7, color=style.color(i))
        for kind, marker in MARKERS.items():
            s = d[d["kind"] == kind]
            if s.empty:
                continue
            ax.plot(
                s["kendall_tau"],
                s["gain_pct"],
                marker,
                color=style.color(i),
                mfc="none" if kind != "learned" else style.color(i),
                ms=9 if kind == "learned" else 4,
                mec="k" if kind == "learned" else style.color(i),
                mew=0.5 if kind == "learned" else 1.0,
                ls="none",
            )
        if d["exact_gain_pct"].notna().any():
            e = d[d["exact_gain_pct"].notna()]
            # exact points of predictors of one family lie on a curve; join them in tau order
            ax.plot(
                e["kendall_tau"],
                e["exact_gain_pct"],
                "-",
                lw=2.2,
                alpha=0.3,
                color=style.color(i),
                label=f"{mode}: exact (Cobham, classes by prediction)",
            )
        ax.plot(
            [], [], "-", color=style.color(i), label=f"{mode}: {d['rate_per_s'].iloc[0]:.3g} req/s"
        )
        learned = d[d["kind"] == "learned"].sort_values("kendall_tau")
        for j, (_, r) in enumerate(learned.iterrows()):
            if mode == MODES[0]:  # label the stars once, alternately above-left / below-right
                ax.annotate(
                    str(r["predictor"]).replace("learned:", "learned "),
                    (r["kendall_tau"], r["gain_pct"]),
                    xytext=(-6, 8) if j % 2 == 0 else (6, -12),
                    textcoords="offset points",
                    fontsize=6,
                    ha="right" if j % 2 == 0 else "left",
                )
    for kind, marker in MARKERS.items():
        ax.plot(
            [],
            [],
            marker,
            color="0.3",
            mfc="none" if kind != "learned" else "0.3",
            ls="none",
            label=kind,
        )
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.set_xlim(-0.05, 1.05)
    ax.set_xlabel("Kendall's tau (predicted vs true output length, held-out rows)")
    ax.set_ylabel("mean-JCT gain over FCFS (%)")
    load = float(df["load"].iloc[0]) if len(df) else np.nan
    ax.set_title(f"SSJF gain against predictor quality ({df['setting'].iloc[0]}, load {load:g})")
    ax.legend(loc="upper left", fontsize=5.5, ncol=2)
    style.source_note(
        fig,
        "markers: simulation (Poisson arrivals, held-out rows); the same requests for every "
        f"predictor; stars: learned scikit-learn models (SSJF curves use {params['ssjf_model']})",
    )
    return fig
