"""Multi-Bin Batching against continuous batching on the same measured kernels.

(a) the highest sustainable rate against the number of bins k: Multi-Bin exact (lines) and
simulated (markers) under the fitted Eq. (18) batch law (solid) and under Eq. (18) read off the
step law (dashed), beside each continuous-batching variant under the step law (horizontal lines;
none for a variant whose batch no cap or KV limit bounds); (b) the mean latency at each load (a
fraction of the highest Multi-Bin rate): Multi-Bin under both batch laws and continuous batching
(its variants differ by a few percent at these loads; the lowest and highest are drawn).
"""

from __future__ import annotations

import numpy as np
from matplotlib import ticker

from llmqueue import figstyle as style

TICKS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)

LINESTYLES = ("-", "--")
CONT_STYLES = (":", "-.", (0, (1, 3)), (0, (5, 2, 1, 2)))


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    df, laws = inputs["table"], inputs["laws"]
    fig, (a, b) = style.new_figure((7.2, 3.1), ncols=2)
    mb = df[df["kind"] == "multibin"]
    cont = df[df["kind"] == "continuous"]
    ks = np.sort(mb["bins"].unique())
    mb_laws = list(dict.fromkeys(mb["time_law_kind"]))
    # (a) capacity
    for j, law in enumerate(mb_laws):
        s = mb[(mb["time_law_kind"] == law) & (mb["load"] == mb["load"].min())]
        s = s.sort_values("bins")
        a.plot(s["bins"], s["exact_rate_per_s"], LINESTYLES[j % 2], color=style.color(0))
        style.sim_points(
            a,
            s["bins"],
            s["sim_rate_per_s"],
            s["sim_rate_ci95_per_s"],
            "_sim",
            i=0,
            marker="os"[j % 2],
        )
        a.plot([], [], LINESTYLES[j % 2], color=style.color(0), label=f"Multi-Bin, {law}")

    for j, name in enumerate(dict.fromkeys(cont["policy"])):
        r = cont[cont["policy"] == name].iloc[0]
        if np.isfinite(r["sim_rate_per_s"]):
            a.axhline(
                r["sim_rate_per_s"],
                color=style.color(j + 1),
                ls=CONT_STYLES[j % len(CONT_STYLES)],
                label=f"{name}: {r['sim_rate_per_s']:.3g}",
            )
    a.set_yscale("log")
    a.set_xscale("log", base=2)
    a.set_xlabel("bins k (Multi-Bin)")
    a.set_ylabel("highest sustainable rate (requests/s)")
    a.plot([], [], "ko", mfc="none", label="markers: simulation (95% CI)")
    a.set_title(f"(a) highest sustainable rate, {int(df['servers'].iloc[0])} servers")
    a.legend(loc="lower right", fontsize=5)
    # (b) latency at each load
    loads = sorted(df["load"].unique())
    for i, load in enumerate(loads):
        for j, law in enumerate(mb_laws):
            s = mb[(mb["time_law_kind"] == law) & (mb["load"] == load)].sort_values("bins")
            s = s[~s["unstable"].astype(bool)]
            b.errorbar(
                s["bins"],
                s["sim_jct_mean_s"],
                yerr=s["sim_jct_ci95_s"],
                fmt=LINESTYLES[j % 2],
                marker="os"[j % 2],
                mfc="none",
                capsize=1.5,
                elinewidth=0.8,
                color=style.color(i),
            )
        c = cont[(cont["load"] == load) & ~cont["unstable"].astype(bool)]
        if not c.empty:
            lo, hi = c["sim_jct_mean_s"].min(), c["sim_jct_mean_s"].max()
            b.axhspan(lo, hi, color=style.color(i), alpha=0.35, lw=0)
            b.axhline(hi, color=style.color(i), ls=":", lw=1.0)
        rate = df[df["load"] == load]["rate_per_s"].iloc[0]
        b.plot([], [], "-", color=style.color(i), label=f"load {load:g}: {rate:.3g} req/s")
    for j, law in enumerate(mb_laws):
        b.plot(
            [],
            [],
            "k" + LINESTYLES[j % 2],
            marker="os"[j % 2],
            mfc="none",
            label=f"Multi-Bin, {law}",
        )
    b.plot([], [], "k:", label="continuous batching (all variants)")
    b.set_xscale("log", base=2)
    b.set_yscale("log")
    b.set_xlabel("bins k (Multi-Bin)")
    b.set_ylabel("mean latency, arrival to last token (s)")
    b.set_title("(b) mean latency at the same loads (95% CI)")
    lo, hi = b.get_ylim()
    b.set_ylim(lo, hi * 2.5)  # headroom for the legend (log axis)
    b.legend(loc="upper left", fontsize=5, ncol=2)
    for ax in (a, b):
        ax.set_xticks(ks)
        ax.set_xticklabels([str(int(k)) for k in ks])
        lo, hi = ax.get_ylim()
        ax.set_yticks([t for t in TICKS if lo <= t <= hi])
        ax.yaxis.set_major_formatter(ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ratio = laws.set_index("batch")["decode_ratio"]
    bsz = int(mb["max_batch"].iloc[0])
    style.source_note(
        fig,
        f"B = {bsz}; prompts {int(df['prompt_tokens'].iloc[0])} tokens, outputs "
        f"{df['tokens'].iloc[0].split(':')[-1]} of the Azure conv trace; load = fraction of the "
        f"highest Multi-Bin rate (largest k); points above a policy's capacity are left out. The "
        f"step law's decode step at b = {bsz} is {ratio.get(bsz, np.nan):.2f} x the fitted "
        "batch law's t2(b) (results/multibin/time_laws.csv)",
    )
    return fig
