"""Time to first token and job completion time against the arrival rate, the cache off and on.

One replay of each Mooncake trace per load (its own timestamps, time-scaled), at a KV budget of
several GPUs' worth; the load is the rate over the cache-off highest sustainable rate. Open
markers: the cache off; filled: on; means with 95% CIs (batch means). Beyond load 1 (shaded) a
cache-off queue has no steady state: those points are a finite replay's means.
"""

from __future__ import annotations

import pandas as pd

from llmqueue import figstyle as style


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    runs: pd.DataFrame = inputs["runs"]
    rate = runs[runs["table"] == "rate"]
    profile = str(rate["profile"].iloc[0])
    rate = rate[rate["profile"] == profile]
    fig, axes = style.new_figure(style.WIDE, ncols=2)
    for t, trace in enumerate(dict.fromkeys(rate["trace"])):
        for caching in (False, True):
            pts = rate[(rate["trace"] == trace) & (rate["prefix_caching"].astype(bool) == caching)]
            pts = pts.sort_values("load")
            for ax, metric in zip(axes, ("ttft", "jct"), strict=True):
                ax.errorbar(
                    pts["load"], pts[f"{metric}_mean_s"], yerr=pts[f"{metric}_ci95_s"],
                    fmt="o-" if caching else "o--", ms=3, color=style.color(t),
                    mfc=style.color(t) if caching else "none", capsize=1.5, elinewidth=0.7, lw=0.8,
                    label=f"{trace}, cache {'on' if caching else 'off'}",
                )  # fmt: skip
    for ax, name in zip(axes, ("mean TTFT (s)", "mean JCT (s)"), strict=True):
        ax.set_yscale("log")
        ax.set_xlabel("load (rate / cache-off highest rate)")
        ax.set_ylabel(name)
        hi = float(rate["load"].max())
        if hi > 1.0:
            ax.axvspan(1.0, hi, color="0.9", zorder=0)
    axes[0].legend(fontsize=5.5, loc="upper left")
    budget = rate["budget"].iloc[0]
    style.source_note(
        fig,
        f"{profile}; KV budget {float(budget):g} x one GPU's; continuous batching with on-demand "
        "KV; shaded: beyond the cache-off highest rate",
    )
    return fig


def example() -> tuple[dict, dict]:
    from llmqueue.studies.prefix.tables import example_runs

    return {"runs": example_runs()}, {}
