"""SSJF study: claim 10's three groups side by side, one column per batching mode: SSJF's
mean-JCT reduction over FCFS (top) and SSJF's throughput ratio (bottom), as SSJF's evaluation
reads them, with 95% confidence bars over the runs (jackknife). Bars: (a) SSJF's published
inputs and protocol served as their simulator serves, (b) the same served as this engine serves,
(c) the Azure trace's lengths with the learned predictor, SSJF's protocol at one rate, per cost
model; the diamond on a (c) bar: the same jobs read over SSJF's rates, as in (a) and (b); the
open circle on every bar: SJF with true lengths (the oracle). Shaded: the published range. The
right column: the quality of the predictor each group's SSJF orders by (Kendall's tau, class
accuracy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style

MODES = ("none", "dynamic", "continuous")
TITLES = {"none": "no batching", "dynamic": "dynamic batching", "continuous": "continuous batching"}
GROUP_LABELS = {
    "a": "(a) SSJF's inputs,\nprotocol, simulator",
    "b": "(b) SSJF's inputs,\nthis engine's serving",
    "c": "(c) Azure, learned\npredictor",
}
METRICS = (
    ("jct_reduction_pct", "jct_reduction_ci95", "mean-JCT reduction vs FCFS (%)", "10a1"),
    ("throughput_ratio", "throughput_ratio_ci95", "throughput / FCFS's (SSJF's reading)", "10a2"),
)


def _bars(df: pd.DataFrame, settings: list[str], rate: float) -> list[tuple[str, str, int]]:
    """(label, setting, colour) of each bar, in group order."""
    bars = []
    for g in ("a", "b"):
        s = df.loc[df["group"] == g, "setting"]
        if len(s):
            bars.append((g, str(s.iloc[0]), 0 if g == "a" else 1))
    for i, setting in enumerate(settings):
        if ((df["group"] == "c") & (df["setting"] == setting)).any():
            bars.append((f"c:{setting}", setting, 2 + i))
    return bars


def _pick(df: pd.DataFrame, group: str, setting: str, mode: str, policy: str, rate: float) -> Any:
    d = df[
        (df["group"] == group)
        & (df["setting"] == setting)
        & (df["mode"] == mode)
        & (df["policy"] == policy)
    ]
    if group == "c":
        return d[(d["reading"] == "rate") & np.isclose(d["nominal_rate_per_s"], rate)].iloc[0]
    return d[d["reading"] == "rates"].iloc[0]


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    df = inputs["data"]
    ref = inputs["reference"].set_index("id")
    tol = {"10a1": float(params["jct_tolerance"]), "10a2": float(params["thr_tolerance"])}
    settings = [str(s) for s in params["claim_settings"]]
    rate = float(params["rate_per_s"])
    bars = _bars(df, settings, rate)
    fig = style.new_figure((9.0, 4.6))[0]
    fig.clear()
    grid = fig.add_gridspec(2, len(MODES) + 1, width_ratios=[1.0] * len(MODES) + [0.8])
    x = np.arange(len(bars))
    rates_label = ""
    for row, (col_v, col_ci, ylabel, cid) in enumerate(METRICS):
        paper = float(ref.loc[cid, "paper"])
        share = None
        for c, mode in enumerate(MODES):
            ax = fig.add_subplot(grid[row, c], sharey=share)
            share = ax
            ax.axhspan(paper - tol[cid], paper + tol[cid], color="0.88", zorder=0,
                       label="published range")  # fmt: skip
            for i, (name, setting, colour) in enumerate(bars):
                group = name.split(":")[0]
                r = _pick(df, group, setting, mode, "SSJF+guard", rate)
                sjf = _pick(df, group, setting, mode, "SJF+guard", rate)
                ax.bar(i, r[col_v], 0.7, color=style.color(colour), alpha=0.85,
                       yerr=r[col_ci], capsize=2, error_kw={"lw": 0.8})  # fmt: skip
                ax.plot(i, sjf[col_v], "o", mfc="none", mec="k", ms=4, mew=0.8,
                        label="SJF, true lengths" if i == 0 else None)  # fmt: skip
                if group == "c":
                    avg = df[
                        (df["group"] == "c")
                        & (df["setting"] == setting)
                        & (df["mode"] == mode)
                        & (df["policy"] == "SSJF+guard")
                        & (df["reading"] == "rates")
                    ].iloc[0]
                    ax.plot(i, avg[col_v], "D", color="k", ms=3.5,
                            label="(c) over SSJF's rates" if i == len(bars) - 1 else None)  # fmt: skip
            if row == 0:
                ax.set_title(TITLES[mode])
            ax.set_xticks(x)
            if row == 1:
                labels = [
                    GROUP_LABELS[n] if ":" not in n else f"(c) {n.split(':')[1]}"
                    for n, _, _ in bars
                ]
                ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=5.5)
            else:
                ax.set_xticklabels([])
            if c == 0:
                ax.set_ylabel(ylabel, fontsize=6.5)
            else:
                ax.tick_params(labelleft=False)
            if row == 1:
                ax.axhline(1.0, color="0.5", lw=0.6)
    rates = sorted(df.loc[df["group"] == "a", "nominal_rate_per_s"].dropna().unique())
    rates_label = "/".join(f"{v:g}" for v in rates)
    # the predictors
    q = fig.add_subplot(grid[:, len(MODES)])
    names: list[str] = []
    taus: list[float] = []
    accs: list[float] = []
    colours: list[int] = []
    for name, setting, colour in bars:
        group = name.split(":")[0]
        r = _pick(df, group, setting, "none", "SSJF+guard", rate)
        users = "(a), (b)" if group in ("a", "b") else "(c)"
        label = f"{r['predictor']}\n{users}"
        if any(n.split("\n")[0] == str(r["predictor"]) for n in names):
            continue
        names.append(label)
        taus.append(float(r["kendall_tau"]))
        accs.append(float(r["accuracy"]))
        colours.append(colour)
    y = np.arange(len(names))
    q.barh(y - 0.18, taus, 0.34, color=[style.color(c) for c in colours], label="Kendall tau")
    q.barh(y + 0.18, accs, 0.34, color=[style.color(c) for c in colours], alpha=0.45,
           hatch="///", label="class accuracy")  # fmt: skip
    q.set_yticks(y)
    q.set_yticklabels(names, fontsize=6)
    q.set_xlim(0, 1)
    q.invert_yaxis()
    q.set_title("SSJF's predictor", fontsize=7)
    q.set_xlabel("vs the true length (SJF: 1)", fontsize=6)
    q.legend(loc="lower right", fontsize=5.5)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    h2, l2 = fig.axes[len(MODES) - 1].get_legend_handles_labels()
    keep: dict[str, Any] = {}
    for h, lab in zip([*handles, *h2], [*labels, *l2], strict=True):
        if lab and lab not in keep:
            keep[lab] = h
    fig.legend(list(keep.values()), list(keep.keys()), loc="outside upper center", ncols=3,
               fontsize=6)  # fmt: skip
    style.source_note(
        fig,
        "bars: SSJF (with its starvation guard) against FCFS, means over runs and then over "
        f"SSJF's rates {rates_label} per s before the ratio ((a), (b)); (c): SSJF's protocol at "
        f"{rate:g} per s on held-out Azure rows; error bars: 95% jackknife intervals over runs",
    )
    return fig
