"""The prefix study's runs (:mod:`llmqueue.studies.prefix`): per (trace, step profile), the
trace replayed through continuous batching with on-demand KV, the cache off and on, in four
tables told apart by their ``table`` column:

- ``capacity``: the highest sustainable rate (requests/s; :func:`llmqueue.sim.capacity.max_rate`,
  every row of the trace queued at once and served in trace order) at each KV budget;
- ``budget``: one replay at ``budget_load`` x the cache-off highest rate at the profile's own
  budget, at each KV budget: the share of prompt tokens served from cache, TTFT, JCT;
- ``rate``: replays at each of ``loads`` x the cache-off highest rate at ``rate_budget``;
- ``routers``: n replicas of ``rate_budget`` each behind each router, the cache on, at n x
  ``router_load`` x one replica's cache-off highest rate;
- ``claim``: the never-evicting replay at ``claim_load`` with every row measured (the claims
  rows read its hit share), beside :func:`ideal_hit_share`, the trace's own bound.

A budget of ``inf`` is the pool that never evicts (:func:`.spec.never_evicting_tokens`).
Units: s, requests/s, tokens; shares are fractions of prompt tokens.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.latency import StepLaw
from llmqueue.seeds import seed_sequence
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run
from llmqueue.sim.result import SimResult
from llmqueue.sim.workload import ReplayWorkload
from llmqueue.studies.prefix.spec import PrefixSpec, budget_tokens, never_evicting_tokens

__all__ = ["COLUMNS", "ideal_hit_share", "prefix_runs"]

COLUMNS = [
    "table",
    "trace",
    "profile",
    "budget",
    "kv_tokens",
    "prefix_caching",
    "router",
    "replicas",
    "load",
    "rate_per_s",
    "max_rate_per_s",
    "prefix_hit_share",
    "ideal_hit_share",
    "jct_mean_s",
    "jct_ci95_s",
    "jct_p99_s",
    "ttft_mean_s",
    "ttft_ci95_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "throughput_per_s",
    "kv_utilisation",
    "preemptions",
    "rejected",
    "requests",
    "unstable",
    "note",
]


def ideal_hit_share(replay: ReplayWorkload, block_size: int, *, first: int = 0) -> float:
    """The share of prompt tokens an infinite cache could serve, from the trace alone: each
    request, in arrival order, takes the longest run of its leading blocks (the engine's blocks
    of `block_size` tokens that carry an id) whose ids some earlier request listed, at most
    (prompt - 1) // block_size blocks, as the engine does; over rows `first`.. (every earlier
    row still fills the cache). It ignores time: a block counts as cached as soon as an earlier
    request lists it, computed or not."""
    assert replay.blocks is not None
    bs = int(block_size)
    prompts = np.asarray(replay.prompt_tokens, dtype=np.int64)
    blocks, _ = replay.blocks.engine_ids(bs, prompts)  # the engine's own mapping, once per replay
    seen: set[int] = set()
    hit = 0
    for i in range(blocks.n):
        ids = blocks.of(i)
        cap = (int(prompts[i]) - 1) // bs
        k = 0
        while k < min(cap, ids.size) and int(ids[k]) in seen:
            k += 1
        if i >= first:
            hit += k * bs
        seen.update(int(x) for x in ids)
    total = int(prompts[first:].sum())
    return hit / total if total > 0 else math.nan


def _row(res: SimResult | None, **keys: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(COLUMNS, math.nan)
    row.update(keys)
    if res is None:
        return row
    for name, m in (("jct", res.response), ("ttft", res.ttft)):
        if m is not None:
            row.update({f"{name}_mean_s": m.mean, f"{name}_ci95_s": m.ci95, f"{name}_p99_s": m.p99})
    row.update(
        tpot_mean_s=res.tpot.mean if res.tpot is not None else math.nan,
        prefix_hit_share=res.prefix_hit_share,
        throughput_per_s=res.throughput_per_s,
        kv_utilisation=res.kv_utilisation,
        preemptions=res.preemptions,
        rejected=res.rejected,
        requests=res.requests,
        unstable=res.unstable,
        note=res.note,
    )
    return row


def prefix_runs(
    spec: PrefixSpec,
    replay: ReplayWorkload,
    law: StepLaw,
    profile_kv: int,
    *,
    trace: str,
    seed: int,
) -> pd.DataFrame:
    """Every table of the module docstring for one (trace, step profile): `law` the profile's
    step law, `profile_kv` its KV budget (tokens)."""
    from dataclasses import replace

    total = int(replay.total or 0)
    bs = int(spec.policy.block_size)
    never = never_evicting_tokens(replay, bs)
    budgets: dict[float, int] = {b: budget_tokens(profile_kv, b) for b in spec.budgets}
    budgets[spec.rate_budget] = budget_tokens(profile_kv, spec.rate_budget)
    budgets[1.0] = budget_tokens(profile_kv, 1.0)
    budgets[math.inf] = never
    base = dict(trace=trace, profile=law.name, router="central", replicas=1)
    rows: list[dict[str, Any]] = []

    def replay_at(rate: float, pol: Any, key: tuple[Any, ...], warmup: int) -> SimResult:
        return run(
            replay.at_rate(rate),
            pol,
            law,
            requests=total - warmup,
            warmup=warmup,
            batches=spec.batches,
            seed=seed_sequence(seed, trace, law.name, *key),
        )

    cap: dict[tuple[float, bool], float] = {}
    for b in sorted(budgets):
        for caching in (False, True):
            c = max_rate(
                replay,
                spec.with_budget(budgets[b], caching=caching),
                law,
                requests=total,
                seed=seed_sequence(seed, trace, law.name, "capacity", b, caching),
            )
            cap[b, caching] = c.rate_per_s
            rows.append(
                _row(
                    None,
                    **base,
                    table="capacity",
                    budget=b,
                    kv_tokens=budgets[b],
                    prefix_caching=caching,
                    max_rate_per_s=c.rate_per_s,
                    note=c.note,
                )
            )

    def point(table: str, b: float, caching: bool, load: float, rate: float, res: SimResult,
              **extra: Any) -> None:  # fmt: skip
        rows.append(
            _row(
                res,
                **{**base, **extra},
                table=table,
                budget=b,
                kv_tokens=budgets[b],
                prefix_caching=caching,
                load=load,
                rate_per_s=rate,
            )  # fmt: skip
        )

    unit = cap[1.0, False]
    for b in sorted(set(spec.budgets) | {math.inf}):
        for caching in (False, True):
            rate = spec.budget_load * unit
            pol = spec.with_budget(budgets[b], caching=caching)
            res = replay_at(rate, pol, ("budget", b, caching), spec.warmup)
            point("budget", b, caching, spec.budget_load, rate, res, max_rate_per_s=cap[b, caching])
    rb = spec.rate_budget
    for load in spec.loads:
        for caching in (False, True):
            rate = load * cap[rb, False]
            pol = spec.with_budget(budgets[rb], caching=caching)
            res = replay_at(rate, pol, ("rate", load, caching), spec.warmup)
            point("rate", rb, caching, load, rate, res, max_rate_per_s=cap[rb, caching])
    one: SimResult | None = None  # one replica: every router sends it everything
    for n in spec.replicas:
        for router in spec.routers:
            rate = n * spec.router_load * cap[rb, False]
            pol = spec.with_budget(budgets[rb], caching=True)
            if n > 1:
                pol = replace(pol, replicas=n, router=router)
                res = replay_at(rate, pol, ("routers", n, router), spec.warmup)
            else:
                one = one or replay_at(rate, pol, ("routers", 1), spec.warmup)
                res = one
            point("routers", rb, True, spec.router_load, rate, res, router=router, replicas=n)
    rate = spec.claim_load * unit
    res = replay_at(rate, spec.with_budget(never, caching=True), ("claim",), 0)
    point("claim", math.inf, True, spec.claim_load, rate, res,
          ideal_hit_share=ideal_hit_share(replay, bs))  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def example_runs() -> pd.DataFrame:
    """A small made-up table in the shape of :func:`prefix_runs`'s, for drawing the figures in
    tests (never a result): two traces, one profile, shares and latencies that move the way the
    study's do."""
    rows: list[dict[str, Any]] = []
    budgets = (1.0, 16.0, 256.0, math.inf)
    for t, trace in enumerate(("conversation", "synthetic")):
        top = (0.37, 0.65)[t]
        base = dict(trace=trace, profile="example_law", router="central", replicas=1)
        for j, b in enumerate(budgets):
            share = top * (1 - 0.9 ** (1 + 3 * j))
            for caching in (False, True):
                cap = 0.5 * (1 + (share if caching else 0))
                rows.append(
                    _row(None, **base, table="capacity", budget=b, prefix_caching=caching)
                    | dict(max_rate_per_s=cap)
                )
                rows.append(
                    _row(None, **base, table="budget", budget=b, prefix_caching=caching)
                    | dict(
                        load=0.7,
                        prefix_hit_share=share if caching else math.nan,
                        ttft_mean_s=2.0 * (1 - share if caching else 1),
                        jct_mean_s=8.0 * (1 - share if caching else 1),
                    )
                )
        for load in (0.25, 0.5, 0.85, 1.2):
            for caching in (False, True):
                slow = 1 / max(0.05, 1 - load / (1.3 if caching else 1.0))
                rows.append(
                    _row(None, **base, table="rate", budget=16.0, prefix_caching=caching)
                    | dict(
                        load=load,
                        rate_per_s=0.5 * load,
                        ttft_mean_s=slow,
                        ttft_ci95_s=0.1 * slow,
                        jct_mean_s=4 * slow,
                        jct_ci95_s=0.4 * slow,
                        tpot_mean_s=0.03 * slow,
                        prefix_hit_share=0.2 if caching else math.nan,
                    )
                )
        for n in (1, 2, 4):
            for r, router in enumerate(("round_robin", "jsq", "prefix_affinity")):
                share = 0.2 * (1 + r * (n - 1) / 2) if r == 2 else 0.2 / n**0.2
                rows.append(
                    _row(None, **base, table="routers", budget=16.0, prefix_caching=True)
                    | dict(
                        router=router,
                        replicas=n,
                        load=0.7,
                        prefix_hit_share=share,
                        ttft_mean_s=2.0 * (1 - share),
                        ttft_ci95_s=0.1 * (1 - share),
                        jct_mean_s=8.0 * (1 - share),
                    )
                )
    return pd.DataFrame(rows, columns=COLUMNS)
