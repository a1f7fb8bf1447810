"""A KV-cache block pool with automatic prefix caching, as vLLM's v1 engine keeps one, compiled.

The pool has C physical blocks. Its semantics are those of vLLM's ``BlockPool`` and
``KVCacheManager`` (vllm/v1/core/block_pool.py, kv_cache_manager.py); what differs: no null
block (vLLM keeps block 0 aside), one KV-cache group, and ids given by the workload
(:mod:`llmqueue.blocks`) instead of hashes of token ids:

- every block has a reference count; a block is in the *free queue* exactly when its count is 0.
  The free queue is a doubly linked list in eviction order; at the start it holds every block,
  in index order;
- a block may carry the id of the prefix block whose KV it holds (:mod:`llmqueue.blocks`): it is
  *cached*, and the id's copies are listed in the order they were cached (vLLM does not
  de-duplicate: a block computed while its id is cached elsewhere becomes a second copy);
- a lookup (:func:`cached_run`) takes the longest run of leading ids with a cached copy; a hit
  (:func:`touch`) takes each id's first copy, removing it from the free queue if it was there,
  and adds a reference;
- an allocation (:func:`allocate`) pops blocks from the head of the free queue; a popped block
  that is cached is evicted (its id forgets it): eviction happens only when an allocation needs
  the block, never before;
- a release (:func:`release`) drops one reference from each block of a request's table, last
  block first (vLLM frees ``reversed(blocks)``), appending each block whose count reaches 0 to
  the tail: a finished request's blocks stay cached and its last blocks are evicted first;
- a block becomes cached (:func:`register`) once it is full and computed.

So the free queue is LRU by release time, and because a request's leading blocks are released
after its later ones and touched with them, the cached copies of any chain form a prefix of it.

State, three int64 arrays made by :func:`new_pool` (no Python objects, the event loops'
convention): ``blk`` (C x NB: free-queue links, reference count, id, links between the copies of
one id), ``idc`` (U x 2: an id's first and last cached copy, -1: none) and ``top`` (the free
queue's head and tail, free blocks, cached blocks, evictions). Ids are dense, 0..U-1
(:meth:`llmqueue.blocks.PromptBlocks.dense`). Units: blocks.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "B_PREV",
    "B_NEXT",
    "B_REF",
    "B_ID",
    "B_CPREV",
    "B_CNEXT",
    "NB",
    "T_HEAD",
    "T_TAIL",
    "T_FREE",
    "T_CACHED",
    "T_EVICT",
    "NT",
    "new_pool",
    "cached_run",
    "evictable",
    "touch",
    "allocate",
    "register",
    "release",
    "replay",
    "replay_hits",
]

# per-block columns of blk
B_PREV, B_NEXT, B_REF, B_ID, B_CPREV, B_CNEXT = range(6)
NB = 6
# the scalars of top
T_HEAD, T_TAIL, T_FREE, T_CACHED, T_EVICT = range(5)
NT = 5


def new_pool(capacity: int, n_ids: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(blk, idc, top) of an empty pool of `capacity` blocks for ids 0..n_ids-1: every block
    free, uncached, in index order."""
    c = int(capacity)
    if c < 1:
        raise ValueError("a block pool needs at least one block")
    blk = np.full((c, NB), -1, dtype=np.int64)
    blk[:, B_PREV] = np.arange(-1, c - 1)
    blk[:, B_NEXT] = np.arange(1, c + 1)
    blk[c - 1, B_NEXT] = -1
    blk[:, B_REF] = 0
    idc = np.full((max(int(n_ids), 1), 2), -1, dtype=np.int64)
    top = np.zeros(NT, dtype=np.int64)
    top[T_HEAD] = 0
    top[T_TAIL] = c - 1
    top[T_FREE] = c
    return blk, idc, top


@njit(cache=True, nogil=True)
def _unlink(blk, top, b):  # type: ignore[no-untyped-def]  # noqa: ANN001
    p = blk[b, B_PREV]
    n = blk[b, B_NEXT]
    if p >= 0:
        blk[p, B_NEXT] = n
    else:
        top[T_HEAD] = n
    if n >= 0:
        blk[n, B_PREV] = p
    else:
        top[T_TAIL] = p
    blk[b, B_PREV] = -1
    blk[b, B_NEXT] = -1
    top[T_FREE] -= 1


@njit(cache=True, nogil=True)
def _append(blk, top, b):  # type: ignore[no-untyped-def]  # noqa: ANN001
    t = top[T_TAIL]
    blk[b, B_PREV] = t
    blk[b, B_NEXT] = -1
    if t >= 0:
        blk[t, B_NEXT] = b
    else:
        top[T_HEAD] = b
    top[T_TAIL] = b
    top[T_FREE] += 1


@njit(cache=True, nogil=True)
def _evict(blk, idc, top, b):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Block b forgets its id (it is about to be overwritten)."""
    i = blk[b, B_ID]
    if i < 0:
        return
    p = blk[b, B_CPREV]
    n = blk[b, B_CNEXT]
    if p >= 0:
        blk[p, B_CNEXT] = n
    else:
        idc[i, 0] = n
    if n >= 0:
        blk[n, B_CPREV] = p
    else:
        idc[i, 1] = p
    blk[b, B_ID] = -1
    blk[b, B_CPREV] = -1
    blk[b, B_CNEXT] = -1
    top[T_CACHED] -= 1
    top[T_EVICT] += 1


@njit(cache=True, nogil=True)
def cached_run(idc, ids, lo, hi, most):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """How many leading ids of ``ids[lo:hi]`` have a cached copy, at most `most`."""
    k = 0
    while k < most and lo + k < hi and idc[ids[lo + k], 0] >= 0:
        k += 1
    return k


@njit(cache=True, nogil=True)
def evictable(blk, idc, ids, lo, k):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Of the first copies of ``ids[lo:lo + k]``, those in the free queue (a hit on them takes a
    free block, as vLLM's admission check counts)."""
    n = 0
    for j in range(k):
        if blk[idc[ids[lo + j], 0], B_REF] == 0:
            n += 1
    return n


@njit(cache=True, nogil=True)
def touch(blk, idc, top, ids, lo, k, table, t0):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Hit the first k ids of ``ids[lo:]`` (each must have a cached copy): each id's first copy
    gains a reference (out of the free queue if it was free) and goes to ``table[t0 + j]``."""
    for j in range(k):
        b = idc[ids[lo + j], 0]
        if blk[b, B_REF] == 0:
            _unlink(blk, top, b)
        blk[b, B_REF] += 1
        table[t0 + j] = b


@njit(cache=True, nogil=True)
def allocate(blk, idc, top, n, table, t0):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Pop n blocks from the head of the free queue (n <= free blocks), evicting any that is
    cached, each with one reference, into ``table[t0:t0 + n]``."""
    for j in range(n):
        b = top[T_HEAD]
        _unlink(blk, top, b)
        _evict(blk, idc, top, b)
        blk[b, B_REF] = 1
        table[t0 + j] = b


@njit(cache=True, nogil=True)
def register(blk, idc, top, b, i):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Block b, full and computed, becomes a cached copy of id i (nothing if it is cached)."""
    if blk[b, B_ID] >= 0:
        return
    blk[b, B_ID] = i
    last = idc[i, 1]
    blk[b, B_CPREV] = last
    blk[b, B_CNEXT] = -1
    if last >= 0:
        blk[last, B_CNEXT] = b
    else:
        idc[i, 0] = b
    idc[i, 1] = b
    top[T_CACHED] += 1


@njit(cache=True, nogil=True)
def release(blk, top, table, lo, hi):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Drop a reference from each block of ``table[lo:hi]``, last first; a block left with none
    goes to the tail of the free queue, still cached."""
    for j in range(hi - 1, lo - 1, -1):
        b = table[j]
        blk[b, B_REF] -= 1
        if blk[b, B_REF] == 0:
            _append(blk, top, b)


@njit(cache=True, nogil=True)
def replay(offsets, ids, prompt, held, bs, blk, idc, top, table, hits):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Requests one after another, none overlapping another (each finishes before the next
    arrives): request r hits the longest cached run of its leading ids (at most
    (prompt - 1) // bs blocks: its last prompt token is always computed), takes
    ceil(held[r] / bs) blocks (hits first, the rest allocated), caches its full prompt blocks
    that have ids, and releases them. ``hits[r]``: its hit blocks, -1 if it needs more blocks
    than the pool has. `table` holds at least the most blocks a request takes."""
    c = blk.shape[0]
    for r in range(offsets.size - 1):
        lo = offsets[r]
        hi = offsets[r + 1]
        need = (held[r] + bs - 1) // bs
        if need > c:
            hits[r] = -1
            continue
        k = cached_run(idc, ids, lo, hi, (prompt[r] - 1) // bs)
        touch(blk, idc, top, ids, lo, k, table, 0)
        allocate(blk, idc, top, need - k, table, k)
        full = min(hi - lo, prompt[r] // bs, need)
        for j in range(k, full):
            register(blk, idc, top, table[j], ids[lo + j])
        release(blk, top, table, 0, need)
        hits[r] = k


def replay_hits(
    offsets: np.ndarray,
    ids: np.ndarray,
    n_ids: int,
    prompt_tokens: np.ndarray,
    held_tokens: np.ndarray,
    *,
    block_tokens: int,
    capacity_blocks: int,
) -> np.ndarray:
    """:func:`replay` from an empty pool of `capacity_blocks` blocks of `block_tokens` tokens:
    the hit blocks of each request of a workload whose requests never overlap in time (dense ids
    ``ids[offsets[r]:offsets[r + 1]]`` over the engine's blocks; `held_tokens`: the KV tokens
    each holds when it finishes). Returns int64 hits per request (-1: larger than the pool)."""
    off = np.ascontiguousarray(offsets, dtype=np.int64)
    idv = np.ascontiguousarray(ids, dtype=np.int64)
    p = np.ascontiguousarray(prompt_tokens, dtype=np.int64)
    h = np.ascontiguousarray(held_tokens, dtype=np.int64)
    bs = int(block_tokens)
    blk, idc, top = new_pool(capacity_blocks, n_ids)
    most = int(((h + bs - 1) // bs).max(initial=1))
    table = np.zeros(max(most, 1), dtype=np.int64)
    hits = np.zeros(p.size, dtype=np.int64)
    replay(off, idv, p, h, np.int64(bs), blk, idc, top, table, hits)
    return hits
