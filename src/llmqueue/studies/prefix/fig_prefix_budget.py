"""Prefix caching against the KV budget, on Mooncake's traces.

Left: the share of prompt tokens served from cache (one replay per budget, at a fixed rate);
right: the highest sustainable rate with the cache on over the one with it off (a saturated
queue in trace order). A budget is a multiple of one GPU's KV (as if a host-memory tier held
the rest); the rightmost point is a pool that never evicts. Colours: traces; line styles: step
profiles (vidur's A100 and H100 kernels).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from llmqueue import figstyle as style

STYLES = ("-", "--", ":", "-.")


def _positions(budgets: pd.Series) -> tuple[np.ndarray, float]:
    """x of each budget: itself, the never-evicting pool 4x right of the largest finite one."""
    b = budgets.to_numpy(dtype=float)
    finite = b[np.isfinite(b)]
    far = 4.0 * float(finite.max()) if finite.size else 1.0
    return np.where(np.isfinite(b), b, far), far


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    runs: pd.DataFrame = inputs["runs"]
    fig, (left, right) = style.new_figure(style.WIDE, ncols=2)
    traces = list(dict.fromkeys(runs["trace"]))
    profiles = list(dict.fromkeys(runs["profile"]))
    far = 1.0
    for t, trace in enumerate(traces):
        for p, profile in enumerate(profiles):
            mine = runs[(runs["trace"] == trace) & (runs["profile"] == profile)]
            on = mine[(mine["table"] == "budget") & mine["prefix_caching"].astype(bool)]
            on = on.sort_values("budget", key=lambda s: s.astype(float))
            x, far = _positions(on["budget"])
            label = trace if p == 0 else None
            left.plot(x, 100 * on["prefix_hit_share"], marker="o", ms=3, ls=STYLES[p % 4],
                      color=style.color(t), label=label)  # fmt: skip
            cap = mine[mine["table"] == "capacity"]
            cap_on = cap[cap["prefix_caching"].astype(bool)].set_index("budget")["max_rate_per_s"]
            cap_off = cap[~cap["prefix_caching"].astype(bool)].set_index("budget")["max_rate_per_s"]
            gain = (cap_on / cap_off).sort_index()
            xg, far = _positions(pd.Series(gain.index, dtype=float))
            right.plot(xg, gain.to_numpy(), marker="o", ms=3, ls=STYLES[p % 4],
                       color=style.color(t), label=label)  # fmt: skip
    for ax in (left, right):
        ax.set_xscale("log")
        ticks = sorted({float(b) for b in runs["budget"] if math.isfinite(float(b))})
        ax.set_xticks([*ticks, far])
        ax.set_xticklabels([f"{b:g}" for b in ticks] + ["never\nevicts"])
        ax.minorticks_off()
        ax.set_xlabel("KV budget (x one GPU's KV tokens)")
    left.set_ylabel("prompt tokens served from cache (%)")
    left.set_ylim(bottom=0)
    right.set_ylabel("highest rate, cache on / off")
    right.axhline(1.0, color="0.5", lw=0.6)
    handles, labels = left.get_legend_handles_labels()
    for p, profile in enumerate(profiles):
        handles.append(left.plot([], [], color="0.3", ls=STYLES[p % 4])[0])
        labels.append(profile)
    left.legend(handles, labels, fontsize=5.5, loc="upper left")
    style.source_note(
        fig,
        f"continuous batching, on-demand KV, vLLM's automatic prefix caching (llmqueue.sim.prefix);"
        f" left at load {params.get('budget_load', '?')} of the cache-off highest rate at one "
        "GPU's budget",
    )
    return fig


def example() -> tuple[dict, dict]:
    from llmqueue.studies.prefix.tables import example_runs

    return {"runs": example_runs()}, {"budget_load": 0.7}
