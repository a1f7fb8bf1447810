"""Replicas behind cache-blind and prefix-affinity routers, the cache on.

Left: the share of prompt tokens served from cache; right: mean TTFT with its 95% CI (batch
means); against the number of replicas (each with the same KV budget), the rate growing with
them (the same load per replica). Round robin and JSQ scatter a conversation's turns and a system prompt's users over
the replicas, each of which must compute the prefix once; prefix affinity (the replica with the
longest cached match, then the fewest requests) keeps them together and lets a session's replica
saturate; prefix score (llm-d's default profile: 3 x the share of the prompt's blocks cached + 2 x
the normalised queue score) trades the match against the replicas' waiting queues; prefix index
scores the same over the router's own index of what it sent where, blind to evictions.
"""

from __future__ import annotations

import pandas as pd

from llmqueue import figstyle as style

MARKERS = ("o", "s", "^", "D", "v")
STYLES = ("-", "--", ":", "-.")


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    runs: pd.DataFrame = inputs["runs"]
    rt = runs[runs["table"] == "routers"]
    profile = str(rt["profile"].iloc[0])
    rt = rt[rt["profile"] == profile]
    fig, (left, right) = style.new_figure(style.WIDE, ncols=2)
    routers = list(dict.fromkeys(rt["router"]))
    for t, trace in enumerate(dict.fromkeys(rt["trace"])):
        for r, router in enumerate(routers):
            pts = rt[(rt["trace"] == trace) & (rt["router"] == router)].sort_values("replicas")
            kw = dict(marker=MARKERS[r % 5], ms=3, ls=STYLES[r % 4], color=style.color(t))
            left.plot(
                pts["replicas"], 100 * pts["prefix_hit_share"], label=f"{trace}, {router}", **kw
            )
            right.errorbar(pts["replicas"], pts["ttft_mean_s"], yerr=pts["ttft_ci95_s"],
                           capsize=1.5, elinewidth=0.7, **kw)  # fmt: skip
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ticks = sorted({int(n) for n in rt["replicas"]})
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(n) for n in ticks])
        ax.minorticks_off()
        ax.set_xlabel("replicas")
    left.set_ylabel("prompt tokens served from cache (%)")
    left.set_ylim(bottom=0)
    right.set_ylabel("mean TTFT (s)")
    right.set_yscale("log")
    left.legend(fontsize=5, loc="best", ncol=2)
    style.source_note(
        fig,
        f"{profile}; KV budget {float(rt['budget'].iloc[0]):g} x one GPU's per replica; "
        f"load {float(rt['load'].iloc[0]):g} of one replica's cache-off highest rate per replica",
    )
    return fig


def example() -> tuple[dict, dict]:
    from llmqueue.studies.prefix.tables import example_runs

    return {"runs": example_runs()}, {}
