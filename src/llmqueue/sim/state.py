"""Run state shared by the engine's batch formers: the arrays of one run (:class:`Run`), compiled
helpers and index constants.

Every event loop keeps its scalars in two small arrays, so that a kernel call can stop at the
end of a chunk of arrivals and the next call resume: ``sti`` (int64, ``I_*``) and ``stf``
(float64, ``S_*``). The recorder's metrics are ``M_*``. A kernel returns one of the codes
``NEED_MORE`` (give me the next chunk), ``DONE``, ``GROW`` (the queue's pool is full: grow it and
call again), ``BUF`` (a batch buffer is too small) or ``CAP`` (the run cannot finish: unstable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from llmqueue.sim import queue as Q
from llmqueue.sim.recorder import bit_view, new_arrays

# metrics of the recorder
M_WAIT, M_RESP, M_TTFT, M_TPOT = 0, 1, 2, 3
N_METRICS = 4

# integer state
I_POS = 0  # position in the current chunk
I_NEXT_ID = 1  # id of the next arrival
I_DONE = 2  # measured requests finished or rejected
I_MAXQ = 3  # largest queue seen (measured window)
I_PREEMPT = 4  # preemptions in the window
I_REJECT = 5  # measured requests rejected
I_COMPLETED = 6  # completions in the window (any request)
I_QS_NEXT = 7  # next measurement batch whose start samples the queue
I_LAST_KNOWN = 8  # 1 once the last measured request has arrived
I_FIRST_KNOWN = 9  # 1 once the first measured request has arrived
NI = 10

# float state
S_TLAST = 0  # arrival time of the last request pushed
S_WIN0 = 1  # first measured arrival
S_WIN1 = 2  # last measured arrival
S_SUMB = 3  # sum of batch sizes (batches/iterations started in the window)
S_SUMD = 4  # sum of their durations
S_NB = 5  # their number
S_TOK = 6  # output tokens completed in the window
S_KVINT = 7  # integral of KV used over busy time (continuous)
S_ADMSEQ = 8  # admissions so far (continuous)
S_EVENTS = 9  # iteration boundaries processed (continuous; a measure of the engine's work)
S_HITTOK = 10  # prefix caching: prompt tokens first admissions in the window found cached
S_PTOK = 11  # prefix caching: prompt tokens of those first admissions
NS = 12

# kernel return codes
NEED_MORE, DONE, GROW, BUF, CAP = 0, 1, 2, 3, 4
GO = -1  # an event-head helper's answer when the kernel has no code to return and goes on
QUEUE_CAP = 1 << 24


@njit(cache=True, nogil=True, inline="always")
def in_window(sti, stf, t):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Whether time t lies in [first measured arrival, last measured arrival] (the last one not
    known yet means t comes before it)."""
    if sti[I_FIRST_KNOWN] == 0 or t < stf[S_WIN0]:
        return False
    return sti[I_LAST_KNOWN] == 0 or t <= stf[S_WIN1]


@njit(cache=True, nogil=True, inline="always")
def on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Bookkeeping of arrival `rid` at time a: window ends, queue samples per measurement batch."""
    m = rid - warmup
    if m == 0:
        sti[I_FIRST_KNOWN] = 1
        stf[S_WIN0] = a
    if m == n_req - 1:
        sti[I_LAST_KNOWN] = 1
        stf[S_WIN1] = a
    if 0 <= m < n_req:
        g = (m * nbat) // n_req
        if g >= sti[I_QS_NEXT]:
            qsamp[g] = qi[Q.Q_LEN]
            sti[I_QS_NEXT] = g + 1
        if qi[Q.Q_LEN] > sti[I_MAXQ]:
            sti[I_MAXQ] = qi[Q.Q_LEN]


@njit(cache=True, nogil=True, inline="always")
def next_arrival(sti, arr, final, ahead):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The event head every loop shares: (pos, a, more), the next arrival's position in the chunk
    `arr`, its time (inf when no arrival is left) and whether the kernel must return
    ``NEED_MORE`` first: fewer than ``ahead + 1`` arrivals are in hand and the chunk is not the
    final one (a loop that looks one arrival ahead keeps ``ahead = 1``)."""
    pos = sti[I_POS]
    if pos + ahead >= arr.size and not final:
        return pos, np.inf, True
    return pos, arr[pos] if pos < arr.size else np.inf, False


@njit(cache=True, nogil=True, inline="always")
def first_free(free_at):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The server that frees first (`free_at`: each server's free time); ties go to the lowest
    index."""
    s = 0
    for j in range(1, free_at.size):
        if free_at[j] < free_at[s]:
            s = j
    return s


@njit(cache=True, nogil=True, inline="always")
def room(nfree, waiting, sti, id_cap):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Whether an arrival can be taken: ``GROW`` when a queue's pool has no free slot (`nfree`,
    the fewest free slots of the run's queues), ``CAP`` when `waiting` requests reach
    ``QUEUE_CAP`` or the run's ids reach `id_cap` (unstable), else ``GO``."""
    if nfree == 0:
        return GROW
    if waiting >= QUEUE_CAP or sti[I_NEXT_ID] >= id_cap:
        return CAP
    return GO


@njit(cache=True, nogil=True, inline="always")
def room_routed(qis, sti, id_cap):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """:func:`room` for replicas with a queue each (`qis`: one row per queue); returns (code,
    waiting), waiting: the requests waiting in all the queues."""
    nfree = qis[0, Q.Q_NFREE]
    waiting = 0
    for j in range(qis.shape[0]):
        if qis[j, Q.Q_NFREE] < nfree:
            nfree = qis[j, Q.Q_NFREE]
        waiting += qis[j, Q.Q_LEN]
    return room(nfree, waiting, sti, id_cap), waiting


@njit(cache=True, nogil=True, inline="always")
def advance(sti, stf, pos, a):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Take arrival `pos` (at time a) off the chunk; returns its request id."""
    rid = sti[I_NEXT_ID]
    sti[I_POS] = pos + 1
    sti[I_NEXT_ID] = rid + 1
    stf[S_TLAST] = a
    return rid


@njit(cache=True, nogil=True, inline="always")
def enqueue(queue, chunk, pos, a, rid, order, guard):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Put arrival `pos` of `chunk` (arrival, prompt, output, predicted tokens), request `rid`
    at time a, in `queue` (pool, ring, heap, free, qi) in queue order; returns its slot."""
    _arr, prompt, out, pred = chunk
    pool, ring, heap, free, qi = queue
    slot = Q.alloc(pool, free, qi, a, prompt[pos], out[pos], pred[pos], rid)
    Q.push(pool, ring, heap, qi, slot, order, guard)
    return slot


@njit(cache=True, nogil=True, inline="always")
def take_arrival(state, queue, chunk, pos, a, order, guard, limits):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Arrival `pos` at time a joins the run's one queue (:func:`room`, :func:`advance`,
    :func:`enqueue`, :func:`on_arrival`); returns ``GO`` or the code to return (``GROW``,
    ``CAP``)."""
    sti, stf, qsamp = state
    qi = queue[4]
    warmup, n_req, nbat, id_cap = limits
    code = room(qi[Q.Q_NFREE], qi[Q.Q_LEN], sti, id_cap)
    if code != GO:
        return code
    rid = advance(sti, stf, pos, a)
    enqueue(queue, chunk, pos, a, rid, order, guard)
    on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)
    return GO


@njit(cache=True, nogil=True, inline="always")
def on_rejected(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Request `rid`, arriving at a, is turned away at once (it can never run): its arrival's
    bookkeeping, and a measured one counts as rejected and done."""
    on_arrival(sti, stf, qsamp, qi, rid, a, warmup, n_req, nbat)
    if batch_of(rid, warmup, n_req, nbat) >= 0:
        sti[I_REJECT] += 1
        sti[I_DONE] += 1


@njit(cache=True, nogil=True, inline="always")
def batch_of(rid, warmup, n_req, nbat):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Measurement batch of request `rid`, or -1 for a request outside the measured window."""
    m = rid - warmup
    if m < 0 or m >= n_req:
        return -1
    return (m * nbat) // n_req


def new_state(batches: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sti, stf, qsamp) for a run with `batches` measurement batches."""
    return np.zeros(NI, dtype=np.int64), np.zeros(NS), np.full(batches, -1, dtype=np.int64)


@dataclass
class Run:
    """The arrays every event loop of one run shares (no Python objects reach compiled code: a
    batch former's driver passes these to its kernel): the run state (``sti``, ``stf``, the
    queue samples ``qsamp``), the queue (``pool``, ``ring``, ``heap``, ``free``, ``qi``;
    :mod:`llmqueue.sim.queue`, replaced by :meth:`grow_queue`), the recorder's arrays and the
    per-request record ``rec`` (start, first token, finish, server; empty unless kept), and the
    run's sizes: ``warmup`` discarded requests, ``n_req`` measured ones in ``nbat`` batches, at
    most ``id_cap`` arrivals."""

    sti: np.ndarray
    stf: np.ndarray
    qsamp: np.ndarray
    pool: np.ndarray
    ring: np.ndarray
    heap: np.ndarray
    free: np.ndarray
    qi: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    hist: np.ndarray
    maxima: np.ndarray
    fbuf: np.ndarray
    ibuf: np.ndarray
    rec: np.ndarray
    warmup: int
    n_req: int
    nbat: int
    id_cap: int

    @classmethod
    def new(cls, warmup: int, n_req: int, nbat: int, keep: int) -> Run:
        """A fresh run; `keep` requests get a row in ``rec`` (0: none kept)."""
        sti, stf, qsamp = new_state(nbat)
        pool, ring, heap, free, qi = Q.new_queue(1024)
        sums, counts, hist, maxima = new_arrays(N_METRICS, nbat)
        fbuf, ibuf = bit_view()
        rec = np.full((keep, 4), np.nan)
        total = warmup + n_req
        return cls(
            sti, stf, qsamp, pool, ring, heap, free, qi, sums, counts, hist, maxima, fbuf, ibuf,
            rec, warmup, n_req, nbat, 2 * total,
        )  # fmt: skip

    def grow_queue(self) -> None:
        """Double the queue's pool (a kernel returned :data:`GROW`)."""
        self.pool, self.ring, self.heap, self.free = Q.grow(
            self.pool, self.ring, self.heap, self.free, self.qi
        )

    # The groups the compiled loops take (each unpacked at a loop's top, names as there):
    @property
    def state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sti, stf, qsamp): the loop's integer and float state and the queue-length samples."""
        return self.sti, self.stf, self.qsamp

    @property
    def queue(self) -> tuple[np.ndarray, ...]:
        """(pool, ring, heap, free, qi): the central queue (:mod:`llmqueue.sim.queue`)."""
        return self.pool, self.ring, self.heap, self.free, self.qi

    @property
    def recorder(self) -> tuple[np.ndarray, ...]:
        """(sums, counts, hist, maxima, fbuf, ibuf, rec): the recorder's arrays."""
        return self.sums, self.counts, self.hist, self.maxima, self.fbuf, self.ibuf, self.rec

    @property
    def limits(self) -> tuple[int, int, int, int]:
        """(warmup, n_req, nbat, id_cap): requests before recording, to serve, per batch mean,
        and the ids that fit the recorder."""
        return self.warmup, self.n_req, self.nbat, self.id_cap

    @property
    def queue_cap(self) -> int:
        return int(self.qi[Q.Q_CAP])


@dataclass
class Queues:
    """One queue per replica (a routed policy, :mod:`llmqueue.sim.router`): the arrays of
    :func:`llmqueue.sim.queue.new_queue` stacked, replica first (``pools[r]`` is replica r's slot
    pool, and so on), all of one capacity, and ``qtot`` (a queue state whose ``Q_LEN`` the routed
    loops set to the requests waiting in all the queues, for the run's queue samples)."""

    pools: np.ndarray
    rings: np.ndarray
    heaps: np.ndarray
    frees: np.ndarray
    qis: np.ndarray
    qtot: np.ndarray

    @classmethod
    def new(cls, replicas: int, cap: int = 1024) -> Queues:
        parts = [Q.new_queue(cap) for _ in range(replicas)]
        pools, rings, heaps, frees, qis = (np.stack([p[i] for p in parts]) for i in range(5))
        return cls(pools, rings, heaps, frees, qis, np.zeros(Q.QI_SIZE, dtype=np.int64))

    def grow(self) -> None:
        """Double every queue's capacity (a routed loop returned :data:`GROW`)."""
        parts = [
            Q.grow(self.pools[r], self.rings[r], self.heaps[r], self.frees[r], self.qis[r])
            for r in range(self.qis.shape[0])
        ]
        self.pools, self.rings, self.heaps, self.frees = (
            np.stack([p[i] for p in parts]) for i in range(4)
        )

    @property
    def arrays(self) -> tuple[np.ndarray, ...]:
        """(pools, rings, heaps, frees, qis, qtot): every replica's queue, as the routed loops
        take them."""
        return self.pools, self.rings, self.heaps, self.frees, self.qis, self.qtot

    @property
    def cap(self) -> int:
        return int(self.qis[0, Q.Q_CAP])

    def waiting(self) -> int:
        """Requests waiting in all the queues."""
        return int(self.qis[:, Q.Q_LEN].sum())


@dataclass(frozen=True)
class Setup:
    """What a batch former's driver is made from: the policy, its time law (each former checks
    its own kind of law), the fixed batch-time table of static batches (or None), the workload
    and the run's seed."""

    policy: Any
    latency: Any
    batch_time_table: np.ndarray | None
    workload: Any
    seed: Any


class Former:
    """Base of a batch former's driver (``llmqueue.sim.engine.FORMERS``; docs/architecture.md):
    made from a :class:`Setup` and the run's arrays; :meth:`step` calls its compiled loop
    over the arrivals in hand, ``chunk`` = (arrival s, prompt, output, predicted tokens), grows
    whatever the loop asked for and returns the loop's code; :meth:`finish` settles what is
    still in service when the run ends."""

    whole_tokens = False  # requests carry whole token counts (iteration-level scheduling)
    has_tpot = False  # it records the time per output token

    def __init__(self, setup: Setup, run: Run) -> None:
        raise NotImplementedError

    def step(self, run: Run, chunk: Sequence[np.ndarray], final: bool) -> int:
        raise NotImplementedError

    def finish(self, run: Run) -> None:
        """Nothing is pending unless a former keeps batches in service."""

    def waiting(self, run: Run) -> int:
        """Requests waiting when the run stopped (in the run's queue; a routed former: in all the
        replicas' queues)."""
        return int(run.qi[Q.Q_LEN])
