"""Static batch formers (paper Sec. IV), compiled: ``none``, ``dynamic``, ``fixed``, ``elastic``.

When a server frees (the earliest-free one first; ties by index) it takes waiting requests in
queue order (:mod:`llmqueue.sim.queue`): ``none`` one, ``dynamic`` / ``elastic`` all of them up to
``cap_b`` (b_max), ``fixed`` waits until ``threshold`` = K wait and takes K; if too few wait it starts
when enough have arrived. The batch lasts the time law's T_b (:mod:`llmqueue.sim.timelaw`); every
member is recorded at formation (its reply time is known then) and its slot freed.

Two options of SSJF's simulator (arXiv 2404.08509; :mod:`llmqueue.policy`), off by default:
``batch_timeout_s`` (``dynamic``, ``elastic``; one server): a batch not full at the moment it
could start, t0 = max(server free, first waiting arrival), takes the arrivals up to t0 + timeout
(inclusive) until it is full, and starts when its last member arrives if it filled, else at
t0 + timeout; ``guard_factor``: the starvation guard also fires when the longest-waiting request
has waited more than that many times its run time alone, T_1(n) = t1(1) + t2(1) n
(:func:`llmqueue.sim.queue.select_aged`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numba import njit

from llmqueue.policy import former_code
from llmqueue.sim import fields as F
from llmqueue.sim import queue as Q
from llmqueue.sim import router as R
from llmqueue.sim import state as S
from llmqueue.sim.jit import kernel
from llmqueue.sim.recorder import record
from llmqueue.sim.timelaw import TABLE, StaticLaw, batch_time, static_settings

__all__ = [
    "run_static",
    "run_static_routed",
    "start_batch",
    "BatchServers",
    "StaticFormer",
    "run_time_law",
    "NONE",
    "DYNAMIC",
    "FIXED",
    "ELASTIC",
]

NONE, DYNAMIC, FIXED, ELASTIC = (former_code(k) for k in ("none", "dynamic", "fixed", "elastic"))


@njit(cache=True, nogil=True, inline="always")
def start_batch(  # type: ignore[no-untyped-def]  # noqa: ANN001
    s, start, b, d, t1, slots, lengths, comp, pool, free, qi, state, pending, recorder, limits,
):  # fmt: skip
    """Server `s` starts at `start` a batch of the `b` requests in ``slots[:b]`` that lasts `d`
    (first token at ``start + t1``, NaN when the law has none; member i replies at
    ``start + comp[i]``). Counts the server's previous batch's completions in the measured window
    (they have happened by now), adds the batch to the window's size and duration sums, records
    every measured member's wait, response and TTFT (each member's reply time is known now), and
    frees the members' slots. Shared by the static formers and Multi-Bin Batching."""
    sti, stf, _qsamp = state
    free_at, pend_t, pend_tok, pend_n = pending
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, _id_cap = limits
    for j in range(pend_n[s]):
        if S.in_window(sti, stf, pend_t[s, j]):
            sti[S.I_COMPLETED] += 1
            stf[S.S_TOK] += pend_tok[s, j]
    if S.in_window(sti, stf, start):
        stf[S.S_SUMB] += b
        stf[S.S_SUMD] += d
        stf[S.S_NB] += 1.0
    for i in range(b):
        sl = slots[i]
        a = pool[sl, F.F_ARR]
        rid = np.int64(pool[sl, F.F_ID])
        g = S.batch_of(rid, warmup, n_req, nbat)
        if g >= 0:
            w = start - a
            record(sums, counts, hist, maxima, fbuf, ibuf, S.M_WAIT, g, w)
            record(sums, counts, hist, maxima, fbuf, ibuf, S.M_RESP, g, w + comp[i])
            if t1 == t1:
                record(sums, counts, hist, maxima, fbuf, ibuf, S.M_TTFT, g, w + t1)
            sti[S.I_DONE] += 1
        if rid < rec.shape[0]:
            rec[rid, 0] = start
            rec[rid, 1] = start + t1
            rec[rid, 2] = start + comp[i]
            rec[rid, 3] = s
        pend_t[s, i] = start + comp[i]
        pend_tok[s, i] = lengths[i]
        Q.release(pool, free, qi, sl)
    pend_n[s] = b
    free_at[s] = start + d


@kernel
def run_static(  # type: ignore[no-untyped-def]  # noqa: ANN001, C901
    chunk, final, state, queue, pending, former_rule, order_rule, law, batch, recorder, limits,
):  # fmt: skip
    """Static batch formers over one chunk of arrivals; returns a code (S.NEED_MORE, S.DONE, S.GROW,
    S.BUF, S.CAP). All state lives in the arrays, so a call resumes where the last one stopped
    (``tw[0]``: the moment a batch started waiting to fill, NaN when none waits)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, ring, heap, free, qi = queue
    free_at, pend_t, pend_tok, pend_n = pending
    former, cap_b, threshold, timeout, timeout_s, tw = former_rule
    order, guard, guard_s, guard_x, run0, run1 = order_rule
    law_kind, kcoef, table = law
    slots, lengths, comp, idx = batch
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, id_cap = limits
    elastic = former == ELASTIC
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        s = S.first_free(free_at)
        t_free = free_at[s]
        # bring in the arrivals up to the moment the server frees (and beyond, while too few wait)
        while True:
            pos, a, more = S.next_arrival(sti, arr, final, 0)
            if more:
                return S.NEED_MORE
            if a <= t_free or (qi[Q.Q_LEN] < threshold and a < np.inf):
                code = S.take_arrival(state, queue, chunk, pos, a, order, guard, limits)
                if code != S.GO:
                    return code
                continue
            break
        if qi[Q.Q_LEN] < threshold:
            return S.DONE  # no arrivals left and too few wait to form a batch
        start = t_free if stf[S.S_TLAST] <= t_free else stf[S.S_TLAST]
        if timeout:
            if tw[0] == tw[0]:
                start = tw[0]  # resume the batch that waits to fill
            if qi[Q.Q_LEN] < cap_b:
                tw[0] = start
                t_end = start + timeout_s
                while qi[Q.Q_LEN] < cap_b:
                    pos, a, more = S.next_arrival(sti, arr, final, 0)
                    if more:
                        return S.NEED_MORE
                    if a == np.inf or a > t_end:
                        break
                    code = S.take_arrival(state, queue, chunk, pos, a, order, guard, limits)
                    if code != S.GO:
                        return code
                if qi[Q.Q_LEN] >= cap_b:
                    if stf[S.S_TLAST] > start:
                        start = stf[S.S_TLAST]  # full when its last member arrived
                else:
                    start = t_end
        b = qi[Q.Q_LEN] if qi[Q.Q_LEN] < cap_b else cap_b
        if former == FIXED:
            b = threshold
        if b > slots.size:
            return S.BUF
        for i in range(b):
            sl = Q.select_aged(pool, ring, heap, qi, order_rule, start)
            Q.remove(pool, ring, heap, qi, sl, order)
            slots[i] = sl
            lengths[i] = pool[sl, F.F_OUT]
        d, t1 = batch_time(law_kind, kcoef, table, lengths, b, elastic, comp, idx)
        start_batch(
            s, start, b, d, t1, slots, lengths, comp, pool, free, qi, state, pending, recorder, limits,
        )  # fmt: skip
        tw[0] = np.nan


@njit(cache=True, nogil=True, inline="always")
def _replica_load(kind, r, t, qis, wwork, pend_t, pend_n, pend_w):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Replica r's load of kind `kind` (:func:`llmqueue.sim.router.load_kind`) at time t: its
    waiting requests (or their predicted tokens) plus its members in service not yet replied."""
    if kind == R.LOAD_REQUESTS:
        u = float(qis[r, Q.Q_LEN])
        for j in range(pend_n[r]):
            if pend_t[r, j] > t:
                u += 1.0
        return u
    u = wwork[r]
    for j in range(pend_n[r]):
        if pend_t[r, j] > t:
            u += pend_w[r, j]
    return u


@kernel
def run_static_routed(  # type: ignore[no-untyped-def]  # noqa: ANN001
    chunk, final, state, queues, routed_load, pending, former_rule, order_rule, law, batch, router, recorder, limits,
):  # fmt: skip
    """The formers none, dynamic and elastic on replicas with a queue each, behind router `rcode`
    (module docstring): ``tq[r]``, the arrival that found replica r's queue empty; ``wwork[r]``,
    the predicted tokens of its waiting requests; ``pend_w``, those of its members in service.
    Returns a code as :func:`run_static` (GROW: every queue is doubled)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pools, rings, heaps, frees, qis, qtot = queues
    tq, wwork, pend_w = routed_load
    free_at, pend_t, pend_tok, pend_n = pending
    former, cap_b = former_rule
    order, guard, guard_s, guard_x, run0, run1 = order_rule
    law_kind, kcoef, table = law
    slots, lengths, comp, idx = batch
    rcode, rst, perm, load = router
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, id_cap = limits
    c = free_at.size
    elastic = former == ELASTIC
    kind = R.load_kind(rcode)
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        s = -1
        ts = np.inf
        for j in range(c):
            if qis[j, Q.Q_LEN] > 0:
                t0 = free_at[j] if free_at[j] >= tq[j] else tq[j]
                if t0 < ts:
                    ts = t0
                    s = j
        pos, a, more = S.next_arrival(sti, arr, final, 0)
        if more:
            return S.NEED_MORE
        if a <= ts and a < np.inf:
            code, waiting = S.room_routed(qis, sti, id_cap)
            if code != S.GO:
                return code
            if kind != R.LOAD_NONE:
                for j in range(c):
                    load[j] = _replica_load(kind, j, a, qis, wwork, pend_t, pend_n, pend_w)
            r = R.choose(rcode, load, rst, perm)
            if qis[r, Q.Q_LEN] == 0:
                tq[r] = a
            rid = S.advance(sti, stf, pos, a)
            S.enqueue(
                (pools[r], rings[r], heaps[r], frees[r], qis[r]), chunk, pos, a, rid, order, guard
            )
            wwork[r] += R.work_tokens(prompt[pos], pred[pos])
            qtot[Q.Q_LEN] = waiting + 1
            S.on_arrival(sti, stf, qsamp, qtot, rid, a, warmup, n_req, nbat)
            continue
        if s < 0:
            return S.DONE  # nothing waits and no arrivals are left
        n = qis[s, Q.Q_LEN]
        b = n if n < cap_b else cap_b
        if b > slots.size:
            return S.BUF
        pool = pools[s]
        for i in range(b):
            sl = Q.select_aged(pool, rings[s], heaps[s], qis[s], order_rule, ts)
            Q.remove(pool, rings[s], heaps[s], qis[s], sl, order)
            slots[i] = sl
            lengths[i] = pool[sl, F.F_OUT]
            w = R.work_tokens(pool[sl, F.F_PROMPT], pool[sl, F.F_PRED])
            wwork[s] -= w
            pend_w[s, i] = w
        d, t1 = batch_time(law_kind, kcoef, table, lengths, b, elastic, comp, idx)
        start_batch(
            s, ts, b, d, t1, slots, lengths, comp, pool, frees[s], qis[s], state, pending,
            recorder, limits,
        )  # fmt: skip
        tq[s] = ts


def run_time_law(law: StaticLaw) -> tuple[float, float]:
    """(r0, r1) of a request's run time alone on a server, T_1(n) = r0 + r1 n (s): t1(1) and
    t2(1) of an Eq. (18) law, or the fixed-T table's T_1 (the starvation guard's run-time
    trigger and :mod:`llmqueue.sim.rebatch` read it)."""
    if law.kind == TABLE:
        return (float(law.table[1]) if law.table.size > 1 else math.nan), 0.0
    k = law.kcoef
    return float(k[0] + k[1]), float(k[2] + k[3])


@dataclass
class BatchServers:
    """The servers of a static former and the batches they have in service: when each frees
    (``free_at``), the reply times and tokens of its current batch's members (``pend_t``,
    ``pend_tok``, ``pend_n`` of them), and the scratch buffers of one batch (``slots``,
    ``lengths``, ``comp``, ``idx``), for batches of up to ``width`` members."""

    free_at: np.ndarray
    pend_t: np.ndarray
    pend_tok: np.ndarray
    pend_n: np.ndarray
    slots: np.ndarray
    lengths: np.ndarray
    comp: np.ndarray
    idx: np.ndarray

    @property
    def pending(self) -> tuple[np.ndarray, ...]:
        """(free_at, pend_t, pend_tok, pend_n): when each server frees, its batches in flight."""
        return self.free_at, self.pend_t, self.pend_tok, self.pend_n

    @property
    def batch(self) -> tuple[np.ndarray, ...]:
        """(slots, lengths, comp, idx): the batch being formed."""
        return self.slots, self.lengths, self.comp, self.idx

    @classmethod
    def new(cls, servers: int, width: int) -> BatchServers:
        z = np.zeros
        return cls(
            z(servers), z((servers, width)), z((servers, width)), z(servers, dtype=np.int64),
            z(width, dtype=np.int64), z(width), z(width), z(width, dtype=np.int64),
        )  # fmt: skip

    def widen(self, width: int) -> None:
        """Room for batches of `width` members (the kernel returned :data:`BUF`)."""
        wider = BatchServers.new(self.free_at.size, width)
        wider.free_at, wider.pend_n = self.free_at, self.pend_n
        wider.pend_t[:, : self.pend_t.shape[1]] = self.pend_t
        wider.pend_tok[:, : self.pend_tok.shape[1]] = self.pend_tok
        self.__dict__.update(wider.__dict__)

    def count_pending(self, run: S.Run) -> None:
        """At the end of a run: the completions of the batches still in service (their reply
        times are known) that fall in the measured window."""
        sti, stf = run.sti, run.stf
        for s in range(self.pend_n.size):
            for j in range(int(self.pend_n[s])):
                if S.in_window(sti, stf, self.pend_t[s, j]):
                    sti[S.I_COMPLETED] += 1
                    stf[S.S_TOK] += self.pend_tok[s, j]


class StaticFormer(S.Former):
    """The driver of :func:`run_static` for the formers ``none``, ``dynamic``, ``fixed`` and
    ``elastic`` (module docstring): their buffers, growth and end-of-run accounting."""

    def __init__(self, setup: S.Setup, run: S.Run) -> None:
        policy = setup.policy
        self.law: StaticLaw = static_settings(policy, setup.latency, setup.batch_time_table)
        self.former = former_code(policy.kind)
        self.order_rule = Q.order_rule(policy, *run_time_law(self.law))
        self.timeout = policy.batch_timeout_s is not None
        self.timeout_s = policy.batch_timeout_s if policy.batch_timeout_s is not None else 0.0
        self.tw = np.full(1, np.nan)
        self.threshold = policy.threshold
        self.cap_b = int(min(policy.cap, 1 << 30))
        width = int(min(self.cap_b, 64)) if policy.kind != "fixed" else policy.k
        self.b = BatchServers.new(int(policy.servers), width)
        self.queues = S.Queues.new(int(policy.servers)) if policy.routed else None
        self.router = R.RouterState.new(policy, setup.seed) if policy.routed else None
        self.tq = np.zeros(int(policy.servers))
        self.wwork = np.zeros(int(policy.servers))
        self.pend_w = np.zeros((int(policy.servers), width))

    def waiting(self, run: S.Run) -> int:
        return self.queues.waiting() if self.queues is not None else int(run.qi[Q.Q_LEN])

    def _step_routed(
        self, run: S.Run, chunk: Sequence[np.ndarray], final: bool, qs: S.Queues, rt: R.RouterState
    ) -> int:
        b = self.b
        return int(
            run_static_routed(
                tuple(chunk),
                final,
                run.state,
                qs.arrays,
                (self.tq, self.wwork, self.pend_w),
                b.pending,
                (self.former, self.cap_b),
                self.order_rule,
                self.law.args,
                b.batch,
                rt.arrays,
                run.recorder,
                run.limits,
            )  # fmt: skip
        )

    def step(self, run: S.Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        """One call of the kernel over the arrivals in hand; grows what it asked for."""
        b = self.b
        if self.queues is not None and self.router is not None:
            code = self._step_routed(run, chunk, final, self.queues, self.router)
            if code == S.GROW:
                self.queues.grow()
            elif code == S.BUF:
                nb = 2 * b.slots.size
                while nb < min(self.queues.qis[:, Q.Q_LEN].max(), self.cap_b):
                    nb *= 2
                b.widen(nb)
                wider = np.zeros((self.pend_w.shape[0], nb))
                wider[:, : self.pend_w.shape[1]] = self.pend_w
                self.pend_w = wider
            return code
        code = run_static(
            tuple(chunk), final, run.state, run.queue, b.pending,
            (self.former, self.cap_b, self.threshold, self.timeout, self.timeout_s, self.tw),
            self.order_rule, self.law.args, b.batch, run.recorder, run.limits,
        )  # fmt: skip
        if code == S.GROW:
            run.grow_queue()
        elif code == S.BUF:
            nb = 2 * b.slots.size
            while nb < min(run.qi[Q.Q_LEN], self.cap_b):
                nb *= 2
            b.widen(nb)
        return int(code)

    def finish(self, run: S.Run) -> None:
        self.b.count_pending(run)
