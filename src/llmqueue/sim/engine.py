"""The serving engine: requests that carry their own lengths, a queue order, a batch former and a
time law, on c identical servers sharing one queue, or on c replicas with a queue each behind a
router (:mod:`llmqueue.sim.router`). Compiled with Numba; one run per call of :func:`run`.

Where things live (one compiled part per concern):

- the workload, a request table generated chunk by chunk: :mod:`llmqueue.sim.workload`;
- the queue order (fcfs / sjf / spjf, starvation guard): :mod:`llmqueue.sim.queue`;
- the time law (Eq. 18 / 26 batches, the iteration step law): :mod:`llmqueue.sim.timelaw`;
- the router of replicas with a queue each (round_robin, random, jsq, least_work, least_kv,
  power_of_d, prefix_affinity): :mod:`llmqueue.sim.router`, called by the routed loops of the static formers
  ``none``, ``dynamic``, ``elastic`` and of continuous batching;
- the batch former: one compiled event loop and its Python driver per module,
  :mod:`llmqueue.sim.static` (``none``, ``dynamic``, ``fixed``, ``elastic``),
  :mod:`llmqueue.sim.continuous` (iteration-level scheduling) and :mod:`llmqueue.sim.multibin`,
  chosen by name in :data:`FORMERS` (the names and their codes come from
  :data:`llmqueue.policy.BATCHING`), with the arrays of a run in :class:`llmqueue.sim.state.Run`;
  a preemptive queue order (``psjf``, ``srpt``, ``pspjf``, ``sprpt``) runs ``none`` on one server
  in its own loop, :mod:`llmqueue.sim.preemptive`, and ``continuous`` on one shared queue in the
  continuous loop, which evicts for it at iteration boundaries;
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
With ``admission = per_chunk`` (Hugging Face transformers' FIFO scheduler, FCFS) steps (2)-(3)
are that scheduler's instead: the candidates are the decoding requests, then those part way
through their prompt (both in admission order), then the waiting queue (skipped while the server
is paused); each takes min(its tokens left, the budget left) tokens and the KV blocks those need
*now* (no rule that the whole prompt fits), or is passed over when they are not free (a waiting
request that does not fit is skipped and later ones may go first; a running one is *starved*
and sits the iteration out); once the free share of the KV at the step's start is below
``kv_margin``, no prompt chunk follows the first scheduled request; then, while a request is
starved, more than one runs and the starved would not all get their blocks next step, the newest
starved is reset: its KV freed, it goes to the *back* of the queue to prefill prompt + tokens
generated again, and the server admits nothing until one of its requests finishes
(:func:`llmqueue.sim.per_chunk.schedule_per_chunk`).
It lasts step(decode_seqs, prefill_tokens, context_tokens) (:class:`llmqueue.latency.StepLaw`),
with context_tokens = sum over decoding sequences of (prompt + generated tokens) + over prefill
chunks of (offset + chunk). Between events (an arrival the server could admit, a completion, KV
running out, a request turning overdue under the guard) the engine jumps over whole runs of
decode-only iterations in closed form instead of looping token by token. A request whose prompt
+ output exceeds ``kv_tokens`` can never fit: it is rejected at arrival and counted.
With ``prefix_caching`` (``on_demand``, a finite ``kv_tokens``, a non-preemptive order) each
server's budget is a block pool with vLLM's automatic prefix caching
(:mod:`llmqueue.sim.prefix`): a request with prompt block ids (the workload's ``blocks``)
hits the longest cached run of its leading ids, prefills only the rest (the hit tokens count as
context) and needs blocks for the rest only; finished prompts' blocks stay cached until an
allocation evicts them.

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
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.policy import BATCHING, Policy, queue_order
from llmqueue.sim import state as S
from llmqueue.sim.continuous import ContinuousFormer
from llmqueue.sim.multibin import MultiBinFormer
from llmqueue.sim.preemptive import PreemptiveFormer
from llmqueue.sim.rebatch import RebatchFormer
from llmqueue.sim.recorder import finish
from llmqueue.sim.result import SimResult
from llmqueue.sim.rng import check_seed
from llmqueue.sim.static import StaticFormer
from llmqueue.sim.timelaw import static_law
from llmqueue.sim.workload import Workload

__all__ = [
    "run",
    "DEFAULT_WARMUP",
    "DEFAULT_BATCHES",
    "DEFAULT_CHUNK",
    "static_law",
    "FORMERS",
    "PER_REQUEST_COLUMNS",
]

DEFAULT_WARMUP = 100_000
DEFAULT_BATCHES = 40
DEFAULT_CHUNK = 1 << 16  # requests generated per chunk (the workload's draws depend on it)
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


# The driver (a llmqueue.sim.state.Former) of every batch former of the registry
# (llmqueue.policy.BATCHING), by name.
FORMERS: dict[str, type[S.Former]] = {
    "none": StaticFormer,
    "dynamic": StaticFormer,
    "fixed": StaticFormer,
    "elastic": StaticFormer,
    "continuous": ContinuousFormer,
    "multibin": MultiBinFormer,
    "rebatch": RebatchFormer,
}


def _driver(kind: str) -> type[S.Former]:
    if kind not in FORMERS:
        known = ", ".join(k for k in BATCHING if k in FORMERS)
        raise InputError(f"batching {kind!r} has no driver in llmqueue.sim.engine; known: {known}")
    return FORMERS[kind]


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
    chunk: int = DEFAULT_CHUNK,
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
    if not isinstance(policy, Policy):
        raise InputError(f"policy must be a llmqueue.policy.Policy, got {type(policy).__name__}")
    # a preemptive order has its own loop under batching none (one server: Policy checks);
    # continuous batching evicts in its own loop (llmqueue.sim.continuous)
    own = queue_order(policy.order).preemptive and policy.kind == "none"
    driver = PreemptiveFormer if own else _driver(policy.kind)
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
    if per_request and total > 10**7:
        raise InputError(f"per_request keeps at most 10**7 requests; this run has {total}")
    n_req, nbat = int(requests), int(batches)
    run_state = S.Run.new(int(warmup), n_req, nbat, 2 * total if per_request else 0)
    gen = workload.chunks(seed, int(chunk), driver.whole_tokens)
    if last_arrival is not None:
        if not _is_int(last_arrival) or last_arrival < total:
            raise InputError(f"last_arrival must be an integer >= warmup + requests = {total}")
        gen = _truncated(gen, int(last_arrival))
    nxt = next(gen, None)
    setup = S.Setup(policy, latency, batch_time_table, workload, seed)
    former: S.Former = driver(setup, run_state)
    kept: list[Any] = []
    arrays = [np.zeros(0) for _ in range(4)]
    final = False
    sti = run_state.sti
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
        code = former.step(run_state, arrays, final)
        if code in (S.DONE, S.CAP):
            break
    former.finish(run_state)
    return _result(run_state, policy, former, code, kept if per_request else None)


def _result(
    rs: S.Run, policy: Policy, former: S.Former, code: int, kept: list[Any] | None
) -> SimResult:
    """The :class:`SimResult` of a finished run (stability verdict, window rates, metrics)."""
    sti, stf = rs.sti, rs.stf
    n_req = rs.n_req
    total = rs.warmup + n_req
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
    q_end = former.waiting(rs)
    samples = rs.qsamp[rs.qsamp >= 0].astype(float)
    trend = _spearman(samples)
    if q_end > 0.01 * n_req + 100 and trend > 0.8:
        unstable = True
        notes.append(
            f"the queue grows without bound: {q_end} waiting at the end, trend {trend:.2f}"
        )
    win = float(stf[S.S_WIN1] - stf[S.S_WIN0]) if sti[S.I_LAST_KNOWN] else math.nan
    n_batches = float(stf[S.S_NB])
    kv_util = math.nan
    if policy.kv_tokens is not None and stf[S.S_SUMD] > 0:
        kv_util = float(stf[S.S_KVINT]) / (float(policy.kv_tokens) * float(stf[S.S_SUMD]))
    metrics = [finish(rs.sums, rs.counts, rs.hist, rs.maxima, m) for m in range(S.N_METRICS)]
    table = None
    if kept is not None:
        n_seen = int(sti[S.I_NEXT_ID]) if kept else 0
        cols = [np.concatenate([getattr(k, f) for k in kept])[:n_seen] for f in _CHUNK_FIELDS]
        table = np.column_stack([np.arange(n_seen, dtype=float), *cols, rs.rec[:n_seen]])
    has_ttft = rs.counts[S.M_TTFT].sum() > 0
    return SimResult(
        n_req,
        metrics[S.M_WAIT],
        response=metrics[S.M_RESP],
        ttft=metrics[S.M_TTFT] if has_ttft else None,
        tpot=metrics[S.M_TPOT] if former.has_tpot else None,
        throughput_per_s=float(sti[S.I_COMPLETED]) / win if win > 0 else math.nan,
        tokens_per_s=float(stf[S.S_TOK]) / win if win > 0 else math.nan,
        mean_batch=float(stf[S.S_SUMB]) / n_batches if n_batches > 0 else math.nan,
        mean_batch_time=float(stf[S.S_SUMD]) / n_batches if n_batches > 0 else math.nan,
        kv_utilisation=kv_util,
        prefix_hit_share=(
            float(stf[S.S_HITTOK]) / float(stf[S.S_PTOK])
            if policy.prefix_caching and stf[S.S_PTOK] > 0
            else math.nan
        ),
        preemptions=int(sti[S.I_PREEMPT]),
        rejected=int(sti[S.I_REJECT]),
        max_queue=int(sti[S.I_MAXQ]),
        unstable=bool(unstable),
        note="; ".join(notes),
        per_request=table,
        events=int(stf[S.S_EVENTS]),
    )
