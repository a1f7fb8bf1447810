"""LRU caches: an exact replay and Che's approximation, the theory a prefix cache is checked on.

- :func:`lru_request_hits`: an LRU cache of C items over a sequence of requests, each a list of
  items (a prompt's blocks, in order). A request's hits are the longest run of its leading items
  in the cache when it starts; then all its items are referenced, its last item first and its
  first item last (so its first item is the most recent), and the least recent items beyond C
  are evicted. This is vLLM's prefix cache when requests never overlap in time: a finished
  request's blocks join the free queue last-block-first and allocations evict from its head
  (:mod:`llmqueue.sim.block_pool`).
- :func:`che_hit_ratio`: Che, Tung and Wang's approximation (IEEE JSAC 20(7), 2002) for LRU
  under the independent reference model. Items i = 1..N are requested with probabilities p_i;
  the cache holds what was referenced within the last T requests, the *characteristic time* T
  solving sum_i (1 - exp(-p_i T)) + u T = C, and the hit ratio is sum_i p_i (1 - exp(-p_i T)).
  ``u`` counts items per request that are never referenced again (a prompt's unique suffix
  block) but take cache space for as long as any item does (Fricker, Robert and Roberts'
  extension to mixed traffic, ITC 2012). tests/analytic/test_lru.py holds it to a point of hit
  ratio against an exact LRU replay for C >= 50; T is in requests.
- :func:`zipf_popularity`: p_i proportional to i^-alpha.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Hashable, Sequence

import numpy as np

from llmqueue.errors import InputError

__all__ = ["lru_request_hits", "che_characteristic_time", "che_hit_ratio", "zipf_popularity"]


def lru_request_hits(requests: Sequence[Sequence[Hashable]], capacity: int) -> np.ndarray:
    """Per request, the leading items found in an LRU cache of `capacity` items (the module's
    rule; a request of more than `capacity` items is referenced whole, the oldest of them
    evicted at once)."""
    if capacity < 1:
        raise InputError(f"capacity: {capacity}; allowed: an integer >= 1")
    cache: OrderedDict[Hashable, None] = OrderedDict()
    hits = np.zeros(len(requests), dtype=np.int64)
    for r, items in enumerate(requests):
        k = 0
        while k < len(items) and items[k] in cache:
            k += 1
        hits[r] = k
        for x in reversed(items):
            cache[x] = None
            cache.move_to_end(x)
        while len(cache) > capacity:
            cache.popitem(last=False)
    return hits


def zipf_popularity(n: int, alpha: float) -> np.ndarray:
    """Probabilities of n items, p_i proportional to i^-alpha (i = 1..n), alpha >= 0."""
    if n < 1 or not alpha >= 0.0 or not math.isfinite(alpha):
        raise InputError(f"zipf: n {n} >= 1 and alpha {alpha} >= 0 required")
    w = np.arange(1, n + 1, dtype=float) ** -float(alpha)
    return w / w.sum()


def che_characteristic_time(
    popularity: np.ndarray, capacity: float, *, one_timers: float = 0.0
) -> float:
    """T (requests) with sum_i (1 - exp(-p_i T)) + one_timers T = capacity; needs capacity <
    N when one_timers = 0 (otherwise every item fits and T is infinite)."""
    p = np.asarray(popularity, dtype=float)
    if p.ndim != 1 or p.size < 1 or np.any(p < 0) or not abs(p.sum() - 1.0) < 1e-9:
        raise InputError("popularity: a 1-D array of probabilities summing to 1 required")
    if not capacity > 0 or one_timers < 0:
        raise InputError(f"capacity {capacity} > 0 and one_timers {one_timers} >= 0 required")
    if one_timers == 0.0 and capacity >= np.count_nonzero(p):
        return math.inf

    def filled(t: float) -> float:
        return float(np.sum(-np.expm1(-p * t))) + one_timers * t

    lo, hi = 0.0, 1.0
    while filled(hi) < capacity:
        hi *= 2.0
    for _ in range(200):  # bisection to float precision: filled() is increasing in t
        mid = 0.5 * (lo + hi)
        if filled(mid) < capacity:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return 0.5 * (lo + hi)


def che_hit_ratio(popularity: np.ndarray, capacity: float, *, one_timers: float = 0.0) -> float:
    """Che's approximate hit ratio of an LRU cache of `capacity` items (the module's rule): the
    probability that a request's item is in the cache."""
    p = np.asarray(popularity, dtype=float)
    t = che_characteristic_time(p, capacity, one_timers=one_timers)
    if math.isinf(t):
        return 1.0
    return float(np.sum(p * -np.expm1(-p * t)))
