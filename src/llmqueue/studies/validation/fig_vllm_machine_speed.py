"""Does vLLM's speed follow the machine's? The machine-speed run, cycle by cycle.

Left: per cycle, four series each over its own median (1: the cycle ran at the series' median
speed; 1.1: 10% slower): the engine's decode iteration (scheduler to output), the model's compute
(forward pass and sampling, timed inside the worker), the memory-bound and the compute-bound
fixed kernel (run between the batches while the engine is idle). Right: the model's compute
against each kernel per cycle, both over their medians, with the Pearson correlation. Data:
``llmqueue.studies.validation.machine_speed.cycle_table`` / ``speed_summary``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style

# (column, legend label) drawn on the left, in this order
LINES = [
    ("step_ms", "engine iteration"),
    ("model_ms", "model compute (worker)"),
    ("stream_ms", "memory-bound kernel"),
    ("compute_us", "compute-bound kernel"),
]
PROBES = [("stream_ms", "memory-bound kernel"), ("compute_us", "compute-bound kernel")]


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    cyc: pd.DataFrame = inputs["cycles"]
    summ: dict[Any, dict[Any, Any]] = inputs["summary"].set_index("series").to_dict(orient="index")
    fig, (ax, bx) = style.new_figure((7.2, 2.8), ncols=2, width_ratios=[1.6, 1.0])
    t = cyc["t_mid_s"] / 60.0
    for i, (col, label) in enumerate(LINES):
        x = cyc[col] / cyc[col].median()
        cv = float(summ[col]["cv"])
        ax.plot(t, x, "o-", ms=2.2, lw=0.8, color=style.color(i),
                label=f"{label}\n{_median_label(col, summ)}, CV {100 * cv:.1f}%")  # fmt: skip
    ax.axhline(1.0, color="0.3", lw=0.6)
    ax.set_xlabel("time since the first cycle (min)")
    ax.set_ylabel("time per call / its median")
    top = max(float((cyc[c] / cyc[c].median()).max()) for c, _ in LINES)
    bottom = min(float((cyc[c] / cyc[c].median()).min()) for c, _ in LINES)
    ax.set_ylim(bottom - 0.02, top + 0.16)  # room above the lines for the legend
    ax.legend(fontsize=5.2, loc="upper left", ncols=4, columnspacing=0.8, handlelength=1.2)
    fwd = cyc["model_ms"] / cyc["model_ms"].median()
    lo, hi = 1.0, 1.0
    for i, (col, label) in enumerate(PROBES):
        x = cyc[col] / cyc[col].median()
        r = float(summ[col]["corr_model"])
        bx.plot(x, fwd, "o", ms=2.6, color=style.color(i + 2), label=f"{label}: r = {r:.2f}")
        lo, hi = min(lo, float(x.min())), max(hi, float(x.max()))
    lo, hi = min(lo, float(fwd.min())), max(hi, float(fwd.max()))
    bx.plot([lo, hi], [lo, hi], color="0.5", lw=0.6, ls=":")
    bx.set_xlabel("kernel time / its median")
    bx.set_ylabel("model compute / its median")
    bx.legend(fontsize=5.5, loc="upper left")
    fig.suptitle(
        "vLLM's decode iterations and two fixed kernels in turn on one engine start "
        f"({len(cyc)} cycles; per cycle other processes at most "
        f"{100 * float(cyc['other_cpu_share'].max()):.1f}% of the CPU, steal at most "
        f"{100 * float(cyc['steal_share'].max()):.1f}%)",
        fontsize=7,
    )
    return fig


def _median_label(col: str, summ: dict[Any, dict[Any, Any]]) -> str:
    v = float(summ[col]["median"])
    return f"{v:.0f} us" if col.endswith("_us") else f"{v:.1f} ms"
