"""Fig. 6a (paper file fix_bsz): mean wait under fixed batch size K against lambda, LogNormal(7,
0.7) outputs: Eq. (25) (fixed-T approximation, dashed), exact chain with random batch times
(solid) and the simulation with random batch times (markers, 95% CI). One panel per profile."""

from __future__ import annotations

import numpy as np

from llmqueue import figstyle as style


def plot(inputs: dict, params: dict):
    profiles = params["profiles"]
    fig, axes = style.new_figure((7.2, 3.2), ncols=len(profiles))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, profiles, strict=True):
        df = inputs[name]
        rnd = df[df["mode"] == "random_T"]
        for i, K in enumerate(sorted(rnd["K"].dropna().unique())):
            s = rnd[rnd["K"] == K].sort_values("rate_per_s")
            ok = ~s["unstable"].astype(bool)
            s = s[ok]
            if s.empty:
                continue
            ax.plot(s["rate_per_s"], s["formula_wait_mean_s"], "--", color=style.color(i), lw=1.0)
            ft = df[(df["mode"] == "fixed_T") & (df["K"] == K) & ~df["unstable"].astype(bool)]
            ax.plot(ft["rate_per_s"], ft["sim_wait_mean_s"], "x", color=style.color(i), ms=3)
            style.formula_line(ax, s["rate_per_s"], s["exact_wait_mean_s"], f"K={int(K)}", i=i)
            style.sim_points(
                ax,
                s["rate_per_s"],
                s["sim_wait_mean_s"],
                s["sim_wait_ci95_s"],
                f"K={int(K)} sim",
                i=i,
                marker="o",
            )
        ax.plot([], [], "k--", lw=1.0, label="Eq. (25), fixed-T approximation")
        ax.plot([], [], "k-", label="exact chain, random T_b")
        ax.plot([], [], "kx", ms=3, label="simulation, fixed T = E[T_K]")
        ax.set_yscale("log")
        ax.set_xlabel("arrival rate lambda (requests/s)")
        ax.set_ylabel("mean wait, arrival to batch start (s)")
        ax.set_title(f"profile {name} ({df['verdict'].iloc[0]})")
        ax.legend(loc="upper right", fontsize=5, ncol=2)
    style.source_note(
        fig,
        "fixed batch K: the server waits for K requests; unstable (lambda E[T_K] >= K) points left out; "
        f"{int(inputs[profiles[0]]['sim_requests'].iloc[0])} requests per point",
    )
    return fig
