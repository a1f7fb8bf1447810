"""Routers of the serving engine: which replica an arrival goes to (compiled part).

With a router other than ``central`` (:data:`llmqueue.policy.ROUTERS`) the engine runs c replicas,
each one server with its own queue, KV budget and batch former, and sends every arrival, at its
arrival time, to one replica:

- ``round_robin``: replicas 0, 1, ..., c-1, 0, ... in turn;
- ``random``: uniformly at random;
- ``jsq`` (join the shortest queue): fewest requests in the replica, waiting + running;
- ``least_work``: fewest predicted tokens outstanding (prompt + predicted output of the
  replica's requests not finished, each rounded to a whole token: :func:`work_tokens`, so that the
  running sums are exact and idle replicas tie);
- ``least_kv``: fewest KV tokens held now (continuous batching);
- ``power_of_d``: d replicas sampled without replacement, the one with fewest requests
  (Mitzenmacher's power of d choices);
- ``prefix_affinity`` (continuous batching): the replica whose block pool holds the longest
  cached run of the arrival's leading prompt block ids now (with prefix caching; without it none
  does and this is ``jsq``), ties by fewest requests: llm-d's precise prefix-cache scorer with its
  queue scorer breaking ties. The routed loop folds both into one load, requests - hit blocks x
  2**25 (exact in float64: requests < 2**24 and hit blocks < 2**28);
- ``prefix_score`` (continuous batching): llm-d's default scoring profile, the highest of
  3 x prefix score + 2 x queue score, where the prefix score is the arrival's cached leading
  blocks at the replica over its prompt's full blocks (llm-d's precise prefix-cache scorer) and
  the queue score (qmax - q) / (qmax - qmin) over the replicas' waiting requests q (its queue
  scorer; 1 for all when they are equal). The routed loop folds each replica's hit blocks and
  waiting requests into one load as above; :func:`prefix_scores` turns them into the score;
- ``prefix_index`` (continuous batching): the same score with llm-d's approximate prefix scorer
  in place of the precise one: the router keeps an index of the prompt blocks it sent to each
  replica (every id'ed full block of every arrival it routed there, never forgotten) and counts
  the arrival's leading blocks the index holds for the replica, blind to evictions.

Ties go to one of the tied replicas uniformly at random. The load a state-dependent router
compares is measured by the batch former's routed loop (its :func:`load_kind` says which), at the
arrival's time, over every replica, into ``load[c]``; :func:`choose` then picks.

Random draws come from a SplitMix64 stream (Steele, Lea & Flood 2014) seeded from a child of the
run's seed, kept in ``rst[0]`` so a run resumes across chunks, and apart from the workload's
stream: two routers see the same arrivals (common random numbers). A uniform integer in [0, n)
is Lemire's multiply-shift of the word's top 32 bits (bias below n / 2**32). The routers' codes
are the positions of their names in the registry; an unknown code is an error here, never a
fallback (:func:`check_router`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.policy import ROUTER_LOADS, ROUTER_RECORDS, Policy, router_code
from llmqueue.sim.rng import check_seed, child_seeds

__all__ = [
    "CENTRAL",
    "ROUND_ROBIN",
    "RANDOM",
    "JSQ",
    "LEAST_WORK",
    "LEAST_KV",
    "POWER_OF_D",
    "PREFIX_AFFINITY",
    "PREFIX_SCORE",
    "PREFIX_INDEX",
    "PREFIX_WEIGHT",
    "PREFIX_SCORER_WEIGHT",
    "QUEUE_SCORER_WEIGHT",
    "COMPILED_ROUTERS",
    "LOAD_NONE",
    "LOAD_REQUESTS",
    "LOAD_WORK",
    "LOAD_KV",
    "LOAD_PREFIX",
    "LOAD_PREFIX_QUEUE",
    "LOAD_PREFIX_INDEX",
    "check_router",
    "prefix_scores",
    "load_kind",
    "choose",
    "next_word",
    "work_tokens",
    "below",
    "RouterState",
]

(
    CENTRAL, ROUND_ROBIN, RANDOM, JSQ, LEAST_WORK, LEAST_KV, POWER_OF_D, PREFIX_AFFINITY,
    PREFIX_SCORE, PREFIX_INDEX,
) = (
    router_code(name)
    for name in (
        "central", "round_robin", "random", "jsq", "least_work", "least_kv", "power_of_d",
        "prefix_affinity", "prefix_score", "prefix_index",
    )
)  # fmt: skip
COMPILED_ROUTERS = (
    ROUND_ROBIN, RANDOM, JSQ, LEAST_WORK, LEAST_KV, POWER_OF_D, PREFIX_AFFINITY, PREFIX_SCORE,
    PREFIX_INDEX,
)  # fmt: skip

# what a router compares (the former's routed loop measures it per replica): the codes of
# llmqueue.policy.ROUTER_LOADS, and each router's, from its record
LOAD_NONE, LOAD_REQUESTS, LOAD_WORK, LOAD_KV, LOAD_PREFIX, LOAD_PREFIX_QUEUE, LOAD_PREFIX_INDEX = (
    ROUTER_LOADS.index(k)
    for k in ("none", "requests", "work", "kv", "prefix", "prefix_queue", "prefix_index")
)
PREFIX_WEIGHT = float(2**25)  # the prefix loads: requests - hit blocks x PREFIX_WEIGHT
PREFIX_SCORER_WEIGHT = 3.0  # prefix_score: llm-d's default weights of its two scorers
QUEUE_SCORER_WEIGHT = 2.0
_LOAD_OF = np.array([ROUTER_LOADS.index(r.load) for r in ROUTER_RECORDS], dtype=np.int64)

# rst: the router's state (uint64)
R_RNG = 0  # SplitMix64 state
R_NEXT = 1  # round robin's next replica
R_D = 2  # d of power_of_d
NR = 3

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def check_router(name: str) -> int:
    """The code of router `name`, refused (InputError) when the registry does not know it or this
    module has no compiled branch for it (``central`` is the engine's shared queue, not a
    router's choice)."""
    code = router_code(name)
    if code not in COMPILED_ROUTERS:
        raise InputError(f"router {name!r} has no compiled branch in llmqueue.sim.router")
    return code


@njit(cache=True, nogil=True, inline="always")
def load_kind(code):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The load router `code` compares (LOAD_*, its record's ``load``): none for the routers that
    ignore state."""
    return _LOAD_OF[code]


@njit(cache=True, nogil=True, inline="always")
def work_tokens(prompt, pred):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """A request's predicted tokens for ``least_work``: prompt + predicted output, rounded to the
    nearest whole token (halves up)."""
    return np.floor(prompt + pred + 0.5)


@njit(cache=True, nogil=True, inline="always")
def next_word(rst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The next 64-bit word of the SplitMix64 stream in ``rst[R_RNG]``."""
    z = rst[R_RNG] + _GOLDEN
    rst[R_RNG] = z
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def below(rst, n):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """A uniform integer in [0, n), n <= 2**32 (Lemire's multiply-shift of 32 random bits)."""
    w = next_word(rst) >> np.uint64(32)
    return np.int64((w * np.uint64(n)) >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _least(load, cand, k, rst):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The replica of least load among ``cand[:k]``, ties uniformly at random (reservoir)."""
    best = cand[0]
    ties = 1
    for i in range(1, k):
        j = cand[i]
        if load[j] < load[best]:
            best = j
            ties = 1
        elif load[j] == load[best]:
            ties += 1
            if below(rst, ties) == 0:
                best = j
    return best


@njit(cache=True, nogil=True, inline="always")
def prefix_scores(load, blocks):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """``prefix_score``'s scores, in place: each ``load[j]`` = q - k x PREFIX_WEIGHT (q waiting
    requests, k cached leading blocks of the arrival at replica j; exact, q < PREFIX_WEIGHT)
    becomes -(PREFIX_SCORER_WEIGHT x k / blocks + QUEUE_SCORER_WEIGHT x (qmax - q) / (qmax -
    qmin)), the queue term 1 when every q is equal and the prefix term 0 when the arrival has no
    full block (`blocks` its prompt's full blocks), so the least load is the highest score."""
    c = load.size
    qmin = np.inf
    qmax = -np.inf
    for j in range(c):
        k = np.ceil(-load[j] / PREFIX_WEIGHT)
        q = load[j] + k * PREFIX_WEIGHT
        qmin = min(qmin, q)
        qmax = max(qmax, q)
    for j in range(c):
        k = np.ceil(-load[j] / PREFIX_WEIGHT)
        q = load[j] + k * PREFIX_WEIGHT
        hit = PREFIX_SCORER_WEIGHT * k / blocks if blocks > 0 else 0.0
        queue = (qmax - q) / (qmax - qmin) if qmax > qmin else 1.0
        load[j] = -(hit + QUEUE_SCORER_WEIGHT * queue)


@njit(cache=True, nogil=True, inline="always")
def choose(code, load, rst, perm):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The replica the next arrival goes to under router `code`; ``load[c]`` holds each
    replica's load (:func:`load_kind`) for the state-dependent routers; ``perm`` (int64[c], a
    permutation of 0..c-1 kept between calls) is the scratch of every sample. Returns -1 for a
    code without a branch (the driver refuses such codes before a run)."""
    c = perm.size
    if code == ROUND_ROBIN:
        r = np.int64(rst[R_NEXT])
        rst[R_NEXT] = np.uint64((r + 1) % c)
        return r
    if code == RANDOM:
        return below(rst, c)
    if (
        code == JSQ
        or code == LEAST_WORK
        or code == LEAST_KV
        or code == PREFIX_AFFINITY
        or code == PREFIX_SCORE
        or code == PREFIX_INDEX
    ):
        return _least(load, perm, c, rst)
    if code == POWER_OF_D:
        d = np.int64(rst[R_D])
        for i in range(d):  # partial Fisher-Yates: perm[:d] a uniform d-subset, in random order
            j = i + below(rst, c - i)
            x = perm[i]
            perm[i] = perm[j]
            perm[j] = x
        return _least(load, perm, d, rst)
    return -1


@dataclass
class RouterState:
    """A run's router: its code, the state ``rst`` (SplitMix64 word, round robin's next replica,
    d), the sample scratch ``perm`` and the per-replica ``load`` buffer."""

    code: int
    rst: np.ndarray
    perm: np.ndarray
    load: np.ndarray

    @property
    def arrays(self) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """(code, rst, perm, load): the router as the routed loops take it."""
        return self.code, self.rst, self.perm, self.load

    @classmethod
    def new(cls, policy: Policy, seed: int | np.random.SeedSequence) -> RouterState:
        """The router of a routed `policy`, its stream seeded from a child of the run's seed."""
        check_seed(seed)
        code = check_router(policy.router)
        c = int(policy.replicas)
        rst = np.zeros(NR, dtype=np.uint64)
        rst[R_RNG] = child_seeds(seed, 1)[0].generate_state(1, dtype=np.uint64)[0]
        rst[R_D] = np.uint64(policy.router_d)
        return cls(code, rst, np.arange(c, dtype=np.int64), np.zeros(c))
