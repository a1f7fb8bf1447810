"""Claim 13 (prefix caching): Mooncake's Table 2 cache ratios (Qin et al., FAST'25: the share
of each workload's prompt tokens its prefix cache served) against the engine's, one row per
reference row of ``src/llmqueue/studies/prefix/reference_claims.csv``.

The engine's number is the hit share of the never-evicting replay (``claim`` rows of
:mod:`.tables`, every request measured) on the first step profile: vLLM's automatic prefix
caching with a pool that holds every block, the upper bound a cache of the paper's size
approaches. The note gives the trace's own bound (:func:`.tables.ideal_hit_share`) and the
shares at the finite budgets. A reference row without a trace is not expressed: its reason says
why.
"""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.claims import ClaimBook, ClaimRow
from llmqueue.markdown import as_float

__all__ = ["claims_rows"]


def _note(claim: dict, budgets: pd.DataFrame) -> str:
    note = (
        f"{claim['trace']} trace on {claim['profile']}, a pool that never evicts "
        f"({int(claim['kv_tokens'])} tokens), replayed at {as_float(claim['rate_per_s']):.3g} "
        f"requests/s (load {as_float(claim['load']):g}), every one of its "
        f"{int(claim['requests'])} requests measured: "
        f"{100 * as_float(claim['prefix_hit_share']):.1f}% of prompt tokens from cache; the "
        f"trace's own bound (any earlier listing counts) {100 * as_float(claim['ideal_hit_share']):.1f}%"
    )
    finite = budgets[budgets["budget"].map(math.isfinite)].sort_values("budget")
    if len(finite):
        shares = ", ".join(
            f"{100 * as_float(r['prefix_hit_share']):.1f}% at {as_float(r['budget']):g}x"
            for r in finite.to_dict("records")
        )
        first = finite.iloc[0]
        note += (
            f"; at finite budgets (x one GPU's KV; replays at load {as_float(first['load']):g}, "
            f"the last {int(first['requests'])} requests measured): {shares}"
        )
    return note


def _miss(ours: float, ideal: float, paper: float) -> str:
    if abs(ours - ideal) <= 0.5:
        return (
            f"the engine's share equals the released trace's own bound ({ideal:.1f}%): the "
            f"published {paper:g}% is not what this trace's block ids give"
        )
    return f"the engine's share ({ours:.1f}%) stays below the trace's own bound ({ideal:.1f}%)"


def claims_rows(book: ClaimBook, reference: pd.DataFrame, runs: pd.DataFrame) -> list[ClaimRow]:
    """Claim 13's rows from the study's runs (:func:`.tables.prefix_runs`, every trace and
    profile concatenated); the engine's number is read on the first profile of `runs`."""
    rows: list[ClaimRow] = []
    profile = str(runs["profile"].iloc[0])
    for ref in reference.to_dict("records"):
        cid = str(ref["id"])
        trace = ref.get("trace")
        if not isinstance(trace, str) or not trace:
            rows.append(book.not_expressed(cid, str(ref["reason"])))
            continue
        mine = runs[(runs["trace"] == trace) & (runs["profile"] == profile)]
        claim = mine[mine["table"] == "claim"].iloc[0].to_dict()
        ours = 100.0 * as_float(claim["prefix_hit_share"])
        ideal = 100.0 * as_float(claim["ideal_hit_share"])
        budgets = mine[(mine["table"] == "budget") & mine["prefix_caching"].astype(bool)]
        rows.append(
            book.judge(cid, ours, _note(claim, budgets), miss=_miss(ours, ideal, book.paper(cid)))
        )
    return rows
