"""Multi-Bin Batching: mean latency against the number of bins k at several loads.

Their simulated LLM (0.0366 s/token, B = 8, 8 servers) with our length law, Poisson arrivals at
fractions of the k = 1 highest rate: simulated mean latency (markers, 95% CI) and Lemma 5.1's
lower bound E[T] + (B - 1) k / (2 lambda) (dashed); with a flush timeout (open squares, dotted)
where the config asks for one. More bins pad less but fill more slowly.
"""

from __future__ import annotations

import numpy as np
from matplotlib import ticker

from llmqueue import figstyle as style

TICKS_S = (1, 2, 3, 5, 10, 15, 20, 30, 50, 100, 150, 200, 300, 500, 1000, 2000, 5000)


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    df = inputs["latency"]
    fig, ax = style.new_figure((5.0, 3.2))
    loads = sorted(df["load"].unique())
    flushes = sorted(df["flush_s"].dropna().unique())
    for i, load in enumerate(loads):
        base = df[(df["load"] == load) & df["flush_s"].isna()].sort_values("bins")
        ok = ~base["unstable"].astype(bool)
        rate = base["rate_per_s"].iloc[0]
        ax.plot(base["bins"], base["bound_jct_mean_s"], "--", color=style.color(i), lw=1.0)
        style.sim_points(
            ax,
            base["bins"][ok],
            base["sim_jct_mean_s"][ok],
            base["sim_jct_ci95_s"][ok],
            f"load {load:g} ({rate:.2f} req/s)",
            i=i,
        )
        for fl in flushes:
            s = df[(df["load"] == load) & (df["flush_s"] == fl)].sort_values("bins")
            s = s[~s["unstable"].astype(bool)]
            ax.plot(s["bins"], s["sim_jct_mean_s"], ":s", color=style.color(i), mfc="none", ms=3)
    ax.plot([], [], "k--", lw=1.0, label="Lemma 5.1 lower bound")
    for fl in flushes:
        ax.plot([], [], "k:s", mfc="none", ms=3, label=f"flush after {fl:g} s (simulation)")
    ks = np.sort(df["bins"].unique())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ks)
    ax.set_xticklabels([str(int(k)) for k in ks])
    ax.set_xlabel("bins k")
    lo, hi = ax.get_ylim()
    ax.set_yticks([t for t in TICKS_S if lo <= t <= hi])
    ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_ylabel("mean latency, arrival to reply (s)")
    ax.set_title(
        f"Multi-Bin, B = {int(df['batch'].iloc[0])}, {int(df['servers'].iloc[0])} servers: "
        "load = fraction of the k = 1 highest rate"
    )
    ax.legend(loc="upper left", fontsize=5.5)
    style.source_note(
        fig,
        f"{int(df['sim_requests'].iloc[0])} measured requests per point after warm-up; 95% CI by "
        "batch means; bound = mean batch time + mean time to fill a bin (no wait for a server)",
    )
    return fig
