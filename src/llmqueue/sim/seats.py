"""The per-server state of continuous batching (:mod:`llmqueue.sim.continuous`), compiled: the
column layout of the servers' scalars (``V_*``) and of the policy's numbers (``P_*``), and the
inlined operations on them the event loops and the per-chunk scheduler share: the completion heap,
the admission stack, KV blocks by phase, runs of decode-only iterations, and seating, unseating,
resetting and stalling a request. :mod:`llmqueue.sim.continuous`'s docstring states the rules and
the data layout.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from llmqueue.sim import fields as F
from llmqueue.sim import heap as H
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.timelaw import context_price, decode_part, decode_run_time, iterations_until

__all__ = [
    "V_TNEXT",
    "V_DEC",
    "V_CTX",
    "V_KVU",
    "V_RUN",
    "V_NPREF",
    "V_STEPS",
    "V_JM",
    "V_JT0",
    "V_DHN",
    "V_ADMN",
    "V_WORK",
    "V_PAUSE",
    "NV",
    "earliest",
    "unfit",
    "P_BLOCK",
    "P_WHOLE",
    "P_BATCHQ",
    "P_CHUNK",
    "P_MARGIN",
    "NP",
    "P_MAXB",
    "P_KV",
    "P_KVX",
    "P_PLIM",
    "P_PREFIX",
    "P_ONDEMAND",
    "P_MAXTOK",
    "P_ORDER",
    "P_GUARD",
    "P_GUARDS",
    "P_WARMUP",
    "P_NREQ",
    "P_NBAT",
    "policy_params",
    "new_servers",
    "dpush",
    "dremove",
    "adm_push",
    "adm_top",
    "phase_of",
    "new_blocks",
    "apply_jump",
    "cut",
    "interrupt",
    "held",
    "slots",
    "admit",
    "unseat",
    "reset",
    "stall",
]


# per-server scalar columns
V_TNEXT = 0  # time of its next iteration boundary (inf: idle)
V_DEC = 1  # decoding sequences
V_CTX = 2  # their total context (prompt + generated tokens)
V_KVU = 3  # KV tokens held
V_RUN = 4  # running requests (decoding + prefilling)
V_NPREF = 5  # prefilling requests
V_STEPS = 6  # decode steps executed so far
V_JM = 7  # pending run of decode-only iterations (0: none)
V_JT0 = 8  # its start
V_DHN = 9  # completion-heap size
V_ADMN = 10  # admission-stack entries (live and stale)
V_WORK = 11  # predicted tokens outstanding (prompt + predicted output; routed runs)
V_PAUSE = 12  # per-chunk admission: 1 after a reset until a request finishes (nothing admitted)
NV = 13

# the policy's numbers, one float64 array (a compiled call takes at most ~30 arguments to inline)
P_MAXB, P_KV, P_ONDEMAND, P_MAXTOK, P_ORDER, P_GUARD, P_GUARDS, P_WARMUP, P_NREQ, P_NBAT = range(10)
P_BLOCK = 10
P_WHOLE = 11  # 1: chunked prefill off, a prompt is admitted only when it fits the budget whole
P_BATCHQ = 12  # 1: admissions only at a boundary where nothing runs (the batch queue)
P_CHUNK = 13  # 1: per-chunk admission (transformers' FIFO scheduler, :func:`~llmqueue.sim.per_chunk.schedule_per_chunk`)
P_MARGIN = 14  # its safety margin: the free share of the KV under which prompt chunks stop
P_KVX = 15  # on-demand KV: tokens a sequence holds beyond vLLM's count (kv_accounting dong: 1)
P_PLIM = 16  # a preemptive order's limit: a request that has made this share of its size stays
P_PREFIX = 17  # 1: automatic prefix caching (:mod:`llmqueue.sim.prefix`)
NP = 18


def policy_params(
    max_batch: float, kv_tokens: float, on_demand: bool, max_tok: float, order: int,
    guard: bool, guard_s: float, warmup: int, n_req: int, nbat: int, block_size: int = 1,
    chunked_prefill: bool = True, batch_queue: bool = False, per_chunk: bool = False,
    kv_margin: float = 0.0, kv_extra: float = 0.0, preempt_limit: float = np.inf,
    prefix_caching: bool = False,
) -> np.ndarray:  # fmt: skip
    """The P_* array of :func:`run_continuous` (`per_chunk` implies on-demand KV growth)."""
    return np.array(
        [max_batch, kv_tokens, float(on_demand or per_chunk), max_tok, order, float(guard),
         guard_s, warmup, n_req, nbat, block_size, float(not chunked_prefill),
         float(batch_queue), float(per_chunk), kv_margin, kv_extra, preempt_limit,
         float(prefix_caching)],
        dtype=float,
    )  # fmt: skip


def new_servers(c: int, mb: int, block: int = 1) -> tuple[np.ndarray, ...]:
    """(srv, dheap, adm, pref, qbuf, phase, sbuf) for c servers of at most mb running requests
    each, KV blocks of `block` tokens; ``sbuf`` (mb x 2: slot, KV tokens it asked) holds the
    starved requests of one per-chunk step."""
    srv = np.zeros((c, NV))
    srv[:, V_TNEXT] = np.inf
    return (
        srv,
        np.zeros((c, mb), dtype=np.int64),
        np.zeros((c, 2 * mb + 4, 2), dtype=np.int64),
        np.zeros((c, mb), dtype=np.int64),
        np.zeros(mb),
        np.zeros((c, block), dtype=np.int64),
        np.zeros((mb, 2), dtype=np.int64),
    )


# ---- the event head: which server's boundary comes first, which arrival can never run ---------
@njit(cache=True, nogil=True, inline="always")
def earliest(srv):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The server whose next boundary (``V_TNEXT``) comes first; ties go to the lowest index."""
    s = 0
    for j in range(1, srv.shape[0]):
        if srv[j, V_TNEXT] < srv[s, V_TNEXT]:
            s = j
    return s


@njit(cache=True, nogil=True, inline="always")
def unfit(prm, prompt, out):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Whether a request of `prompt` + `out` tokens can never run, and is rejected at arrival: it
    exceeds the KV budget, or with whole prompts the token budget (vLLM without chunked prefill
    needs max_model_len <= max_num_batched_tokens)."""
    return prompt + out > prm[P_KV] or (prm[P_WHOLE] == 1.0 and prompt + out > prm[P_MAXTOK])


# ---- the per-server completion heap (min on F_TARGET, ties by id; :mod:`llmqueue.sim.heap`) ---
@njit(cache=True, nogil=True, inline="always")
def dpush(pool, srv, dheap, s, sl):  # type: ignore[no-untyped-def]  # noqa: ANN001
    srv[s, V_DHN] = H.push(pool, dheap[s], np.int64(srv[s, V_DHN]), sl, F.F_TARGET)


@njit(cache=True, nogil=True, inline="always")
def dremove(pool, srv, dheap, s, sl):  # type: ignore[no-untyped-def]  # noqa: ANN001
    srv[s, V_DHN] = H.remove(pool, dheap[s], np.int64(srv[s, V_DHN]), sl, F.F_TARGET)


# ---- the admission stack (most recent on top, lazy deletion) ---------------------------------
@njit(cache=True, nogil=True, inline="always")
def adm_push(pool, srv, adm, s, sl, seq):  # type: ignore[no-untyped-def]  # noqa: ANN001
    n = np.int64(srv[s, V_ADMN])
    if n == adm.shape[1]:  # compact: keep the live entries, in order
        k = 0
        for j in range(n):
            x = adm[s, j, 0]
            if pool[x, F.F_SERVER] == s and np.int64(pool[x, F.F_ADMSEQ]) == adm[s, j, 1]:
                adm[s, k, 0] = x
                adm[s, k, 1] = adm[s, j, 1]
                k += 1
        n = k
    adm[s, n, 0] = sl
    adm[s, n, 1] = seq
    srv[s, V_ADMN] = n + 1


@njit(cache=True, nogil=True, inline="always")
def adm_top(pool, srv, adm, s):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The most recently admitted request still running on server s (popped), or -1."""
    n = np.int64(srv[s, V_ADMN])
    while n > 0:
        n -= 1
        x = adm[s, n, 0]
        if pool[x, F.F_SERVER] == s and np.int64(pool[x, F.F_ADMSEQ]) == adm[s, n, 1]:
            srv[s, V_ADMN] = n
            return x
    srv[s, V_ADMN] = 0
    return -1


# ---- KV blocks by phase ----------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def phase_of(hbase, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The phase of a decoding sequence: its ``F_HBASE`` modulo the block size (in [0, bs))."""
    b = np.int64(bs)
    r = np.int64(hbase) % b
    return r + b if r < 0 else r


@njit(cache=True, nogil=True, inline="always")
def new_blocks(phase, s, steps, m, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """KV slots the next m decode-only iterations of server s take, from step count `steps`:
    a sequence of phase r takes a block as the iteration of step count j starts when
    j + r is a multiple of bs (its held tokens fill its blocks)."""
    b = np.int64(bs)
    st = np.int64(steps)
    mi = np.int64(m)
    total = 0
    for r in range(b):
        n = phase[s, r]
        if n == 0:
            continue
        j0 = (-(st + r)) % b
        if j0 < 0:
            j0 += b
        if j0 < mi:
            total += n * (1 + (mi - 1 - j0) // b)
    return bs * total


# ---- iterations ------------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def apply_jump(s, sti, stf, srv, phase, on_demand, bs, cst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Apply the pending run of decode-only iterations of server s. Its KV integral: iteration
    i = 0..m-1 lasts a0 + dd i and holds u0 + du (i + 1) (each decode takes its next token's KV
    as the iteration starts; on-demand growth only, du = 0 when the KV is reserved whole). With
    KV blocks of bs > 1 tokens the integral counts the tokens, not the blocks they fill."""
    m = srv[s, V_JM]
    if m == 0.0:
        return
    dec = srv[s, V_DEC]
    ctx = srv[s, V_CTX]
    if S.in_window(sti, stf, srv[s, V_JT0]):
        stf[S.S_SUMB] += srv[s, V_RUN] * m
        stf[S.S_SUMD] += decode_run_time(cst, dec, ctx, m)
        stf[S.S_NB] += m
        cp = context_price(cst, dec)
        a0 = decode_part(cst, dec) + cp * ctx
        dd = cp * dec
        du = dec if on_demand else 0.0
        u0 = srv[s, V_KVU] + du  # what the first iteration holds
        stf[S.S_KVINT] += (
            u0 * a0 * m
            + (u0 * dd + du * a0) * m * (m - 1.0) * 0.5
            + du * dd * (m - 1.0) * m * (2.0 * m - 1.0) / 6.0
        )
    if on_demand:
        if bs == 1.0:
            srv[s, V_KVU] += dec * m
        else:
            srv[s, V_KVU] += new_blocks(phase, s, srv[s, V_STEPS], m, bs)
    srv[s, V_STEPS] += m
    srv[s, V_CTX] += dec * m
    srv[s, V_JM] = 0.0


@njit(cache=True, nogil=True, inline="always")
def cut(j, t, srv, max_batch, cst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Server j, if it has room, ends its pending decode-only run at its first boundary >= t
    (where it can admit what its queue got at t)."""
    m0 = srv[j, V_JM]
    if m0 <= 1.0 or srv[j, V_RUN] >= max_batch:
        return
    dec = srv[j, V_DEC]
    ctx = srv[j, V_CTX]
    m = iterations_until(cst, dec, ctx, t - srv[j, V_JT0], np.int64(m0))
    if m < m0:
        srv[j, V_JM] = m
        srv[j, V_TNEXT] = srv[j, V_JT0] + decode_run_time(cst, dec, ctx, m)


@njit(cache=True, nogil=True, inline="always")
def interrupt(s, t, srv, max_batch, cst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The queue changed at time t (another server admitted or put back a request): every other
    server with room ends its pending decode-only run at its first boundary >= t."""
    for j in range(srv.shape[0]):
        if j != s:
            cut(j, t, srv, max_batch, cst)


@njit(cache=True, nogil=True, inline="always")
def held(pool, srv, s, sl, on_demand):  # type: ignore[no-untyped-def]  # noqa: ANN001
    if on_demand and pool[sl, F.F_DECODING] == 1.0:
        return srv[s, V_STEPS] + pool[sl, F.F_HBASE]
    return pool[sl, F.F_HELD]


@njit(cache=True, nogil=True, inline="always")
def slots(h, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """KV slots (tokens in whole blocks of bs) that h tokens take."""
    if bs == 1.0:
        return h
    return bs * np.ceil(h / bs)


@njit(cache=True, nogil=True, inline="always")
def admit(pool, srv, adm, stf, s, sl, t, held, slots):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Admit request sl to server s at time t holding `held` KV tokens (`slots` of the budget):
    it runs, prefilling from its start; its first admission is its start; it goes on top of the
    admission stack (the caller puts it in the prefilling list)."""
    srv[s, V_RUN] += 1.0
    srv[s, V_KVU] += slots
    pool[sl, F.F_HELD] = held
    pool[sl, F.F_PREFILLED] = 0.0
    pool[sl, F.F_DECODING] = 0.0
    pool[sl, F.F_SERVER] = s
    if pool[sl, F.F_START] < 0.0:
        pool[sl, F.F_START] = t
    stf[S.S_ADMSEQ] += 1.0
    pool[sl, F.F_ADMSEQ] = stf[S.S_ADMSEQ]
    adm_push(pool, srv, adm, s, sl, np.int64(stf[S.S_ADMSEQ]))


@njit(cache=True, nogil=True, inline="always")
def unseat(pool, srv, dheap, pref, qbuf, phase, s, sl, steps, bs, on_demand):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take running request sl off server s: out of the decoding counts or the prefilling list,
    its KV freed (what it holds under `on_demand` growth or reserved), to prefill its prompt and
    the output it has so far again (recompute); the caller queues it. Returns the KV slots
    freed."""
    freed = slots(held(pool, srv, s, sl, on_demand), bs)
    if pool[sl, F.F_DECODING] == 1.0:
        g = steps + pool[sl, F.F_BASE]
        dremove(pool, srv, dheap, s, sl)
        srv[s, V_DEC] -= 1.0
        srv[s, V_CTX] -= pool[sl, F.F_PROMPT] + g
        phase[s, phase_of(pool[sl, F.F_HBASE], bs)] -= 1
        pool[sl, F.F_DONE] = g
    else:
        npf = np.int64(srv[s, V_NPREF])
        k = 0
        for j in range(npf):
            if pref[s, j] != sl:
                pref[s, k] = pref[s, j]
                qbuf[k] = qbuf[j]
                k += 1
        srv[s, V_NPREF] = k
    srv[s, V_KVU] -= freed
    srv[s, V_RUN] -= 1.0
    pool[sl, F.F_HELD] = 0.0
    pool[sl, F.F_DECODING] = 0.0
    pool[sl, F.F_PREFILLED] = 0.0
    pool[sl, F.F_PEFF] = pool[sl, F.F_PROMPT] + pool[sl, F.F_DONE]
    pool[sl, F.F_SERVER] = -1.0
    return freed


@njit(cache=True, nogil=True, inline="always")
def reset(pool, ring, heap, qi, srv, dheap, pref, qbuf, phase, s, sl, steps, bs, order, guard):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Soft reset of request sl on server s (per-chunk admission, :func:`unseat`): it goes to the
    *back* of the queue, and server s admits nothing until one of its requests finishes. Returns
    the KV slots freed."""
    freed = unseat(pool, srv, dheap, pref, qbuf, phase, s, sl, steps, bs, True)
    srv[s, V_PAUSE] = 1.0
    Q.push(pool, ring, heap, qi, sl, order, guard)
    return freed


@njit(cache=True, nogil=True, inline="always")
def stall(pool, srv, dheap, phase, s, sl, bs):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Decoding request sl of server s sits out the coming iteration (starved: its KV could not
    grow): one step behind the server's count, it has the same tokens after the iteration and
    finishes one step later."""
    dremove(pool, srv, dheap, s, sl)
    phase[s, phase_of(pool[sl, F.F_HBASE], bs)] -= 1
    pool[sl, F.F_BASE] -= 1.0
    pool[sl, F.F_TARGET] += 1.0
    pool[sl, F.F_HBASE] -= 1.0
    phase[s, phase_of(pool[sl, F.F_HBASE], bs)] += 1
    dpush(pool, srv, dheap, s, sl)
