"""The engine's one binary heap of request slots (compiled, inlined helpers).

A heap is an int64 array ``h`` whose first ``n`` entries are slots of the request pool
(:mod:`llmqueue.sim.fields`), smallest first in the order of :func:`before`: a request put back by
a preemption (``F_FRONT`` = 1) first, then the smaller ``pool[slot, key]``, then the earlier
arrival (``F_ID``): a strict total order, so every heap pops the same sequence. Each slot's
position is kept in ``pool[slot, F_HPOS]``, so any slot can be removed in O(log n).

Two users: the queue order (:mod:`llmqueue.sim.queue`, key = true or predicted output tokens) and
the per-server completion heaps of continuous batching (:mod:`llmqueue.sim.continuous`, key =
``F_TARGET``, a server's row ``dheap[s]``). A request is in at most one heap at a time. The
caller keeps the size ``n``; :func:`push` and :func:`remove` return the new size.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from llmqueue.sim.fields import F_FRONT, F_HPOS, F_ID

__all__ = ["before", "push", "remove", "sift_up", "sift_down"]


@njit(cache=True, nogil=True, inline="always")
def before(pool, a, b, key):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Whether slot a comes before slot b: preempted first, then the smaller key, then the
    earlier arrival."""
    fa = pool[a, F_FRONT]
    fb = pool[b, F_FRONT]
    if fa != fb:
        return fa > fb
    ka = pool[a, key]
    kb = pool[b, key]
    if ka != kb:
        return ka < kb
    return pool[a, F_ID] < pool[b, F_ID]


@njit(cache=True, nogil=True, inline="always")
def sift_up(pool, h, i, key):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Move the entry at position i up to its place."""
    x = h[i]
    while i > 0:
        p = (i - 1) >> 1
        if before(pool, x, h[p], key):
            h[i] = h[p]
            pool[h[i], F_HPOS] = i
            i = p
        else:
            break
    h[i] = x
    pool[x, F_HPOS] = i


@njit(cache=True, nogil=True, inline="always")
def sift_down(pool, h, n, i, key):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Move the entry at position i (of a heap of n) down to its place."""
    x = h[i]
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and before(pool, h[c + 1], h[c], key):
            c += 1
        if before(pool, h[c], x, key):
            h[i] = h[c]
            pool[h[i], F_HPOS] = i
            i = c
        else:
            break
    h[i] = x
    pool[x, F_HPOS] = i


@njit(cache=True, nogil=True, inline="always")
def push(pool, h, n, s, key):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Add slot s to the heap of n entries; returns n + 1."""
    h[n] = s
    sift_up(pool, h, n, key)
    return n + 1


@njit(cache=True, nogil=True, inline="always")
def remove(pool, h, n, s, key):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take slot s out of the heap of n entries; returns n - 1."""
    m = n - 1
    i = np.int64(pool[s, F_HPOS])
    if i == m:
        return m
    last = h[m]
    h[i] = last
    pool[last, F_HPOS] = i
    sift_down(pool, h, m, i, key)
    if np.int64(pool[last, F_HPOS]) == i:
        sift_up(pool, h, i, key)
    return m
