"""The compiled prefix-caching block pool (llmqueue.sim.block_pool) against its plain-Python
reference (tests/reference_pool.py), operation by operation, and its replay against an
independent LRU cache (llmqueue.analytic.lru) and against Che's approximation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference_pool import RefPool

from llmqueue.analytic.lru import che_hit_ratio, lru_request_hits, zipf_popularity
from llmqueue.blocks import PromptBlocks
from llmqueue.sim import block_pool as BP
from llmqueue.traces import read_trace

MOONCAKE = "data/traces/mooncake-fast25/conversation_trace.jsonl"


def free_queue(blk: np.ndarray, top: np.ndarray) -> list[int]:
    out, b = [], int(top[BP.T_HEAD])
    while b >= 0:
        out.append(b)
        b = int(blk[b, BP.B_NEXT])
    back, b = [], int(top[BP.T_TAIL])
    while b >= 0:
        back.append(b)
        b = int(blk[b, BP.B_PREV])
    assert back[::-1] == out  # both links agree
    return out


def same_state(blk, idc, top, ref: RefPool) -> None:  # noqa: ANN001
    assert free_queue(blk, top) == ref.free
    assert int(top[BP.T_FREE]) == len(ref.free)
    assert blk[:, BP.B_REF].tolist() == ref.ref
    assert [None if i < 0 else int(i) for i in blk[:, BP.B_ID]] == ref.id_of
    for i in range(idc.shape[0]):
        copies, b = [], int(idc[i, 0])
        while b >= 0:
            copies.append(b)
            b = int(blk[b, BP.B_CNEXT])
        assert copies == ref.copies.get(i, [])
    assert int(top[BP.T_CACHED]) == ref.cached
    assert int(top[BP.T_EVICT]) == ref.evictions


# a request: its id list (a path in a small tree of prefixes: shared leading ids) and how many
# blocks beyond them it holds
chains = st.lists(st.integers(0, 2), min_size=0, max_size=6)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), chains, st.integers(0, 3), st.booleans()),
        st.tuples(st.just("release"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=60,
)


def tree_ids(path: list[int]) -> list[int]:
    """Dense ids of the nodes along a path of a ternary tree (equal paths, equal prefixes)."""
    out, node = [], 0
    for x in path:
        node = 3 * node + 1 + x
        out.append(node)
    return out


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 24), ops=ops)
def test_pool_follows_the_reference_operation_by_operation(capacity: int, ops: list) -> None:
    n_ids = 3**7
    blk, idc, top = BP.new_pool(capacity, n_ids)
    ref = RefPool(capacity)
    running: list[tuple[np.ndarray, list[int]]] = []
    table = np.zeros(capacity + 8, dtype=np.int64)
    for op in ops:
        if op[0] == "admit":
            _, path, extra, register = op
            ids = np.array(tree_ids(path), dtype=np.int64)
            k = BP.cached_run(idc, ids, 0, ids.size, ids.size)
            assert k == ref.cached_run(ids.tolist(), ids.size)
            ev = BP.evictable(blk, idc, ids, 0, k)
            assert ev == ref.evictable(ids[:k].tolist())
            need = ids.size + extra
            if need - k + ev > int(top[BP.T_FREE]) or need == 0:
                continue  # vLLM's admission check: it would not fit
            BP.touch(blk, idc, top, ids, 0, k, table, 0)
            BP.allocate(blk, idc, top, need - k, table, k)
            mine = ref.touch(ids[:k].tolist()) + ref.allocate(need - k)
            assert table[:need].tolist() == mine
            if register:
                for j in range(k, ids.size):
                    BP.register(blk, idc, top, table[j], ids[j])
                    ref.register(mine[j], int(ids[j]))
            running.append((table[:need].copy(), mine))
        elif running:
            tab, mine = running.pop(op[1] % len(running))
            BP.release(blk, top, tab, 0, tab.size)
            ref.release(mine)
        same_state(blk, idc, top, ref)


def lru_items(ids: list[int], prompt: int, held: int, bs: int, r: int) -> list[object]:
    """Request r's blocks as LRU items: its full prompt blocks with ids by id, every other block
    unique to it."""
    full = min(len(ids), prompt // bs)
    need = -(-held // bs)
    return [ids[j] if j < full else ("own", r, j) for j in range(need)]


workloads = st.lists(
    st.tuples(chains, st.integers(1, 15), st.integers(0, 40)), min_size=1, max_size=80
)


@settings(max_examples=150, deadline=None)
@given(capacity=st.integers(1, 40), reqs=workloads)
def test_requests_that_never_overlap_hit_what_an_lru_of_the_same_capacity_hits(
    capacity: int, reqs: list
) -> None:
    """Check (b): with a prompt that is not a whole number of blocks (so that a hit never stops
    short of a cached block at the prompt's end), the pool's hits equal an LRU's over the same
    block sequence, request by request."""
    bs = 16
    lists = [tree_ids(path) for path, _, _ in reqs]
    prompt = np.array([bs * len(ids) + part for ids, (_, part, _) in zip(lists, reqs, strict=True)])
    held = prompt + np.array([o for _, _, o in reqs])
    off = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
    flat = np.array([i for x in lists for i in x], dtype=np.int64)
    hits = BP.replay_hits(off, flat, 3**7, prompt, held, block_tokens=bs, capacity_blocks=capacity)
    fits = -(-held // bs) <= capacity
    items = [
        lru_items(x, int(p), int(h), bs, r)
        for r, (x, p, h) in enumerate(zip(lists, prompt, held, strict=True))
        if fits[r]
    ]
    expect = lru_request_hits(items, capacity)
    assert hits[fits].tolist() == expect.tolist()
    assert np.all(hits[~fits] == -1)


def test_mooncake_requests_one_at_a_time_hit_what_an_lru_hits() -> None:
    """Check (b) on Mooncake's conversation trace: its first 3,000 requests whose prompt is not a
    multiple of the engine's 16-token block, replayed one at a time in pools of 20,000 blocks
    (about 26 mean requests: it evicts) and 400,000, hit what LRUs of as many items hit."""
    rows = read_trace(MOONCAKE, "mooncake")
    bs = 16
    eng, n_ids = rows.blocks.on_blocks_of(bs, rows.prompt_tokens).dense()
    keep = np.flatnonzero(rows.prompt_tokens % bs != 0)[:3000]
    lists = [eng.of(int(i)).tolist() for i in keep]
    prompt = rows.prompt_tokens[keep].astype(np.int64)
    held = prompt + rows.output_tokens[keep].astype(np.int64)
    sub = PromptBlocks(
        np.concatenate([[0], np.cumsum([len(x) for x in lists])]),
        np.array([i for x in lists for i in x], dtype=np.int64),
        bs,
    )
    items = [
        lru_items(x, int(p), int(h), bs, r)
        for r, (x, p, h) in enumerate(zip(lists, prompt, held, strict=True))
    ]
    shares = []
    for cap in (20_000, 400_000):
        hits = BP.replay_hits(
            sub.offsets, sub.ids, n_ids, prompt, held, block_tokens=bs, capacity_blocks=cap
        )
        assert hits.tolist() == lru_request_hits(items, cap).tolist()
        shares.append(hits.sum() * bs / prompt.sum())
    assert 0.0 < shares[0] < shares[1]


@pytest.mark.parametrize("alpha", [0.8, 1.0, 1.2])
@pytest.mark.parametrize("capacity", [50, 200, 800])
def test_che_approximation_within_a_point_of_hit_ratio(alpha: float, capacity: int) -> None:
    """Check (c): N = 2,000 single-block system prompts of Zipf(alpha) popularity (independent
    reference model), each request one prompt block and one block of its own (a partial
    suffix), replayed in a pool of C blocks: the share of requests that hit their prompt block
    is within one point of Che's hit ratio with one one-timer per request. The tolerance is the
    issue's point plus the 95% interval of the measured ratio by batch means."""
    bs, n_items, n_req, warm = 16, 2000, 120_000, 20_000
    rng = np.random.default_rng(20261203)
    p = zipf_popularity(n_items, alpha)
    ids = rng.choice(n_items, size=n_req, p=p).astype(np.int64)
    off = np.arange(n_req + 1, dtype=np.int64)
    prompt = np.full(n_req, bs + 5, dtype=np.int64)
    held = prompt + 3
    hits = BP.replay_hits(
        off, ids, n_items, prompt, held, block_tokens=bs, capacity_blocks=capacity
    )
    h = hits[warm:].astype(float)
    batches = h.reshape(50, -1).mean(axis=1)
    ci = 1.96 * batches.std(ddof=1) / np.sqrt(batches.size)
    assert ci < 0.005
    che = che_hit_ratio(p, capacity, one_timers=1.0)
    assert abs(h.mean() - che) <= 0.01 + ci, (h.mean(), che)
