"""Fig. 2a (paper file time_token_line): end-to-end latency vs output tokens, one linear fit per model.

Left panel: the A100 — the paper's Table I points (input 128) and their fit (reference), the
roofline-PREDICTED lines per model (dashed; a lower bound, never a measurement) and the line of the
A100 kernel profile measured by others (vidur; kernels plus roofline attention, no framework). Other panels: one
per measured hardware, the end-to-end runs (markers; never composed) and their least-squares fit.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.profiling.fits import rows_of
from llmqueue.studies.profiling._profiling import MARKERS, MODEL_NAMES, colour_index


def plot(inputs: dict[str, Any], params: dict[str, Any]) -> Figure:
    pts: pd.DataFrame = inputs["points"]
    lines: pd.DataFrame = inputs["lines"]
    panels = ["A100"] + [p for p in pts["panel"].unique() if p != "A100"]
    fig, axes = style.new_figure((3.6 * len(panels), 3.0), ncols=len(panels))
    axes = np.atleast_1d(axes)
    for ax, panel in zip(axes, panels, strict=False):
        pp, ll = pts[pts["panel"] == panel], lines[lines["panel"] == panel]
        xmax = max(520.0, float(pp["output_tokens"].max()) if not pp.empty else 0.0)
        x = np.linspace(0, xmax, 50)
        for r in rows_of(ll):
            i = colour_index(r.model)
            if r.kind == "reference":
                ax.plot(
                    x,
                    r.slope * x + r.intercept,
                    "-",
                    color="k",
                    lw=1.0,
                    label=f"{r.label}: {1e3 * r.slope:.1f} ms/token, R²={r.r2:.3f}",
                )
            elif r.kind == "measured-kernels":
                ax.plot(
                    x,
                    r.slope * x + r.intercept,
                    "-",
                    color="0.35",
                    lw=1.2,
                    label=f"{MODEL_NAMES.get(r.model, r.model)}, {r.source} kernels ({1e3 * r.slope:.1f} ms/token)",
                )
            elif r.kind == "predicted":
                ax.plot(
                    x,
                    r.slope * x + r.intercept,
                    ":" if "40GB" in r.label else "--",
                    color=style.color(i),
                    label=f"{MODEL_NAMES.get(r.model, r.model)}, {r.label} ({1e3 * r.slope:.1f} ms/token)",
                )
            else:
                ax.plot(
                    x,
                    r.slope * x + r.intercept,
                    "-",
                    color=style.color(i),
                    label=f"{MODEL_NAMES.get(r.model, r.model)} fit: {1e3 * r.slope:.0f} ms/token, R²={r.r2:.3f}",
                )
        for (model, kind), g in pp.groupby(["model", "kind"], sort=False):
            if kind == "paper":
                ax.plot(
                    g["output_tokens"],
                    g["latency_s"],
                    "D",
                    color="k",
                    ms=4,
                    label="paper Table I (A100, input 128)",
                )
            else:
                ax.plot(
                    g["output_tokens"],
                    g["latency_s"],
                    MARKERS.get(model, "o"),
                    color=style.color(colour_index(model)),
                    mfc="none",
                    ls="none",
                    label=f"{MODEL_NAMES.get(model, model)}, measured end to end (n={len(g)})",
                )
        ax.set_xlabel("output tokens N")
        ax.set_ylabel("end-to-end latency S (s)")
        ax.set_xlim(0, None)
        ax.set_ylim(0, None)
        if panel == "A100":
            ax.set_title(
                "A100: paper (reference), roofline (predicted)\nand kernels measured by others (vidur)",
                fontsize=6.5,
            )
        else:
            lab = pp["label"].iloc[0] if not pp.empty else panel
            ax.set_title(f"{panel}: {lab}", fontsize=6.5)
        ax.legend(loc="upper left" if panel == "A100" else "best", fontsize=5.2)
    style.source_note(
        fig,
        "Random-weight models with each architecture's shapes (ChatGLM3-6B as a Llama-style block "
        "with 2 KV groups). Requests drawn from the Azure LLM trace 2023 (output < 512 tokens). "
        "Roofline lines are predictions (lower bounds), not measurements; the kernel line sums GPU kernel "
        "times measured by others (vidur), no framework overhead. Sources without end-to-end runs have no panel.",
    )
    return fig
