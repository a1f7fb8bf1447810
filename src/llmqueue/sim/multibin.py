"""Multi-Bin Batching (Guldogan et al., arXiv 2412.04504), compiled.

Requests go on arrival to bin j = #{edges <= predicted length} (k bins, k - 1 edges). A bin that
holds B requests forms a batch at once; formed batches wait in one FCFS queue (by formation time)
for the first free server (the earliest-free one; ties by index). With a flush timeout, a bin
whose oldest request has waited ``flush_s`` forms a batch of whatever it holds at that moment.
A batch lasts the time law's T_b (Eq. 18 with its b members' true lengths; the paper's law, a
constant plus the longest request times the time per token, is Eq. 18 with k1 = k3 = 0). Every
member replies when its batch ends (padded batching). The queue order of the policy is not used:
the bins and the batch FCFS queue are the order.

Events in time order: a batch start (server free and a batch formed) before an arrival or a flush
at the same time, an arrival before a flush. Measured requests are recorded when their batch
starts (their reply time is known then), as in :mod:`llmqueue.sim.static`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import njit

from llmqueue.sim import fields as F
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.jit import kernel
from llmqueue.sim.static import BatchServers, start_batch
from llmqueue.sim.timelaw import StaticLaw, batch_time, static_settings

__all__ = ["run_multibin", "new_bins", "grow_ready", "equal_probability_edges", "MultiBinFormer"]


def new_bins(k: int, b: int, cap: int) -> tuple[np.ndarray, ...]:
    """(bins[k, B] slots, bin counts[k], ready member ring[cap], ready batch ring[cap, 2]:
    (size, formation time), ring state[4]: member head, member count, batch head, batch count)."""
    return (
        np.zeros((k, b), dtype=np.int64),
        np.zeros(k, dtype=np.int64),
        np.zeros(cap, dtype=np.int64),
        np.zeros((cap, 2)),
        np.zeros(4, dtype=np.int64),
    )


def grow_ready(
    ready: np.ndarray, rbatch: np.ndarray, rs: np.ndarray, cap: int
) -> tuple[np.ndarray, np.ndarray]:
    """The ready rings re-laid from index 0 with capacity `cap` (the pool's, after it grew)."""
    old = ready.size
    nr = np.zeros(cap, dtype=np.int64)
    nb = np.zeros((cap, 2))
    for i in range(int(rs[1])):
        nr[i] = ready[(rs[0] + i) % old]
    for i in range(int(rs[3])):
        nb[i] = rbatch[(rs[2] + i) % old]
    rs[0] = 0
    rs[2] = 0
    return nr, nb


def equal_probability_edges(
    workload: Any, k: int, seed: int | np.random.SeedSequence
) -> np.ndarray:
    """The k - 1 bin edges at the equal-probability quantiles of the predicted length law: exact
    (the law's ppf) for Poisson arrivals with the oracle predictor, else the quantiles of 10^6
    predictions drawn from the workload (its first requests, seed `seed`)."""
    from llmqueue.analytic.multibin import equal_probability_edges as lemma_4_1
    from llmqueue.sim.predictors import Oracle
    from llmqueue.sim.workload import PoissonWorkload

    q = np.arange(1, k) / k
    if k == 1:
        return np.zeros(0)
    if isinstance(workload, PoissonWorkload) and isinstance(workload.predictor, Oracle):
        return lemma_4_1(workload.output, k)
    preds = []
    n = 0
    for ch in workload.chunks(seed, 1 << 16, False):
        preds.append(ch.pred)
        n += ch.pred.size
        if n >= 1_000_000:
            break
    return np.quantile(np.concatenate(preds), q)


@njit(cache=True, nogil=True, inline="always")
def _form(bins, bcnt, j, ready, rbatch, rs, t):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Move bin j's requests into the ready ring as one batch formed at time t."""
    cap = ready.size
    n = bcnt[j]
    for i in range(n):
        ready[(rs[0] + rs[1]) % cap] = bins[j, i]
        rs[1] += 1
    q = (rs[2] + rs[3]) % cap
    rbatch[q, 0] = n
    rbatch[q, 1] = t
    rs[3] += 1
    bcnt[j] = 0


@kernel
def run_multibin(  # type: ignore[no-untyped-def]  # noqa: ANN001, C901
    chunk, final, state, store, pending, bin_state, law, batch, recorder, limits,
):  # fmt: skip
    """Multi-Bin Batching over one chunk of arrivals; returns a code (state.NEED_MORE, DONE,
    GROW, CAP). ``flush_s`` = inf: no flush (the paper's model)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, free, qi = store
    free_at, pend_t, pend_tok, pend_n = pending
    edges, bins, bcnt, ready, rbatch, rs, flush_s = bin_state
    law_kind, kcoef, table = law
    slots, lengths, comp, idx = batch
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    warmup, n_req, nbat, id_cap = limits
    k = bcnt.size
    bsize = bins.shape[1]
    cap = ready.size
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        pos, t_arr, more = S.next_arrival(sti, arr, final, 0)
        if more:
            return S.NEED_MORE
        t_flush = np.inf
        jf = -1
        if flush_s < np.inf:
            for j in range(k):
                if bcnt[j] > 0:
                    tj = pool[bins[j, 0], F.F_ARR] + flush_s
                    if tj < t_flush:
                        t_flush = tj
                        jf = j
        t_srv = np.inf
        s = 0
        if rs[3] > 0:
            s = S.first_free(free_at)
            formed = rbatch[rs[2], 1]
            t_srv = free_at[s] if free_at[s] > formed else formed
        if t_srv == np.inf and t_arr == np.inf and t_flush == np.inf:
            return S.DONE  # nothing left to do (requests left in bins never fill)
        if t_srv <= t_arr and t_srv <= t_flush:
            # start the oldest formed batch on server s
            b = np.int64(rbatch[rs[2], 0])
            rs[2] = (rs[2] + 1) % cap
            rs[3] -= 1
            start = t_srv
            for i in range(b):
                sl = ready[rs[0]]
                rs[0] = (rs[0] + 1) % cap
                rs[1] -= 1
                slots[i] = sl
                lengths[i] = pool[sl, F.F_OUT]
            qi[Q.Q_LEN] -= b
            d, t1 = batch_time(law_kind, kcoef, table, lengths, b, False, comp, idx)
            start_batch(
                s, start, b, d, t1, slots, lengths, comp, pool, free, qi, state, pending, recorder,
                limits,
            )  # fmt: skip
        elif t_arr <= t_flush:
            code = S.room(qi[Q.Q_NFREE], qi[Q.Q_LEN], sti, id_cap)
            if code != S.GO:
                return code
            rid = S.advance(sti, stf, pos, t_arr)
            sl = Q.alloc(pool, free, qi, t_arr, prompt[pos], out[pos], pred[pos], rid)
            qi[Q.Q_LEN] += 1
            S.on_arrival(sti, stf, qsamp, qi, rid, t_arr, warmup, n_req, nbat)
            j = np.searchsorted(edges, pred[pos], side="right")
            bins[j, bcnt[j]] = sl
            bcnt[j] += 1
            if bcnt[j] == bsize:
                _form(bins, bcnt, j, ready, rbatch, rs, t_arr)
        else:
            _form(bins, bcnt, jf, ready, rbatch, rs, t_flush)


class MultiBinFormer(S.Former):
    """The driver of :func:`run_multibin` (module docstring): bins, the ready rings, the
    servers' pending batches, and their growth with the queue's pool."""

    def __init__(self, setup: S.Setup, run: S.Run) -> None:
        policy = setup.policy
        self.law: StaticLaw = static_settings(policy, setup.latency, setup.batch_time_table)
        self.b = BatchServers.new(int(policy.servers), policy.k)
        if policy.bin_edges is not None:
            self.edges = np.asarray(policy.bin_edges, dtype=float)
        else:
            self.edges = equal_probability_edges(setup.workload, policy.bins, setup.seed)
        self.bins, self.bcnt, self.ready, self.rbatch, self.rs = new_bins(
            policy.bins, policy.k, run.queue_cap
        )
        self.flush = policy.flush_s if policy.flush_s is not None else math.inf

    def step(self, run: S.Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        """One call of the kernel over the arrivals in hand; grows what it asked for."""
        b = self.b
        code = run_multibin(
            tuple(chunk), final, run.state, (run.pool, run.free, run.qi), b.pending,
            (self.edges, self.bins, self.bcnt, self.ready, self.rbatch, self.rs, self.flush),
            self.law.args, b.batch, run.recorder, run.limits,
        )  # fmt: skip
        if code == S.GROW:
            run.grow_queue()
            self.ready, self.rbatch = grow_ready(self.ready, self.rbatch, self.rs, run.queue_cap)
        return int(code)

    def finish(self, run: S.Run) -> None:
        self.b.count_pending(run)
