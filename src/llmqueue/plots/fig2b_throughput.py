"""Fig. 2b (paper file throughput): top, tokens/s vs batch size b (input 256, output 1024);
middle and bottom, first-token time t1(b) and later-token time t2(b) at input 64 with their
linear fits t1 = k1 b + k2, t2 = k3 b + k4 (Eq. 18). One column per source: the roofline-PREDICTED
A100 and every measured hardware (throughput there composed as T = t1 + (n - 1) t2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue.plots import style
from llmqueue.plots.fig2a_time_token_line import MARKERS, MODEL_NAMES, _ci
from llmqueue.profiling.fits import rows_of


def plot(inputs: dict[str, Any], params: dict[str, Any]) -> Figure:
    pts: pd.DataFrame = inputs["points"]
    lines: pd.DataFrame = inputs["lines"]
    sources = list(
        dict.fromkeys(
            [s for s in pts["source"] if str(s).startswith("roofline")]
            + [s for s in pts["source"] if not str(s).startswith("roofline")]
        )
    )
    fig, axes = style.new_figure(
        (3.6 * len(sources), 6.4), ncols=len(sources), nrows=3, squeeze=False
    )
    s_tp, n_tp, s_t = (
        params["throughput_input"],
        params["throughput_output"],
        params["timing_input"],
    )
    for j, src in enumerate(sources):
        pp, ll = pts[pts["source"] == src], lines[lines["source"] == src]
        label = pp["label"].iloc[0]
        predicted = str(src).startswith("roofline")
        for model, g in pp.groupby("model", sort=False):
            i, name = _ci(model), MODEL_NAMES.get(model, model)
            tp = g[g["quantity"] == "throughput"].sort_values("batch")
            ax = axes[0, j]
            if predicted:
                ax.plot(
                    tp["batch"], tp["value"], "-", color=style.color(i), label=f"{name} (predicted)"
                )
            else:
                ax.plot(
                    tp["batch"],
                    tp["value"],
                    MARKERS.get(model, "o") + "-",
                    color=style.color(i),
                    mfc="none",
                    label=f"{name} (measured t1, t2; T composed)",
                )
            for row, q in ((1, "t1"), (2, "t2")):
                ax = axes[row, j]
                d = g[g["quantity"] == q].sort_values("batch")
                f = ll[(ll["model"] == model) & (ll["quantity"] == q)]
                if not predicted:
                    ax.plot(
                        d["batch"],
                        1e3 * d["value"],
                        MARKERS.get(model, "o"),
                        color=style.color(i),
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
                        "--" if predicted else "-",
                        color=style.color(i),
                        label=f"{name} fit: {k[0]}={1e3 * r.slope:.3g} ms, {k[1]}={1e3 * r.intercept:.3g} ms, R²={r.r2:.3f}",
                    )
        axes[0, j].set_title(
            f"{label}\n{'PREDICTED (roofline, lower bound)' if predicted else 'measured'}",
            fontsize=6.5,
        )
        axes[0, j].set_ylabel(f"throughput (tokens/s)\ninput {s_tp}, output {n_tp}")
        axes[1, j].set_ylabel(f"first-token time t1 (ms)\ninput {s_t}")
        axes[2, j].set_ylabel(f"later-token time t2 (ms/token)\ninput {s_t}")
        for row in range(3):
            axes[row, j].set_xlabel("batch size b")
            axes[row, j].set_xlim(0, None)
            axes[row, j].set_ylim(0, None)
            axes[row, j].legend(loc="upper left", fontsize=5.0)
    style.source_note(
        fig,
        "Random-weight models with each architecture's shapes. Roofline columns are predictions "
        "(fp16, weights read once per step, KV cache read per token, no framework overhead); measured "
        "columns are timings on the named hardware (median over repeats; t2 = median decode step; machine, "
        "load and plan in data/profiling/<id>/meta.json).",
    )
    return fig
