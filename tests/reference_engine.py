"""A plain-Python reference of the serving engine (llmqueue.sim.engine), written separately from
it: lists instead of heaps and rings, one iteration at a time instead of closed-form jumps.

It reads a request table (arrival, prompt, output, predicted) and returns, per request, the time
it started (batch start / first admission), its first token and its finish (NaN if rejected).
The rules are the engine's module docstring, re-implemented from that text; the options of
SSJF's simulator (a batch timeout, the guard's run-time trigger, re-batching at the shortest
member's end) from the docstrings of llmqueue.policy, llmqueue.sim.static and
llmqueue.sim.rebatch; replicas with a queue each behind a router (RefRouter) from those of
llmqueue.policy, llmqueue.sim.router, llmqueue.sim.static and llmqueue.sim.continuous.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from reference_pool import RefPool

from llmqueue.policy import queue_order, router

DEBUG = False


def random_table(
    seed: int, n: int, rate: float, max_prompt: int, max_out: int, min_prompt: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random request table: Poisson arrivals at `rate` from t = 0, prompts uniform on
    [min_prompt, max_prompt] and outputs on [1, max_out] tokens."""
    rng = np.random.default_rng(seed)
    arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    prompt = rng.integers(min_prompt, max_prompt + 1, n).astype(float)
    out = rng.integers(1, max_out + 1, n).astype(float)
    return arr, prompt, out


def compare_times(tab: np.ndarray, reqs: list[Req]) -> None:
    """The engine's per-request table (start, first token, finish in columns 5-7) against the
    reference's requests: the same requests rejected or unfinished, the same times."""
    got = tab[:, 5:8]
    want = np.array([[r.start, r.first, r.finish] for r in reqs])
    assert np.array_equal(np.isnan(got), np.isnan(want)), "rejected / unfinished requests differ"
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-9, atol=1e-9)


@dataclass
class Req:
    i: int
    arrival: float
    prompt: float
    output: float
    pred: float
    start: float = math.nan
    first: float = math.nan
    finish: float = math.nan
    server: int = -1
    # continuous batching
    g: float = 0.0  # tokens generated
    peff: float = 0.0
    prefilled: float = 0.0
    held: float = 0.0
    decoding: bool = False
    front: bool = False
    table: list[int] = field(default_factory=list)  # prefix caching: its KV blocks, in order
    # the queue's view of it: its place among equal keys and the time it entered (its arrival,
    # or its return to the queue), the run time it has left (s)
    seq: float = -1.0
    t_in: float = math.nan
    work: float = math.nan

    def __post_init__(self) -> None:
        if self.seq < 0:
            self.seq, self.t_in = float(self.i), self.arrival


# the batch formers this reference runs (its run_* functions): another is refused, never run as
# one of these
REF_FORMERS = ("none", "dynamic", "fixed", "elastic", "continuous", "rebatch", "multibin")


@dataclass
class RefPolicy:
    kind: str  # a name of REF_FORMERS
    bmax: float = math.inf
    K: int = 1
    order: str = "fcfs"
    guard_s: float = math.inf
    servers: int = 1
    kv_tokens: float = math.inf
    admission: str = "reserve"
    max_batched_tokens: float = math.inf
    block_size: int = 1
    batch_timeout_s: float | None = None
    guard_factor: float = math.inf
    chunked_prefill: bool = True  # False: a prompt is admitted only when it fits the budget whole
    batch_queue: bool = False  # admissions only at a boundary where nothing runs
    kv_margin: float = (
        0.0  # per_chunk: no prompt chunk after the first scheduled below this free share
    )
    kv_extra: float = 0.0  # on_demand: KV a sequence holds beyond vLLM's count (Dong's: 1)
    preempt_limit: float = math.inf  # preemptive continuous: made this share of its size, stays
    prefix_caching: bool = False  # a block pool per server (RefPool); needs on_demand, kv_tokens

    def __post_init__(self) -> None:
        if self.kind not in REF_FORMERS:
            raise NotImplementedError(f"reference engine: no batch former {self.kind!r}")
        order_key(self.order)  # an order whose key this reference does not know is refused


@dataclass
class Waiting:
    reqs: list[Req] = field(default_factory=list)

    def pick(self, pol: RefPolicy, now: float) -> Req | None:
        """The request that goes next under the order (not removed)."""
        if not self.reqs:
            return None
        fronts = [r for r in self.reqs if r.front]
        by_arrival = queue_order(pol.order).by_arrival
        if fronts:
            if by_arrival:
                return fronts[-1]  # the most recently put back goes first
            return min(fronts, key=lambda r: (self._key(pol, r), r.i))
        if by_arrival:
            return min(self.reqs, key=lambda r: r.seq)
        oldest = min(self.reqs, key=lambda r: r.seq)
        if math.isfinite(pol.guard_s):
            waited = now - oldest.t_in
            if waited > pol.guard_s or waited > pol.guard_factor * oldest.work:
                return oldest
        if queue_order(pol.order).key == "size" and pol.kind == "rebatch":
            return min(self.reqs, key=lambda r: (r.work, r.seq))  # the run time left
        return min(self.reqs, key=lambda r: (self._key(pol, r), r.seq))

    @staticmethod
    def _key(pol: RefPolicy, r: Req) -> float:
        """The order's key of r now (waiting or running): true or predicted output tokens, less
        those made under the remaining-size keys (srpt and sprpt)."""
        return order_key(pol.order)(r)

    def take(self, r: Req) -> None:
        self.reqs.remove(r)
        r.front = False


# a queue order's key (its record's `key`, llmqueue.policy.QueueOrder) of a request now, in
# output tokens: the true or predicted size, less the tokens made for the remaining ones
KEYS: dict[str, Callable[[Req], float]] = {
    "size": lambda r: r.output,
    "predicted_size": lambda r: r.pred,
    "remaining_size": lambda r: r.output - r.g,
    "predicted_remaining": lambda r: r.pred - r.g,
}


def order_key(order: str) -> Callable[[Req], float]:
    """The key queue order `order` serves by (by arrival: the request's place, which the queue
    reads itself); an order outside the registry (InputError) or with a key this reference does
    not know (NotImplementedError) is refused, never served by another order's key."""
    key = queue_order(order).key
    if key == "arrival":
        return lambda r: r.seq
    if key not in KEYS:
        raise NotImplementedError(f"reference engine: no key {key!r} (order {order!r})")
    return KEYS[key]


_MASK = (1 << 64) - 1


def _size(pol: RefPolicy, r: Req) -> float:
    """The size TRAIL's limit is a share of: predicted output tokens under an order that needs
    a prediction (pspjf, sprpt)."""
    return r.pred if queue_order(pol.order).needs_prediction else r.output


class RefRouter:
    """A router (llmqueue.sim.router's docstring): SplitMix64 words, Lemire's multiply-shift for a
    uniform integer, ties among the least loaded by reservoir sampling, power_of_d's sample by a
    partial Fisher-Yates shuffle of a permutation kept between arrivals."""

    # how each router chooses among the replicas; a router without a choice here is refused
    CHOICES = (
        "round_robin", "random", "jsq", "least_work", "least_kv", "power_of_d", "prefix_affinity",
        "prefix_score", "prefix_index",
    )  # fmt: skip

    def __init__(self, name: str, replicas: int, word: int, d: int = 2) -> None:
        if name not in self.CHOICES:
            router(name)  # InputError for a name outside the registry
            raise NotImplementedError(f"reference engine: no router {name!r}")
        self.name, self.c, self.state, self.d = name, replicas, word, d
        self.next = 0
        self.perm = list(range(replicas))
        self.sent: list[set[int]] = [set() for _ in range(replicas)]  # prefix_index's index

    def word(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        return ((self.word() >> 32) * n) >> 32

    def load_kind(self) -> str:
        """What the router compares (its record's `load`): none, requests, work or kv."""
        return router(self.name).load

    def _least(self, load: list[float], cand: list[int]) -> int:
        best, ties = cand[0], 1
        for j in cand[1:]:
            if load[j] < load[best]:
                best, ties = j, 1
            elif load[j] == load[best]:
                ties += 1
                if self.below(ties) == 0:
                    best = j
        return best

    def score(self, hits: list[int], waiting: list[int], blocks: int) -> list[float]:
        """prefix_score's loads: minus llm-d's default score, 3 x hits / blocks + 2 x (qmax - q)
        / (qmax - qmin) (1 when every q is equal; the first term 0 without a full block)."""
        lo, hi = min(waiting), max(waiting)
        out = []
        for k, q in zip(hits, waiting, strict=True):
            hit = 3.0 * k / blocks if blocks > 0 else 0.0
            queue = (hi - q) / (hi - lo) if hi > lo else 1.0
            out.append(-(hit + 2.0 * queue))
        return out

    def choose(self, load: list[float]) -> int:
        if self.name == "round_robin":
            r = self.next
            self.next = (r + 1) % self.c
            return r
        if self.name == "random":
            return self.below(self.c)
        if self.name == "power_of_d":
            for i in range(self.d):
                j = i + self.below(self.c - i)
                self.perm[i], self.perm[j] = self.perm[j], self.perm[i]
            return self._least(load, self.perm[: self.d])
        return self._least(load, self.perm)


def _work(r: Req) -> float:
    """A request's predicted tokens for least_work: prompt + prediction to the nearest token."""
    return float(math.floor(r.prompt + r.pred + 0.5))


def _form(q: Waiting, pol: RefPolicy, start: float, b: int) -> list[Req]:
    members = []
    for _ in range(b):
        r = q.pick(pol, start)
        q.take(r)
        members.append(r)
    return members


def _batch_times(
    k: tuple[float, float, float, float], lengths: list[float], elastic: bool
) -> tuple[list[float], float]:
    b = len(lengths)
    t1 = k[0] * b + k[1]
    if not elastic:
        d = t1 + (k[2] * b + k[3]) * max(lengths)
        return [d] * b, t1
    order = sorted(range(b), key=lambda i: lengths[i])
    out = [0.0] * b
    t, prev = t1, 0.0
    for j, i in enumerate(order):
        t += (k[2] * (b - j) + k[3]) * (lengths[i] - prev)
        prev = lengths[i]
        out[i] = t
    return out, t1


def run_static(reqs: list[Req], pol: RefPolicy, k: tuple[float, float, float, float]) -> list[Req]:
    free_at = [0.0] * pol.servers
    q = Waiting()
    nxt = 0
    n = len(reqs)
    last_push = -math.inf
    threshold = pol.K if pol.kind == "fixed" else 1
    cap = pol.K if pol.kind == "fixed" else (1 if pol.kind == "none" else pol.bmax)
    if math.isfinite(pol.guard_factor):
        for r in reqs:  # its run time alone, for the guard's run-time trigger
            r.work = k[0] + k[1] + (k[2] + k[3]) * r.output
    while True:
        s = min(range(pol.servers), key=lambda j: (free_at[j], j))
        t = free_at[s]
        while nxt < n and (reqs[nxt].arrival <= t or len(q.reqs) < threshold):
            q.reqs.append(reqs[nxt])
            last_push = reqs[nxt].arrival
            nxt += 1
        if len(q.reqs) < threshold:
            return reqs
        start = t if last_push <= t else last_push
        if pol.batch_timeout_s is not None and len(q.reqs) < cap:
            # not full: wait for arrivals until full or the timeout (arrivals at its end count)
            t_end = start + pol.batch_timeout_s
            while nxt < n and len(q.reqs) < cap and reqs[nxt].arrival <= t_end:
                q.reqs.append(reqs[nxt])
                last_push = reqs[nxt].arrival
                nxt += 1
            start = max(start, last_push) if len(q.reqs) >= cap else t_end
        members = _form(q, pol, start, int(min(len(q.reqs), cap)))
        comp, t1 = _batch_times(k, [r.output for r in members], pol.kind == "elastic")
        for r, cpl in zip(members, comp, strict=True):
            r.start, r.first, r.finish, r.server = start, start + t1, start + cpl, s
        free_at[s] = start + max(comp)


def run_static_routed(
    reqs: list[Req], pol: RefPolicy, k: tuple[float, float, float, float], router: RefRouter
) -> list[Req]:
    """none / dynamic / elastic on replicas with a queue each: a replica with requests waiting
    starts its batch at max(the moment it frees, the arrival that found its queue empty), after
    every arrival up to then; an arrival goes where the router says, by the loads at its time."""
    c = pol.servers
    free_at = [0.0] * c
    qs = [Waiting() for _ in range(c)]
    t_empty = [0.0] * c
    batch: list[list[Req]] = [[] for _ in range(c)]
    cap = 1 if pol.kind == "none" else pol.bmax
    nxt, n = 0, len(reqs)
    while True:
        ready = [(max(free_at[j], t_empty[j]), j) for j in range(c) if qs[j].reqs]
        ts, s = min(ready) if ready else (math.inf, -1)
        a = reqs[nxt].arrival if nxt < n else math.inf
        if a <= ts and a < math.inf:
            r = reqs[nxt]
            nxt += 1
            kind = router.load_kind()
            load = []
            for j in range(c):
                busy = [m for m in batch[j] if m.finish > a]
                if kind == "work":
                    load.append(sum(_work(x) for x in qs[j].reqs + busy))
                else:
                    load.append(float(len(qs[j].reqs) + len(busy)))
            j = router.choose(load)
            if not qs[j].reqs:
                t_empty[j] = a
            qs[j].reqs.append(r)
            continue
        if s < 0:
            return reqs
        members = _form(qs[s], pol, ts, int(min(len(qs[s].reqs), cap)))
        comp, t1 = _batch_times(k, [r.output for r in members], pol.kind == "elastic")
        for r, cpl in zip(members, comp, strict=True):
            r.start, r.first, r.finish, r.server = ts, ts + t1, ts + cpl, s
        free_at[s] = ts + max(comp)
        batch[s] = members
        t_empty[s] = ts


def run_rebatch(reqs: list[Req], pol: RefPolicy, k: tuple[float, float, float, float]) -> list[Req]:
    """Re-batching at the shortest member's end: a batch of at most bmax runs until the member
    with the least run time left finishes; those with that much left finish, the others go back
    to the queue (as new entries at that moment; FCFS: at its head) with that much less to run.
    Run time alone: k1 + k2 + (k3 + k4) n. Servers act in time order (ties: the lower index); at a
    server's moment the arrivals up to it enter first, then its batch's members come back."""
    nsrv = pol.servers
    cap = pol.bmax
    at = [0.0] * nsrv  # when each server next acts
    members: list[list[Req]] = [[] for _ in range(nsrv)]
    length = [0.0] * nsrv
    q = Waiting()
    n = len(reqs)
    nxt = 0
    entries = 0
    last_push = -math.inf

    def enter(r: Req, t: float) -> None:
        nonlocal entries
        r.seq, r.t_in = float(entries), t
        entries += 1
        q.reqs.append(r)

    def arrive() -> None:
        nonlocal nxt, last_push
        r = reqs[nxt]
        r.work = k[0] + k[1] + (k[2] + k[3]) * r.output
        enter(r, r.arrival)
        last_push = r.arrival
        nxt += 1

    while True:
        s = min(range(nsrv), key=lambda j: (at[j], j))
        t = at[s]
        if t == math.inf or all(not math.isnan(r.finish) for r in reqs):
            return reqs
        while nxt < n and reqs[nxt].arrival <= t:
            arrive()
        if members[s]:
            for r in members[s]:
                if r.work <= length[s]:
                    r.finish, r.server = t, s
                else:
                    r.work -= length[s]
                    enter(r, t)
                    r.front = queue_order(pol.order).by_arrival
            members[s] = []
            if q.reqs:
                for j in range(nsrv):
                    if not members[j] and at[j] > t:
                        at[j] = t
        if not q.reqs:
            at[s] = reqs[nxt].arrival if nxt < n else math.inf
            continue
        start = t
        if pol.batch_timeout_s is not None and len(q.reqs) < cap:
            t_end = t + pol.batch_timeout_s
            while nxt < n and len(q.reqs) < cap and reqs[nxt].arrival <= t_end:
                arrive()
            start = max(t, last_push) if len(q.reqs) >= cap else t_end
        batch = []
        for _ in range(int(min(len(q.reqs), cap))):
            r = q.pick(pol, start)
            assert r is not None
            q.take(r)
            batch.append(r)
            if math.isnan(r.start):
                r.start, r.server = start, s
        members[s] = batch
        length[s] = min(r.work for r in batch)
        at[s] = start + length[s]


def _slots(h: float, bs: int) -> float:
    """KV tokens that h tokens take in whole blocks of bs tokens."""
    return float(bs * math.ceil(h / bs))


def run_continuous(
    reqs: list[Req],
    pol: RefPolicy,
    c: tuple[float, float, float] | Callable[[int, float, float], float],
    router: RefRouter | None = None,
    start_at: float = -math.inf,
    blocks: list[list[int]] | None = None,
) -> list[Req]:
    """Continuous batching, one iteration at a time (`start_at`: no server starts before that
    time, so the requests that arrived before it meet the first iteration together, as at a
    recorded engine's first step). KV in blocks of pol.block_size tokens: a
    sequence holding h tokens takes _slots(h) of the budget; the decodes of an iteration take
    their KV before any admission. With a router, each server has its own queue and an arrival
    goes to the one the router picks by the loads at its time (requests waiting + running,
    prompt + predicted tokens of those, or the KV its running iteration holds). `c`: the step
    law's (c0, c_tok, c_ctx), or any step(decode_seqs, prefill_tokens, context_tokens) function
    (a shaped law). Chunked prefill off: admission stops at the first prompt that does not fit
    what is left of the iteration's budget whole. The batch queue: nothing is admitted at a
    boundary where a request still runs. Admission ``per_chunk``: Hugging Face transformers'
    FIFO scheduler as llmqueue.sim.engine's docstring states it (boundary_per_chunk).

    Prefix caching (pol.prefix_caching): each server's KV is a RefPool of kv_tokens / block_size
    blocks and every running request keeps its full block table (r.table: hits, then blocks
    allocated at admission, then decode blocks), as vLLM's KVCacheManager does; `blocks[i]`: the
    dense ids of request i's prompt blocks (each wholly inside its prompt). Decodes take their
    blocks before any admission; a request hits its longest cached run of leading ids (at most
    (tokens to prefill - 1) // block_size), is admitted if its other blocks plus its hit blocks
    that are free fit the free blocks, and its full id'ed blocks are cached when the chunk
    computing them is scheduled; a finish or preemption releases its table, last block first."""
    step = c if callable(c) else (lambda d, p, x: c[0] + c[1] * (d + p) + c[2] * x)
    nsrv = pol.servers
    t_next = [math.inf] * nsrv
    running: list[list[Req]] = [[] for _ in range(nsrv)]
    used = [0.0] * nsrv
    queues = [Waiting() for _ in range(nsrv if router is not None else 1)]
    on_demand = pol.admission == "on_demand"

    bs = pol.block_size
    pc = pol.prefix_caching
    pools = [RefPool(int(pol.kv_tokens) // bs) for _ in range(nsrv)] if pc else []
    cap_blocks = int(pol.kv_tokens) // bs if pc else 0

    def ids_of(r: Req) -> list[int]:
        return blocks[r.i] if blocks is not None and r.i < len(blocks) else []

    def pool_used(s: int) -> float:
        return float(bs * (cap_blocks - len(pools[s].free)))

    def drop(s: int, r: Req) -> None:
        """r lets its KV go (a finish or a preemption)."""
        if pc:
            pools[s].release(r.table)
            r.table = []
            used[s] = pool_used(s)
        else:
            used[s] -= _slots(r.held, bs)

    def cache_upto(r: Req, s: int, tokens: float) -> None:
        """r's full id'ed blocks within its first `tokens` tokens become cached copies."""
        ids = ids_of(r)
        for j in range(min(len(ids), int(tokens) // bs)):
            pools[s].register(r.table[j], ids[j])

    def admission_kv(r: Req) -> float:
        """KV r takes when admitted: its prompt (and recomputed output, and Dong's extra
        token) growing on demand, or prompt + output reserved."""
        return r.peff + pol.kv_extra if on_demand else r.prompt + r.output

    def grow(r: Req) -> float:
        return _slots(r.held + 1, bs) - _slots(r.held, bs)

    paused = [False] * nsrv
    resets = [0]

    def prefill(r: Req, n: float, te: float) -> None:
        """Request r prefills n more tokens in the iteration ending at te: its last chunk gives
        its next token (its first, unless it is recomputing), then it decodes if it needs more."""
        r.prefilled += n
        if r.prefilled >= r.peff:
            r.g += 1
            if math.isnan(r.first):
                r.first = te
            if r.g < r.output:
                r.decoding = True

    def complete(s: int, t: float) -> None:
        """Free the requests of server s that have all their tokens (a finish unpauses it)."""
        keep = []
        for r in running[s]:
            if r.g >= r.output:
                r.finish = t
                drop(s, r)
                paused[s] = False
            else:
                keep.append(r)
        running[s] = keep

    def boundary_per_chunk(s: int, t: float) -> None:
        q = queues[s if router is not None else 0]
        complete(s, t)
        while True:
            # 2. the step's list: decodes, prompts part way, then the waiting queue
            free = pol.kv_tokens - used[s]
            in_margin = math.isinf(pol.kv_tokens) or free >= pol.kv_margin * pol.kv_tokens
            budget = pol.max_batched_tokens
            sched: list[tuple[Req, float]] = []
            starved: list[tuple[Req, float]] = []
            need = 0.0
            for r in running[s]:
                if r.decoding:
                    g = grow(r)
                    if g > free - need:
                        starved.append((r, g))
                        continue
                    need += g
                    sched.append((r, 1.0))
                    budget -= 1.0
            stop = budget <= 0 or len(sched) >= pol.bmax
            for r in running[s]:
                if r.decoding:
                    continue
                if stop or (not in_margin and sched):
                    stop = True
                    break
                qn = min(r.peff - r.prefilled, budget)
                take = _slots(r.held + qn, bs) - _slots(r.held, bs)
                if take > free - need:
                    starved.append((r, take))
                    continue
                used[s] += take
                free -= take
                r.held += qn
                sched.append((r, qn))
                budget -= qn
                if budget <= 0 or len(sched) >= pol.bmax:
                    stop = True
            if not stop and not paused[s]:
                for r in sorted(q.reqs, key=lambda x: x.seq):
                    if len(running[s]) >= pol.bmax or (not in_margin and sched):
                        break
                    qn = min(r.peff, budget)
                    take = _slots(qn, bs)
                    if take > free - need:
                        continue  # passed over: later ones may go first
                    q.take(r)
                    running[s].append(r)
                    used[s] += take
                    free -= take
                    r.held, r.prefilled, r.decoding, r.server = qn, 0.0, False, s
                    if math.isnan(r.start):
                        r.start = t
                    sched.append((r, qn))
                    budget -= qn
                    if budget <= 0 or len(sched) >= pol.bmax:
                        break
            # 3. resets: the newest starved until the others would all get their blocks
            n_reset = 0
            while starved and len(running[s]) > 1:
                avail = free - need
                fits = True
                for _, k in starved:
                    avail -= k
                    if avail < 0:
                        fits = False
                        break
                if fits:
                    break
                v, _ = starved.pop()
                running[s].remove(v)
                used[s] -= _slots(v.held, bs)
                free += _slots(v.held, bs)
                v.held, v.decoding, v.prefilled = 0.0, False, 0.0
                v.peff = v.prompt + v.g
                resets[0] += 1
                k = resets[0]
                v.seq = nxt - 1 + k / (k + 1)  # the back of the queue: behind every arrival so far
                q.reqs.append(v)
                paused[s] = True
                n_reset += 1
            if sched or n_reset == 0:
                break
        if not running[s]:
            t_next[s] = math.inf
            return
        # 4. the iteration: the starved sit it out
        dec = [r for r, _ in sched if r.decoding]
        chunks = [(r, n) for r, n in sched if not r.decoding]
        pre = sum(n for _, n in chunks)
        ctx = sum(r.prompt + r.g for r in dec) + sum(r.prefilled + n for r, n in chunks)
        d = step(len(dec), pre, ctx)
        te = t + d
        for r in dec:
            used[s] += grow(r)
            r.held += 1
            r.g += 1
        for r, n in chunks:
            prefill(r, n, te)
        t_next[s] = te

    def boundary(s: int, t: float) -> None:
        if pol.admission == "per_chunk":
            boundary_per_chunk(s, t)
            return
        q = queues[s if router is not None else 0]
        complete(s, t)  # 1. completions
        # 2. on-demand growth: one KV token per decoding sequence, else preempt the newest
        preempted = False
        need = 0.0
        if on_demand:
            need = sum(grow(r) for r in running[s] if r.decoding)
            while used[s] + need > pol.kv_tokens and running[s]:
                v = running[s].pop()
                if v.decoding:
                    need -= grow(v)
                drop(s, v)
                v.held, v.decoding, v.prefilled = 0.0, False, 0.0
                v.peff = v.prompt + v.g
                v.front = True
                q.reqs.append(v)
                preempted = True
        # 2b. a preemptive order: evict the running request with the largest key (ties: the
        # latest arrival) while the best waiting one has a smaller key and no seat or KV
        if queue_order(pol.order).preemptive and not preempted and not pol.batch_queue:
            while True:
                r = q.pick(pol, t)
                if r is None or not running[s]:
                    break
                need_kv = admission_kv(r)
                room = len(running[s]) < pol.bmax
                if room and used[s] + need + _slots(need_kv, bs) <= pol.kv_tokens:
                    break
                free = [x for x in running[s] if x.g < pol.preempt_limit * _size(pol, x)]
                if not free:
                    break
                v = max(free, key=lambda x: (Waiting._key(pol, x), x.i))
                if not Waiting._key(pol, r) < Waiting._key(pol, v):
                    break
                running[s].remove(v)
                if v.decoding and on_demand:
                    need -= grow(v)
                used[s] -= _slots(v.held, bs)
                v.held, v.decoding, v.prefilled = 0.0, False, 0.0
                v.peff = v.prompt + v.g
                q.reqs.append(v)
        if pc:  # the decodes take their blocks first, in running order
            for r in running[s]:
                if r.decoding and grow(r) > 0:
                    r.table += pools[s].allocate(1)
            used[s] = pool_used(s)
            need = 0.0
        # 3. prefill chunks of those prefilling, then admissions
        dec = [r for r in running[s] if r.decoding]
        budget = pol.max_batched_tokens - len(dec)
        chunks: dict[int, float] = {}
        for r in running[s]:
            if not r.decoding:
                qn = r.peff - r.prefilled
                qn = min(qn, max(budget, 0.0))
                chunks[r.i] = qn
                budget -= qn
                if pc:
                    cache_upto(r, s, r.prefilled + qn)
        if not preempted and not (pol.batch_queue and running[s]):
            while len(running[s]) < pol.bmax and budget > 0:
                r = q.pick(pol, t)
                if r is None:
                    break
                need_kv = admission_kv(r)
                hit = 0.0
                if pc:
                    ids = ids_of(r)
                    nb = math.ceil(need_kv / bs)
                    k = pools[s].cached_run(ids, int(r.peff - 1) // bs)
                    ev = pools[s].evictable(ids[:k])
                    if used[s] + bs * (nb - k + ev) > pol.kv_tokens:
                        break
                    hit = float(bs * k)
                elif used[s] + need + _slots(need_kv, bs) > pol.kv_tokens:
                    break
                if not pol.chunked_prefill and r.peff - hit > budget:
                    break
                q.take(r)
                running[s].append(r)
                if pc:
                    r.table = pools[s].touch(ids[:k]) + pools[s].allocate(nb - k)
                    used[s] = pool_used(s)
                else:
                    used[s] += _slots(need_kv, bs)
                r.held, r.prefilled, r.decoding, r.server = need_kv, hit, False, s
                if math.isnan(r.start):
                    r.start = t
                qn = min(r.peff - hit, budget)
                chunks[r.i] = qn
                budget -= qn
                if pc:
                    cache_upto(r, s, hit + qn)
        if not running[s]:
            t_next[s] = math.inf
            return
        # 4. the iteration
        pre = sum(chunks.values())
        ctx = sum(r.prompt + r.g for r in dec) + sum(
            r.prefilled + chunks[r.i] for r in running[s] if not r.decoding
        )
        d = step(len(dec), pre, ctx)
        if DEBUG:
            print("R", t, len(dec), pre, ctx, used[s], len(running[s]), len(q.reqs))
        te = t + d
        for r in dec:
            r.g += 1
            if on_demand:
                if not pc:  # with prefix caching the block was taken before the admissions
                    used[s] += grow(r)
                r.held += 1
        for r in running[s]:
            if not r.decoding and r.i in chunks:
                prefill(r, chunks[r.i], te)
        t_next[s] = te

    nxt = 0
    n = len(reqs)
    while True:
        a = reqs[nxt].arrival if nxt < n else math.inf
        s = min(range(nsrv), key=lambda j: (t_next[j], j))
        if a <= t_next[s] and a < math.inf:
            r = reqs[nxt]
            nxt += 1
            r.peff = r.prompt
            whole = not pol.chunked_prefill and r.prompt + r.output > pol.max_batched_tokens
            if r.prompt + r.output > pol.kv_tokens or whole:
                continue  # rejected
            if router is not None:
                kind = router.load_kind()
                load = []
                hit_of: list[int] = []
                waiting_of: list[int] = []
                for j in range(nsrv):
                    mine = queues[j].reqs + running[j]
                    if kind == "work":
                        load.append(sum(_work(x) for x in mine))
                    elif kind == "kv":
                        load.append(used[j])
                    elif kind == "prefix":  # fewest requests among the most cached blocks
                        most = int(r.prompt - 1) // bs
                        hits = pools[j].cached_run(ids_of(r), most) if pc else 0
                        load.append(float(len(mine)) - hits * 2.0**25)
                    elif kind == "prefix_queue":  # hits and waiting requests, scored below
                        most = int(r.prompt - 1) // bs
                        hit_of.append(pools[j].cached_run(ids_of(r), most) if pc else 0)
                        waiting_of.append(len(queues[j].reqs))
                    elif kind == "prefix_index":  # what the router sent there, scored below
                        most, ids, k = int(r.prompt - 1) // bs, ids_of(r), 0
                        while pc and k < min(most, len(ids)) and ids[k] in router.sent[j]:
                            k += 1
                        hit_of.append(k)
                        waiting_of.append(len(queues[j].reqs))
                    else:
                        load.append(float(len(mine)))
                if kind in ("prefix_queue", "prefix_index"):
                    load = router.score(hit_of, waiting_of, int(r.prompt) // bs)
                j = router.choose(load)
                if kind == "prefix_index" and pc:
                    router.sent[j].update(ids_of(r))
                queues[j].reqs.append(r)
                if t_next[j] == math.inf:
                    boundary(j, a)
                continue
            queues[0].reqs.append(r)
            for j in range(nsrv):
                if t_next[j] == math.inf:
                    if a < start_at:
                        t_next[j] = start_at
                    else:
                        boundary(j, a)
                    break
            continue
        if t_next[s] == math.inf:
            return reqs
        if all(
            not math.isnan(r.finish)
            or r.prompt + r.output > pol.kv_tokens
            or (not pol.chunked_prefill and r.prompt + r.output > pol.max_batched_tokens)
            for r in reqs
        ):
            return reqs
        boundary(s, t_next[s])


def run_multibin(
    reqs: list[Req],
    batch: int,
    edges: list[float],
    k: tuple[float, float, float, float],
    servers: int = 1,
    flush_s: float = math.inf,
) -> list[Req]:
    """Multi-Bin Batching: bins by predicted length, batches of `batch` per bin (or whatever a
    bin holds once its oldest request waited `flush_s`), formed batches served FCFS."""
    nbins = len(edges) + 1
    bins: list[list[Req]] = [[] for _ in range(nbins)]
    formed: list[tuple[float, list[Req]]] = []  # (formation time, members), FCFS
    free_at = [0.0] * servers
    nxt = 0
    n = len(reqs)
    while True:
        t_arr = reqs[nxt].arrival if nxt < n else math.inf
        t_flush, jf = math.inf, -1
        for j, b in enumerate(bins):
            if b and b[0].arrival + flush_s < t_flush:
                t_flush, jf = b[0].arrival + flush_s, j
        t_srv = math.inf
        s = min(range(servers), key=lambda i: (free_at[i], i))
        if formed:
            t_srv = max(free_at[s], formed[0][0])
        if math.inf == t_srv == t_arr == t_flush:
            return reqs
        if t_srv <= t_arr and t_srv <= t_flush:
            _, members = formed.pop(0)
            comp, t1 = _batch_times(k, [r.output for r in members], False)
            for r, c in zip(members, comp, strict=True):
                r.start, r.first, r.finish, r.server = t_srv, t_srv + t1, t_srv + c, s
            free_at[s] = t_srv + comp[0]
        elif t_arr <= t_flush:
            r = reqs[nxt]
            nxt += 1
            j = sum(1 for e in edges if e <= r.pred)
            bins[j].append(r)
            if len(bins[j]) == batch:
                formed.append((t_arr, bins[j]))
                bins[j] = []
        else:
            formed.append((t_flush, bins[jf]))
            bins[jf] = []


def run_preemptive(
    reqs: list[Req], order: str, k: tuple[float, float, float, float], limit: float = math.inf
) -> list[Req]:
    """One server, one request at a time, preemptive resume by `order` (psjf, srpt, pspjf,
    sprpt; llmqueue.sim.preemptive's docstring): a request needs S = t1(1) + t2(1) n; the key is
    S (psjf), the predicted S (pspjf), or either less the service received (srpt, sprpt); an
    arrival with a strictly smaller key than the running request's preempts it; a completion
    at the moment of an arrival goes first; waiting requests keep the key they entered with,
    ties by arrival; a running request that has had `limit` times its size (the predicted one
    under pspjf and sprpt) of service is not preempted."""
    rec = queue_order(order)
    if not rec.preemptive:
        raise NotImplementedError(f"reference engine: order {order!r} does not preempt")
    if rec.key not in KEYS:
        raise NotImplementedError(f"reference engine: no preemptive key {rec.key!r}")
    r0, r1 = k[0] + k[1], k[2] + k[3]
    got = {r.i: 0.0 for r in reqs}
    predicted = rec.needs_prediction  # the key is the predicted size (pspjf, sprpt)
    remaining = rec.key in ("remaining_size", "predicted_remaining")  # less the service had

    def size(r: Req) -> float:
        return r0 + r1 * r.output

    def basis_of(r: Req) -> float:
        return r0 + r1 * (r.pred if predicted else r.output)

    def key(r: Req) -> float:
        return basis_of(r) - got[r.i] if remaining else basis_of(r)

    waiting: list[tuple[float, int, Req]] = []
    cur: Req | None = None
    t_cur = 0.0
    nxt = 0

    def start(r: Req, t: float) -> None:
        nonlocal cur, t_cur
        cur, t_cur = r, t
        if math.isnan(r.start):
            r.start, r.server = t, 0

    while True:
        tc = t_cur + (size(cur) - got[cur.i]) if cur is not None else math.inf
        a = reqs[nxt].arrival if nxt < len(reqs) else math.inf
        if tc == math.inf and a == math.inf:
            return reqs
        if tc <= a:
            assert cur is not None
            cur.finish = tc
            cur = None
            if waiting:
                best = min(waiting, key=lambda e: (e[0], e[1]))
                waiting.remove(best)
                start(best[2], tc)
            continue
        r = reqs[nxt]
        nxt += 1
        if cur is None:
            start(r, a)
            continue
        got[cur.i] += a - t_cur
        t_cur = a
        if key(r) < key(cur) and not got[cur.i] >= limit * basis_of(cur):
            waiting.append((key(cur), cur.i, cur))
            start(r, a)
        else:
            waiting.append((key(r), r.i, r))
