"""Fig. 4d: provider objectives F1 (patient) and F2 (impatient) vs limit l, optima marked (Eq. 10-13)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from llmqueue import figstyle as style
from llmqueue.analytic.tradeoff import argmax_on_grid
from llmqueue.studies.token_limit._token_limit import extra_tables, limits_axis


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    df = inputs["main_tradeoff"]
    l1, l2 = params["paper_optimum_patient"], params["paper_optimum_impatient"]
    fig, (a1, a2) = style.new_figure(style.WIDE, ncols=2)
    tables = [(params["main_profile"], df, "-")] + [
        (p, t, "--") for p, t in extra_tables(inputs, params, "tradeoff")
    ]
    for i, (name, t, ls) in enumerate(tables):
        x = t["limit_tokens"]
        tag = "back-solved law" if params["verdicts"].get(name) == "back_solved" else name
        o1 = argmax_on_grid(x, t["f1"])
        style.formula_line(a1, x, t["f1"], f"F1, {tag}", i, ls=ls)
        style.mark_optimum(a1, o1.limit, o1.value, f"l* = {o1.limit:g} ({tag})", i)
        for j, (col, what) in enumerate((("f2_exact", "exact"), ("f2_interp", "approx. (6)-(8)"))):
            o2 = argmax_on_grid(x, t[col])
            style.formula_line(a2, x, t[col], f"F2 {what}, {tag}", i, ls=ls if j == 0 else ":")
            if j == 0:
                style.mark_optimum(a2, o2.limit, o2.value, f"l* = {o2.limit:g} ({tag})", i)
    a1.axvline(l1, color="0.5", lw=0.6, ls="-.", label=f"paper l* = {l1:g}")
    a2.axvline(l2, color="0.5", lw=0.6, ls="-.", label=f"paper l* = {l2:g}")
    for ax in (a1, a2):
        limits_axis(ax)
        ax.legend(loc="lower right")
    a1.set_ylabel("objective F1")
    a2.set_ylabel("objective F2")
    a1.set_title(
        f"patient: α = {params['alpha_patient']:.4g}, λ = {params['rate_per_s']:g}/s "
        f"(paper l* = {l1:g})"
    )
    a2.set_title(
        f"impatient: α = {params['alpha_impatient']:g}, c = {params['loss_cost']:g}, "
        f"τ = {params['patience_s']:g} s (paper l* = {l2:g})"
    )
    style.source_note(
        fig,
        f"utility g(r) = r^γ with γ = {float(df['gamma'].iloc[0]):g} (fixed in advance; the paper does not give g)",
    )
    return fig
