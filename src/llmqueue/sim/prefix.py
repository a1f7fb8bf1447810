"""Automatic prefix caching in continuous batching (vLLM v1's), compiled: each server's KV budget
is a block pool (:mod:`llmqueue.sim.block_pool`) and a request's prompt blocks that carry ids
(:mod:`llmqueue.blocks`) are looked up, shared and kept after it finishes.

The rules, as vLLM's ``Scheduler.schedule`` and ``KVCacheManager`` apply them
(:mod:`llmqueue.sim.continuous` calls these at the same points):

- **admission**: a waiting request hits the longest run of its leading prompt ids with a cached
  copy, at most (tokens to prefill - 1) // block tokens (its last token is always computed);
  the hit tokens are prefilled already (they are context, not work). It needs blocks for the KV it
  takes at admission (its prompt, or prompt + output so far after a preemption) less the hits; it
  is admitted only if those, plus the hit blocks that sit in the free queue, fit the free blocks
  left after this iteration's decodes took theirs (vLLM's check counts evictable hit blocks as
  taken); it takes its hits first (:func:`~llmqueue.sim.block_pool.touch`), then the rest from the
  head of the free queue (evicting what those held);
- **caching**: a full prompt block with an id becomes a cached copy when the chunk that computes
  it is scheduled (vLLM caches ``num_computed_tokens + num_new_tokens`` at allocation);
- **decodes** take their new blocks from the head of the free queue before any admission of
  the same step (vLLM schedules running requests first); a run of decode-only iterations takes
  them as the event loop applies it, and since nothing else touches a server's pool inside such
  a run, they are taken (:func:`settle`) before the next operation on that pool, in order;
- **release** (a finish or a preemption): the request's blocks, last first, lose a reference;
  those left with none go to the tail of the free queue, cached ones still cached.

What a request holds is not stored as a table of blocks. Its hit blocks are the first cached
copies of its leading ids, and stay so while it holds them (a held block is never evicted, and a
new copy goes after the others); the blocks it allocated for ids are a chain through ``link``
(head in ``F_CHAIN``); every other block it holds (its partial last prompt block, prompt blocks
without ids, decode blocks) has no id and is on the server's stack of anonymous blocks in use,
where any one of them stands for another. So a server's pool state is the one an engine that
keeps full block tables would reach, up to renaming blocks without ids.

Differences from vLLM, stated: ids come from the workload, not from hashes of token ids, so
generated tokens are never cached (vLLM also caches full blocks of generated tokens, which a
recomputed request after a preemption then hits); the KV a request takes at admission is taken
whole (the engine's on-demand rule), not chunk by chunk.

The cache tuple (int64 arrays; per server s): ``blk[s]``, ``idc[s]``, ``top[s]`` the pool
(:func:`~llmqueue.sim.block_pool.new_pool`), ``anon[s, :acount[s]]`` the anonymous blocks in use,
``link[s]`` the chains, ``offsets``/``ids`` the requests' dense ids by request id (a request id
past them has none), ``scratch`` room for one request's blocks, ``sent[s, id]`` (uint8) the
``prefix_index`` router's index: 1 once it sent a request listing the id to server s (a
one-entry stand-in for the other routers). Units: blocks, unless named tokens.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from llmqueue.sim import block_pool as BP
from llmqueue.sim import fields as F

__all__ = [
    "new_cache",
    "no_cache",
    "settle",
    "lookup",
    "take",
    "register_upto",
    "release",
    "ids_of",
    "sent_run",
    "mark_sent",
]


def new_cache(
    servers: int,
    capacity_blocks: int,
    offsets: np.ndarray,
    ids: np.ndarray,
    n_ids: int,
    *,
    index: bool = False,
) -> tuple[np.ndarray, ...]:
    """The cache tuple (module docstring) of `servers` empty pools of `capacity_blocks` blocks
    each, for requests whose dense ids are ``ids[offsets[r]:offsets[r + 1]]``; with `index`, the
    ``prefix_index`` router's empty index over the `n_ids` ids (servers x n_ids bytes)."""
    c, cap = int(servers), int(capacity_blocks)
    pools = [BP.new_pool(cap, n_ids) for _ in range(c)]
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    idv = np.ascontiguousarray(ids, dtype=np.int64)
    longest = int(np.diff(off).max(initial=0)) if off.size > 1 else 0
    return (
        np.stack([p[0] for p in pools]),
        np.stack([p[1] for p in pools]),
        np.stack([p[2] for p in pools]),
        np.zeros((c, cap), dtype=np.int64),
        np.zeros(c, dtype=np.int64),
        np.full((c, cap), -1, dtype=np.int64),
        off,
        idv if idv.size else np.zeros(1, dtype=np.int64),
        np.zeros(max(longest, 1), dtype=np.int64),
        np.zeros((c, max(int(n_ids), 1)) if index else (1, 1), dtype=np.uint8),
    )


def no_cache(servers: int) -> tuple[np.ndarray, ...]:
    """A cache tuple of the same types for a run without prefix caching (never touched)."""
    return new_cache(servers, 1, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), 1)


@njit(cache=True, nogil=True, inline="always")
def ids_of(cache, rid):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """(lo, hi): request rid's ids are ``ids[lo:hi]`` (lo == hi: none)."""
    off = cache[6]
    if rid + 1 >= off.size:
        return 0, 0
    return off[rid], off[rid + 1]


@njit(cache=True, nogil=True, inline="always")
def sent_run(cache, s, rid, tokens, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """How many leading ids of request rid, about to prefill `tokens` tokens, the router's index
    holds for server s (at most (tokens - 1) // bs, as a cache hit)."""
    lo, hi = ids_of(cache, rid)
    sent, ids = cache[9], cache[7]
    most = (np.int64(tokens) - 1) // np.int64(bs)
    k = 0
    while k < most and lo + k < hi and sent[s, ids[lo + k]] == 1:
        k += 1
    return k


@njit(cache=True, nogil=True, inline="always")
def mark_sent(cache, s, rid):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The router sent request rid to server s: its index holds every id of its prompt there."""
    lo, hi = ids_of(cache, rid)
    sent, ids = cache[9], cache[7]
    for j in range(lo, hi):
        sent[s, ids[j]] = 1


@njit(cache=True, nogil=True, inline="always")
def settle(cache, s, blocks):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Server s's pool holds `blocks` blocks in use: the decode blocks the event loop counted
    and the pool has not given yet are popped from the head of its free queue (evicting what they
    held) onto the anonymous stack."""
    blk, idc, top, anon, acount = cache[0], cache[1], cache[2], cache[3], cache[4]
    cap = blk.shape[1]
    n = blocks - (cap - top[s, BP.T_FREE])
    if n > 0:
        a = acount[s]
        BP.allocate(blk[s], idc[s], top[s], n, anon[s], a)
        acount[s] = a + n


@njit(cache=True, nogil=True, inline="always")
def lookup(cache, s, rid, tokens, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """(hit blocks, those of them in the free queue) for request rid about to prefill `tokens`
    tokens on server s (hits at most (tokens - 1) // bs)."""
    lo, hi = ids_of(cache, rid)
    if hi == lo:
        return 0, 0
    blk, idc = cache[0], cache[1]
    k = BP.cached_run(idc[s], cache[7], lo, hi, (np.int64(tokens) - 1) // np.int64(bs))
    return k, BP.evictable(blk[s], idc[s], cache[7], lo, k)


@njit(cache=True, nogil=True, inline="always")
def take(cache, pool, s, sl, rid, k, need):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request rid in slot sl takes its k hit blocks and need - k blocks from the free queue on
    server s: those for its ids beyond the hits chained from ``F_CHAIN``, the others anonymous.
    Returns the blocks that left the free queue."""
    blk, idc, top, anon, acount, link = cache[0], cache[1], cache[2], cache[3], cache[4], cache[5]
    ids, scratch = cache[7], cache[8]
    lo, hi = ids_of(cache, rid)
    free0 = top[s, BP.T_FREE]
    if k > 0:
        BP.touch(blk[s], idc[s], top[s], ids, lo, k, scratch, 0)
    # in position order: its blocks for ids k..n_id-1 (chained), then the rest (anonymous)
    n_own = hi - lo - k
    BP.allocate(blk[s], idc[s], top[s], n_own, scratch, 0)
    for j in range(n_own):
        link[s, scratch[j]] = scratch[j + 1] if j + 1 < n_own else -1
    head = scratch[0] if n_own > 0 else -1
    a = acount[s]
    BP.allocate(blk[s], idc[s], top[s], need - (hi - lo), anon[s], a)
    acount[s] = a + need - (hi - lo)
    pool[sl, F.F_HITS] = k
    pool[sl, F.F_CHAIN] = head
    pool[sl, F.F_REG] = k
    pool[sl, F.F_REGB] = head
    return free0 - top[s, BP.T_FREE]


@njit(cache=True, nogil=True, inline="always")
def register_upto(cache, pool, s, sl, rid, tokens, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request rid (slot sl) on server s has its first `tokens` prompt tokens computed or
    scheduled: its full blocks with ids among them become cached copies."""
    lo, hi = ids_of(cache, rid)
    upto = np.int64(tokens) // np.int64(bs)
    if upto > hi - lo:
        upto = hi - lo
    j = np.int64(pool[sl, F.F_REG])
    if j >= upto:
        return
    blk, idc, top, link, ids = cache[0], cache[1], cache[2], cache[5], cache[7]
    b = np.int64(pool[sl, F.F_REGB])
    while j < upto:
        BP.register(blk[s], idc[s], top[s], b, ids[lo + j])
        b = link[s, b]
        j += 1
    pool[sl, F.F_REG] = j
    pool[sl, F.F_REGB] = b


@njit(cache=True, nogil=True, inline="always")
def release(cache, pool, s, sl, rid, blocks):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request rid (slot sl), holding `blocks` blocks on server s, lets them go, last first: its
    anonymous ones, then those it allocated for ids (last to first), then its hits (last to
    first). Returns the blocks that went back to the free queue."""
    blk, idc, top, anon, acount, link = cache[0], cache[1], cache[2], cache[3], cache[4], cache[5]
    ids, scratch = cache[7], cache[8]
    lo, hi = ids_of(cache, rid)
    free0 = top[s, BP.T_FREE]
    n_id = hi - lo
    n_anon = blocks - n_id
    a = acount[s]
    BP.release(blk[s], top[s], anon[s], a - n_anon, a)
    acount[s] = a - n_anon
    k = np.int64(pool[sl, F.F_HITS])
    n_own = 0
    b = np.int64(pool[sl, F.F_CHAIN])
    while b >= 0:
        scratch[n_own] = b
        n_own += 1
        b = link[s, b]
    BP.release(blk[s], top[s], scratch, 0, n_own)
    for j in range(k):
        scratch[j] = idc[s, ids[lo + j], 0]
    BP.release(blk[s], top[s], scratch, 0, k)
    pool[sl, F.F_HITS] = 0
    pool[sl, F.F_CHAIN] = -1
    pool[sl, F.F_REG] = 0
    pool[sl, F.F_REGB] = -1
    return top[s, BP.T_FREE] - free0
