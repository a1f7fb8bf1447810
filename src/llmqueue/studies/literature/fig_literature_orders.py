"""Queue orders on one server against the load: exact lines, the engine and the published numbers.

M/G/1 in the papers' time unit (mean size 1), predictions y ~ Exp(mean x). Left: exponential
sizes (Mitzenmacher and Shahout, arXiv 2503.07545, Tables 1 and 2); right: Weibull sizes
F(x) = 1 - exp(-sqrt(2x)) (their Table 3). Lines: the exact mean response time of each order
(Pollaczek-Khinchine, Cobham, the preemptive-resume priority formulas, Schrage-Miller, the SOAP
formula of SPRPT; the one-bit advice at its best threshold T*); circles: the engine's simulated
means with 95% CI; black crosses: the published numbers. Preemption and size information lower
the mean response time, and a weak (exponential) prediction keeps most of the gain.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import ticker

from llmqueue import figstyle as style

PANELS = (("exponential", "one_bit"), ("weibull",))
TICKS = (1, 1.5, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 70, 100)
TITLES = ("sizes Exp(1)", "sizes Weibull, F(x) = 1 - exp(-sqrt(2x))")


def _label(setting: str, order: str) -> str:
    return "one bit at T*" if setting == "one_bit" else str(order).upper()


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    table: pd.DataFrame = inputs["table"]
    curves: pd.DataFrame = inputs["curves"]
    ref: pd.DataFrame = inputs["reference"]
    ref = ref[ref["setting"].fillna("").astype(str) != ""]
    fig, axes = style.new_figure((7.2, 3.3), ncols=2)
    orders = list(dict.fromkeys(curves["order"]))
    for ax, settings, title in zip(axes, PANELS, TITLES, strict=True):
        for setting in settings:
            cur = curves[curves["setting"] == setting]
            for order in dict.fromkeys(cur["order"]):
                i = orders.index(order) + (len(orders) if setting == "one_bit" else 0)
                line = cur[cur["order"] == order].sort_values("rate_per_s")
                style.formula_line(
                    ax,
                    line["rate_per_s"],
                    line["exact_response_mean_s"],
                    _label(setting, order),
                    i=i,
                    lw=1.0,
                    ls="--" if setting == "one_bit" else "-",
                )
                sim = table[(table["setting"] == setting) & (table["order"] == order)]
                style.sim_points(
                    ax,
                    sim["rate_per_s"],
                    sim["sim_response_mean_s"],
                    sim["sim_response_ci95_s"],
                    "",
                    i=i,
                )
            pub = ref[ref["setting"] == setting]
            ax.plot(pd.to_numeric(pub["rate_per_s"]), pub["paper"], "kx", ms=4, mew=0.8, zorder=6)
        ax.set_yscale("log")
        ax.set_xlabel("load λ (arrival rate, mean size 1)")
        ax.set_title(title)
        handles, labels = ax.get_legend_handles_labels()
        keep = [(h, lab) for h, lab in zip(handles, labels, strict=True) if "CI" not in lab]
        keep.append((ax.plot([], [], "kx", ms=4)[0], "published"))
        keep.append((ax.plot([], [], "o", color="0.4", mfc="none")[0], "engine (95% CI)"))
        ax.legend(*zip(*keep, strict=True), fontsize=5.5, loc="upper left")
        ys = np.concatenate([[1.0], table["sim_response_mean_s"].to_numpy(dtype=float)])
        ax.set_ylim(bottom=max(1.0, float(np.nanmin(ys)) * 0.8))
        lo, hi = ax.get_ylim()
        ax.set_yticks([t for t in TICKS if lo <= t <= hi])
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda y, _: f"{y:g}"))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    axes[0].set_ylabel("mean response time (time units)")
    style.source_note(
        fig,
        f"{int(table['sim_requests'].iloc[0])} measured requests per engine point; lines exact "
        "(llmqueue.analytic.priority, llmqueue.sim.exact); crosses: the published tables",
    )
    return fig
