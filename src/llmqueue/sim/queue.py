"""The queue order of the serving engine: which waiting request goes next (compiled part).

Requests live in a *slot pool* while they wait or run (``pool[slot, field]``, fields ``F_*``;
slots are recycled through a free stack, so memory follows the number in the system, not the
run length). The waiting ones are ordered by the policy's order code:

- ``FCFS``: by arrival (a ring of slots);
- ``SJF``: by true output tokens, ties by arrival (a binary heap);
- ``SPJF``: by predicted output tokens, ties by arrival (the same heap, another key);
- the preemptive orders' keys (``PSJF``, ``PSPJF``: as SJF, SPJF; ``SRPT``, ``SPRPT``: true or
  predicted output tokens less those made, fixed as the request enters the queue): continuous
  batching evicts a running request for a waiting one with a smaller key
  (:mod:`llmqueue.sim.continuous`); the queue itself only orders.

The order only chooses among waiting requests. A request put back by a
preemption (:func:`push_front`) goes before every other waiting request whatever the order.
The optional **starvation guard** ``guard_s`` (SSJF's, arXiv 2404.08509): a request that has
waited longer than ``guard_s`` is served by age first (oldest overdue first); the heap orders are
then kept beside an arrival-order ring with lazy deletion (an entry is live while its slot still
holds the same request id and that request still waits). :func:`select_aged` adds the guard's
second trigger (SSJF's ``guard_factor``): the longest-waiting request is also overdue once it has
waited more than ``guard_x`` times its run time ``r0 + r1 * pool[slot, F_OUT]`` (s).

The order codes are the positions of the names in :data:`llmqueue.policy.ORDERS`; the compiled
branches below exist for :data:`COMPILED_ORDERS` only (the engine refuses any other code before a
run). A new order is a registry entry and its branch in :func:`_key` (its sort key) and, when it
is not a key order, in :func:`select` / :func:`remove`.

All functions are ``inline='always'`` Numba functions over arrays (no Python objects): the
pool (float64[cap, NF], fields :mod:`llmqueue.sim.fields`), ring (int64[cap, 2]: slot, id), heap
(int64[cap], :mod:`llmqueue.sim.heap`), free (int64[cap]) and the integer state ``qi``
(int64[QI_SIZE]). Growth is the caller's job (:func:`grow` when ``qi[Q_NFREE] == 0``), because it
replaces the arrays.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.policy import (
    FCFS_ORDER,
    PSJF_ORDER,
    PSPJF_ORDER,
    SJF_ORDER,
    SPJF_ORDER,
    SPRPT_ORDER,
    SRPT_ORDER,
    Policy,
    order_code,
)
from llmqueue.sim import heap as H
from llmqueue.sim.fields import (
    F_ARR,
    F_DECODING,
    F_DONE,
    F_FRONT,
    F_HELD,
    F_ID,
    F_OUT,
    F_PEFF,
    F_PRED,
    F_PREFILLED,
    F_PROMPT,
    F_SERVER,
    F_START,
    F_TARGET,
    F_TTFT,
    F_WAITING,
    NF,
)

__all__ = [
    "key_field",
    "FCFS",
    "SJF",
    "SPJF",
    "COMPILED_ORDERS",
    "check_order",
    "order_rule",
    "QI_SIZE",
    "Q_LEN",
    "Q_NFREE",
    "new_queue",
    "grow",
    "alloc",
    "release",
    "push",
    "push_front",
    "select",
    "select_aged",
    "remove",
    "ring_live",
    "take_at",
    "oldest_arrival",
]

FCFS, SJF, SPJF = FCFS_ORDER.code, SJF_ORDER.code, SPJF_ORDER.code
# the preemptive orders' keys, for continuous batching's evictions (llmqueue.sim.continuous)
PSJF, SRPT, PSPJF, SPRPT = (o.code for o in (PSJF_ORDER, SRPT_ORDER, PSPJF_ORDER, SPRPT_ORDER))
COMPILED_ORDERS = (FCFS, SJF, SPJF, PSJF, SRPT, PSPJF, SPRPT)


def order_rule(policy: Policy, run0: float, run1: float) -> tuple[Any, ...]:
    """(order, guard, guard_s, guard_x, run0, run1), the queue order as the static and
    re-batching loops take it: the order's code (:func:`check_order`), whether the starvation
    guard is on, its age trigger guard_s (s; inf: none) and run-time factor guard_x (inf: none),
    and a request's run time alone T_1(n) = run0 + run1 n (s, n output tokens) that guard_x
    multiplies."""
    guard_s = policy.guard_s if policy.guard_s is not None else math.inf
    guard_x = policy.guard_factor if policy.guard_factor is not None else math.inf
    guard = policy.guard_s is not None
    return check_order(policy.order), guard, guard_s, guard_x, run0, run1


def check_order(name: str) -> int:
    """The code of queue order `name`, refused (InputError) when the registry does not know it or
    this module has no compiled branch for it: an unknown order never falls back to another."""
    code = order_code(name)
    if code not in COMPILED_ORDERS:
        raise InputError(f"order {name!r} has no compiled branch in llmqueue.sim.queue")
    return code


# integer state
Q_HEAD = 0  # ring head
Q_RLEN = 1  # ring entries (live and stale)
Q_HN = 2  # heap size
Q_NFREE = 3  # free slots
Q_CAP = 4  # capacity
Q_LEN = 5  # waiting requests
QI_SIZE = 6


def new_queue(cap: int = 1024) -> tuple[np.ndarray, ...]:
    """(pool, ring, heap, free, qi) with `cap` slots, all free."""
    pool = np.zeros((cap, NF))
    ring = np.zeros((cap, 2), dtype=np.int64)
    heap = np.zeros(cap, dtype=np.int64)
    free = np.arange(cap - 1, -1, -1, dtype=np.int64)
    qi = np.zeros(QI_SIZE, dtype=np.int64)
    qi[Q_NFREE] = cap
    qi[Q_CAP] = cap
    return pool, ring, heap, free, qi


@njit(cache=True, nogil=True)
def grow(pool, ring, heap, free, qi):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Double the capacity (call when no slot is free); returns the new arrays."""
    cap = qi[Q_CAP]
    ncap = 2 * cap
    npool = np.zeros((ncap, pool.shape[1]))
    npool[:cap] = pool
    nring = np.zeros((ncap, 2), dtype=np.int64)
    head = qi[Q_HEAD]
    for i in range(qi[Q_RLEN]):
        j = (head + i) % cap
        nring[i, 0] = ring[j, 0]
        nring[i, 1] = ring[j, 1]
    nheap = np.zeros(ncap, dtype=np.int64)
    nheap[:cap] = heap
    nfree = np.zeros(ncap, dtype=np.int64)
    nf = 0
    for s in range(ncap - 1, cap - 1, -1):
        nfree[nf] = s
        nf += 1
    qi[Q_HEAD] = 0
    qi[Q_NFREE] = nf
    qi[Q_CAP] = ncap
    return npool, nring, nheap, nfree


@njit(cache=True, nogil=True, inline="always")
def alloc(pool, free, qi, arrival, prompt, output, pred, rid):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take a free slot for a new request (the caller grew the pool if none was free)."""
    qi[Q_NFREE] -= 1
    s = free[qi[Q_NFREE]]
    pool[s, F_ARR] = arrival
    pool[s, F_PROMPT] = prompt
    pool[s, F_OUT] = output
    pool[s, F_PRED] = pred
    pool[s, F_ID] = rid
    pool[s, F_WAITING] = 0.0
    pool[s, F_FRONT] = 0.0
    pool[s, F_DONE] = 0.0
    pool[s, F_TTFT] = -1.0
    pool[s, F_START] = -1.0
    pool[s, F_PREFILLED] = 0.0
    pool[s, F_SERVER] = -1.0
    pool[s, F_PEFF] = prompt
    pool[s, F_HELD] = 0.0
    pool[s, F_DECODING] = 0.0
    return s


@njit(cache=True, nogil=True, inline="always")
def release(pool, free, qi, s):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Return slot s to the free stack (its request has left the system)."""
    pool[s, F_ID] = -1.0
    free[qi[Q_NFREE]] = s
    qi[Q_NFREE] += 1


@njit(cache=True, nogil=True, inline="always")
def _ring_compact(pool, ring, qi):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Drop every stale entry of a full ring (live ones keep their order). Stale entries behind a
    live head pile up when the heap orders serve requests past an old one (the guard's ring), or
    when a request re-enters the queue; the live ones are at most the waiting requests, fewer than
    the pool's slots, so a full ring always has room after this."""
    cap = qi[Q_CAP]
    head = qi[Q_HEAD]
    k = 0
    for i in range(qi[Q_RLEN]):
        j = (head + i) % cap
        s = ring[j, 0]
        if pool[s, F_WAITING] == 1.0 and np.int64(pool[s, F_ID]) == ring[j, 1]:
            jj = (head + k) % cap
            ring[jj, 0] = s
            ring[jj, 1] = ring[j, 1]
            k += 1
    qi[Q_RLEN] = k


@njit(cache=True, nogil=True, inline="always")
def _ring_push_back(pool, ring, qi, s):  # type: ignore[no-untyped-def]  # noqa: ANN001
    cap = qi[Q_CAP]
    if qi[Q_RLEN] >= cap:
        _ring_compact(pool, ring, qi)
    j = (qi[Q_HEAD] + qi[Q_RLEN]) % cap
    ring[j, 0] = s
    ring[j, 1] = np.int64(pool[s, F_ID])
    qi[Q_RLEN] += 1


@njit(cache=True, nogil=True, inline="always")
def _ring_push_front(pool, ring, qi, s):  # type: ignore[no-untyped-def]  # noqa: ANN001
    cap = qi[Q_CAP]
    if qi[Q_RLEN] >= cap:
        _ring_compact(pool, ring, qi)
    j = (qi[Q_HEAD] - 1 + cap) % cap
    ring[j, 0] = s
    ring[j, 1] = np.int64(pool[s, F_ID])
    qi[Q_HEAD] = j
    qi[Q_RLEN] += 1


@njit(cache=True, nogil=True, inline="always")
def _ring_clean(pool, ring, qi):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Drop stale entries at the ring head; returns the live head slot or -1."""
    cap = qi[Q_CAP]
    while qi[Q_RLEN] > 0:
        h = qi[Q_HEAD]
        s = ring[h, 0]
        if pool[s, F_WAITING] == 1.0 and np.int64(pool[s, F_ID]) == ring[h, 1]:
            return s
        qi[Q_HEAD] = (h + 1) % cap
        qi[Q_RLEN] -= 1
    return -1


@njit(cache=True, nogil=True, inline="always")
def key_field(order):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The pool field a heap order sorts by (SJF, PSJF: true output tokens; SPJF, PSPJF:
    predicted; SRPT, SPRPT: ``F_TARGET``, set as the request enters the queue to its true or
    predicted output tokens less those it has made)."""
    if order == SJF or order == PSJF:
        return F_OUT
    if order == SRPT or order == SPRPT:
        return F_TARGET
    return F_PRED


@njit(cache=True, nogil=True, inline="always")
def _enqueue(pool, ring, heap, qi, s, order, guard, front):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Mark request s waiting and put it in the order's structure: the (S)PJF heap, and the
    arrival ring (FCFS order, or the guard's age order) at its back, or its front when `front`."""
    pool[s, F_WAITING] = 1.0
    qi[Q_LEN] += 1
    if order == SRPT:
        pool[s, F_TARGET] = pool[s, F_OUT] - pool[s, F_DONE]
    elif order == SPRPT:
        pool[s, F_TARGET] = pool[s, F_PRED] - pool[s, F_DONE]
    if order != FCFS:
        qi[Q_HN] = H.push(pool, heap, qi[Q_HN], s, key_field(order))
    if order == FCFS or guard:
        if front:
            _ring_push_front(pool, ring, qi, s)
        else:
            _ring_push_back(pool, ring, qi, s)


@njit(cache=True, nogil=True, inline="always")
def push(pool, ring, heap, qi, s, order, guard):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Put request s in the queue (at the back in FCFS order)."""
    _enqueue(pool, ring, heap, qi, s, order, guard, False)


@njit(cache=True, nogil=True, inline="always")
def push_front(pool, ring, heap, qi, s, order, guard):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Put a preempted request back before every waiting request."""
    pool[s, F_FRONT] = 1.0
    _enqueue(pool, ring, heap, qi, s, order, guard, True)


@njit(cache=True, nogil=True, inline="always")
def select(pool, ring, heap, qi, order, guard, guard_s, now):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The slot that goes next at time `now` (not removed), or -1 if none waits."""
    if qi[Q_LEN] == 0:
        return -1
    if order == FCFS:
        return _ring_clean(pool, ring, qi)
    if guard:
        s = _ring_clean(pool, ring, qi)
        if s >= 0 and pool[s, F_FRONT] == 0.0 and now - pool[s, F_ARR] > guard_s:
            top = heap[0]
            if pool[top, F_FRONT] == 0.0:
                return s
    return heap[0]


@njit(cache=True, nogil=True, inline="always")
def select_aged(pool, ring, heap, qi, order_rule, now):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """:func:`select` with the guard's run-time trigger; `order_rule` = (order, guard, guard_s,
    guard_x, r0, r1) (:func:`order_rule`): the longest-waiting request is overdue when it has
    waited more than `guard_s` or more than `guard_x` times its run time
    ``r0 + r1 * pool[slot, F_OUT]`` (s; `guard_x` = inf: never by run time, as :func:`select`)."""
    order, guard, guard_s, guard_x, r0, r1 = order_rule
    if qi[Q_LEN] == 0:
        return -1
    if order == FCFS:
        return _ring_clean(pool, ring, qi)
    if guard:
        s = _ring_clean(pool, ring, qi)
        if s >= 0 and pool[s, F_FRONT] == 0.0:
            w = now - pool[s, F_ARR]
            if w > guard_s or (guard_x < np.inf and w > guard_x * (r0 + r1 * pool[s, F_OUT])):
                top = heap[0]
                if pool[top, F_FRONT] == 0.0:
                    return s
    return heap[0]


@njit(cache=True, nogil=True, inline="always")
def remove(pool, ring, heap, qi, s, order):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take slot s (just returned by :func:`select`) out of the queue."""
    pool[s, F_WAITING] = 0.0
    pool[s, F_FRONT] = 0.0
    qi[Q_LEN] -= 1
    if order == FCFS:
        qi[Q_HEAD] = (qi[Q_HEAD] + 1) % qi[Q_CAP]
        qi[Q_RLEN] -= 1
        return
    qi[Q_HN] = H.remove(pool, heap, qi[Q_HN], s, key_field(order))


@njit(cache=True, nogil=True, inline="always")
def ring_live(pool, ring, qi, i):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The slot of the ring's `i`-th entry from its head (0 <= i < ``qi[Q_RLEN]``) if that entry
    is live (its request still waits), else -1: a scan of the waiting requests in FCFS order that
    may pass some of them (:func:`take_at`)."""
    j = (qi[Q_HEAD] + i) % qi[Q_CAP]
    s = ring[j, 0]
    if pool[s, F_WAITING] == 1.0 and np.int64(pool[s, F_ID]) == ring[j, 1]:
        return s
    return -1


@njit(cache=True, nogil=True, inline="always")
def take_at(pool, ring, qi, i):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take the live request of the ring's `i`-th entry out of an FCFS queue, wherever it stands:
    the entry is made stale for good (no request has id -2) and dropped when it reaches the head,
    so the others keep their order and a request put back later gets an entry of its own."""
    j = (qi[Q_HEAD] + i) % qi[Q_CAP]
    s = ring[j, 0]
    pool[s, F_WAITING] = 0.0
    pool[s, F_FRONT] = 0.0
    ring[j, 1] = -2
    qi[Q_LEN] -= 1
    return s


@njit(cache=True, nogil=True, inline="always")
def oldest_arrival(pool, ring, qi):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Arrival time of the longest-waiting request (the ring's live head), inf if none; needs
    the ring (FCFS order, or a heap order with the guard)."""
    s = _ring_clean(pool, ring, qi)
    return pool[s, F_ARR] if s >= 0 else np.inf
