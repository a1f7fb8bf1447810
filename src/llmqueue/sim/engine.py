"""The serving engine: requests that carry their own lengths, a queue order, a batch former and a
time law, on c identical servers sharing one queue. Compiled with Numba; one run per call of
:func:`run`.

Where things live (one compiled part per concern):

- the workload, a request table generated chunk by chunk: :mod:`llmqueue.sim.workload`;
- the queue order (fcfs / sjf / spjf, starvation guard): :mod:`llmqueue.sim.queue`;
- the time law (Eq. 18 / 26 batches, the iteration step law): :mod:`llmqueue.sim.timelaw`;
- the batch former: two compiled event loops, :mod:`llmqueue.sim.static` (``none``, ``dynamic``,
  ``fixed``, ``elastic``) and :mod:`llmqueue.sim.continuous` (iteration-level scheduling), with
  their shared run state in :mod:`llmqueue.sim.state`;
- the recorder and the result: :mod:`llmqueue.sim.recorder`, :mod:`llmqueue.sim.result`.

Static batch formers (the paper's Sec. IV, each request with its own length): when a server frees
(the earliest-free one first) it takes waiting requests in queue order: ``none`` one, ``dynamic``
all of them up to ``bmax`` (None = no cap), ``elastic`` the same with replies leaving as they
finish (Eq. 26), ``fixed`` waits until K wait and takes K; if too few wait it starts when enough
have arrived. A batch lasts Eq. (18) (or the fixed-T table).

Continuous batching (Orca, vLLM): before every iteration a server (1) frees the requests that
finished, (2) with ``admission = on_demand`` makes room for one more KV token per decoding
sequence by preempting the most recently admitted request (its KV is freed and it goes back to
the front of the queue to redo prefill over prompt + tokens generated so far), (3) if nothing was
preempted, admits waiting requests in queue order while the batch has room (``bmax`` = max_batch)
and the KV budget holds (``reserve``: prompt + output tokens reserved at admission, never
preempts; ``on_demand``: the prompt's tokens, growing one per step, the decodes of the iteration
taking theirs first), stopping at the first that does not fit, as vLLM does. With
``block_size`` > 1 the KV cache is paged as vLLM's: a sequence holding h tokens takes
ceil(h / block_size) blocks of the budget, admission needs the prompt's blocks, and a decoding
sequence needs a new block only when its blocks are full (every block_size-th token). One
iteration = one decode token for every decoding sequence + prefill of the admitted prompts
(chunked by ``max_batched_tokens`` after the decodes, as vLLM's chunked prefill does; a
request's first token comes out at the end of its last prefill chunk).
It lasts step(decode_seqs, prefill_tokens, context_tokens) (:class:`llmqueue.latency.StepLaw`),
with context_tokens = sum over decoding sequences of (prompt + generated tokens) + over prefill
chunks of (offset + chunk). Between events (an arrival the server could admit, a completion, KV
running out, a request turning overdue under the guard) the engine jumps over whole runs of
decode-only iterations in closed form instead of looping token by token. A request whose prompt
+ output exceeds ``kv_tokens`` can never fit: it is rejected at arrival and counted.

Measured requests: ids ``warmup .. warmup + requests - 1`` in arrival order. The run goes on
(arrivals continue) until every measured request has finished; the throughput counts every
completion between the first and the last measured arrival. A run is **unstable** when the
number waiting grows without bound: at the end the queue holds more than 1% of the measured
requests (+ 100) and the queue sampled at the start of each measurement batch rises with a
Spearman correlation above 0.8; or more than ``requests + warmup`` further arrivals were needed
to finish the measured ones (starvation); or the queue outgrew 2**24 requests.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.policy import Policy
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.continuous import new_servers, policy_params, run_continuous
from llmqueue.sim.multibin import equal_probability_edges, grow_ready, new_bins, run_multibin
from llmqueue.sim.recorder import bit_view, finish, new_arrays
from llmqueue.sim.result import SimResult
from llmqueue.sim.rng import check_seed
from llmqueue.sim.static import DYNAMIC, ELASTIC, FIXED, NONE, run_static
from llmqueue.sim.workload import Workload

__all__ = [
    "run",
    "DEFAULT_WARMUP",
    "DEFAULT_BATCHES",
    "static_law",
    "EngineSettings",
    "PER_REQUEST_COLUMNS",
]

DEFAULT_WARMUP = 100_000
DEFAULT_BATCHES = 40
CONTINUOUS, MULTIBIN = 4, 5
FORMERS = {
    "none": NONE,
    "dynamic": DYNAMIC,
    "fixed": FIXED,
    "elastic": ELASTIC,
    "continuous": CONTINUOUS,
    "multibin": MULTIBIN,
}
NO_CAP_RUN = 1 << 30
PER_REQUEST_COLUMNS = (
    "id",
    "arrival_s",
    "prompt",
    "output",
    "pred",
    "start_s",
    "first_token_s",
    "finish_s",
    "server",
)
_CHUNK_FIELDS = ("arrival_s", "prompt", "output", "pred")


@dataclass(frozen=True)
class EngineSettings:
    """What the compiled loop reads of a policy and a time law (derived, validated)."""

    former: int
    law_kind: int
    kcoef: np.ndarray
    table: np.ndarray
    step: np.ndarray


def static_law(latency: BatchLatency | LinearLatency) -> np.ndarray:
    """Eq. (18) coefficients (k1, k2, k3, k4) of a batch law; a single-request law S = a*N + b0
    is the batch law of one request: (0, b0, 0, a)."""
    if isinstance(latency, BatchLatency):
        return np.array([latency.k1, latency.k2, latency.k3, latency.k4], dtype=float)
    return np.array([0.0, latency.b0_s, 0.0, latency.a_s_per_token], dtype=float)


def _settings(policy: Policy, latency: Any, batch_time_table: np.ndarray | None) -> EngineSettings:
    if not isinstance(policy, Policy):
        raise InputError(f"policy must be a llmqueue.policy.Policy, got {type(policy).__name__}")
    former = FORMERS[policy.kind]
    empty = np.zeros(1)
    if former == CONTINUOUS:
        if not isinstance(latency, StepLaw):
            raise InputError(
                "continuous batching needs a step law (llmqueue.latency.StepLaw: c0, c_tok, c_ctx), "
                f"got {type(latency).__name__}"
            )
        if batch_time_table is not None:
            raise InputError("a fixed batch-time table applies to static batches only")
        step = np.array([latency.c0_s, latency.c_tok_s, latency.c_ctx_s], dtype=float)
        return EngineSettings(former, 0, np.zeros(4), empty, step)
    if not isinstance(latency, (BatchLatency, LinearLatency)):
        raise InputError(
            f"batching {policy.kind} needs a batch law (Eq. 18: llmqueue.latency.BatchLatency) or "
            f"a single-request law (LinearLatency), got {type(latency).__name__}"
        )
    if batch_time_table is not None:
        if policy.elastic:
            raise InputError("fixed-T mode applies to padded batches (dynamic, fixed), not elastic")
        tab = np.asarray(batch_time_table, dtype=float)
        return EngineSettings(former, 1, static_law(latency), tab, np.zeros(3))
    return EngineSettings(former, 0, static_law(latency), empty, np.zeros(3))


def _truncated(gen: Any, n: int) -> Any:
    """The chunks of `gen` up to n requests in all."""
    left = n
    for ch in gen:
        if left <= 0:
            return
        if ch.arrival_s.size > left:
            ch = type(ch)(*(x[:left] for x in ch))
        left -= ch.arrival_s.size
        yield ch


def _spearman(x: np.ndarray) -> float:
    if x.size < 3 or np.ptp(x) == 0:
        return 0.0
    r = np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(float)
    k = np.arange(x.size, dtype=float)
    return float(np.corrcoef(r, k)[0, 1])


def _is_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def run(
    workload: Workload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    *,
    requests: int,
    warmup: int = DEFAULT_WARMUP,
    batches: int = DEFAULT_BATCHES,
    seed: int | np.random.SeedSequence,
    chunk: int = 1 << 16,
    batch_time_table: np.ndarray | None = None,
    per_request: bool = False,
    last_arrival: int | None = None,
) -> SimResult:
    """Simulate `workload` served under `policy` with time law `latency` (module docstring).

    Args:
        workload: the request table (rate, lengths, predictions), :mod:`llmqueue.sim.workload`.
        policy: batch former, sizes, queue order, servers (:class:`llmqueue.policy.Policy`).
        latency: Eq. (18) BatchLatency (or LinearLatency) for static formers, StepLaw for
            continuous batching.
        requests: measured requests after `warmup` discarded ones; batches: batch-means batches.
        seed: int >= 0 or SeedSequence; the same seed gives the same table and the same result.
        chunk: requests generated per chunk (memory O(chunk)).
        batch_time_table: static formers only: T_b = table[b] (the fixed-T approximation).
        per_request: keep every request of the run (at most 10**7) in ``result.per_request``:
            id, arrival, prompt, output, predicted, start, first token, finish (s), server;
            NaN for a rejected request or one not finished when the run stopped.
        last_arrival: no arrivals after this many (default: the workload's own end, if any),
            e.g. a burst of requests that all arrive at once and then drain.

    Returns a :class:`SimResult` (wait, response = JCT, ttft; tpot for continuous batching).
    """
    st = _settings(policy, latency, batch_time_table)
    if not isinstance(workload, Workload):
        raise InputError(
            f"workload must be a llmqueue.sim.workload.Workload, got {type(workload).__name__}"
        )
    if not _is_int(batches) or batches < 2:
        raise InputError(f"batches must be an integer >= 2, got {batches!r}")
    if not _is_int(requests) or requests < 10 * batches:
        raise InputError(
            f"requests must be an integer >= 10*batches = {10 * batches}, got {requests!r}"
        )
    if not _is_int(warmup) or warmup < 0:
        raise InputError(f"warmup must be an integer >= 0, got {warmup!r}")
    if not _is_int(chunk) or not (2 <= chunk <= 1 << 24):
        raise InputError(f"chunk must be an integer in [2, 2**24], got {chunk!r}")
    check_seed(seed)
    total = int(warmup) + int(requests)
    if workload.total is not None and workload.total < total:
        raise InputError(
            f"the workload holds {workload.total} requests; warmup + requests = {total} needs more "
            "(lower --requests / warmup)"
        )
    n_req, nbat = int(requests), int(batches)
    sti, stf, qsamp = S.new_state(nbat)
    pool, ring, heap, hpos, free, qi = Q.new_queue(1024)
    sums, counts, hist, maxima = new_arrays(S.N_METRICS, nbat)
    fbuf, ibuf = bit_view()
    if per_request and total > 10**7:
        raise InputError(f"per_request keeps at most 10**7 requests; this run has {total}")
    rec = np.full((2 * total if per_request else 0, 4), np.nan)
    kept: list[Any] = []
    order = Q.ORDERS[policy.order]
    guard = policy.guard_s is not None
    guard_s = policy.guard_s if policy.guard_s is not None else math.inf
    id_cap = 2 * total
    c = int(policy.servers)
    cont = st.former == CONTINUOUS
    gen = workload.chunks(seed, int(chunk), cont)
    if last_arrival is not None:
        if not _is_int(last_arrival) or last_arrival < total:
            raise InputError(f"last_arrival must be an integer >= warmup + requests = {total}")
        gen = _truncated(gen, int(last_arrival))
    nxt = next(gen, None)
    arrays = [np.zeros(0) for _ in range(4)]
    final = False
    if cont:
        max_batch = policy.bmax if policy.bmax is not None else NO_CAP_RUN
        mb = max_batch if max_batch < NO_CAP_RUN else int(qi[Q.Q_CAP])
        srv, dheap, adm, pref, qbuf = new_servers(c, mb)
        kv = float(policy.kv_tokens) if policy.kv_tokens is not None else math.inf
        max_tok = (
            float(policy.max_batched_tokens) if policy.max_batched_tokens is not None else math.inf
        )
        on_demand = policy.admission == "on_demand"
        pparams = policy_params(
            float(max_batch),
            kv,
            on_demand,
            max_tok,
            order,
            guard,
            guard_s,
            int(warmup),
            n_req,
            nbat,
            int(policy.block_size),
        )
    else:
        cap_b = int(min(policy.cap, 1 << 30))
        nb0 = int(min(cap_b, 64)) if policy.kind not in ("fixed", "multibin") else policy.k
        free_at = np.zeros(c)
        pend_t = np.zeros((c, nb0))
        pend_tok = np.zeros((c, nb0))
        pend_n = np.zeros(c, dtype=np.int64)
        slots = np.zeros(nb0, dtype=np.int64)
        lengths, comp = np.zeros(nb0), np.zeros(nb0)
        idx = np.zeros(nb0, dtype=np.int64)
        if st.former == MULTIBIN:
            if policy.bin_edges is not None:
                edges = np.asarray(policy.bin_edges, dtype=float)
            else:
                edges = equal_probability_edges(workload, policy.bins, seed)
            bins, bcnt, ready, rbatch, rs = new_bins(policy.bins, policy.k, int(qi[Q.Q_CAP]))
            flush = policy.flush_s if policy.flush_s is not None else math.inf
    code = S.NEED_MORE
    while True:
        if code == S.NEED_MORE:
            pos = int(sti[S.I_POS])
            if nxt is None:
                final = True
                arrays = [x[pos:] for x in arrays]
            else:
                arrays = [np.concatenate((x[pos:], y)) for x, y in zip(arrays, nxt, strict=True)]
                if per_request:
                    kept.append(nxt)
                nxt = next(gen, None)
                final = nxt is None
            sti[S.I_POS] = 0
        arr, prm, out, pred = arrays
        if cont:
            code = run_continuous(
                arr, prm, out, pred, final, sti, stf, qsamp,
                pool, ring, heap, hpos, free, qi,
                srv, dheap, adm, pref, qbuf, pparams, st.step,
                sums, counts, hist, maxima, fbuf, ibuf, rec, id_cap,
            )  # fmt: skip
            if code == S.GROW:
                pool, ring, heap, hpos, free = Q.grow(pool, ring, heap, hpos, free, qi)
                if max_batch >= NO_CAP_RUN:  # unlimited batch: room for everyone in the system
                    old = (dheap, adm, pref)
                    srv_keep = srv
                    srv, dheap, adm, pref, qbuf = new_servers(c, int(qi[Q.Q_CAP]))
                    srv[:] = srv_keep
                    dheap[:, : old[0].shape[1]] = old[0]
                    adm[:, : old[1].shape[1]] = old[1]
                    pref[:, : old[2].shape[1]] = old[2]
                continue
        elif st.former == MULTIBIN:
            code = run_multibin(
                arr, prm, out, pred, final, sti, stf, qsamp,
                pool, free, qi,
                free_at, pend_t, pend_tok, pend_n,
                edges, bins, bcnt, ready, rbatch, rs, flush,
                st.law_kind, st.kcoef, st.table,
                lengths, comp, idx, slots,
                sums, counts, hist, maxima, fbuf, ibuf, rec, int(warmup), n_req, nbat, id_cap,
            )  # fmt: skip
            if code == S.GROW:
                pool, ring, heap, hpos, free = Q.grow(pool, ring, heap, hpos, free, qi)
                ready, rbatch = grow_ready(ready, rbatch, rs, int(qi[Q.Q_CAP]))
                continue
        else:
            code = run_static(
                arr, prm, out, pred, final, sti, stf, qsamp,
                pool, ring, heap, hpos, free, qi,
                free_at, pend_t, pend_tok, pend_n,
                st.former, cap_b, policy.threshold, order, guard, guard_s,
                st.law_kind, st.kcoef, st.table,
                slots, lengths, comp, idx,
                sums, counts, hist, maxima, fbuf, ibuf, rec, int(warmup), n_req, nbat, id_cap,
            )  # fmt: skip
            if code == S.GROW:
                pool, ring, heap, hpos, free = Q.grow(pool, ring, heap, hpos, free, qi)
                continue
            if code == S.BUF:
                nb = 2 * slots.size
                while nb < min(qi[Q.Q_LEN], cap_b):
                    nb *= 2
                slots = np.zeros(nb, dtype=np.int64)
                lengths, comp = np.zeros(nb), np.zeros(nb)
                idx = np.zeros(nb, dtype=np.int64)
                pt, pk = np.zeros((c, nb)), np.zeros((c, nb))
                pt[:, : pend_t.shape[1]] = pend_t
                pk[:, : pend_tok.shape[1]] = pend_tok
                pend_t, pend_tok = pt, pk
                continue
        if code in (S.DONE, S.CAP):
            break
    if not cont:  # the batches still in service
        for s in range(c):
            for j in range(int(pend_n[s])):
                t = pend_t[s, j]
                if (
                    sti[S.I_FIRST_KNOWN]
                    and t >= stf[S.S_WIN0]
                    and (not sti[S.I_LAST_KNOWN] or t <= stf[S.S_WIN1])
                ):
                    sti[S.I_COMPLETED] += 1
                    stf[S.S_TOK] += pend_tok[s, j]
    notes = []
    unstable = code == S.CAP
    if code == S.CAP:
        notes.append(
            "stopped: the queue outgrew 2**24 requests or the measured requests needed more than "
            f"{total} further arrivals to finish (no steady state, or starvation)"
        )
    served = int(sti[S.I_DONE])
    if code == S.DONE and served < n_req:
        notes.append(
            f"{n_req - served} measured requests were never served (no arrivals left to fill a batch)"
        )
    q_end = int(qi[Q.Q_LEN])
    samples = qsamp[qsamp >= 0].astype(float)
    trend = _spearman(samples)
    if q_end > 0.01 * n_req + 100 and trend > 0.8:
        unstable = True
        notes.append(
            f"the queue grows without bound: {q_end} waiting at the end, trend {trend:.2f}"
        )
    win = float(stf[S.S_WIN1] - stf[S.S_WIN0]) if sti[S.I_LAST_KNOWN] else math.nan
    n_batches = float(stf[S.S_NB])
    kv_util = math.nan
    if cont and policy.kv_tokens is not None and stf[S.S_SUMD] > 0:
        kv_util = float(stf[S.S_KVINT]) / (float(policy.kv_tokens) * float(stf[S.S_SUMD]))
    metrics = [finish(sums, counts, hist, maxima, m) for m in range(S.N_METRICS)]
    table = None
    if per_request:
        n_seen = int(sti[S.I_NEXT_ID]) if kept else 0
        cols = [np.concatenate([getattr(k, f) for k in kept])[:n_seen] for f in _CHUNK_FIELDS]
        table = np.column_stack([np.arange(n_seen, dtype=float), *cols, rec[:n_seen]])
    has_ttft = counts[S.M_TTFT].sum() > 0
    return SimResult(
        n_req,
        metrics[S.M_WAIT],
        response=metrics[S.M_RESP],
        ttft=metrics[S.M_TTFT] if has_ttft else None,
        tpot=metrics[S.M_TPOT] if cont else None,
        throughput_per_s=float(sti[S.I_COMPLETED]) / win if win > 0 else math.nan,
        tokens_per_s=float(stf[S.S_TOK]) / win if win > 0 else math.nan,
        mean_batch=float(stf[S.S_SUMB]) / n_batches if n_batches > 0 else math.nan,
        mean_batch_time=float(stf[S.S_SUMD]) / n_batches if n_batches > 0 else math.nan,
        kv_utilisation=kv_util,
        preemptions=int(sti[S.I_PREEMPT]),
        rejected=int(sti[S.I_REJECT]),
        max_queue=int(sti[S.I_MAXQ]),
        unstable=bool(unstable),
        note="; ".join(notes),
        per_request=table,
        events=int(stf[S.S_EVENTS]),
    )
