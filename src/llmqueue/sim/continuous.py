"""Continuous batching (iteration-level scheduling, Orca / vLLM), compiled.

Rules (:mod:`llmqueue.sim.engine` states them in full): before every iteration a server frees
the requests that produced their last token, makes room for one more KV token per decoding
sequence (``on_demand``: preempting the most recently admitted request), then, if nothing was
preempted, admits waiting requests in queue order while the batch has room and the KV budget
holds (stopping at the first that does not fit; with chunked prefill off, also at the first
whose whole prompt does not fit the iteration's remaining token budget; with ``batch_queue``,
only at a boundary where nothing runs, the paper's dynamic batching on an iteration-level engine). An iteration decodes one token for every
decoding sequence and prefills the admitted prompts (chunked after the decodes by the token
budget); it lasts step(decode_seqs, prefill_tokens, context_tokens). With per-chunk admission
(``P_CHUNK``, Hugging Face transformers' FIFO scheduler) the admission step is
:func:`~llmqueue.sim.per_chunk.schedule_per_chunk`'s instead: KV taken per prompt chunk, waiting requests that do not fit
passed over, starved requests sitting the iteration out (:func:`~llmqueue.sim.seats.stall`) and the newest of them
reset to the back of the queue (:func:`~llmqueue.sim.seats.reset`), the server paused (``V_PAUSE``) until a finish.

KV in blocks of ``P_BLOCK`` tokens (1: token-granular): a sequence holding h tokens takes
``slots(h)`` = P_BLOCK * ceil(h / P_BLOCK) of the budget, and ``V_KVU`` counts those slots. A
decoding sequence takes a new block when an iteration starts with its blocks full (h a multiple
of P_BLOCK); its held tokens are ``steps + F_HBASE``, so whether it does depends only on
``F_HBASE`` modulo P_BLOCK (its *phase*): ``phase[s, r]`` counts server s's decoding sequences of
phase r, and the blocks an iteration, or a run of m decode-only iterations, takes come from these
counts in O(P_BLOCK), not O(B) (:func:`~llmqueue.sim.seats.new_blocks`). A run of decode-only iterations is cut to
the length the free blocks surely cover, and the KV-time integral counts the growth inside such a
run in tokens.

Data layout, chosen so that an event costs O(log B), not O(B), for a batch of B:

- per server, the scalars ``srv[s, V_*]``: next boundary, decoding sequences, their total
  context, KV tokens held, running and prefilling counts, decode steps so far, the pending run
  of decode-only iterations (length and start);
- a decoding request's generated tokens are ``steps[s] + F_BASE`` and it has all of them when the
  server's step count reaches ``F_TARGET``: the next completion is the top of a per-server
  min-heap on ``F_TARGET`` (``dheap``); on-demand KV held is ``steps[s] + F_HBASE``;
- a run of m decode-only iterations is applied in O(1) (steps += m, context += m B, KV += m B);
- the most recently admitted request (the preemption victim) is the top live entry of a
  per-server admission stack with lazy deletion (``adm``: slot and admission number);
- the requests still prefilling, few, sit in a per-server list (``pref``).

Replicas behind a router (:mod:`llmqueue.sim.router`): :func:`run_continuous_routed` keeps a queue
per server (:class:`llmqueue.sim.state.Queues`); each arrival goes, at its arrival time, to the
replica the router chooses, and each server's iterations draw on its own queue only. The loads a
router compares are exact at the arrival: no boundary before it is pending (events run in time
order; a pending run of decode-only iterations ends at the first completion, so none falls inside
it), and the KV held by a server inside such a run is what the iterations started by then took
(a sequence takes its next token's KV when an iteration starts).

The servers' column layout (``V_*``, ``P_*``) and the inlined operations on a server's state the
loops and the per-chunk scheduler share live in :mod:`llmqueue.sim.seats`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numba import njit

from llmqueue.policy import KV_ACCOUNTINGS
from llmqueue.sim import fields as F
from llmqueue.sim import prefix as PC
from llmqueue.sim import queue as Q
from llmqueue.sim import router as R
from llmqueue.sim import state as S
from llmqueue.sim.jit import kernel
from llmqueue.sim.per_chunk import schedule_per_chunk
from llmqueue.sim.recorder import record
from llmqueue.sim.seats import (
    NV,
    P_BATCHQ,
    P_BLOCK,
    P_CHUNK,
    P_GUARD,
    P_GUARDS,
    P_KV,
    P_KVX,
    P_MAXB,
    P_MAXTOK,
    P_NBAT,
    P_NREQ,
    P_ONDEMAND,
    P_ORDER,
    P_PLIM,
    P_PREFIX,
    P_WARMUP,
    P_WHOLE,
    V_CTX,
    V_DEC,
    V_DHN,
    V_JM,
    V_JT0,
    V_KVU,
    V_NPREF,
    V_PAUSE,
    V_RUN,
    V_STEPS,
    V_TNEXT,
    V_WORK,
    adm_top,
    admit,
    apply_jump,
    cut,
    dpush,
    dremove,
    earliest,
    held,
    interrupt,
    new_blocks,
    new_servers,
    phase_of,
    policy_params,
    slots,
    unfit,
    unseat,
)
from llmqueue.sim.timelaw import decode_run_time, iterations_until, step_coefficients, step_time

__all__ = [
    "run_continuous",
    "run_continuous_routed",
    "new_servers",
    "policy_params",
    "ContinuousFormer",
    "NV",
]


@njit(cache=True, nogil=True, inline="always")
def _made(pool, sl, steps):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Output tokens running request sl has made (decoding: the server's steps + its base;
    prefilling: those made before a preemption)."""
    if pool[sl, F.F_DECODING] == 1.0:
        return steps + pool[sl, F.F_BASE]
    return pool[sl, F.F_DONE]


@njit(cache=True, nogil=True, inline="always")
def _admission_kv(pool, sl, on_demand, kv_extra):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """KV tokens request sl takes when admitted: its prompt (and recomputed output; plus the
    first token's under Dong's count) growing on demand, or prompt + output reserved."""
    if on_demand:
        return pool[sl, F.F_PEFF] + kv_extra
    return pool[sl, F.F_PROMPT] + pool[sl, F.F_OUT]


@njit(cache=True, nogil=True, inline="always")
def _running_key(pool, sl, order, steps):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """A running request's key under a preemptive order now: its true (PSJF) or predicted
    (PSPJF) output tokens, or those less the tokens it has made (SRPT, SPRPT)."""
    if order == Q.PSJF:
        return pool[sl, F.F_OUT]
    if order == Q.PSPJF:
        return pool[sl, F.F_PRED]
    g = _made(pool, sl, steps)
    if order == Q.SRPT:
        return pool[sl, F.F_OUT] - g
    if order == Q.SPRPT:
        return pool[sl, F.F_PRED] - g
    raise ValueError("_running_key: not a preemptive order code")


@njit(cache=True, nogil=True, inline="always")
def _largest_key(pool, srv, dheap, pref, s, order, steps, limit):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The running request of server s that a preemptive order evicts first: the largest key
    (:func:`_running_key`), ties to the latest arrival, among those that have made less than
    `limit` times their size in tokens (predicted under PSPJF and SPRPT: TRAIL's limited
    preemption; inf: every one); -1 when none is left."""
    best = -1
    bk = -np.inf
    n_dec = np.int64(srv[s, V_DHN])
    for j in range(n_dec + np.int64(srv[s, V_NPREF])):
        x = dheap[s, j] if j < n_dec else pref[s, j - n_dec]
        if limit < np.inf:
            size = pool[x, F.F_PRED] if order == Q.PSPJF or order == Q.SPRPT else pool[x, F.F_OUT]
            if _made(pool, x, steps) >= limit * size:
                continue
        k = _running_key(pool, x, order, steps)
        if best < 0 or k > bk or (k == bk and pool[x, F.F_ID] > pool[best, F.F_ID]):
            best = x
            bk = k
    return best


@njit(cache=True, nogil=True, inline="always")
def _iteration(  # type: ignore[no-untyped-def]  # noqa: ANN001, C901
    s, t, next_a, state, queue, servers, cst, recorder, cache,
):  # fmt: skip
    """Server s at an iteration boundary at time t: the pending decode-only run, completions,
    preemption, admission, then the next iteration (or a closed-form run of decode-only
    iterations, applied when it ends). Returns whether the queue changed. With prefix caching
    (``P_PREFIX``) the KV budget is server s's block pool in `cache` (:mod:`llmqueue.sim.prefix`:
    ``V_KVU`` counts the distinct blocks in use)."""
    sti, stf, _qsamp = state
    pool, ring, heap, free, qi = queue
    srv, dheap, adm, pref, qbuf, phase, sbuf, prm = servers
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    max_batch = prm[P_MAXB]
    kv_tokens = prm[P_KV]
    on_demand = prm[P_ONDEMAND] == 1.0
    max_tok = prm[P_MAXTOK]
    order = np.int64(prm[P_ORDER])
    guard = prm[P_GUARD] == 1.0
    guard_s = prm[P_GUARDS]
    warmup = np.int64(prm[P_WARMUP])
    n_req = np.int64(prm[P_NREQ])
    nbat = np.int64(prm[P_NBAT])
    bs = prm[P_BLOCK]
    preemptive = order == Q.PSJF or order == Q.SRPT or order == Q.PSPJF or order == Q.SPRPT
    pc = prm[P_PREFIX] == 1.0
    apply_jump(s, sti, stf, srv, phase, on_demand, bs, cst)
    stf[S.S_EVENTS] += 1.0
    changed = False
    window = S.in_window(sti, stf, t)
    steps = srv[s, V_STEPS]
    if pc:  # the decode blocks of the iterations since the last boundary, in order
        PC.settle(cache, s, np.int64(srv[s, V_KVU] / bs))
    # 1. completions (with prefix caching their blocks go back after the loop, in admission order
    # as vLLM frees a step's finished requests in its running order)
    n_fin = 0
    while srv[s, V_DHN] > 0:
        sl = dheap[s, 0]
        if pool[sl, F.F_TARGET] > steps:
            break
        dremove(pool, srv, dheap, s, sl)
        n = pool[sl, F.F_OUT]
        if pool[sl, F.F_DECODING] == 1.0:
            srv[s, V_DEC] -= 1.0
            srv[s, V_CTX] -= pool[sl, F.F_PROMPT] + n
            phase[s, phase_of(pool[sl, F.F_HBASE], bs)] -= 1
        h = slots(held(pool, srv, s, sl, on_demand), bs)
        if pc:
            sbuf[n_fin, 0] = sl
            sbuf[n_fin, 1] = np.int64(h / bs)
            n_fin += 1
        else:
            srv[s, V_KVU] -= h
        srv[s, V_RUN] -= 1.0
        srv[s, V_WORK] -= R.work_tokens(pool[sl, F.F_PROMPT], pool[sl, F.F_PRED])
        srv[s, V_PAUSE] = 0.0  # a finish lets the per-chunk scheduler admit again
        pool[sl, F.F_SERVER] = -1.0
        a = pool[sl, F.F_ARR]
        if window:
            sti[S.I_COMPLETED] += 1
            stf[S.S_TOK] += n
        rid = np.int64(pool[sl, F.F_ID])
        g = S.batch_of(rid, warmup, n_req, nbat)
        if g >= 0:
            tf = pool[sl, F.F_TTFT]
            record(sums, counts, hist, maxima, fbuf, ibuf, S.M_WAIT, g, pool[sl, F.F_START] - a)
            record(sums, counts, hist, maxima, fbuf, ibuf, S.M_RESP, g, t - a)
            record(sums, counts, hist, maxima, fbuf, ibuf, S.M_TTFT, g, tf - a)
            if n >= 2.0:
                record(sums, counts, hist, maxima, fbuf, ibuf, S.M_TPOT, g, (t - tf) / (n - 1.0))
            sti[S.I_DONE] += 1
        if rid < rec.shape[0]:
            rec[rid, 0] = pool[sl, F.F_START]
            rec[rid, 1] = pool[sl, F.F_TTFT]
            rec[rid, 2] = t
            rec[rid, 3] = s
        if not pc:
            Q.release(pool, free, qi, sl)
    if n_fin > 0:
        for i in range(1, n_fin):  # insertion sort by admission number (few finish at once)
            x0 = sbuf[i, 0]
            x1 = sbuf[i, 1]
            j = i - 1
            while j >= 0 and pool[sbuf[j, 0], F.F_ADMSEQ] > pool[x0, F.F_ADMSEQ]:
                sbuf[j + 1, 0] = sbuf[j, 0]
                sbuf[j + 1, 1] = sbuf[j, 1]
                j -= 1
            sbuf[j + 1, 0] = x0
            sbuf[j + 1, 1] = x1
        for i in range(n_fin):
            sl = sbuf[i, 0]
            fr = PC.release(cache, pool, s, sl, np.int64(pool[sl, F.F_ID]), sbuf[i, 1])
            srv[s, V_KVU] -= bs * fr
            Q.release(pool, free, qi, sl)
    nstall = 0
    stall_ctx = 0.0
    if prm[P_CHUNK] == 1.0:
        # 2-3. transformers' FIFO scheduler: KV per chunk, starvation and resets
        changed_pc, preempted, dec, budget, pre, pctx, npf, need, nstall, stall_ctx = (
            schedule_per_chunk(s, t, steps, window, state, queue, servers)
        )  # fmt: skip
        if changed_pc:
            changed = True
    else:
        # 2. on-demand KV: one more token per decoding sequence (a new block for those whose blocks
        # are full), else preempt the newest
        preempted = False
        need = 0.0
        if on_demand:
            # a decoding sequence whose blocks are full (phase = -steps mod bs) takes a new one
            full = phase_of(-steps, bs)
            need = srv[s, V_DEC] if bs == 1.0 else bs * phase[s, full]
            while srv[s, V_KVU] + need > kv_tokens and srv[s, V_RUN] > 0:
                sl = adm_top(pool, srv, adm, s)
                if pc:
                    h = slots(held(pool, srv, s, sl, True), bs)
                    rid = np.int64(pool[sl, F.F_ID])
                    fr = PC.release(cache, pool, s, sl, rid, np.int64(h / bs))
                    srv[s, V_KVU] += h - bs * fr  # unseat frees h: the pool freed fr blocks
                unseat(pool, srv, dheap, pref, qbuf, phase, s, sl, steps, bs, True)
                need = srv[s, V_DEC] if bs == 1.0 else bs * phase[s, full]
                Q.push_front(pool, ring, heap, qi, sl, order, guard)
                preempted = True
                changed = True
                if window:
                    sti[S.I_PREEMPT] += 1
        # 2b. a preemptive order: evict the running request with the largest key for a waiting
        # one with a smaller key that has no seat or KV (recompute, as vLLM's preemption)
        if preemptive and not preempted and prm[P_BATCHQ] == 0.0:
            while True:
                c = Q.select(pool, ring, heap, qi, order, guard, guard_s, t)
                if c < 0:
                    break
                c_kv = _admission_kv(pool, c, on_demand, prm[P_KVX])
                if (
                    srv[s, V_RUN] < max_batch
                    and srv[s, V_NPREF] < pref.shape[1]
                    and srv[s, V_KVU] + need + slots(c_kv, bs) <= kv_tokens
                ):
                    break  # it has room: admitted below
                v = _largest_key(pool, srv, dheap, pref, s, order, steps, prm[P_PLIM])
                if v < 0 or not pool[c, Q.key_field(order)] < _running_key(pool, v, order, steps):
                    break
                unseat(pool, srv, dheap, pref, qbuf, phase, s, v, steps, bs, on_demand)
                Q.push(pool, ring, heap, qi, v, order, guard)
                if on_demand:
                    need = srv[s, V_DEC] if bs == 1.0 else bs * phase[s, phase_of(-steps, bs)]
                changed = True
                if window:
                    sti[S.I_PREEMPT] += 1
        if pc:  # this iteration's decodes take their blocks before any admission (vLLM)
            PC.settle(cache, s, np.int64((srv[s, V_KVU] + need) / bs))
        # 3. prefill chunks of the requests already prefilling, then admissions
        dec = srv[s, V_DEC]
        budget = max_tok - dec
        pre = 0.0
        pctx = 0.0
        npf = np.int64(srv[s, V_NPREF])
        for j in range(npf):
            sl = pref[s, j]
            done = pool[sl, F.F_PREFILLED]
            q = pool[sl, F.F_PEFF] - done
            if q > budget:
                q = budget if budget > 0.0 else 0.0
            qbuf[j] = q
            budget -= q
            pre += q
            pctx += done + q
            if pc:
                PC.register_upto(cache, pool, s, sl, np.int64(pool[sl, F.F_ID]), done + q, bs)
        # the batch queue admits only when nothing runs (then up to max_batch at once)
        if not preempted and (prm[P_BATCHQ] == 0.0 or srv[s, V_RUN] == 0.0):
            while srv[s, V_RUN] < max_batch and npf < pref.shape[1] and budget > 0.0:
                sl = Q.select(pool, ring, heap, qi, order, guard, guard_s, t)
                if sl < 0:
                    break
                need_kv = _admission_kv(pool, sl, on_demand, prm[P_KVX])
                rid = np.int64(pool[sl, F.F_ID])
                hit = 0.0
                k = 0
                nb = 0
                if pc:
                    # its hit blocks, and its others from the free queue, with the hit blocks
                    # that sit there counted as taken (vLLM's check)
                    k, ev = PC.lookup(cache, s, rid, pool[sl, F.F_PEFF], bs)
                    nb = np.int64(slots(need_kv, bs) / bs)
                    if srv[s, V_KVU] + need + bs * (nb - k + ev) > kv_tokens:
                        break
                    hit = bs * k
                # the decodes of this iteration take their KV first (as vLLM's running requests do)
                elif srv[s, V_KVU] + need + slots(need_kv, bs) > kv_tokens:
                    break
                # chunked prefill off: the whole prompt must fit this iteration's budget
                if prm[P_WHOLE] == 1.0 and pool[sl, F.F_PEFF] - hit > budget:
                    break
                Q.remove(pool, ring, heap, qi, sl, order)
                changed = True
                if pc:
                    if window and pool[sl, F.F_START] < 0.0:
                        stf[S.S_HITTOK] += hit
                        stf[S.S_PTOK] += pool[sl, F.F_PROMPT]
                    got = PC.take(cache, pool, s, sl, rid, k, nb)
                    admit(pool, srv, adm, stf, s, sl, t, need_kv, bs * got)
                    pool[sl, F.F_PREFILLED] = hit  # the hit tokens are context, not work
                else:
                    admit(pool, srv, adm, stf, s, sl, t, need_kv, slots(need_kv, bs))
                pref[s, npf] = sl
                q = pool[sl, F.F_PEFF] - hit
                if q > budget:
                    q = budget
                if pc:
                    PC.register_upto(cache, pool, s, sl, rid, hit + q, bs)
                qbuf[npf] = q
                npf += 1
                budget -= q
                pre += q
                pctx += hit + q
            srv[s, V_NPREF] = npf
    if srv[s, V_RUN] == 0.0:
        srv[s, V_TNEXT] = np.inf
        return changed
    ctx = srv[s, V_CTX] - stall_ctx  # a starved (stalled) sequence is not in the iteration
    if npf == 0 and dec > 0.0 and nstall == 0:
        # 4a. decode-only: a run of iterations up to the next event, in closed form
        m = np.int64(pool[dheap[s, 0], F.F_TARGET] - steps)
        if on_demand and kv_tokens < np.inf:
            # m iterations take at most ceil(m / bs) new blocks per sequence
            mk = np.int64((kv_tokens - srv[s, V_KVU]) // (bs * dec)) * np.int64(bs)
            if mk < m:
                m = mk
        if m < 1 or preempted:
            m = 1  # after a preemption the next boundary may admit again
        # (a preemptive order's arrival may evict a running request: stop at it even when full)
        if (srv[s, V_RUN] < max_batch or preemptive) and prm[P_BATCHQ] == 0.0:
            stop = next_a
            if guard and qi[Q.Q_LEN] > 0:
                oldest = Q.oldest_arrival(pool, ring, qi)
                if oldest + guard_s < stop:
                    stop = oldest + guard_s
            if stop < np.inf:
                m = iterations_until(cst, dec, ctx, stop - t, m)
        srv[s, V_JM] = m
        srv[s, V_JT0] = t
        srv[s, V_TNEXT] = t + decode_run_time(cst, dec, ctx, m)
        return changed
    # 4b. one iteration with prefill (or nothing decoding yet), applied now; its decodes take
    # their next token's KV as it starts, so it holds that KV throughout
    d = step_time(cst, dec, pre, ctx + pctx)
    if on_demand:
        srv[s, V_KVU] += need
    if window:
        stf[S.S_SUMB] += srv[s, V_RUN]
        stf[S.S_SUMD] += d
        stf[S.S_NB] += 1.0
        stf[S.S_KVINT] += srv[s, V_KVU] * d
    te = t + d
    steps += 1.0
    srv[s, V_STEPS] = steps
    srv[s, V_CTX] += dec
    k = 0
    for j in range(npf):
        sl = pref[s, j]
        pool[sl, F.F_PREFILLED] += qbuf[j]
        if pool[sl, F.F_PREFILLED] >= pool[sl, F.F_PEFF]:
            g = pool[sl, F.F_DONE] + 1.0
            pool[sl, F.F_DONE] = g
            if pool[sl, F.F_TTFT] < 0.0:
                pool[sl, F.F_TTFT] = te
            n = pool[sl, F.F_OUT]
            if g < n:
                pool[sl, F.F_DECODING] = 1.0
                pool[sl, F.F_BASE] = g - steps
                pool[sl, F.F_TARGET] = n - (g - steps)
                pool[sl, F.F_HBASE] = pool[sl, F.F_HELD] - steps
                phase[s, phase_of(pool[sl, F.F_HBASE], bs)] += 1
                srv[s, V_DEC] += 1.0
                srv[s, V_CTX] += pool[sl, F.F_PROMPT] + g
            else:
                pool[sl, F.F_TARGET] = steps  # done: freed at the next boundary
            dpush(pool, srv, dheap, s, sl)
        else:
            pref[s, k] = sl
            k += 1
    srv[s, V_NPREF] = k
    srv[s, V_TNEXT] = te
    return changed


@kernel
def run_continuous(  # type: ignore[no-untyped-def]  # noqa: ANN001
    chunk, final, state, queue, servers, cst, recorder, id_cap, cache,
):  # fmt: skip
    """Continuous batching over one chunk of arrivals; returns a code (state.NEED_MORE, DONE,
    GROW, CAP). Events in time order; an arrival before a boundary at the same time goes first.
    `prm`: the policy's numbers (:func:`policy_params`)."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pool, ring, heap, free, qi = queue
    srv, dheap, adm, pref, qbuf, phase, sbuf, prm = servers
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    max_batch = prm[P_MAXB]
    order = np.int64(prm[P_ORDER])
    guard = prm[P_GUARD] == 1.0
    warmup = np.int64(prm[P_WARMUP])
    n_req = np.int64(prm[P_NREQ])
    nbat = np.int64(prm[P_NBAT])
    n_avail = arr.size
    c = srv.shape[0]
    # a changed queue cuts the other servers' decode-only runs where they could act on it: those
    # with room, and under a preemptive order also the full ones (they may evict for it)
    preemptive = order == Q.PSJF or order == Q.SRPT or order == Q.PSPJF or order == Q.SPRPT
    cut_below = np.inf if preemptive else max_batch
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        pos, a, more = S.next_arrival(sti, arr, final, 1)
        if more:
            return S.NEED_MORE  # jumps need the arrival after the next one: keep one in hand
        s = earliest(srv)
        tb = srv[s, V_TNEXT]
        if a <= tb and a < np.inf:
            code = S.room(qi[Q.Q_NFREE], qi[Q.Q_LEN], sti, id_cap)
            if code != S.GO:
                return code
            rid = S.advance(sti, stf, pos, a)
            if unfit(prm, prompt[pos], out[pos]):
                S.on_rejected(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)
                continue
            S.enqueue(queue, chunk, pos, a, rid, order, guard)
            S.on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)
            s = -1
            for j in range(c):  # an idle server starts at once
                if srv[j, V_TNEXT] == np.inf:
                    s = j
                    break
            if s < 0:
                continue
            t_ev = a
            na = arr[pos + 1] if pos + 1 < n_avail else np.inf
        else:
            if tb == np.inf:
                return S.DONE  # nothing runs and no arrivals are left
            t_ev = tb
            na = a
        # one call site: _iteration is inlined once (compile time), for both kinds of event
        ch = _iteration(s, t_ev, na, state, queue, servers, cst, recorder, cache)
        if ch:
            interrupt(s, t_ev, srv, cut_below, cst)


@njit(cache=True, nogil=True, inline="always")
def _replica_load(kind, r, t, srv, phase, qis, on_demand, bs, cst, arrival):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Replica r's load of kind `kind` (:func:`llmqueue.sim.router.load_kind`) at time t. KV held:
    what the iteration running at t holds (a sequence takes its next token's KV when an iteration
    starts); inside a pending run of decode-only iterations, those started before t count.
    Prefix: requests (prefix_queue: the waiting ones) - hit blocks x PREFIX_WEIGHT, the hits of
    `arrival` = (cache, request id, prompt tokens, prefix caching on) in r's pool as it is at t
    (the decode blocks of the iterations started by then taken first)."""
    if kind == R.LOAD_REQUESTS:
        return qis[r, Q.Q_LEN] + srv[r, V_RUN]
    if kind == R.LOAD_WORK:
        return srv[r, V_WORK]
    if kind == R.LOAD_PREFIX_INDEX:
        cache, rid, prompt, pc = arrival
        k = PC.sent_run(cache, r, rid, prompt, bs) if pc else 0
        return qis[r, Q.Q_LEN] - R.PREFIX_WEIGHT * k
    if kind == R.LOAD_PREFIX or kind == R.LOAD_PREFIX_QUEUE:
        cache, rid, prompt, pc = arrival
        n = qis[r, Q.Q_LEN] + (srv[r, V_RUN] if kind == R.LOAD_PREFIX else 0.0)
        if not pc:
            return n
        u = _replica_kv(r, t, srv, phase, on_demand, bs, cst)
        PC.settle(cache, r, np.int64(u / bs))
        k, _ev = PC.lookup(cache, r, rid, prompt, bs)
        return n - R.PREFIX_WEIGHT * k
    return _replica_kv(r, t, srv, phase, on_demand, bs, cst)


@njit(cache=True, nogil=True, inline="always")
def _replica_kv(r, t, srv, phase, on_demand, bs, cst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The KV tokens replica r holds at time t (:func:`_replica_load`)."""
    u = srv[r, V_KVU]
    m = srv[r, V_JM]
    if not on_demand or m == 0.0:
        return u
    dec = srv[r, V_DEC]
    k = iterations_until(cst, dec, srv[r, V_CTX], t - srv[r, V_JT0], np.int64(m))
    if bs == 1.0:
        return u + dec * k
    return u + new_blocks(phase, r, srv[r, V_STEPS], k, bs)


@kernel
def run_continuous_routed(  # type: ignore[no-untyped-def]  # noqa: ANN001
    chunk, final, state, queues, servers, cst, router, recorder, id_cap, cache,
):  # fmt: skip
    """Continuous batching on replicas with a queue each, behind router `rcode` (module
    docstring); returns a code as :func:`run_continuous` (GROW: every queue is doubled). A replica's
    run of decode-only iterations is cut by an arrival only when the arrival joins its queue."""
    arr, prompt, out, pred = chunk
    sti, stf, qsamp = state
    pools, rings, heaps, frees, qis, qtot = queues
    srv, dheap, adm, pref, qbuf, phase, sbuf, prm = servers
    rcode, rst, perm, load = router
    sums, counts, hist, maxima, fbuf, ibuf, rec = recorder
    max_batch = prm[P_MAXB]
    on_demand = prm[P_ONDEMAND] == 1.0
    order = np.int64(prm[P_ORDER])
    guard = prm[P_GUARD] == 1.0
    warmup = np.int64(prm[P_WARMUP])
    n_req = np.int64(prm[P_NREQ])
    nbat = np.int64(prm[P_NBAT])
    bs = prm[P_BLOCK]
    kind = R.load_kind(rcode)
    c = srv.shape[0]
    while True:
        if sti[S.I_DONE] >= n_req:
            return S.DONE
        pos, a, more = S.next_arrival(sti, arr, final, 1)
        if more:
            return S.NEED_MORE  # jumps need the arrival after the next one: keep one in hand
        s = earliest(srv)
        tb = srv[s, V_TNEXT]
        if a <= tb and a < np.inf:
            code, waiting = S.room_routed(qis, sti, id_cap)
            if code != S.GO:
                return code
            rid = S.advance(sti, stf, pos, a)
            qtot[Q.Q_LEN] = waiting
            if unfit(prm, prompt[pos], out[pos]):
                S.on_rejected(sti, stf, qsamp, qtot, rid, a, warmup, n_req, nbat)
                continue
            if kind != R.LOAD_NONE:
                arrival = (cache, rid, prompt[pos], prm[P_PREFIX] == 1.0)
                for j in range(c):
                    load[j] = _replica_load(
                        kind, j, a, srv, phase, qis, on_demand, bs, cst, arrival
                    )
                if kind == R.LOAD_PREFIX_QUEUE or kind == R.LOAD_PREFIX_INDEX:
                    R.prefix_scores(load, np.floor(prompt[pos] / bs))
            r = R.choose(rcode, load, rst, perm)
            if kind == R.LOAD_PREFIX_INDEX and prm[P_PREFIX] == 1.0:
                PC.mark_sent(cache, r, rid)
            S.enqueue(
                (pools[r], rings[r], heaps[r], frees[r], qis[r]), chunk, pos, a, rid, order, guard
            )
            srv[r, V_WORK] += R.work_tokens(prompt[pos], pred[pos])
            qtot[Q.Q_LEN] = waiting + 1
            S.on_arrival(sti, stf, qsamp, qtot, rid, a, warmup, n_req, nbat)
            if srv[r, V_TNEXT] < np.inf:
                cut(r, a, srv, max_batch, cst)  # its decode-only run ends at its boundary >= a
                continue
            s = r
            t_ev = a
        else:
            if tb == np.inf:
                return S.DONE  # nothing runs and no arrivals are left
            t_ev = tb
        # a replica's decode-only runs are not cut at every arrival, only at its own (cut)
        replica = (pools[s], rings[s], heaps[s], frees[s], qis[s])
        _iteration(s, t_ev, np.inf, state, replica, servers, cst, recorder, cache)


NO_CAP_RUN = 1 << 30  # max_batch of a policy without one


class ContinuousFormer(S.Former):
    """The driver of :func:`run_continuous` (module docstring): the servers' arrays, the policy's
    numbers, and the growth of the per-server arrays with the queue when the batch has no cap."""

    whole_tokens = True  # iterations generate whole tokens
    has_tpot = True

    def __init__(self, setup: S.Setup, run: S.Run) -> None:
        policy = setup.policy
        self.step_law = step_coefficients(setup.latency, setup.batch_time_table)
        self.max_batch = policy.bmax if policy.bmax is not None else NO_CAP_RUN
        self.c = int(policy.servers)
        self.queues = S.Queues.new(self.c) if policy.routed else None
        self.router = R.RouterState.new(policy, setup.seed) if policy.routed else None
        mb = self.max_batch if self.max_batch < NO_CAP_RUN else self._queue_cap(run)
        self.block = int(policy.block_size)
        self.srv, self.dheap, self.adm, self.pref, self.qbuf, self.phase, self.sbuf = new_servers(
            self.c, mb, self.block
        )
        guard = policy.guard_s is not None
        guard_s = policy.guard_s if policy.guard_s is not None else math.inf
        self.prm = policy_params(
            float(self.max_batch),
            float(policy.kv_tokens) if policy.kv_tokens is not None else math.inf,
            policy.admission in ("on_demand", "per_chunk"),
            float(policy.max_batched_tokens) if policy.max_batched_tokens is not None else math.inf,
            Q.check_order(policy.order),
            guard,
            guard_s,
            run.warmup,
            run.n_req,
            run.nbat,
            int(policy.block_size),
            policy.chunked_prefill,
            policy.batch_queue,
            policy.admission == "per_chunk",
            float(policy.kv_margin),
            float(KV_ACCOUNTINGS.index(policy.kv_accounting)),
            math.inf if policy.preempt_limit is None else float(policy.preempt_limit),
            policy.prefix_caching,
        )
        self.cache = self._cache(setup) if policy.prefix_caching else PC.no_cache(self.c)

    def _cache(self, setup: S.Setup) -> tuple[np.ndarray, ...]:
        """The servers' block pools (kv_tokens / block_size blocks each) and the requests'
        dense ids over the engine's blocks, by request id (the workload's rows in order; a
        workload without block ids shares nothing)."""
        policy = setup.policy
        bs = self.block
        capacity = int(policy.kv_tokens) // bs
        blocks = getattr(setup.workload, "blocks", None)
        if blocks is None:
            return PC.new_cache(self.c, capacity, np.zeros(1, np.int64), np.zeros(0, np.int64), 1)
        prompt = np.maximum(0.0, np.floor(np.asarray(setup.workload.prompt_tokens) + 0.5))
        dense, n_ids = blocks.engine_ids(bs, prompt)
        index = bool(policy.routed) and (
            R.load_kind(R.check_router(policy.router)) == R.LOAD_PREFIX_INDEX
        )
        return PC.new_cache(self.c, capacity, dense.offsets, dense.ids, n_ids, index=index)

    def _queue_cap(self, run: S.Run) -> int:
        return self.queues.cap if self.queues is not None else run.queue_cap

    def waiting(self, run: S.Run) -> int:
        return self.queues.waiting() if self.queues is not None else int(run.qi[Q.Q_LEN])

    def step(self, run: S.Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        """One call of the kernel over the arrivals in hand; grows what it asked for."""
        qs, rt = self.queues, self.router
        servers = (
            self.srv, self.dheap, self.adm, self.pref, self.qbuf, self.phase, self.sbuf, self.prm,
        )  # fmt: skip
        if qs is None or rt is None:
            code = run_continuous(
                tuple(chunk), final, run.state, run.queue, servers, self.step_law, run.recorder,
                run.id_cap, self.cache,
            )  # fmt: skip
        else:
            code = run_continuous_routed(
                tuple(chunk), final, run.state, qs.arrays, servers, self.step_law, rt.arrays,
                run.recorder, run.id_cap, self.cache,
            )  # fmt: skip
        if code == S.GROW:
            if qs is not None:
                qs.grow()
            else:
                run.grow_queue()
            if self.max_batch >= NO_CAP_RUN:  # unlimited batch: room for everyone in the system
                old = (self.dheap, self.adm, self.pref)
                srv_keep = self.srv
                # the phase counts keep their size (c x block): only the per-request arrays grow
                self.srv, self.dheap, self.adm, self.pref, self.qbuf, _, self.sbuf = new_servers(
                    self.c, self._queue_cap(run), self.block
                )
                self.srv[:] = srv_keep
                self.dheap[:, : old[0].shape[1]] = old[0]
                self.adm[:, : old[1].shape[1]] = old[1]
                self.pref[:, : old[2].shape[1]] = old[2]
        return int(code)
