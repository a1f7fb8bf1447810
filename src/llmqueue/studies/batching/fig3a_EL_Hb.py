"""Fig. 3a (paper file EL_Hb): E[L_b] (Eq. 23) and E[T_b] (Eq. 18) against the batch size b for
the truncated Gaussian output law; Monte Carlo markers check Eq. (23)."""

from __future__ import annotations

from llmqueue import figstyle as style


def plot(inputs: dict, params: dict):
    df = inputs["data"]
    fig, ax = style.new_figure(style.SINGLE)
    style.formula_line(ax, df["b"], df["EL"], "E[L_b], Eq. (23)", i=0)
    style.sim_points(
        ax, df["b"][::4], df["EL_mc"][::4], df["EL_mc_ci95"][::4], "E[L_b], Monte Carlo", i=0
    )
    ax.set_xlabel("batch size b")
    ax.set_ylabel("E[L_b] (tokens)")
    ax2 = ax.twinx()
    ax2.grid(False)
    for j, name in enumerate(params["profiles"]):
        verdict = params.get("verdicts", {}).get(name, "")
        tag = f"{name} ({verdict})" if verdict else name
        ax2.plot(
            df["b"],
            df[f"ET_{name}"],
            "-",
            color=style.color(j + 1),
            label=f"E[T_b], Eq. (18): {tag}",
        )
    ax2.set_ylabel("E[T_b] (s)")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="center right", fontsize=5.5)
    ax.set_title(f"Fig. 3a: {df['tokens'].iloc[0]}")
    style.source_note(fig, "E[T_b] = t1(b) + t2(b) E[L_b]; Monte Carlo: 95% CI of the mean max")
    return fig
