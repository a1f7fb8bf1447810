"""Fig. 5 (paper files junyun_llama / _alpaca / _chatglm): mean response time of dynamic and
elastic batching against lambda, outputs U(0, 1000): simulation (95% CI), exact chain, and
Inoue's bound (16) with (alpha_b, tau0) from Eq. (20) or from a least-squares fit of E[T_b]. The
fitted curve is labelled a bound only where it lies on or above the exact chain at every rate;
otherwise it is drawn and labelled as a fit (:func:`llmqueue.analytic.inoue.below_exact`)."""

from __future__ import annotations

import numpy as np

from llmqueue import figstyle as style
from llmqueue.analytic.inoue import below_exact

NAMES = {"llama": "LLaMA-2-7B", "alpaca": "Chinese-Alpaca-2-7B", "chatglm": "ChatGLM3-6B"}


def plot(inputs: dict, params: dict):
    df = inputs["data"]
    fig, ax = style.new_figure(style.SINGLE)
    for i, pol in enumerate(("dynamic", "elastic")):
        s = df[df["policy"] == pol].sort_values("rate_per_s")
        x = s["rate_per_s"]
        style.formula_line(ax, x, s["exact_jct_mean_s"], f"{pol}: exact chain", i=i)
        style.sim_points(ax, x, s["sim_jct_mean_s"], s["sim_jct_ci95_s"], f"{pol}: simulation", i=i)
        if pol == "dynamic" and np.isfinite(s["bound_jct_mean_s"]).any():
            ax.plot(
                x,
                s["bound_jct_mean_s"],
                "--",
                color=style.color(i),
                label="dynamic: bound (16), Eq. (20) alpha, tau0",
            )
        if "bound_fit_jct_mean_s" in s and np.isfinite(s["bound_fit_jct_mean_s"]).any():
            fit_only = bool(below_exact(s["bound_fit_jct_mean_s"], s["exact_jct_mean_s"]).any())
            ax.plot(
                x,
                s["bound_fit_jct_mean_s"],
                "-." if fit_only else ":",
                color=style.color(i),
                alpha=0.6 if fit_only else 1.0,
                label=(
                    f"{pol}: Eq. (16), fitted alpha, tau0: a fit, not a bound"
                    if fit_only
                    else f"{pol}: bound (16), fitted alpha, tau0"
                ),
            )
        if s["unstable"].any():
            style.mark_unstable(ax, x, s["unstable"].astype(bool), label="unstable")
    panel = params.get("panel", "")
    src = df["profile_source"].iloc[0]
    ax.set_title(f"Fig. 5: {NAMES.get(panel, panel)} ({src})")
    ax.set_xlabel("arrival rate lambda (requests/s)")
    ax.set_ylabel("mean response time (s)")
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.9 * (hi - lo))  # room for the legend above the curves
    ax.legend(loc="upper left", fontsize=5.5)
    style.source_note(
        fig,
        f"outputs {df['tokens'].iloc[0]}; profile {df['profile'].iloc[0]} "
        f"(verdict {df['verdict'].iloc[0]}); {int(df['sim_requests'].iloc[0])} requests per point",
    )
    return fig
