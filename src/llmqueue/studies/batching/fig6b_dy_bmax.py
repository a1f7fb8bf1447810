"""Fig. 6b (paper file dy_bmax): mean response time of dynamic batching with b_max in
{8, 16, 32, inf} and of elastic batching against lambda, LogNormal(7, 0.7) outputs: exact chain
(lines) and simulation (markers, 95% CI); unstable points are left out and listed."""

from __future__ import annotations

import numpy as np

from llmqueue import figstyle as style


def plot(inputs: dict, params: dict):
    profiles = params["profiles"]
    fig, axes = style.new_figure((7.2, 3.2), ncols=len(profiles))
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, profiles, strict=True):
        df = inputs[name]
        for i, curve in enumerate(dict.fromkeys(df["curve"])):
            s = df[df["curve"] == curve].sort_values("rate_per_s")
            bad = s["unstable"].astype(bool)
            meta = s["metastable"].astype(bool) & ~bad
            ok = s[~bad]
            lab = curve + (" (some points metastable)" if meta.any() else "")
            style.formula_line(ax, ok["rate_per_s"], ok["exact_jct_mean_s"], lab, i=i)
            style.sim_points(
                ax, ok["rate_per_s"], ok["sim_jct_mean_s"], ok["sim_jct_ci95_s"], "", i=i
            )
            if bad.any():
                xs = s.loc[bad, "rate_per_s"]
                ax.plot(xs, np.full(len(xs), np.nan), "x")
                ax.annotate(
                    f"{curve}: unstable from lambda = {xs.min():.3g}",
                    xy=(0.02, 0.98 - 0.06 * i),
                    xycoords="axes fraction",
                    fontsize=5,
                    color=style.color(i),
                    va="top",
                )
        ax.plot([], [], "ko", mfc="none", label="simulation (95% CI bars)")
        ax.set_yscale("log")
        ax.set_xlabel("arrival rate lambda (requests/s)")
        ax.set_ylabel("mean response time (s)")
        ax.set_title(f"profile {name} ({df['verdict'].iloc[0]})")
        handles, labels = ax.get_legend_handles_labels()
        keep = [
            (h, lab)
            for h, lab in zip(handles, labels, strict=True)
            if lab and not lab.startswith(" (95%")
        ]
        ax.legend([h for h, _ in keep], [lab for _, lab in keep], loc="lower right", fontsize=5)
    style.source_note(
        fig,
        "lines: exact chain; markers: simulation with 95% CI; "
        f"{int(inputs[profiles[0]]['sim_requests'].iloc[0])} requests per point",
    )
    return fig
