"""SSJF study: mean and p99 job completion time (JCT) against load, FCFS / SJF / SSJF, with and
without SSJF's starvation guard, one column per batching mode (none, dynamic, continuous), for
one setting and one arrival process (a panel: ``<arrivals>_<setting>``). Simulation markers with
95% CI bars; with no batching and Poisson arrivals the exact mean JCT (Cobham's priority formula,
Pollaczek-Khinchine for FCFS) as lines."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from llmqueue import figstyle as style

MODES = ("none", "dynamic", "continuous")
POLICIES = ("FCFS", "SJF", "SSJF")
ARRIVALS = {
    "poisson": "Poisson arrivals, lengths from held-out trace rows",
    "replay": "held-out trace rows at their own timestamps, time-scaled",
}


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    arrivals, setting = str(params["panel"]).split("_", 1)
    df = inputs["data"]
    df = df[df["setting"] == setting]
    fig, axes = style.new_figure((8.4, 4.6), ncols=len(MODES), nrows=2, sharex=True)
    for col, mode in enumerate(MODES):
        d = df[df["mode"] == mode]
        pol = str(d["batching"].iloc[0]) if len(d) else ""
        for row, (metric, label) in enumerate((("jct_mean_s", "mean"), ("jct_p99_s", "p99"))):
            ax = axes[row, col]
            for i, name in enumerate(POLICIES):
                for guard in (False, True):
                    s = d[d["policy"] == (f"{name}+guard" if guard else name)].sort_values("load")
                    if s.empty:
                        continue
                    x, y = s["load"].to_numpy(), s[metric].to_numpy(float)
                    ci = s["jct_ci95_s"] if metric == "jct_mean_s" else None
                    lab = f"{name} + {s['guard_s'].iloc[0]:g}-s guard" if guard else name
                    ok = np.isfinite(y)
                    ax.plot(x[ok], y[ok], ls=":" if guard else "-", lw=0.7, color=style.color(i))
                    style.sim_points(ax, x, y, ci, lab, i, marker="s" if guard else "o", band=False)
                    if metric == "jct_mean_s" and not guard and s["exact_jct_mean_s"].notna().any():
                        ax.plot(
                            x,
                            s["exact_jct_mean_s"],
                            "-",
                            lw=2.2,
                            alpha=0.35,
                            color=style.color(i),
                            label=f"{name}: exact (Cobham / P-K)",
                        )
            bad = d.groupby("load")["unstable"].any()
            style.mark_unstable(ax, bad.index, bad.to_numpy())
            ax.set_yscale("log")
            plain = FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(plain)
            ax.tick_params(axis="y", which="minor", labelsize=5.5)
            if row == 0:
                title = {"none": "no batching", "dynamic": "dynamic", "continuous": "continuous"}
                ax.set_title(f"{title[mode]}: {_short(pol)}")
            if row == 1:
                ax.set_xlabel("load (arrival rate / FCFS capacity)")
            if col == 0:
                ax.set_ylabel(f"{label} JCT (s)")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    keep = {}
    for h, lab in zip(handles, labels, strict=True):
        if lab and lab not in keep:
            keep[lab.replace(" (95% CI)", "")] = h
    fig.legend(list(keep.values()), list(keep.keys()), loc="outside right center", fontsize=6)
    fig.suptitle(f"{params.get('description') or setting}: {ARRIVALS[arrivals]}", fontsize=8)
    pred = df.loc[df["policy"] == "SSJF", "predictor"]
    tau = df.loc[df["policy"] == "SSJF", "kendall_tau"]
    style.source_note(
        fig,
        f"SSJF: predictor {pred.iloc[0] if len(pred) else '?'} (held-out Kendall tau "
        f"{float(tau.iloc[0]) if len(tau) else float('nan'):.2f}); SJF: true lengths; markers: "
        "simulation (mean with 95% CI; p99 from the histogram); grey: unstable",
    )
    return fig


def _short(policy_label: str) -> str:
    return (
        policy_label.replace("continuous ", "")
        .replace(" kv=inf reserve", "")
        .replace("dynamic ", "")
        .replace("none", "one at a time")
    )
