"""Fig. 4a: mean queueing delay W_q vs max-token limit l, patient users (M/G/1, Eq. 1-5)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.studies.token_limit._token_limit import extra_tables, limits_axis, profile_label


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    df = inputs["main_patient"]
    main = params["main_profile"]
    fig, ax = style.new_figure()
    x = df["limit_tokens"]
    lab = profile_label(main, params, df)
    style.formula_line(ax, x, df["formula_wait_mean_s"], f"Eq. (1)-(5), {lab}", 0)
    style.sim_points(
        ax, x, df["sim_wait_mean_s"], df["sim_wait_ci95_s"], "simulation", 0, marker="o"
    )
    for i, (p, t) in enumerate(extra_tables(inputs, params, "patient"), start=1):
        style.formula_line(
            ax,
            t["limit_tokens"],
            t["formula_wait_mean_s"],
            f"Eq. (1)-(5), {profile_label(p, params, t)}",
            i,
            ls="--",
        )
    style.mark_unstable(ax, x, df["unstable"])
    limits_axis(ax)
    ax.set_ylabel("mean queueing delay $W_q$ (s)")
    ax.set_title(f"M/G/1, patient users, λ = {params['rate_per_s']:g}/s, {params['tokens']}")
    ax.legend(loc="upper left")
    n = int(df["sim_requests"].max())
    style.source_note(
        fig, f"simulation: {n:,} requests per point after warm-up, 95% batch-means CI"
    )
    return fig
