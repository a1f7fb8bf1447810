"""Serving policies as plain, validated data: which batch former, which queue order, which sizes.

A policy names the batch former (``kind``), its sizes, the queue order and the number of
servers; the simulators (:mod:`llmqueue.sim`) and the exact chains
(:mod:`llmqueue.analytic.batch_chain`) read it, nothing here runs anything. Batch formers:

- ``none``: one request at a time (M/G/c);
- ``dynamic``: every waiting request, at most ``bmax`` (None = no cap, Eq. 15), paper Sec. IV;
- ``fixed``: exactly ``K`` (the M/D^K/1 policy of Eq. 25);
- ``elastic``: dynamic batches whose replies leave as they finish (Eq. 26);
- ``continuous``: iteration-level scheduling (Orca, vLLM) with at most ``bmax`` running
  requests (max_batch), a KV budget of ``kv_tokens`` tokens per server (None = unlimited),
  ``admission`` ``reserve`` (prompt + output reserved at admission), ``on_demand`` (the whole
  prompt must fit at admission, then the KV grows one token per step; preempts the most recent
  request when it runs out: vLLM) or ``per_chunk`` (Hugging Face transformers' FIFO scheduler:
  KV taken as tokens are scheduled, a waiting request whose chunk does not fit is skipped and
  later ones may pass it, a request whose KV cannot grow is starved for the step and the newest
  starved are reset to the back of the queue, after which nothing is admitted until a request
  finishes; ``kv_margin``: once the free share of the KV is below it at a step's start, the step
  takes no prompt chunk after its first scheduled request; FCFS only), and optionally at most
  ``max_batched_tokens`` tokens per iteration (chunked prefill; with ``chunked_prefill`` False
  a prompt is admitted only when it fits the iteration's remaining budget whole, as vLLM with
  ``enable_chunked_prefill=False``; a request whose prompt and output exceed the budget is then
  rejected at arrival, as one above the KV budget is: vLLM refuses such an engine, since a
  preempted request could never be admitted again) and a KV cache in blocks of ``block_size`` tokens (a
  sequence holding h tokens takes ceil(h / block_size) blocks, as vLLM's paged cache;
  1 = token-granular; ``kv_tokens`` must then be a whole number of blocks); ``batch_queue``:
  waiting requests are admitted only at an iteration boundary where nothing runs, up to
  ``bmax`` at once (the paper's dynamic batching, Sec. IV, on an iteration-level engine: members
  leave as they finish, as Eq. 26, and every iteration is priced by the step law; vLLM with
  :class:`llmqueue.engines.admission.BatchQueueMixin`); ``kv_accounting`` (on-demand
  admission): ``vllm`` (a sequence making output token j holds l + j - 1 KV tokens, vLLM's
  count) or ``dong`` (l + j: Dong and Cao, arXiv 2604.11001; one more token per running
  sequence, from its admission on); ``prefix_caching`` (admission on_demand, a KV budget, a
  non-preemptive order): vLLM's automatic prefix caching, each server's KV a block pool that
  keeps the prompt blocks of finished requests and shares them with later requests that carry
  the same leading block ids (:mod:`llmqueue.sim.prefix`);
- ``multibin``: Multi-Bin Batching (Guldogan et al., arXiv 2412.04504): requests go to one of
  ``bins`` bins by their *predicted* output length (edges ``bin_edges``, tokens; None = the
  equal-probability quantiles of the predicted length law, set by the engine), each bin forms
  batches of exactly ``K`` (B), full batches wait in one FCFS queue for the ``servers``; with
  ``flush_s`` a partly full bin whose oldest request has waited that long is sent as it is;
- ``rebatch``: the "continuous" batching of SSJF's simulator (arXiv 2404.08509, its public code):
  a batch of at most ``bmax`` runs until its *shortest* member finishes; the finished leave, the
  others go back to the queue with their remaining run time and the next batch is formed from the
  queue in order. Each request's run time is its time alone on the server, T_1(n) = t1(1) +
  t2(1) n of the batch law (SSJF's 0.1 s + 0.02 s per token, the 0.1 s counted once per
  request), whatever the batch's size. A request put back re-enters the queue as at an arrival
  at that moment (behind every waiting request of its key; FCFS: before every waiting request,
  as SSJF's FCFS puts it back at the head), and under ``sjf`` it is ordered by its *remaining*
  run time (so SJF preempts at batch ends); under ``spjf`` by its unchanged prediction.

Queue orders (:data:`QUEUE_ORDERS`, one :class:`QueueOrder` record each: its key, whether it
needs a prediction, whether it preempts, its exact formula): ``fcfs``, ``sjf`` (true output
length), ``spjf`` (predicted output length), all non-preemptive, ties by arrival; and the
preemptive-resume ones, which serve one request at a time on one server (``none``, no router,
no guard): ``psjf`` (true size), ``srpt`` (remaining true service time), ``pspjf`` (predicted
size), ``sprpt`` (predicted size less the service received), an arrival with a strictly smaller
key preempting the request in service (:mod:`llmqueue.sim.preemptive`); with ``preempt_limit`` c
a request that has received c times its size (predicted size under ``pspjf``, ``sprpt``) or more
is no longer preempted (TRAIL's limited preemption, arXiv 2410.01035). Under ``continuous``
batching on one shared queue (one or several servers; no router, guard or batch queue) the same
orders evict, each server from its own running requests: at an iteration
boundary, while the waiting request with the smallest key has no seat or KV and its key is
strictly smaller than the largest key of the running requests (output tokens, predicted or
true, less those made under ``srpt``/``sprpt``; ties to the latest arrival), that request loses
its seat and its KV and waits to recompute its prompt and output so far (vLLM's recompute
preemption); with ``preempt_limit`` c a request that has made c times its output tokens (its
predicted ones under ``pspjf``, ``sprpt``) or more is not evicted. ``guard_s``: a request that has waited longer is served by age
first (the starvation guard of SSJF, arXiv 2404.08509). ``guard_factor``: the guard also serves
by age once the longest-waiting request has waited more than ``guard_factor`` times its own run
time alone, T_1(n) (its remaining run time under ``rebatch``): the second trigger of SSJF's guard
(10x in their code); it adds to ``guard_s`` (required with sjf / spjf) and applies to the static
formers and ``rebatch``. ``batch_timeout_s`` (``dynamic``, ``elastic``, ``rebatch``; one server):
a batch that is not full when it could start (server free, a request waiting) waits up to this
long for more arrivals and starts when it is full or the time is up (SSJF's FCFS batching waits
10 s, ``BATCH_WAIT_TIMEOUT``); 0 or none: it never waits. ``servers``: identical servers sharing
the queue.

Replicas and routers: ``replicas`` (the same number as ``servers``; either name) engine instances,
each one server with its batch former and KV budget, and ``router`` says how arrivals reach them
(:data:`ROUTERS`): ``central`` (the default), one queue shared by all, the limit every router
approaches; or a queue per replica, each arrival sent on arrival to one replica by
``round_robin`` (in turn), ``random`` (uniformly), ``jsq`` (fewest requests in the replica,
waiting + running), ``least_work`` (fewest predicted tokens outstanding: prompt + predicted output
of its requests not finished), ``least_kv`` (fewest KV tokens held; continuous batching) or
``power_of_d`` (``router_d`` replicas sampled without replacement, the one with fewest requests);
ties go to one of the tied replicas at random. Routers apply to the formers of
:data:`ROUTED_FORMERS`.

Spec strings (config and CLI) are :mod:`llmqueue.policy_text`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llmqueue.errors import InputError

__all__ = [
    "Policy",
    "NO_CAP",
    "BATCHING",
    "BatchFormer",
    "FORMER_RECORDS",
    "batch_former",
    "ORDERS",
    "QueueOrder",
    "ORDER_KEYS",
    "QUEUE_ORDERS",
    "FCFS_ORDER",
    "SJF_ORDER",
    "SPJF_ORDER",
    "DEFAULT_ORDER",
    "queue_order",
    "order_names",
    "PREDICTING_ROUTERS",
    "predictions_needed",
    "predicting_names",
    "ADMISSIONS",
    "Router",
    "ROUTER_LOADS",
    "ROUTER_RECORDS",
    "CENTRAL_ROUTER",
    "ROUTERS",
    "router",
    "ROUTED_FORMERS",
    "STATE_FREE_ROUTERS",
    "router_code",
    "TIMEOUT_FORMERS",
    "GUARD_FACTOR_FORMERS",
    "former_code",
    "order_code",
]

NO_CAP = 1 << 40  # "b_max = infinity"


# The registries: every batch former, queue order and router, declared once as a record. A name's
# integer code (what the compiled engine switches on) is its record's position; adding one means a
# record here and its compiled branch (docs/architecture.md says where).
@dataclass(frozen=True)
class BatchFormer:
    """One batch former of the registry: its `name` (config, CLI, results), the `size` it takes
    (``one``: one request at a time, no size; ``bmax``: at most b_max requests, None for no cap;
    ``K``: exactly K), whether its replicas may each have a queue behind a router (`routed`),
    whether it takes the SSJF simulator's batch timeout (`timeout`, one server) and the guard's
    run-time trigger (`guard_factor`), and whether it reads each request's predicted length
    (`needs_prediction`). Its own settings are checked by :class:`Policy` (``_continuous``,
    ``_multibin``). Its integer `code` is its position in :data:`FORMER_RECORDS`."""

    name: str
    size: str
    routed: bool = False
    timeout: bool = False
    guard_factor: bool = False
    needs_prediction: bool = False

    def __post_init__(self) -> None:
        if self.size not in ("one", "bmax", "K"):
            raise InputError(f"batch former {self.name!r}: size must be one, bmax or K")

    @property
    def code(self) -> int:
        return FORMER_RECORDS.index(self)


FORMER_RECORDS = (
    BatchFormer("none", "one", routed=True, guard_factor=True),
    BatchFormer("dynamic", "bmax", routed=True, timeout=True, guard_factor=True),
    BatchFormer("fixed", "K", guard_factor=True),
    BatchFormer("elastic", "bmax", routed=True, timeout=True, guard_factor=True),
    BatchFormer("continuous", "bmax", routed=True),
    BatchFormer("multibin", "K", needs_prediction=True),
    BatchFormer("rebatch", "bmax", timeout=True, guard_factor=True),
)
BATCHING = tuple(f.name for f in FORMER_RECORDS)
# the formers that take the SSJF-simulator options: a batch timeout, the run-time guard trigger
TIMEOUT_FORMERS = tuple(f.name for f in FORMER_RECORDS if f.timeout)
GUARD_FACTOR_FORMERS = tuple(f.name for f in FORMER_RECORDS if f.guard_factor)


@dataclass(frozen=True)
class QueueOrder:
    """One queue order of the registry: its `name` (config, CLI, results), the `key` the waiting
    requests are served by (``arrival``: first come first served; ``size``: the true output
    length, tokens; ``predicted_size``: the predicted output length, tokens; ties by arrival),
    whether it needs a prediction per request (`needs_prediction`), whether it preempts a request
    in service (`preemptive`), and the name of its exact mean-wait formula for a one-at-a-time
    server (`exact`: a key of :data:`llmqueue.sim.exact.FORMULAS`; None when no formula exists).
    Its integer `code` (what the compiled engine switches on) is its position in
    :data:`QUEUE_ORDERS`."""

    name: str
    key: str
    needs_prediction: bool
    preemptive: bool
    exact: str | None

    def __post_init__(self) -> None:
        if self.key not in ORDER_KEYS:
            raise InputError(f"queue order {self.name!r}: key must be one of {ORDER_KEYS}")

    @property
    def code(self) -> int:
        return QUEUE_ORDERS.index(self)

    @property
    def by_arrival(self) -> bool:
        """True for the order that serves by arrival alone (no size key, nothing to guard)."""
        return self.key == "arrival"


ORDER_KEYS = ("arrival", "size", "predicted_size", "remaining_size", "predicted_remaining")
FCFS_ORDER = QueueOrder("fcfs", "arrival", False, False, "pollaczek_khinchine")
SJF_ORDER = QueueOrder("sjf", "size", False, False, "cobham_by_size")
SPJF_ORDER = QueueOrder("spjf", "predicted_size", True, False, "cobham_by_prediction")
# preemptive-resume orders (one request at a time on one server, :mod:`llmqueue.sim.preemptive`);
# their formulas (mean response times) are in :mod:`llmqueue.analytic.priority`
PSJF_ORDER = QueueOrder("psjf", "size", False, True, None)
SRPT_ORDER = QueueOrder("srpt", "remaining_size", False, True, None)
PSPJF_ORDER = QueueOrder("pspjf", "predicted_size", True, True, None)
SPRPT_ORDER = QueueOrder("sprpt", "predicted_remaining", True, True, None)
QUEUE_ORDERS = (
    FCFS_ORDER, SJF_ORDER, SPJF_ORDER, PSJF_ORDER, SRPT_ORDER, PSPJF_ORDER, SPRPT_ORDER,
)  # fmt: skip
ORDERS = tuple(o.name for o in QUEUE_ORDERS)
DEFAULT_ORDER = FCFS_ORDER.name
ADMISSIONS = ("reserve", "on_demand", "per_chunk")
# how many KV entries a decoding sequence holds while it makes output token j (prompt l): vLLM's
# l + j - 1 (the token it makes is cached by the next iteration), or Dong and Cao's l + j
# (arXiv 2604.11001: a request that has made j tokens holds l + j, the one made this slot
# included); the engine's extra KV per running sequence is the name's position here
KV_ACCOUNTINGS = ("vllm", "dong")
# the formers a router other than "central" applies to (a queue per replica)
ROUTED_FORMERS = tuple(f.name for f in FORMER_RECORDS if f.routed)
# what a router compares across the replicas: nothing (its choice ignores their state), the
# requests in each (waiting + running), the predicted tokens outstanding, the KV tokens held, the
# arrival's cached leading blocks (then the requests), those blocks beside the waiting requests,
# and the leading blocks the router itself sent there beside the waiting requests
ROUTER_LOADS = ("none", "requests", "work", "kv", "prefix", "prefix_queue", "prefix_index")


@dataclass(frozen=True)
class Router:
    """One router of the registry: its `name` (config, CLI, results), the `load` it compares
    across the replicas (a name of :data:`ROUTER_LOADS`: ``none`` for a choice that ignores their
    state, ``requests`` waiting + running, ``work`` the predicted tokens outstanding, which reads
    each request's predicted length, ``kv`` the KV tokens held, ``prefix`` the arrival's leading
    prompt blocks cached at the replica, then the requests, ``prefix_queue`` those blocks and the
    replica's waiting requests, traded by a score, ``prefix_index`` the same with the blocks the
    router's own index says it sent there in place of the cache's) and the batch `formers` it applies
    to (a subset of :data:`ROUTED_FORMERS`). ``central`` is the one shared queue, the limit every
    router approaches. Its integer `code` (what the compiled engine switches on) is its position
    in :data:`ROUTER_RECORDS`."""

    name: str
    load: str
    formers: tuple[str, ...] = ROUTED_FORMERS

    def __post_init__(self) -> None:
        if self.load not in ROUTER_LOADS:
            raise InputError(f"router {self.name!r}: load must be one of {ROUTER_LOADS}")
        if self.name != "central" and not set(self.formers) <= set(ROUTED_FORMERS):
            raise InputError(f"router {self.name!r}: formers must be among {ROUTED_FORMERS}")

    @property
    def code(self) -> int:
        return ROUTER_RECORDS.index(self)

    @property
    def needs_prediction(self) -> bool:
        """Whether it reads each request's predicted output length (its load is the work)."""
        return self.load == "work"

    @property
    def reads_cache(self) -> bool:
        """Whether it reads the replicas' prefix caches (its policy needs ``prefix_caching``)."""
        return self.load in ("prefix", "prefix_queue", "prefix_index")


CENTRAL_ROUTER = Router("central", "none", BATCHING)
ROUTER_RECORDS = (
    CENTRAL_ROUTER,
    Router("round_robin", "none"),
    Router("random", "none"),
    Router("jsq", "requests"),
    Router("least_work", "work"),
    Router("least_kv", "kv", ("continuous",)),
    Router("power_of_d", "requests"),
    Router("prefix_affinity", "prefix", ("continuous",)),
    Router("prefix_score", "prefix_queue", ("continuous",)),
    Router("prefix_index", "prefix_index", ("continuous",)),
)
# how arrivals reach the replicas: "central" is one shared queue, the others a queue per replica
ROUTERS = tuple(r.name for r in ROUTER_RECORDS)
# their choice ignores the replicas' state
STATE_FREE_ROUTERS = tuple(r.name for r in ROUTER_RECORDS[1:] if r.load == "none")
# routers that read each request's predicted length
PREDICTING_ROUTERS = tuple(r.name for r in ROUTER_RECORDS if r.needs_prediction)
# formers that read it (bins by predicted length)
PREDICTING_FORMERS = tuple(f.name for f in FORMER_RECORDS if f.needs_prediction)


def _code(registry: tuple[str, ...], what: str, name: str) -> int:
    if name not in registry:
        raise InputError(f"{what} must be one of {', '.join(registry)}, got {name!r}")
    return registry.index(name)


def former_code(name: str) -> int:
    """The integer code of batch former `name` (its position in :data:`FORMER_RECORDS`);
    InputError for a name outside the registry."""
    return _code(tuple(f.name for f in FORMER_RECORDS), "batching", name)


def batch_former(name: str) -> BatchFormer:
    """The record of batch former `name`; InputError for a name outside the registry."""
    return FORMER_RECORDS[former_code(name)]


def order_code(name: str) -> int:
    """The integer code of queue order `name` (its position in :data:`ORDERS`); InputError for a
    name outside the registry."""
    return _code(tuple(o.name for o in QUEUE_ORDERS), "order", name)


def queue_order(name: str) -> QueueOrder:
    """The record of queue order `name`; InputError for a name outside the registry."""
    return QUEUE_ORDERS[order_code(name)]


def order_names(*, preemptive: bool | None = None) -> tuple[str, ...]:
    """The names of the queue orders of the registry, in code order: all of them, or only the
    preemptive (`preemptive=True`) or the non-preemptive ones (False)."""
    return tuple(o.name for o in QUEUE_ORDERS if preemptive is None or o.preemptive == preemptive)


def predictions_needed(
    orders: tuple[str, ...] | list[str] = (),
    formers: tuple[str, ...] | list[str] = (),
    routers: tuple[str, ...] | list[str] = (),
) -> bool:
    """Whether any of these queue orders, batch formers or routers reads a predicted output
    length per request (names outside the registries are refused where they are parsed)."""
    return (
        any(o in ORDERS and queue_order(o).needs_prediction for o in orders)
        or any(f in PREDICTING_FORMERS for f in formers)
        or any(r in PREDICTING_ROUTERS for r in routers)
    )


def predicting_names(*, formers: bool = True) -> str:
    """The orders, formers and routers that need predictions, as the CLI's messages name them;
    `formers=False` for a command without --batching (plan)."""
    names = [f"--order {o.name}" for o in QUEUE_ORDERS if o.needs_prediction]
    if formers:
        names += [f"--batching {f}" for f in PREDICTING_FORMERS]
    names += [f"--router {r}" for r in PREDICTING_ROUTERS]
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def router_code(name: str) -> int:
    """The integer code of router `name` (its position in :data:`ROUTER_RECORDS`); InputError for
    a name outside the registry."""
    return _code(tuple(r.name for r in ROUTER_RECORDS), "router", name)


def router(name: str) -> Router:
    """The record of router `name`; InputError for a name outside the registry."""
    return ROUTER_RECORDS[router_code(name)]


def _posint(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


@dataclass(frozen=True)
class Policy:
    """A serving policy (see the module docstring). Sizes in requests and tokens, times in s."""

    kind: str
    bmax: int | None = None
    K: int | None = None
    order: str = DEFAULT_ORDER
    guard_s: float | None = None
    servers: int = 1
    kv_tokens: int | None = None
    admission: str = "reserve"
    max_batched_tokens: int | None = None
    block_size: int = 1
    chunked_prefill: bool = True
    batch_queue: bool = False
    kv_margin: float = 0.0
    bins: int = 1
    bin_edges: tuple[float, ...] | None = None
    flush_s: float | None = None
    batch_timeout_s: float | None = None
    guard_factor: float | None = None
    replicas: int = 1
    router: str = "central"
    router_d: int = 2
    preempt_limit: float | None = None
    kv_accounting: str = "vllm"
    prefix_caching: bool = False

    def __post_init__(self) -> None:
        """The checks, by concern: the replicas and router, the former's size, the queue order
        and its guard, the Multi-Bin settings, the continuous former's (KV, admission, chunks),
        the SSJF simulator's options."""
        former = batch_former(self.kind)
        self._replicas()
        self._size(former)
        self._order()
        self._multibin()
        self._continuous()
        self._ssjf_options()

    def _size(self, former: BatchFormer) -> None:
        """The former's size: exactly K, at most b_max (None: no cap), or none."""
        if former.size == "K":
            if self.K is None or int(self.K) != self.K or self.K < 1:
                raise InputError(
                    f"{self.kind} batching needs a batch size K >= 1 (integer), got {self.K!r}"
                )
            if self.bmax is not None:
                raise InputError(f"{self.kind} batching takes K (the batch size), not b_max")
        else:
            if self.K is not None:
                raise InputError(f"{self.kind} batching takes b_max, not K")
            if former.size == "one" and self.bmax is not None:
                raise InputError(f"batching {self.kind} serves one request at a time: no b_max")
            if self.bmax is not None and (int(self.bmax) != self.bmax or self.bmax < 1):
                raise InputError(
                    f"b_max must be an integer >= 1 (or none for infinity), got {self.bmax!r}"
                )

    def _order(self) -> None:
        """The queue order, a preemptive one's conditions and limit, the starvation guard."""
        order_code(self.order)
        if queue_order(self.order).preemptive and (
            self.kind not in ("none", "continuous")
            or (self.servers != 1 and self.kind == "none")
            or self.routed
            or self.guard_s is not None
            or self.batch_queue
            or self.admission == "per_chunk"
        ):
            raise InputError(
                f"order {self.order!r} preempts the request in service: it runs under batching "
                "none on one server or continuous on one shared queue, without a guard (no "
                "--replicas, --guard or --batch-queue; --servers 1 under none; admission reserve "
                "or on_demand), got batching "
                f"{self.kind}, {self.servers} server(s), router {self.router}"
            )
        if self.preempt_limit is not None:
            if not queue_order(self.order).preemptive:
                raise InputError(
                    f"preempt_limit applies to a preemptive order, got order {self.order!r}"
                )

            if not (isinstance(self.preempt_limit, float | int) and 0 < self.preempt_limit <= 1):
                raise InputError(
                    f"preempt_limit must be a fraction in (0, 1], got {self.preempt_limit!r}"
                )
        if self.guard_s is not None and not (self.guard_s > 0 and math.isfinite(self.guard_s)):
            raise InputError(f"guard_s must be a finite time > 0 s (or none), got {self.guard_s!r}")

    def _multibin(self) -> None:
        """Multi-Bin's own order, bins, edges and flush time (refused for another former)."""
        mb = self.kind == "multibin"
        if mb and (self.order != DEFAULT_ORDER or self.guard_s is not None):
            raise InputError(
                "multibin batching has its own order (bins by predicted length, full batches "
                f"first come first served): no queue order or guard, got order {self.order!r}"
            )
        if not _posint(self.bins) or (not mb and self.bins != 1):
            raise InputError(
                f"bins must be an integer >= 1 (multibin batching only), got {self.bins!r}"
            )
        if not mb and (self.bin_edges is not None or self.flush_s is not None):
            raise InputError("bin_edges and flush_s apply to multibin batching only")
        if self.bin_edges is not None:
            e = list(self.bin_edges)
            if len(e) != self.bins - 1 or e != sorted(set(e)) or any(not x > 0 for x in e):
                raise InputError(
                    f"bin_edges: {self.bins - 1} increasing token counts > 0 for {self.bins} bins, "
                    f"got {e}"
                )
        if self.flush_s is not None and not (self.flush_s > 0 and math.isfinite(self.flush_s)):
            raise InputError(f"flush_s must be a finite time > 0 s (or none), got {self.flush_s!r}")

    def _continuous(self) -> None:
        """Continuous batching's KV budget and blocks, admission, token budget, chunked prefill,
        batch queue, KV margin and KV count (refused for another former)."""
        cont = self.kind == "continuous"
        if not cont and (
            self.kv_tokens is not None
            or self.admission != "reserve"
            or self.max_batched_tokens is not None
            or self.block_size != 1
            or self.chunked_prefill is not True
            or self.batch_queue is not False
            or self.kv_margin != 0.0
        ):
            raise InputError(
                "kv_tokens, admission, max_batched_tokens, block_size, chunked_prefill, "
                "batch_queue and kv_margin apply to continuous batching only"
            )
        for key in ("chunked_prefill", "batch_queue"):
            if not isinstance(getattr(self, key), bool):
                raise InputError(f"{key} must be true or false, got {getattr(self, key)!r}")
        if not self.chunked_prefill and self.max_batched_tokens is None:
            raise InputError("chunked_prefill false needs max_batched_tokens (the token budget)")
        if self.kv_tokens is not None and not _posint(self.kv_tokens):
            raise InputError(f"kv_tokens must be an integer >= 1 token, got {self.kv_tokens!r}")
        if self.admission not in ADMISSIONS:
            raise InputError(
                f"admission must be one of {', '.join(ADMISSIONS)}, got {self.admission!r}"
            )
        self._per_chunk()
        if self.kv_accounting not in KV_ACCOUNTINGS:
            raise InputError(
                f"kv_accounting must be one of {', '.join(KV_ACCOUNTINGS)}, got "
                f"{self.kv_accounting!r}"
            )
        if self.kv_accounting != KV_ACCOUNTINGS[0] and not (cont and self.admission == "on_demand"):
            raise InputError(
                f"kv_accounting {self.kv_accounting} counts the KV a sequence grows into: it "
                "applies to continuous batching with admission on_demand"
            )
        if self.max_batched_tokens is not None and not _posint(self.max_batched_tokens):
            raise InputError(
                f"max_batched_tokens must be an integer >= 1, got {self.max_batched_tokens!r}"
            )
        self._prefix_caching()

    def _prefix_caching(self) -> None:
        """``prefix_caching``: vLLM's, so continuous batching with on-demand KV in a finite
        block pool, under an order that does not evict for a waiting request."""
        pc = self.prefix_caching
        if not isinstance(pc, bool):
            raise InputError(f"prefix_caching must be true or false, got {pc!r}")
        if not pc:
            return
        if self.kind != "continuous" or self.admission != "on_demand":
            raise InputError(
                "prefix_caching is vLLM's: it needs continuous batching with admission on_demand"
            )
        if self.kv_tokens is None:
            raise InputError("prefix_caching needs kv_tokens (the block pool's size), got none")
        if queue_order(self.order).preemptive:
            raise InputError(
                f"prefix_caching takes a non-preemptive order (fcfs, sjf, spjf), got {self.order}"
            )

    def _ssjf_options(self) -> None:
        """The options of SSJF's simulator (a batch timeout, the guard's run-time trigger) and,
        last, the continuous former's block size and the KV budget in whole blocks."""
        if self.batch_timeout_s is not None:
            if not (self.batch_timeout_s >= 0 and math.isfinite(self.batch_timeout_s)):
                raise InputError(
                    f"batch_timeout_s must be a finite time >= 0 s (or none), got "
                    f"{self.batch_timeout_s!r}"
                )
            if self.kind not in TIMEOUT_FORMERS:
                raise InputError(
                    f"batch_timeout_s applies to {', '.join(TIMEOUT_FORMERS)} batching, not "
                    f"{self.kind}"
                )
            if self.servers != 1:
                raise InputError(f"batch_timeout_s needs one server, got servers={self.servers}")
        if self.guard_factor is not None:
            if not (self.guard_factor > 0 and math.isfinite(self.guard_factor)):
                raise InputError(
                    f"guard_factor must be a finite number > 0 (or none), got {self.guard_factor!r}"
                )
            if self.kind not in GUARD_FACTOR_FORMERS:
                raise InputError(
                    f"guard_factor applies to {', '.join(GUARD_FACTOR_FORMERS)} batching, not "
                    f"{self.kind}"
                )
            if not queue_order(self.order).by_arrival and self.guard_s is None:
                raise InputError(
                    "guard_factor is the second trigger of the starvation guard: give guard_s too"
                )
        if not _posint(self.block_size):
            raise InputError(f"block_size must be an integer >= 1 token, got {self.block_size!r}")
        if self.kv_tokens is not None and self.kv_tokens % self.block_size:
            raise InputError(
                f"kv_tokens ({self.kv_tokens}) must be a whole number of blocks of block_size "
                f"{self.block_size} tokens"
            )

    def _per_chunk(self) -> None:
        """``per_chunk`` admission (transformers' FIFO scheduler) and its ``kv_margin``."""
        m = self.kv_margin
        if isinstance(m, bool) or not isinstance(m, (int, float)) or not (0.0 <= m < 1.0):
            raise InputError(f"kv_margin must be a fraction in [0, 1) of the KV, got {m!r}")
        if self.admission != "per_chunk":
            if m != 0.0:
                raise InputError("kv_margin applies to admission per_chunk only")
            return
        if self.order != FCFS_ORDER.name or self.guard_s is not None:
            raise InputError(
                "admission per_chunk is transformers' FIFO scheduler: order fcfs, no guard_s"
            )
        if not self.chunked_prefill or self.batch_queue:
            raise InputError(
                "admission per_chunk chunks every prompt and admits at any step: chunked_prefill "
                "true, batch_queue false"
            )
        if self.max_batched_tokens is not None and (
            self.bmax is None or self.max_batched_tokens < self.bmax
        ):
            raise InputError(
                "admission per_chunk needs max_batched_tokens >= max_batch (a step decodes every "
                "running request within its token budget), got "
                f"{self.max_batched_tokens} and {self.bmax}"
            )

    def _replicas(self) -> None:
        """``servers`` and ``replicas`` name one number: either given, both hold it."""
        for key in ("servers", "replicas"):
            if not _posint(getattr(self, key)):
                raise InputError(f"{key} must be an integer >= 1, got {getattr(self, key)!r}")
        if self.servers != 1 and self.replicas != 1 and self.servers != self.replicas:
            raise InputError(
                f"servers ({self.servers}) and replicas ({self.replicas}) are one number: give one"
            )
        n = max(self.servers, self.replicas)
        object.__setattr__(self, "servers", n)
        object.__setattr__(self, "replicas", n)
        router_code(self.router)
        if not _posint(self.router_d):
            raise InputError(f"router_d (d) must be an integer >= 1, got {self.router_d!r}")
        if self.router == "central":
            if self.router_d != 2:
                raise InputError("router_d (d) applies to the router power_of_d only")
            return
        if self.kind not in ROUTED_FORMERS:
            raise InputError(
                f"router {self.router!r} applies to {', '.join(ROUTED_FORMERS)} batching, not "
                f"{self.kind} (a central queue only)"
            )
        if self.batch_timeout_s is not None:
            raise InputError("batch_timeout_s needs one queue: the router central")
        rec = router(self.router)
        if self.kind not in rec.formers:
            held = " (the KV tokens held)" if rec.load == "kv" else ""
            raise InputError(
                f"router {self.router} needs {' or '.join(rec.formers)} batching{held}, not "
                f"{self.kind}"
            )
        if self.router != "power_of_d" and self.router_d != 2:
            raise InputError("router_d (d) applies to the router power_of_d only")
        if self.router == "power_of_d" and self.router_d > self.replicas:
            raise InputError(
                f"router power_of_d samples d = {self.router_d} replicas of {self.replicas}: "
                "d must be at most replicas"
            )

    @property
    def routed(self) -> bool:
        """Whether each replica has its own queue (a router other than ``central``)."""
        return self.router != "central"

    @property
    def k(self) -> int:
        """The fixed batch size K (fixed policy only)."""
        if self.K is None:
            raise InputError(f"policy {self.kind!r} has no fixed batch size K")
        return int(self.K)

    @property
    def threshold(self) -> int:
        """Requests that must wait before a static batch starts."""
        return self.k if batch_former(self.kind).size == "K" else 1

    @property
    def cap(self) -> int:
        """Largest batch (NO_CAP for none given)."""
        size = batch_former(self.kind).size
        if size == "K":
            return self.k
        if size == "one":
            return 1
        return NO_CAP if self.bmax is None else int(self.bmax)

    @property
    def elastic(self) -> bool:
        return self.kind == "elastic"

    def label(self) -> str:
        if self.kind == "fixed":
            out = f"fixed K={self.K}"
        elif self.kind == "none":
            out = "none"
        elif self.kind == "multibin":
            out = f"multibin k={self.bins} B={self.K}"
            if self.flush_s is not None:
                out += f" flush={self.flush_s:g}s"
        elif self.kind == "continuous":
            cap = "inf" if self.bmax is None else str(self.bmax)
            kv = "inf" if self.kv_tokens is None else str(self.kv_tokens)
            out = f"continuous max_batch={cap} kv={kv} {self.admission}"
            if self.max_batched_tokens is not None:
                out += f" chunk={self.max_batched_tokens}"
            if self.block_size != 1:
                out += f" block={self.block_size}"
            if not self.chunked_prefill:
                out += " whole-prompts"
            if self.batch_queue:
                out += " batch-queue"
            if self.kv_margin:
                out += f" margin={self.kv_margin:g}"
            if self.kv_accounting != KV_ACCOUNTINGS[0]:
                out += f" kv-count={self.kv_accounting}"
            if self.prefix_caching:
                out += " prefix-cache"
        else:
            cap = "inf" if self.bmax is None else str(self.bmax)
            out = f"{self.kind} b_max={cap}"
        if self.order != DEFAULT_ORDER:
            out += f" {self.order}"
        if self.batch_timeout_s is not None:
            out += f" timeout={self.batch_timeout_s:g}s"
        if self.guard_s is not None:
            out += f" guard={self.guard_s:g}s"
        if self.guard_factor is not None:
            out += f" guard={self.guard_factor:g}x"
        if self.preempt_limit is not None:
            out += f" limit={self.preempt_limit:g}"
        if self.routed:
            d = f" d={self.router_d}" if self.router == "power_of_d" else ""
            out += f" x{self.replicas} {self.router}{d}"
        elif self.servers != 1:
            out += f" x{self.servers}"
        return out
