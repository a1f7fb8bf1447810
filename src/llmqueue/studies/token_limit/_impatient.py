"""Shared body of Fig. 4b and 4c: interpolation (6)-(8), exact M/G/1+D and simulation vs l."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.studies.token_limit._token_limit import extra_tables, limits_axis, profile_label


def plot_impatient(
    inputs: Mapping[str, Any], params: Mapping[str, Any], quantity: str, ylabel: str
) -> Figure:
    """`quantity`: ``served_wait`` (the mean wait of users who stay, s) or ``loss`` (the lost
    fraction); columns ``<source>_<quantity>[_mean_s]`` of the impatient table."""
    df = inputs["main_impatient"]
    main = params["main_profile"]

    def col(source: str, stat: str = "mean") -> str:
        if quantity == "loss":
            return f"{source}_loss" + ("" if stat == "mean" else f"_{stat}")
        return f"{source}_{quantity}_{stat}_s"

    fig, ax = style.new_figure()
    x = df["limit_tokens"]
    lab = profile_label(main, params, df)
    style.formula_line(ax, x, df[col("interp")], "approx. Eq. (6)-(8) (De Kok-Tijms)", 0, ls=":")
    style.formula_line(ax, x, df[col("exact")], f"exact M/G/1+D, {lab}", 0)
    if col("sim") in df:
        style.sim_points(ax, x, df[col("sim")], df[col("sim", "ci95")], "simulation", 0)
    for i, (p, t) in enumerate(extra_tables(inputs, params, "impatient"), start=1):
        style.formula_line(
            ax,
            t["limit_tokens"],
            t[col("exact")],
            f"exact, {profile_label(p, params, t)}",
            i,
            ls="--",
        )
    limits_axis(ax)
    ax.set_ylabel(ylabel)
    ax.set_title(
        f"M/G/1+D, λ = {params['rate_per_s']:g}/s, τ = {params['patience_s']:g} s, "
        f"{params['tokens']}"
    )
    ax.legend(loc="upper left")
    if "sim_requests" in df:
        style.source_note(
            fig,
            f"simulation: {int(df['sim_requests'].max()):,} requests per point after warm-up, 95% batch-means CI",
        )
    return fig
