"""Per-chunk admission under continuous batching, compiled: one step of Hugging Face
transformers' FIFO scheduler (:func:`schedule_per_chunk`), the admission step of
:mod:`llmqueue.sim.continuous` for a policy with ``admission=per_chunk`` (``P_CHUNK``). KV taken per
prompt chunk, waiting requests that do not fit passed over, starved requests sitting the
iteration out and the newest of them reset to the back of the queue, the server paused until a
finish. Units: seconds, tokens.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from llmqueue.sim import fields as F
from llmqueue.sim import queue as Q
from llmqueue.sim import state as S
from llmqueue.sim.seats import (
    P_BLOCK,
    P_GUARD,
    P_KV,
    P_MARGIN,
    P_MAXB,
    P_MAXTOK,
    P_ORDER,
    V_ADMN,
    V_KVU,
    V_NPREF,
    V_PAUSE,
    V_RUN,
    admit,
    phase_of,
    reset,
    slots,
    stall,
)

__all__ = ["schedule_per_chunk"]


@njit(cache=True, nogil=True, inline="always")
def schedule_per_chunk(  # type: ignore[no-untyped-def]  # noqa: ANN001, C901
    s, t, steps, window, state, queue, servers,
):  # fmt: skip
    """One step of Hugging Face transformers' FIFO scheduler on server s at time t (after the
    completions; ``generation/continuous_batching/scheduler.py`` and ``offloading_manager.py``
    of transformers 5.23, offload to the CPU off):

    1. the free share of the KV is read once: below ``P_MARGIN`` the step takes no prompt chunk
       once something is scheduled;
    2. candidates in order: decoding requests (admission order), then those part way through
       their prompt (admission order), then the waiting queue in FCFS order (none while the
       server is paused); each asks min(its tokens left, the step's token budget) tokens (a
       decode 1) and is scheduled if the KV blocks those tokens need are free, else skipped
       (*starved* if it runs) and later candidates may pass it; the budget, the request cap
       (at most ``P_MAXB`` scheduled, and running) end the step's list;
    3. while some request is starved and more than one runs: if the starved, in order, would
       all get their blocks, stop; else the newest starved is reset (:func:`reset`); if nothing
       was scheduled, the step is planned again (without admissions: the server is paused);
    4. the starved that remain sit the iteration out (:func:`stall`).

    KV is taken as tokens are scheduled: a prompt chunk's blocks now (``V_KVU``), the decodes'
    (``need``) when the iteration starts. Returns (queue changed, reset any, scheduled decodes,
    token budget left, prefill tokens, their context, prefilling requests, decode KV, stalled
    decodes, their context)."""
    sti, stf, _qsamp = state
    pool, ring, heap, _free, qi = queue
    srv, dheap, adm, pref, qbuf, phase, sbuf, prm = servers
    max_batch = prm[P_MAXB]
    kv = prm[P_KV]
    max_tok = prm[P_MAXTOK]
    bs = prm[P_BLOCK]
    order = np.int64(prm[P_ORDER])
    guard = prm[P_GUARD] == 1.0
    full = phase_of(-steps, bs)
    changed = False
    preempted = False
    while True:
        free = kv - srv[s, V_KVU]
        in_margin = kv == np.inf or free >= prm[P_MARGIN] * kv
        budget = max_tok
        nsched = 0
        nst = 0
        need = 0.0
        dec = 0.0
        # decodes, in admission order (the admission stack from the bottom)
        for e in range(np.int64(srv[s, V_ADMN])):
            x = adm[s, e, 0]
            if pool[x, F.F_SERVER] != s or np.int64(pool[x, F.F_ADMSEQ]) != adm[s, e, 1]:
                continue
            if pool[x, F.F_DECODING] != 1.0:
                continue
            if phase_of(pool[x, F.F_HBASE], bs) == full:
                if free - need < bs:
                    sbuf[nst, 0] = x
                    sbuf[nst, 1] = np.int64(bs)
                    nst += 1
                    continue
                need += bs
            dec += 1.0
            nsched += 1
            budget -= 1.0
        # prompt chunks of the requests part way through their prompt, in admission order
        stop = budget <= 0.0 or nsched >= max_batch
        npf = np.int64(srv[s, V_NPREF])
        pre = 0.0
        pctx = 0.0
        for j in range(npf):
            qbuf[j] = 0.0
        for j in range(npf):
            if stop or (not in_margin and nsched > 0):
                stop = True
                break
            sl = pref[s, j]
            done = pool[sl, F.F_PREFILLED]
            q = pool[sl, F.F_PEFF] - done
            if q > budget:
                q = budget
            h = pool[sl, F.F_HELD]
            take = slots(h + q, bs) - slots(h, bs)
            if take > free - need:
                sbuf[nst, 0] = sl
                sbuf[nst, 1] = np.int64(take)
                nst += 1
                continue
            srv[s, V_KVU] += take
            free -= take
            pool[sl, F.F_HELD] = h + q
            qbuf[j] = q
            budget -= q
            pre += q
            pctx += done + q
            nsched += 1
            if budget <= 0.0 or nsched >= max_batch:
                stop = True
        # the waiting queue in FCFS order, passing those that do not fit
        if not stop and srv[s, V_PAUSE] == 0.0:
            i = 0
            while i < qi[Q.Q_RLEN]:
                if srv[s, V_RUN] >= max_batch or npf >= pref.shape[1]:
                    break
                if not in_margin and nsched > 0:
                    break
                sl = Q.ring_live(pool, ring, qi, i)
                if sl < 0:
                    i += 1
                    continue
                q = pool[sl, F.F_PEFF]
                if q > budget:
                    q = budget
                take = slots(q, bs)
                if take > free - need:
                    i += 1
                    continue
                Q.take_at(pool, ring, qi, i)
                changed = True
                admit(pool, srv, adm, stf, s, sl, t, q, take)
                free -= take
                pref[s, npf] = sl
                qbuf[npf] = q
                npf += 1
                budget -= q
                pre += q
                pctx += q
                nsched += 1
                i += 1
                if budget <= 0.0 or nsched >= max_batch:
                    break
        srv[s, V_NPREF] = npf
        # resets: the newest starved until the others would all get their blocks
        resets = 0
        while nst > 0 and srv[s, V_RUN] > 1.0:
            avail = free - need
            fits = True
            for k in range(nst):
                avail -= sbuf[k, 1]
                if avail < 0.0:
                    fits = False
                    break
            if fits:
                break
            nst -= 1
            free += reset(pool, ring, heap, qi, srv, dheap, pref, qbuf, phase, s,
                           sbuf[nst, 0], steps, bs, order, guard)  # fmt: skip
            npf = np.int64(srv[s, V_NPREF])
            resets += 1
            preempted = True
            changed = True
            if window:
                sti[S.I_PREEMPT] += 1
        if nsched > 0 or resets == 0:
            break
        # nothing was scheduled: plan the step again without the reset requests
    # the starved decodes that remain sit this iteration out
    nstall = 0
    stall_ctx = 0.0
    for k in range(nst):
        x = sbuf[k, 0]
        if pool[x, F.F_DECODING] == 1.0:
            stall_ctx += pool[x, F.F_PROMPT] + steps + pool[x, F.F_BASE]
            stall(pool, srv, dheap, phase, s, x, bs)
            nstall += 1
    return changed, preempted, dec, budget, pre, pctx, npf, need, nstall, stall_ctx
