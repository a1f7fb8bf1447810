"""Re-batching at the shortest member's end (the "continuous" batching of SSJF's simulator,
Qiu et al., arXiv 2404.08509, its public code), compiled: the former ``rebatch``.

A server takes at most ``bmax`` waiting requests in queue order (:mod:`llmqueue.sim.queue`) and
runs them until the *shortest* of them has finished: the batch lasts d = the smallest remaining
run time of its members. Then the members whose remaining run time was d leave, every other
member goes back to the queue with d less to run, and the server forms its next batch at once
from what waits. Each request's run time is its time alone on the server, T_1(n) = t1(1) +
t2(1) n of the batch law (:func:`llmqueue.sim.static.run_time_law`; SSJF's 0.1 s + 0.02 s per
output token, the 0.1 s paid once per request), whatever the batch's size: members progress in
parallel at full speed, as in SSJF's simulator; new requests join only at a batch's end.

A member put back re-enters the queue as if it arrived at that moment: after the arrivals up to
then, in the batch's order, so among waiting requests of the same key it goes last (SSJF
re-sorts a list with the returned members appended) and the starvation guard counts its wait
from its return; under ``fcfs`` it goes back before every waiting request (SSJF's FCFS puts it
back at the head). The queue's sort key of ``sjf`` is the *remaining* run time (so SJF preempts
at batch ends, as SSJF's re-sort of the updated execution times does); ``spjf`` keeps the
prediction made at arrival. ``batch_timeout_s`` (one server): a batch not full when it could
start waits up to that long for arrivals, as in :mod:`llmqueue.sim.static`.

Pool fields (:mod:`llmqueue.sim.fields`) as the queue helpers read them: ``F_ARR`` the time the
request (re-)entered the queue, ``F_ID`` its entry number (unique, increasing: the queue's
tie-break), ``F_OUT`` its remaining run time (s: the ``sjf`` key and the guard's run time);
the request itself (arrival, id, output tokens, first start) is kept in this former's own rows
``xs[slot, X_*]``. A request is recorded when it finishes: its wait is its first batch start
minus its arrival; no first-token time (the run-time law has no prefill).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.sim import fields as F
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.jit import kernel
from llmqueue.sim.recorder import record
from llmqueue.sim.static import run_time_law
from llmqueue.sim.timelaw import TABLE, static_settings

__all__ = ["run_rebatch", "RebatchFormer", "X_ARR", "X_ID", "X_TOK", "X_START", "NX"]

# the former's own per-slot rows: the request as it arrived
X_ARR = 0  # arrival time (s)
X_ID = 1  # request id (arrival index)
X_TOK = 2  # output tokens (true)
X_START = 3  # start of its first batch (s; NaN before)
NX = 4


@njit(cache=True, nogil=True, inline="always")
def _arrive(  # type: ignore[no-untyped-def]  # noqa: ANN001
    pos, chunk, state, queue, xs, seq, order_rule, limits,
):  # fmt: skip
    """Put arrival `pos` in the queue; returns S.GO, or the code to return (GROW, CAP)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, ring, heap, free, qi = queue
    order, guard, _guard_s, _guard_x, run0, run1 = order_rule
    warmup, n_req, nbat, id_cap = limits
    code = S.room(qi[Q.Q_NFREE], qi[Q.Q_LEN], sti, id_cap)
    if code != S.GO:
        return code
    a = arr[pos]
    rid = S.advance(sti, stf, pos, a)
    sl = Q.alloc(pool, free, qi, a, prompt[pos], out[pos], pred[pos], seq[0])
    seq[0] += 1
    pool[sl, F.F_OUT] = run0 + run1 * out[pos]  # its run time: the sjf key
    xs[sl, X_ARR] = a
    xs[sl, X_ID] = rid
    xs[sl, X_TOK] = out[pos]
    xs[sl, X_START] = np.nan
    Q.push(pool, ring, heap, qi, sl, order, guard)
    S.on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)
    return S.GO


@njit(cache=True, nogil=True, inline="always")
def _end_batch(  # type: ignore[no-untyped-def]  # noqa: ANN001
    s, t, queue, xs, seq, bn, bslots, bd, order, guard, state, recorder, limits,
):  # fmt: skip
    """Server s's batch ends at t: its members with d left to run finish (recorded, slots
    freed), the others go back to the queue with d less to run."""
    pool, ring, heap, free, qi = queue
    sti, stf, _qsamp = state
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, _id_cap = limits
    d = bd[s]
    for i in range(bn[s]):
        sl = bslots[s, i]
        left = pool[sl, F.F_OUT]
        if left <= d:
            rid = np.int64(xs[sl, X_ID])
            a = xs[sl, X_ARR]
            g = S.batch_of(rid, warmup, n_req, nbat)
            if g >= 0:
                record(sums, counts, hist, maxima, fbuf, ibuf, S.M_WAIT, g, xs[sl, X_START] - a)
                record(sums, counts, hist, maxima, fbuf, ibuf, S.M_RESP, g, t - a)
                sti[S.I_DONE] += 1
            if S.in_window(sti, stf, t):
                sti[S.I_COMPLETED] += 1
                stf[S.S_TOK] += xs[sl, X_TOK]
            if rid < rec.shape[0]:
                rec[rid, 0] = xs[sl, X_START]
                rec[rid, 2] = t
                rec[rid, 3] = s
            Q.release(pool, free, qi, sl)
        else:
            pool[sl, F.F_OUT] = left - d
            pool[sl, F.F_ARR] = t
            pool[sl, F.F_ID] = seq[0]
            seq[0] += 1
            if order == Q.FCFS:
                Q.push_front(pool, ring, heap, qi, sl, order, guard)
            else:
                Q.push(pool, ring, heap, qi, sl, order, guard)
    bn[s] = 0


@kernel
def run_rebatch(  # type: ignore[no-untyped-def]  # noqa: ANN001, C901
    chunk, final, state, queue, batches, former_rule, order_rule, recorder, limits,
):  # fmt: skip
    """Re-batching over one chunk of arrivals (module docstring); returns a code (S.NEED_MORE,
    S.DONE, S.GROW, S.BUF, S.CAP). ``free_at[s]``: the end of server s's batch (``bn[s]``
    members in ``bslots[s]``, lasting ``bd[s]``), or while it is idle the next moment it looks
    at the queue (inf: nothing left). All state lives in the arrays, so a call resumes where the
    last one stopped."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, ring, heap, free, qi = queue
    xs, seq, free_at, bn, bslots, bd = batches
    cap_b, timeout, timeout_s = former_rule
    order, guard, guard_s, guard_x, run0, run1 = order_rule
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, id_cap = limits
    c = free_at.size
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        s = S.first_free(free_at)
        t = free_at[s]
        if t == np.inf:
            return S.DONE  # every server idle and no arrival left
        # the arrivals up to t come before the members a batch ending at t puts back
        while True:
            pos, a, more = S.next_arrival(sti, arr, final, 0)
            if more:
                return S.NEED_MORE
            if a > t:  # also no arrival left (a = inf, t finite)
                break
            code = _arrive(pos, chunk, state, queue, xs, seq, order_rule, limits)
            if code != S.GO:
                return code
        if bn[s] > 0:
            _end_batch(s, t, queue, xs, seq, bn, bslots, bd, order, guard, state, recorder, limits)
            if qi[Q.Q_LEN] > 0:
                for j in range(c):  # idle servers take what was put back at once
                    if bn[j] == 0 and free_at[j] > t:
                        free_at[j] = t
            if sti[S.I_DONE] >= n_req:
                return S.DONE
        if qi[Q.Q_LEN] == 0:
            # idle until the next arrival
            pos, a, more = S.next_arrival(sti, arr, final, 0)
            if more:
                return S.NEED_MORE
            free_at[s] = a
            continue
        start = t
        if timeout and qi[Q.Q_LEN] < cap_b:
            t_end = t + timeout_s
            while qi[Q.Q_LEN] < cap_b:
                pos, a, more = S.next_arrival(sti, arr, final, 0)
                if more:
                    return S.NEED_MORE
                if a == np.inf or a > t_end:
                    break
                code = _arrive(pos, chunk, state, queue, xs, seq, order_rule, limits)
                if code != S.GO:
                    return code
            if qi[Q.Q_LEN] >= cap_b:
                if stf[S.S_TLAST] > start:
                    start = stf[S.S_TLAST]  # full when its last member arrived
            else:
                start = t_end
        b = qi[Q.Q_LEN] if qi[Q.Q_LEN] < cap_b else cap_b
        if b > bslots.shape[1]:
            return S.BUF
        d = np.inf
        for i in range(b):
            # pool[:, F_OUT] holds each request's remaining run time: r0 = 0, r1 = 1
            sl = Q.select_aged(
                pool, ring, heap, qi, (order, guard, guard_s, guard_x, 0.0, 1.0), start
            )
            Q.remove(pool, ring, heap, qi, sl, order)
            bslots[s, i] = sl
            if xs[sl, X_START] != xs[sl, X_START]:
                xs[sl, X_START] = start
            if pool[sl, F.F_OUT] < d:
                d = pool[sl, F.F_OUT]
        if S.in_window(sti, stf, start):
            stf[S.S_SUMB] += b
            stf[S.S_SUMD] += d
            stf[S.S_NB] += 1.0
        bn[s] = b
        bd[s] = d
        free_at[s] = start + d


class RebatchFormer(S.Former):
    """The driver of :func:`run_rebatch` (module docstring): the servers' batches, the former's
    per-slot rows (grown with the queue's pool) and the batch buffer."""

    def __init__(self, setup: S.Setup, run: S.Run) -> None:
        policy = setup.policy
        law = static_settings(policy, setup.latency, setup.batch_time_table)
        if law.kind == TABLE:
            raise InputError(
                "rebatch runs each request for its own run time T_1(n): a fixed batch-time "
                "table has none"
            )
        self.order_rule = Q.order_rule(policy, *run_time_law(law))
        self.timeout = policy.batch_timeout_s is not None
        self.timeout_s = policy.batch_timeout_s if policy.batch_timeout_s is not None else 0.0
        self.cap_b = int(min(policy.cap, 1 << 30))
        c = int(policy.servers)
        self.free_at = np.zeros(c)
        self.bn = np.zeros(c, dtype=np.int64)
        self.bd = np.zeros(c)
        self.bslots = np.zeros((c, int(min(self.cap_b, 64))), dtype=np.int64)
        self.xs = np.zeros((run.queue_cap, NX))
        self.seq = np.zeros(1, dtype=np.int64)

    def step(self, run: S.Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        """One call of the kernel over the arrivals in hand; grows what it asked for."""
        code = run_rebatch(
            tuple(chunk), final, run.state, run.queue,
            (self.xs, self.seq, self.free_at, self.bn, self.bslots, self.bd),
            (self.cap_b, self.timeout, self.timeout_s), self.order_rule, run.recorder, run.limits,
        )  # fmt: skip
        if code == S.GROW:
            run.grow_queue()
            xs = np.zeros((run.queue_cap, NX))
            xs[: self.xs.shape[0]] = self.xs
            self.xs = xs
        elif code == S.BUF:
            width = 2 * self.bslots.shape[1]
            while width < min(int(run.qi[Q.Q_LEN]), self.cap_b):
                width *= 2
            wider = np.zeros((self.bslots.shape[0], width), dtype=np.int64)
            wider[:, : self.bslots.shape[1]] = self.bslots
            self.bslots = wider
        return int(code)
