"""Fig. 3b (paper file miub): batch throughput mu_b = b/E[T_b] (Eq. 24) for three output laws,
one panel per batch profile."""

from __future__ import annotations

import numpy as np

from llmqueue import figstyle as style


def plot(inputs: dict, params: dict):
    df = inputs["data"]
    profiles = list(dict.fromkeys(df["profile"]))
    fig, axes = style.new_figure(style.WIDE, ncols=len(profiles))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, profiles, strict=True):
        sub = df[df["profile"] == name]
        for i, spec in enumerate(dict.fromkeys(sub["tokens"])):
            s = sub[sub["tokens"] == spec]
            style.formula_line(ax, s["b"], s["mu"], spec, i=i)
            k = int(np.argmax(s["mu"].to_numpy()))
            if 0 < k < len(s) - 1:
                style.mark_optimum(
                    ax, s["b"].iloc[k], s["mu"].iloc[k], f"max at b = {s['b'].iloc[k]}", i=i
                )
        ax.set_xlabel("batch size b")
        ax.set_ylabel("mu_b = b / E[T_b] (requests/s)")
        ax.set_title(f"profile {name} ({sub['verdict'].iloc[0]})")
        ax.legend(loc="best")
    style.source_note(
        fig, "Eq. (24) with E[T_b] from Eq. (18); paper_k8 is back-solved from claim 8"
    )
    return fig
