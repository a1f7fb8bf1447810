"""Preemptive-resume queue orders on one server serving one request at a time (batching
``none``), compiled: ``psjf``, ``srpt``, ``pspjf``, ``sprpt``
(:data:`llmqueue.policy.QUEUE_ORDERS`).

A request of n output tokens needs S = T_1(n) = t1(1) + t2(1) n seconds of service, its time
alone on the server under the static time law (:func:`llmqueue.sim.static.run_time_law`). Every
request has a key, and the server runs the one with the smallest key, ties by arrival
(:mod:`llmqueue.sim.heap`):

- ``psjf``: S (preemptive shortest job first); ``pspjf``: the predicted service time T_1(p) of
  its prediction p;
- ``srpt``: S less the service it has received (shortest remaining processing time);
  ``sprpt``: T_1(p) less the service received (negative once the prediction is passed;
  Mitzenmacher's shortest predicted remaining processing time).

An arrival whose key is strictly smaller than the key of the request in service at that moment
preempts it, unless the policy's ``preempt_limit`` c is set and the request in service has
received c times its size or more (its predicted size under ``pspjf`` and ``sprpt``: TRAIL's
limited preemption, arXiv 2410.01035; c = 1 is no limit for ``srpt``). The preempted request
keeps its progress (preemptive resume, no cost to switch) and waits with its key of that moment
(a remaining-time key does not change while it waits). When a request completes, the waiting
one with the smallest key starts or resumes. A completion and an arrival at the same moment:
the completion first.

Recorded per measured request: ``response`` (arrival to completion) and ``wait``, its time in the
system while not served, response - S (the waiting time of the scheduling literature: for a
request never preempted, arrival to start); no first-token time. The per-request table keeps its
first start and its finish.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit

from llmqueue.policy import PSJF_ORDER, PSPJF_ORDER, SPRPT_ORDER, SRPT_ORDER, queue_order
from llmqueue.sim import fields as F
from llmqueue.sim import heap as H
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.jit import kernel
from llmqueue.sim.recorder import record
from llmqueue.sim.static import run_time_law
from llmqueue.sim.timelaw import static_settings

__all__ = ["run_preemptive", "PreemptiveFormer", "PREEMPTIVE_CODES"]

PSJF, SRPT, PSPJF, SPRPT = (o.code for o in (PSJF_ORDER, SRPT_ORDER, PSPJF_ORDER, SPRPT_ORDER))
PREEMPTIVE_CODES = (PSJF, SRPT, PSPJF, SPRPT)
KEY = F.F_TARGET  # the pool field that holds a request's key while it waits
GOT = F.F_DONE  # the service it has received (s)


@njit(cache=True, nogil=True, inline="always")
def _key(order, pool, sl, run0, run1):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request sl's key now (module docstring; s)."""
    if order == PSJF:
        return run0 + run1 * pool[sl, F.F_OUT]
    if order == SRPT:
        return run0 + run1 * pool[sl, F.F_OUT] - pool[sl, GOT]
    if order == PSPJF:
        return run0 + run1 * pool[sl, F.F_PRED]
    if order == SPRPT:
        return run0 + run1 * pool[sl, F.F_PRED] - pool[sl, GOT]
    raise ValueError("run_preemptive: not a preemptive order code")


@njit(cache=True, nogil=True, inline="always")
def _basis(order, pool, sl, run0, run1):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The size the preemption limit is a fraction of: S, or its predicted T_1(p) (s)."""
    if order == PSPJF or order == SPRPT:
        return run0 + run1 * pool[sl, F.F_PRED]
    return run0 + run1 * pool[sl, F.F_OUT]


@njit(cache=True, nogil=True, inline="always")
def _start(cur, pool, sl, t):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request sl starts or resumes at t."""
    cur[0] = sl
    cur[1] = t
    if pool[sl, F.F_START] < 0.0:
        pool[sl, F.F_START] = t


@njit(cache=True, nogil=True, inline="always")
def _complete(sl, t, size, pool, free, qi, state, recorder, limits):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request sl (service time `size`) completes at t: its records, the window's counts, its
    slot freed."""
    sti, stf, _qsamp = state
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, _id_cap = limits
    rid = np.int64(pool[sl, F.F_ID])
    g = S.batch_of(rid, warmup, n_req, nbat)
    if g >= 0:
        resp = t - pool[sl, F.F_ARR]
        idle = resp - size
        record(sums, counts, hist, maxima, fbuf, ibuf, S.M_WAIT, g, idle if idle > 0.0 else 0.0)
        record(sums, counts, hist, maxima, fbuf, ibuf, S.M_RESP, g, resp)
        sti[S.I_DONE] += 1
    if S.in_window(sti, stf, t):
        sti[S.I_COMPLETED] += 1
        stf[S.S_TOK] += pool[sl, F.F_OUT]
        stf[S.S_SUMB] += 1.0
        stf[S.S_SUMD] += size
        stf[S.S_NB] += 1.0
    if rid < rec.shape[0]:
        rec[rid, 0] = pool[sl, F.F_START]
        rec[rid, 1] = np.nan
        rec[rid, 2] = t
        rec[rid, 3] = 0.0
    Q.release(pool, free, qi, sl)


@kernel
def run_preemptive(  # type: ignore[no-untyped-def]  # noqa: ANN001
    chunk, final, state, queue, cur, rule, recorder, limits,
):  # fmt: skip
    """One server under a preemptive-resume order over one chunk of arrivals (module docstring);
    returns a code (S.NEED_MORE, S.DONE, S.GROW, S.CAP). ``cur``: (slot in service, -1 when idle;
    when its current stretch of service began, s); ``rule``: (order code, run0, run1, limit), a
    request's service time T_1(n) = run0 + run1 n (s) and the preemption limit (a fraction of
    its size; inf: none)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, _ring, heap, free, qi = queue
    order, run0, run1, limit = rule
    warmup, n_req, nbat, id_cap = limits
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        pos, a, more = S.next_arrival(sti, arr, final, 0)
        if more:
            return S.NEED_MORE
        sl = np.int64(cur[0])
        size = 0.0
        tc = np.inf
        if sl >= 0:
            size = run0 + run1 * pool[sl, F.F_OUT]
            tc = cur[1] + (size - pool[sl, GOT])
        if tc <= a:
            if tc == np.inf:
                return S.DONE  # nothing in service and no arrival left
            _complete(sl, tc, size, pool, free, qi, state, recorder, limits)
            cur[0] = -1.0
            if qi[Q.Q_HN] > 0:
                nx = heap[0]
                qi[Q.Q_HN] = H.remove(pool, heap, qi[Q.Q_HN], nx, KEY)
                qi[Q.Q_LEN] -= 1
                _start(cur, pool, nx, tc)
            continue
        code = S.room(qi[Q.Q_NFREE], qi[Q.Q_LEN], sti, id_cap)
        if code != S.GO:
            return code
        rid = S.advance(sti, stf, pos, a)
        new = Q.alloc(pool, free, qi, a, prompt[pos], out[pos], pred[pos], rid)
        pool[new, KEY] = _key(order, pool, new, run0, run1)
        if sl < 0:
            _start(cur, pool, new, a)
        else:
            pool[sl, GOT] += a - cur[1]  # the service it has had up to now
            cur[1] = a
            pool[sl, KEY] = _key(order, pool, sl, run0, run1)
            wait = new
            protected = pool[sl, GOT] >= limit * _basis(order, pool, sl, run0, run1)
            if pool[new, KEY] < pool[sl, KEY] and not protected:
                wait = sl
                _start(cur, pool, new, a)
            qi[Q.Q_HN] = H.push(pool, heap, qi[Q.Q_HN], wait, KEY)
            qi[Q.Q_LEN] += 1
        S.on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)


class PreemptiveFormer(S.Former):
    """The driver of :func:`run_preemptive`: batching ``none`` on one server under a preemptive
    order (:class:`llmqueue.policy.Policy` refuses any other setting)."""

    def __init__(self, setup: S.Setup, run: S.Run) -> None:
        policy = setup.policy
        order = queue_order(policy.order)
        if not order.preemptive or order.code not in PREEMPTIVE_CODES:
            raise ValueError(f"order {policy.order!r} is not a preemptive order of this engine")
        law = static_settings(policy, setup.latency, setup.batch_time_table)
        run0, run1 = run_time_law(law)
        limit = policy.preempt_limit if policy.preempt_limit is not None else math.inf
        self.rule = (np.int64(order.code), float(run0), float(run1), float(limit))
        self.cur = np.array([-1.0, 0.0])

    def step(self, run: S.Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        """One call of the kernel over the arrivals in hand; grows the queue when asked."""
        code = run_preemptive(
            tuple(chunk), final, run.state, run.queue, self.cur, self.rule, run.recorder,
            run.limits,
        )  # fmt: skip
        if code == S.GROW:
            run.grow_queue()
        return int(code)
