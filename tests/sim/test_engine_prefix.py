"""Prefix caching in the continuous engine (llmqueue.sim.prefix) checked three ways:

- event by event against the plain-Python reference (tests/reference_engine.py), which keeps
  every request's full block table in a RefPool (tests/reference_pool.py) where the engine keeps
  chains and an anonymous stack: random tables whose prompts are paths in a small tree of
  prefixes, tight pools (evictions, preemptions), chunked or whole prompts, one or two servers
  on one queue, and replicas behind a router;
- against the exact replay of llmqueue.sim.block_pool for requests that never overlap in time
  (the first 3,000 requests of Mooncake's conversation trace), request by request, where each
  request's hit blocks are read back from its prefill time;
- switched on for a workload without block ids, it changes nothing.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import (
    RefPolicy,
    RefRouter,
    Req,
    compare_times,
    random_table,
    run_continuous,
)

from llmqueue.blocks import PromptBlocks
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.policy import ROUTERS, Policy, order_names
from llmqueue.policy_text import parse_policy, policy_spec
from llmqueue.sim import router as R
from llmqueue.sim.block_pool import replay_hits
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.tokens import parse_law
from llmqueue.traces import read_trace

MOONCAKE = "data/traces/mooncake-fast25/conversation_trace.jsonl"
STEP = (0.011, 0.00037, 0.000013)


def _tree_blocks(rng: np.random.Generator, prompt: np.ndarray, fan: int) -> PromptBlocks:
    """Each prompt's ids are a random path in a tree of prefixes with `fan` children per node
    (ids name nodes, so equal ids at a position mean an equal prefix), as long as its blocks."""
    lists, node_id = [], {}
    for p in prompt:
        path, out = (), []
        for _ in range(int(math.ceil(p / 4))):
            path = (*path, int(rng.integers(0, fan)))
            out.append(node_id.setdefault(path, len(node_id)))
        lists.append(out)
    off = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    ids = np.array([i for x in lists for i in x], dtype=np.int64)
    return PromptBlocks(off, ids, 4, "tree")


def _engine_ids(pb: PromptBlocks, bs: int, prompt: np.ndarray) -> list[list[int]]:
    dense, _ = pb.on_blocks_of(bs, prompt).dense()
    return [dense.of(i).tolist() for i in range(dense.n)]


def _run(w: ReplayWorkload, pol: Policy, seed: int):  # type: ignore[no-untyped-def]
    n = w.output_tokens.size
    res = run(w, pol, StepLaw(*STEP), requests=n, warmup=0, batches=2, seed=seed, per_request=True)
    return res, res.per_request


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    order=st.sampled_from(order_names(preemptive=False)),
    servers=st.integers(1, 2),
    max_batch=st.sampled_from([None, 3, 8]),
    kv=st.sampled_from([96, 160, 400]),
    chunked=st.sampled_from([None, 24]),
    whole=st.booleans(),
    block=st.sampled_from([1, 2, 4]),
    fan=st.integers(1, 3),
    rate=st.floats(1.0, 30.0),
)
def test_prefix_caching_matches_reference(  # type: ignore[no-untyped-def]
    seed, order, servers, max_batch, kv, chunked, whole, block, fan, rate
):
    arr, prompt, out = random_table(seed, 70, rate, 40, 30)
    pb = _tree_blocks(np.random.default_rng(seed + 1), prompt, fan)
    budget = chunked if chunked is not None else (64 if whole else None)
    guard = 1.5 if order != "fcfs" else None
    pol = Policy(
        "continuous", bmax=max_batch, order=order, guard_s=guard, servers=servers, kv_tokens=kv,
        admission="on_demand", max_batched_tokens=budget, block_size=block,
        chunked_prefill=not whole, prefix_caching=True,
    )  # fmt: skip
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8), blocks=pb)
    res, tab = _run(w, pol, seed)
    ref = RefPolicy(
        "continuous", bmax=math.inf if max_batch is None else max_batch, order=order,
        guard_s=math.inf if guard is None else guard, servers=servers, kv_tokens=kv,
        admission="on_demand", max_batched_tokens=math.inf if budget is None else budget,
        block_size=block, chunked_prefill=not whole, prefix_caching=True,
    )  # fmt: skip
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    compare_times(tab, run_continuous(reqs, ref, STEP, blocks=_engine_ids(pb, block, prompt)))
    assert 0.0 <= res.prefix_hit_share <= 1.0 or math.isnan(res.prefix_hit_share)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    router=st.sampled_from([r for r in ROUTERS if r != "central"]),
    replicas=st.integers(2, 3),
    kv=st.sampled_from([120, 400]),
    block=st.sampled_from([1, 4]),
    fan=st.integers(1, 3),
    rate=st.floats(2.0, 30.0),
)
def test_prefix_caching_behind_a_router_matches_reference(  # type: ignore[no-untyped-def]
    seed, router, replicas, kv, block, fan, rate
):
    arr, prompt, out = random_table(seed, 70, rate, 40, 30)
    pb = _tree_blocks(np.random.default_rng(seed + 1), prompt, fan)
    pol = Policy(
        "continuous", kv_tokens=kv, admission="on_demand", block_size=block, replicas=replicas,
        router=router, max_batched_tokens=32, prefix_caching=True,
    )  # fmt: skip
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8), blocks=pb)
    _, tab = _run(w, pol, seed)
    ref = RefPolicy(
        "continuous", servers=replicas, kv_tokens=kv, admission="on_demand", block_size=block,
        max_batched_tokens=32, prefix_caching=True,
    )  # fmt: skip
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    rr = RefRouter(router, replicas, _router_word(seed), 2)
    compare_times(tab, run_continuous(reqs, ref, STEP, rr, blocks=_engine_ids(pb, block, prompt)))


@pytest.mark.parametrize("router", ["prefix_score", "prefix_index"])
@pytest.mark.parametrize("seed", range(5))
def test_scored_prefix_routers_match_reference_under_queueing(seed: int, router: str) -> None:
    """prefix_score and prefix_index where their two scorers disagree: arrivals faster than three
    replicas serve (their waiting queues differ) in pools that evict (so the index, blind to
    evictions, differs from the pools), on prompts that share a prefix tree; the reference scores
    each replica from its own counts and its own index (RefRouter.score, RefRouter.sent)."""
    arr, prompt, out = random_table(seed, 70, 25.0, 40, 30)
    pb = _tree_blocks(np.random.default_rng(seed + 1), prompt, 2)
    pol = Policy(
        "continuous", bmax=3, kv_tokens=160, admission="on_demand", block_size=4, replicas=3,
        router=router, max_batched_tokens=32, prefix_caching=True,
    )  # fmt: skip
    w = ReplayWorkload(arr, prompt, out, blocks=pb)
    _, tab = _run(w, pol, seed)
    ref = RefPolicy(
        "continuous", bmax=3, servers=3, kv_tokens=160, admission="on_demand", block_size=4,
        max_batched_tokens=32, prefix_caching=True,
    )  # fmt: skip
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    rr = RefRouter(router, 3, _router_word(seed), 2)
    compare_times(tab, run_continuous(reqs, ref, STEP, rr, blocks=_engine_ids(pb, 4, prompt)))


def test_prefix_scores_by_hand() -> None:
    """llm-d's default profile on three replicas: (hits, waiting) = (4, 2), (0, 0), (4, 1) of an
    arrival with 8 full blocks: 3 x 4/8 + 2 x 0 = 1.5, 0 + 2 x 1 = 2, 1.5 + 2 x 1/2 = 2.5; the
    third wins. Equal queues score 1 each; an arrival without a full block scores no hits."""
    w = R.PREFIX_WEIGHT
    load = np.array([2.0 - 4 * w, 0.0, 1.0 - 4 * w])
    R.prefix_scores(load, 8.0)
    assert load.tolist() == [-1.5, -2.0, -2.5]
    load = np.array([3.0 - 2 * w, 3.0])
    R.prefix_scores(load, 4.0)
    assert load.tolist() == [-(1.5 + 2.0), -2.0]
    load = np.array([1.0, 0.0])
    R.prefix_scores(load, 0.0)
    assert load.tolist() == [-0.0, -2.0]


def _router_word(seed: int) -> int:
    """The router's first SplitMix64 state: a child of the run's seed (llmqueue.sim.router)."""
    return int(np.random.SeedSequence(seed, spawn_key=(0,)).generate_state(1, np.uint64)[0])


@pytest.mark.parametrize("capacity", [4_000, 20_000])
def test_prefix_hits_equal_the_pool_replay_when_requests_never_overlap(capacity: int) -> None:
    """Requests 1e4 s apart on one server (none overlaps another): each request's hit blocks,
    read back from its prefill time (one iteration: c0 + c_tok (prompt - hits b)), equal
    llmqueue.sim.block_pool's replay of the same ids with the KV each holds at its finish (prompt
    + output - 1 tokens, vLLM's count) in a pool of the same size."""
    n, bs = 3000, 16
    rows = read_trace(MOONCAKE, format="mooncake").take(0, n)
    prompt = np.asarray(rows.prompt_tokens, dtype=float)
    out = np.asarray(rows.output_tokens, dtype=float)
    arr = np.arange(n) * 1e4
    c0, ctok = 0.01, 1e-3
    pol = Policy(
        "continuous", kv_tokens=capacity * bs, admission="on_demand", block_size=bs,
        prefix_caching=True,
    )  # fmt: skip
    w = ReplayWorkload(arr, prompt, out, blocks=rows.blocks)
    res = run(
        w, pol, StepLaw(c0, ctok, 0.0), requests=n, warmup=0, batches=2, seed=1, per_request=True
    )
    tab = res.per_request
    fit = prompt + out <= capacity * bs
    assert res.rejected == int((~fit).sum())
    prefill = tab[fit, 6] - tab[fit, 5]
    hits = np.rint((prompt[fit] - (prefill - c0) / ctok) / bs).astype(int)
    dense, u = rows.blocks.on_blocks_of(bs, prompt).dense()
    keep = np.flatnonzero(fit)
    counts = dense.counts()[keep]
    off = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    ids = np.concatenate([dense.of(int(i)) for i in keep]).astype(np.int64)
    want = replay_hits(
        off, ids, u, prompt[fit], prompt[fit] + out[fit] - 1, block_tokens=bs,
        capacity_blocks=capacity,
    )  # fmt: skip
    np.testing.assert_array_equal(hits, want)
    assert want.sum() > 0.02 * (prompt[fit] // bs).sum()  # the check is not vacuous
    share = float((want * bs).sum() / prompt[fit].sum())
    assert res.prefix_hit_share == pytest.approx(share, rel=0.02)  # the window's edges aside


def test_prefix_caching_without_ids_changes_nothing() -> None:
    """A Poisson workload carries no block ids: with prefix caching on, every number is the one
    without (a pool with nothing cached is the paged KV count), and the hit share is 0."""
    w = PoissonWorkload(
        parse_law("uniform:low=1,high=80"), 9.0, prompt=parse_law("uniform:low=0,high=120")
    )
    base = dict(bmax=16, kv_tokens=640, admission="on_demand", block_size=16, max_batched_tokens=64)
    off = run(w, Policy("continuous", **base), StepLaw(*STEP), requests=20_000, seed=3)
    on = run(
        w,
        Policy("continuous", prefix_caching=True, **base),
        StepLaw(*STEP),
        requests=20_000,
        seed=3,
    )
    assert off.preemptions > 0  # the pool is tight: evictions and preemptions are exercised
    assert on.prefix_hit_share == 0.0
    assert dataclasses.replace(on, prefix_hit_share=math.nan) == off


@pytest.mark.parametrize(
    ("kw", "word"),
    [
        (dict(kind="dynamic"), "continuous"),
        (dict(kind="continuous", kv_tokens=64), "on_demand"),
        (dict(kind="continuous", admission="per_chunk", kv_tokens=64), "on_demand"),
        (dict(kind="continuous", admission="on_demand"), "kv_tokens"),
        (
            dict(kind="continuous", admission="on_demand", kv_tokens=64, order="srpt"),
            "non-preemptive",
        ),
        (
            dict(kind="continuous", admission="on_demand", kv_tokens=64, prefix_caching_="yes"),
            "true or false",
        ),
    ],
)
def test_prefix_caching_refuses_what_it_is_not(kw: dict, word: str) -> None:  # type: ignore[type-arg]
    kw = dict(kw)
    pc = kw.pop("prefix_caching_", True)
    kind = kw.pop("kind")
    with pytest.raises(InputError, match=word):
        Policy(kind, prefix_caching=pc, **kw)  # type: ignore[arg-type]


def test_prefix_caching_spec_round_trip() -> None:
    p = parse_policy(
        "continuous:kv_tokens=4096,admission=on_demand,block_size=16,prefix_caching=true"
    )
    assert p.prefix_caching and "prefix-cache" in p.label()
    assert parse_policy(policy_spec(p)) == p
    assert not parse_policy("continuous:kv_tokens=64,admission=on_demand").prefix_caching


def test_one_seat_with_a_shared_system_prompt_is_pollaczek_khinchine() -> None:
    """One seat (max_batch 1) and c_ctx = 0: a request of l prompt tokens, h of them found cached,
    and o output tokens is served in S = c0 + c_tok (l - h) + (o - 1)(c0 + c_tok). Half the
    requests (an independent coin) open with the same 8-block system prompt, cached after the
    first and never evicted (a 4,096-block pool, a few hundred consecutive other requests would
    be needed to push it out); the others' ids are their own. So S is i.i.d., a mixture of a hit
    and a miss, and the mean wait is Pollaczek-Khinchine's lambda E[S^2] / (2 (1 - rho)), within
    the run's own confidence interval; without the cache the same run sits far outside it."""
    rng = np.random.default_rng(2026)
    n, bs, shared = 160_000, 16, 8
    c0, ctok = 0.01, 0.001
    extra = np.arange(1, 65)  # prompt = 128 + U{1..64} tokens
    outs = np.arange(1, 65)  # output U{1..64} tokens
    # E[S], E[S^2] over the coin, the prompt and the output (independent, uniform)
    hits = np.array([0, shared * bs])
    s = (
        c0
        + ctok * (shared * bs + extra[None, :, None] - hits[:, None, None])
        + (outs[None, None, :] - 1) * (c0 + ctok)
    )
    es, es2 = float(s.mean()), float((s**2).mean())
    rate = 0.7 / es
    pk = rate * es2 / (2 * (1 - rate * es))
    arr = np.cumsum(rng.exponential(1 / rate, n))
    prompt = (shared * bs + rng.choice(extra, n)).astype(float)
    out = rng.choice(outs, n).astype(float)
    coin = rng.random(n) < 0.5
    ids = np.where(
        coin[:, None],
        np.arange(shared),
        shared + shared * np.arange(n)[:, None] + np.arange(shared),
    )
    pb = PromptBlocks(np.arange(n + 1, dtype=np.int64) * shared, ids.ravel().astype(np.int64), bs)
    w = ReplayWorkload(arr, prompt, out, blocks=pb)
    runs = {}
    for pc in (True, False):
        pol = Policy(
            "continuous", bmax=1, kv_tokens=4096 * bs, admission="on_demand", block_size=bs,
            prefix_caching=pc,
        )  # fmt: skip
        runs[pc] = run(w, pol, StepLaw(c0, ctok, 0.0), requests=n - 10_000, warmup=10_000, seed=5)
    on, off = runs[True], runs[False]
    assert on.prefix_hit_share == pytest.approx(
        0.5 * shared * bs / (shared * bs + extra.mean()), abs=0.01
    )
    assert abs(on.wait.mean - pk) < 2.5 * on.wait.ci95
    assert abs(off.wait.mean - pk) > 5 * off.wait.ci95


@pytest.fixture(scope="module")
def four_replicas() -> dict[str, tuple[float, float]]:
    """(share of prompt tokens from cache, mean TTFT) of every router but central on Mooncake's
    conversation trace (its first 6,000 requests at 2/s) behind four replicas, each with a pool
    of 8 M tokens (a session's history survives between its turns)."""
    n = 6000
    rows = read_trace(MOONCAKE, format="mooncake").take(0, n)
    w = ReplayWorkload(
        rows.arrival_s, rows.prompt_tokens, rows.output_tokens, blocks=rows.blocks
    ).at_rate(2.0)
    out = {}
    for router in ("prefix_affinity", "prefix_score", "prefix_index", "round_robin", "jsq"):
        pol = Policy(
            "continuous", bmax=32, kv_tokens=8_000_000, admission="on_demand", block_size=16,
            max_batched_tokens=8192, replicas=4, router=router, prefix_caching=True,
        )  # fmt: skip
        res = run(w, pol, StepLaw(0.01, 2e-5, 0.0), requests=n - 500, warmup=500, seed=2)
        assert not res.unstable
        out[router] = (res.prefix_hit_share, res.ttft.mean)
    return out


def test_prefix_affinity_finds_more_of_the_cache_than_blind_routers(
    four_replicas: dict[str, tuple[float, float]],
) -> None:
    """Sending a request where its prefix is cached finds a larger share of the prompt tokens
    cached than round robin, which spreads every session over all four pools, and than jsq, the
    tie-break prefix_affinity falls back on. It pays in balance: its sticky replicas queue, and
    its mean TTFT is the worst of the three (with pools of 0.4-2 M tokens its hot replicas also
    evict sooner and it finds less than round robin)."""
    share = {r: v[0] for r, v in four_replicas.items()}
    ttft = {r: v[1] for r, v in four_replicas.items()}
    assert share["prefix_affinity"] > share["round_robin"] + 0.05
    assert share["prefix_affinity"] > share["jsq"] + 0.05
    assert ttft["prefix_affinity"] > max(ttft["round_robin"], ttft["jsq"])


def test_scored_prefix_routers_trade_the_match_against_the_queue(
    four_replicas: dict[str, tuple[float, float]],
) -> None:
    """prefix_score (llm-d's 3 x prefix + 2 x queue) and prefix_index (the same score over the
    router's own index of what it sent where): when a session's replica has a queue, a replica
    without one outscores it, so no replica saturates: their mean TTFT stays within twice jsq's
    while they find more of the cache than round robin and jsq (pools this large seldom evict,
    so the index is seldom wrong)."""
    share = {r: v[0] for r, v in four_replicas.items()}
    ttft = {r: v[1] for r, v in four_replicas.items()}
    for scored in ("prefix_score", "prefix_index"):
        assert share[scored] > max(share["round_robin"], share["jsq"]) + 0.05
        assert ttft[scored] < 2.0 * ttft["jsq"]
