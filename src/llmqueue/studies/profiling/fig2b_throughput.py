"""Fig. 2b (paper file throughput): top, tokens/s vs batch size b (input 256, output 1024);
middle and bottom, first-token time t1(b) and later-token time t2(b) at input 64 with their
linear fits t1 = k1 b + k2, t2 = k3 b + k4 (Eq. 18). One column per panel: the roofline-PREDICTED
A100, with beside it (same column) the A100 kernel profile measured by others (kernel sums plus
roofline attention, no framework), and every measured hardware (throughput there composed as
T = t1 + (n - 1) t2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.profiling.fits import rows_of
from llmqueue.studies.profiling._profiling import MARKERS, MODEL_NAMES, colour_index

KERNEL_COLOR = "k"


def _panel_title(pp: pd.DataFrame) -> str:
    kinds = set(pp["kind"])
    if "predicted" in kinds:
        roof = pp[pp["kind"] == "predicted"]["label"].iloc[0]
        extra = pp[pp["kind"] == "measured-kernels"]["source"].unique()
        title = f"{roof}\nPREDICTED (roofline, lower bound)"
        if len(extra):
            title += f"; black: {', '.join(extra)} kernels (measured by others)"
        return title
    return f"{pp['label'].iloc[0]}\nmeasured"


def plot(inputs: dict[str, Any], params: dict[str, Any]) -> Figure:
    pts: pd.DataFrame = inputs["points"]
    lines: pd.DataFrame = inputs["lines"]
    if "panel" not in pts:
        pts = pts.assign(panel=pts["source"])
        lines = lines.assign(panel=lines["source"])
    panels = list(
        dict.fromkeys(
            [s for s in pts["panel"] if str(s).startswith("roofline")]
            + [s for s in pts["panel"] if not str(s).startswith("roofline")]
        )
    )
    fig, axes = style.new_figure(
        (3.6 * len(panels), 6.4), ncols=len(panels), nrows=3, squeeze=False
    )
    s_tp, n_tp, s_t = (
        params["throughput_input"],
        params["throughput_output"],
        params["timing_input"],
    )
    for j, panel in enumerate(panels):
        pp, ll = pts[pts["panel"] == panel], lines[lines["panel"] == panel]
        for (src, model), g in pp.groupby(["source", "model"], sort=False):
            kind = g["kind"].iloc[0]
            predicted = kind == "predicted"
            kernels = kind == "measured-kernels"
            i, name = colour_index(model), MODEL_NAMES.get(model, model)
            color = KERNEL_COLOR if kernels else style.color(i)
            tp = g[g["quantity"] == "throughput"].sort_values("batch")
            ax = axes[0, j]
            if predicted:
                ax.plot(tp["batch"], tp["value"], "--", color=color, label=f"{name} (predicted)")
            elif kernels:
                ax.plot(
                    tp["batch"],
                    tp["value"],
                    "-",
                    color=color,
                    lw=1.3,
                    label=f"{name}, {src}: kernels measured by others + roofline attention",
                )
            else:
                ax.plot(
                    tp["batch"],
                    tp["value"],
                    MARKERS.get(model, "o") + "-",
                    color=color,
                    mfc="none",
                    label=f"{name} (measured t1, t2; T composed)",
                )
            for row, q in ((1, "t1"), (2, "t2")):
                ax = axes[row, j]
                d = g[g["quantity"] == q].sort_values("batch")
                f = ll[(ll["source"] == src) & (ll["model"] == model) & (ll["quantity"] == q)]
                if kernels:
                    ax.plot(
                        d["batch"],
                        1e3 * d["value"],
                        "-",
                        color=color,
                        lw=1.3,
                        label=f"{name}, {src} kernels (+ roofline attention)",
                    )
                elif not predicted:
                    ax.plot(
                        d["batch"],
                        1e3 * d["value"],
                        MARKERS.get(model, "o"),
                        color=color,
                        mfc="none",
                        ls="none",
                        label=f"{name}, measured",
                    )
                for r in rows_of(f):
                    xb = np.linspace(r.bmin, r.bmax, 50)
                    k = ("k1", "k2") if q == "t1" else ("k3", "k4")
                    ax.plot(
                        xb,
                        1e3 * (r.slope * xb + r.intercept),
                        ":" if kernels else ("--" if predicted else "-"),
                        color=color,
                        lw=0.8 if kernels else 1.0,
                        label=f"{name}{' ' + str(src) if kernels else ''} fit: {k[0]}={1e3 * r.slope:.3g} ms, "
                        f"{k[1]}={1e3 * r.intercept:.3g} ms, R²={r.r2:.3f}",
                    )
        axes[0, j].set_title(_panel_title(pp), fontsize=6.0)
        axes[0, j].set_ylabel(f"throughput (tokens/s)\ninput {s_tp}, output {n_tp}")
        axes[1, j].set_ylabel(f"first-token time t1 (ms)\ninput {s_t}")
        axes[2, j].set_ylabel(f"later-token time t2 (ms/token)\ninput {s_t}")
        for row in range(3):
            axes[row, j].set_xlabel("batch size b")
            axes[row, j].set_xlim(0, None)
            axes[row, j].set_ylim(0, None)
            axes[row, j].set_ylim(0, 1.45 * axes[row, j].get_ylim()[1])  # headroom for the legend
            axes[row, j].legend(loc="upper left", fontsize=4.6)
    style.source_note(
        fig,
        "Random-weight models with each architecture's shapes. Roofline curves are predictions "
        "(fp16, weights read once per step, KV cache read per token, no framework overhead); black curves in "
        "that column sum GPU kernel times measured by others (vidur) with roofline attention and LM head, no "
        "framework overhead; measured columns are timings on the named hardware (median over repeats; t2 = "
        "median decode step; machine, load and plan in data/profiling/<id>/meta.json).",
    )
    return fig
