"""The goodput of a serving configuration, and a search over many.

**Goodput** (DistServe's, Zhong et al., OSDI 2024): the highest arrival rate at which a
configuration meets every SLO (:mod:`llmqueue.plan.slo`). Latencies grow with the rate, so
whether the SLOs are met is monotone in the rate and the goodput is found by bisection
(:func:`goodput`), every run at every rate on the same requests (common random numbers: one seed
for every run, the workload time-scaled to the rate), so that a configuration's verdicts are
monotone in practice too and two configurations differ by their serving, not by their draws. The
rate is searched

- ``max``: below the configuration's saturation rate, c x the rate at which one of its replicas
  completes requests when every request arrives at once, in FCFS order
  (:func:`llmqueue.sim.capacity.saturated_rate`; c replicas cannot complete more, so no rate
  above has a steady state; measured once per replica setting and shared by the configurations
  that differ only in replicas, router or order), and at most ``max_load`` x sat (0.95): near
  saturation no run of finite length reaches the steady state (the relaxation time grows like
  1 / (1 - rho)^2), so a run there would show latencies far below the queue's own. The search
  runs top / 2 first (top = max_load x sat): if it meets the SLOs the bracket is [top / 2, top]
  (the top itself is not run); else the rate halves until one meets them, down to ``rel_tol`` x
  sat, below which the configuration has goodput 0 (bound ``<``). A configuration that never
  misses them up to the top gets the bound ``>=`` (its goodput is at least that: the search
  reached its ceiling);
- ``LO:HI``: in a range: ``>=`` HI when HI meets the SLOs, ``<`` LO when LO does not;
- one rate: no bisection, only whether the configuration meets its SLOs at that rate (bound
  ``=`` when it does; else ``<``: no goodput at that rate, as a range's LO missed).

Every mode measures the saturation rate and searches no rate above its top, min(``max_load`` x
sat, :data:`~llmqueue.limits.MAX_RATE_PER_S`): a range's HI above it is lowered to it (``>=``
the top when the top meets the SLOs), and a range's LO or the one rate above it is not run
and misses (``<``; why: at or above saturation there is no steady state, between the top and
sat no run of finite length reaches it). So no goodput above a configuration's saturation rate
is ever reported, nor one above the rates ``--rate`` accepts (a step law of almost no time).
A configuration whose saturation cannot be measured (no request fits its KV budget) has
goodput 0 with the reason.

Each row also says whether its runs were long enough to tell (:func:`too_short`): by Little's
law the run at the goodput holds ``in_system`` requests on average; a warm-up of fewer than
2 x that, or fewer than 20 x that measured requests, has not turned the system over often
enough to show its steady state (``too_short``; ``llmqueue plan`` names ``--warmup`` and
``--requests`` and the sizes that would do).

Inside a bracket (a rate that meets the SLOs, one that does not) the search interpolates: each
run's *severity* (the largest value / limit over the SLOs, :class:`llmqueue.plan.slo.Verdict`)
is 1 at the goodput, and the Illinois variant of regula falsi on log(severity) against the rate
picks the next rate, with a bisection step whenever interpolation does not halve the bracket
(:func:`_refine`). It stops when the bracket is within ``rel_tol`` of its upper end; the goodput
reported is the highest rate found to meet the SLOs (bound ``=``: the true goodput lies in
[rate, rate (1 + rel_tol))). At ``headroom`` x the goodput (0.8: the rate an operator would run
at), the configuration's p99 of the SLOs' first metric is its Pareto latency.

:func:`search` evaluates configurations on worker threads (the engine's compiled loops release
the GIL), reporting each finished one to a progress callback; results come back in the
configurations' order and are the same for any number of workers.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.limits import MAX_RATE_PER_S
from llmqueue.plan.slo import SLO, Verdict, as_row, slo_columns
from llmqueue.plan.space import Config
from llmqueue.policy import FCFS_ORDER
from llmqueue.sim.capacity import saturated_rate
from llmqueue.sim.engine import run as run_engine
from llmqueue.sim.result import SimResult
from llmqueue.sim.workload import Workload

__all__ = [
    "RateSpec",
    "PlanRun",
    "Goodput",
    "parse_rate",
    "evaluate",
    "goodput",
    "search",
    "too_short",
    "sizes_needed",
]


@dataclass(frozen=True)
class RateSpec:
    """How the rate is searched: ``max``, a range [lo, hi] or ``one`` rate (lo == hi)."""

    mode: str
    lo: float = math.nan
    hi: float = math.nan

    def describe(self) -> str:
        if self.mode == "max":
            return "the highest rate meeting the SLOs"
        if self.mode == "range":
            return f"the highest rate in [{self.lo:g}, {self.hi:g}] /s meeting the SLOs"
        return f"the SLOs at {self.lo:g} requests/s"


def _rate(text: str, flag: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (0 < v <= MAX_RATE_PER_S):
        raise InputError(f"{flag}: {text!r} must be a rate in (0, {MAX_RATE_PER_S:g}] requests/s")
    return v


def parse_rate(text: str, *, flag: str = "--rate") -> RateSpec:
    """``max``, ``R`` or ``LO:HI`` (requests/s)."""
    t = str(text).strip()
    if t == "max":
        return RateSpec("max")
    if ":" in t:
        lo_t, _, hi_t = t.partition(":")
        lo, hi = _rate(lo_t, flag), _rate(hi_t, flag)
        if not hi > lo:
            raise InputError(f"{flag} {t!r}: a range LO:HI needs HI > LO")
        return RateSpec("range", lo, hi)
    r = _rate(t, flag)
    return RateSpec("one", r, r)


@dataclass(frozen=True)
class PlanRun:
    """How each configuration is run: ``requests`` measured after ``warmup`` (a replayed trace:
    at most its rows, the warm-up at most a tenth of them), one ``seed`` for every run, the
    bisection's relative tolerance, the Pareto headroom, the saturation run's size, the
    starvation guard of the non-FCFS orders (s, None: none) and the highest share of the
    saturation rate searched (``max``)."""

    requests: int = 20_000
    warmup: int = 2_000
    seed: int = 0
    rel_tol: float = 0.02
    headroom: float = 0.8
    capacity_requests: int = 20_000
    guard_s: float | None = None
    max_load: float = 0.95

    def sizes(self, workload: Workload) -> tuple[int, int]:
        """(requests, warmup) for this workload (a replayed trace: :meth:`Workload.run_sizes`)."""
        return workload.run_sizes(self.requests, self.warmup)


@dataclass(frozen=True)
class Goodput:
    """A configuration's result: its goodput (requests/s) and what it means (``bound``: ``=``,
    ``>=`` the range's top, ``<`` the range's bottom / the lowest rate tried / the one rate
    missed: goodput 0), the verdict at that rate (or at the one rate), its saturation rate (NaN
    when it could not be measured), the p99 of the SLOs' first metric at headroom x goodput (NaN
    when the goodput is 0), the runs made, why the lowest failing rate failed, and the mean
    requests in the system at the goodput (Little's law; NaN without one)."""

    rate_per_s: float
    bound: str
    verdict: Verdict
    saturation_per_s: float
    pareto_latency_s: float
    runs: int
    why_not_higher: str = ""
    in_system: float = math.nan

    @property
    def met(self) -> bool:
        return self.verdict.met

    def too_short(self, run: PlanRun) -> bool:
        """Whether the runs that found this goodput were too short to tell (:func:`too_short`)."""
        return self.bound != "<" and too_short(self.in_system, run.warmup, run.requests)


def evaluate(
    workload: Workload,
    config: Config,
    latency: StepLaw,
    slo: SLO,
    rate_per_s: float,
    run: PlanRun,
) -> tuple[Verdict, SimResult]:
    """One run of `config` at `rate_per_s` and its SLO verdict."""
    req, warm = run.sizes(workload)
    res = run_engine(
        workload.at_rate(rate_per_s),
        config.policy(run.guard_s),
        latency,
        requests=req,
        warmup=warm,
        seed=run.seed,
        per_request=slo.needs_table,
    )
    return slo.check(res, res.per_request, slice(warm, warm + req)), res


def _p99(res: SimResult, metric: str) -> float:
    field = {"wait": "wait", "ttft": "ttft", "tpot": "tpot", "jct": "response"}[metric]
    m = getattr(res, field)
    return math.inf if res.unstable or m is None else float(m.p99)


def _saturation(workload: Workload, config: Config, latency: StepLaw, run: PlanRun) -> float:
    """The saturation rate of one replica of `config` (FCFS, every request at once), /s."""
    n_cap = run.capacity_requests
    if workload.total is not None:
        n_cap = min(n_cap, workload.total)
    one = replace(config, replicas=1, router="central", order=FCFS_ORDER.name).policy()
    return saturated_rate(workload, one, latency, requests=n_cap, seed=run.seed).rate_per_s


class SaturationCache:
    """:func:`_saturation` once per replica setting (batch cap, token budget, KV budget, blocks),
    shared by the configurations that differ only in replicas, router or order; thread-safe."""

    def __init__(self, workload: Workload, latency: StepLaw, run: PlanRun) -> None:
        self.workload, self.latency, self.run = workload, latency, run
        self._done: dict[tuple[Any, ...], float] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[Any, ...], threading.Lock] = {}

    def __call__(self, workload: Workload, config: Config, latency: StepLaw, run: PlanRun) -> float:
        key = (config.max_batch, config.max_batched_tokens, config.kv_tokens, config.block_size)
        with self._lock:
            if key in self._done:
                return self._done[key]
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:  # one thread measures a setting; the others wait for it
            if key not in self._done:
                self._done[key] = _saturation(workload, config, latency, run)
            return self._done[key]


def _beyond(rate: float, sat: float, slo: SLO, run: PlanRun) -> Verdict:
    """The verdict of a rate above the search's top (``max_load`` x sat; a rate --rate accepts
    is never above the other cap, :data:`~llmqueue.limits.MAX_RATE_PER_S`), not run: at or
    above the saturation rate no steady state exists; between ``max_load`` x sat and sat no run
    of finite length reaches it."""
    if rate >= sat:
        why = f"{rate:.6g}/s is at or above the saturation rate {sat:.6g}/s: no steady state"
    else:
        why = (
            f"{rate:.6g}/s is above --max-load {run.max_load:g} x the saturation rate "
            f"{sat:.6g}/s: no run of finite length shows the steady state there"
        )
    values = {b.name: math.nan for b in slo.bounds}
    if slo.deadlines:
        values["attainment"] = math.nan
    return Verdict(False, values, why, math.inf)


def goodput(
    workload: Workload,
    config: Config,
    latency: StepLaw,
    slo: SLO,
    rates: RateSpec,
    run: PlanRun,
    saturation: Callable[[Workload, Config, StepLaw, PlanRun], float] | None = None,
) -> Goodput:
    """The goodput of one configuration (module docstring); `saturation`: a shared
    :class:`SaturationCache` (default: measured for this configuration alone). In every mode
    the rate is bounded by the configuration's saturation rate: no rate above ``max_load`` x
    sat (nor above :data:`~llmqueue.limits.MAX_RATE_PER_S`) is ever reported as met."""
    runs = 0
    last: dict[float, float] = {}  # rate -> mean requests in the system there

    def at(rate: float) -> tuple[Verdict, SimResult]:
        nonlocal runs
        runs += 1
        v, res = evaluate(workload, config, latency, slo, rate, run)
        last[rate] = _in_system(res)
        return v, res

    try:
        sat = config.replicas * (saturation or _saturation)(workload, config, latency, run)
    except InputError as err:  # no request fits the KV budget, or too few finish to tell
        v = Verdict(False, {}, f"no saturation rate: {err}", math.inf)
        r = rates.lo if rates.mode != "max" else 0.0
        return Goodput(r, "<", v, math.nan, math.nan, runs, v.why)
    capped = run.max_load * sat > MAX_RATE_PER_S
    top = MAX_RATE_PER_S if capped else run.max_load * sat
    top_why = (
        f"the highest rate searched, {MAX_RATE_PER_S:g}/s"
        if capped
        else f"the search's top, {run.max_load:g} x saturation"
    )
    if rates.mode == "one":
        if rates.lo > top:
            v = _beyond(rates.lo, sat, slo, run)
            return Goodput(rates.lo, "<", v, sat, math.nan, runs, v.why)
        v, res = at(rates.lo)
        if not v.met:  # no goodput at this rate: as a range's LO missed
            return Goodput(rates.lo, "<", v, sat, math.nan, runs, v.why)
        return Goodput(
            rates.lo, "=", v, sat, _p99(res, slo.first_metric), runs, v.why, _in_system(res)
        )
    if rates.mode == "max":
        floor = run.rel_tol * (top / run.max_load if capped else sat)
        x = 0.5 * top
        v, _ = at(x)
        lo, hi, v_lo, v_hi = x, top, v, None
        while not v.met:  # down by halves until a rate meets the SLOs
            hi, v_hi = x, v
            if x <= floor:
                return Goodput(x, "<", v, sat, math.nan, runs, v.why)
            x = max(0.5 * x, floor)
            v, _ = at(x)
            lo, v_lo = x, v
    else:
        lo = rates.lo
        if lo > top:
            v = _beyond(lo, sat, slo, run)
            return Goodput(lo, "<", v, sat, math.nan, runs, v.why)
        hi = min(rates.hi, top)
        why_hi = top_why if rates.hi > top else ""
        v_hi, _ = at(hi)
        if v_hi.met:
            return _finish(workload, config, latency, slo, run, hi, ">=", v_hi, sat, runs,
                           why_hi, last[hi])  # fmt: skip
        v_lo, _ = at(lo)
        if not v_lo.met:
            return Goodput(lo, "<", v_lo, sat, math.nan, runs, v_lo.why)
    lo, v_lo, hi, v_hi, n = _refine(lambda r: at(r)[0], lo, v_lo, hi, v_hi, run.rel_tol)
    del n
    why = v_hi.why if v_hi is not None else top_why
    bound = ">=" if v_hi is None else "="
    return _finish(workload, config, latency, slo, run, lo, bound, v_lo, sat, runs, why,
                   last[lo])  # fmt: skip


def _in_system(res: SimResult) -> float:
    """Mean requests in the system of a run (Little's law: throughput x mean JCT); NaN when it
    has no steady state."""
    if res.unstable or res.response is None:
        return math.nan
    return float(res.throughput_per_s) * float(res.response.mean)


def _log_severity(v: Verdict | None) -> float:
    """log(severity): <= 0 where the SLOs are met; NaN when unknown or not finite."""
    if v is None or not (0 < v.severity < math.inf):
        return math.nan
    return math.log(v.severity)


def _refine(
    at: Callable[[float], Verdict],
    lo: float,
    v_lo: Verdict,
    hi: float,
    v_hi: Verdict | None,
    rel_tol: float,
) -> tuple[float, Verdict, float, Verdict | None, int]:
    """Narrow [lo, hi] (lo meets the SLOs, hi does not or is the unrun top, `v_hi` None) until
    hi - lo <= rel_tol x hi: the Illinois variant of regula falsi on log(severity) against the
    rate (the root of the line through the ends, an end kept twice in a row having its value
    halved), kept 5% inside the bracket, and a bisection whenever an end's value is unknown or
    the last step did not halve the bracket (so it converges at least as fast as bisection
    every two steps). Returns the bracket and the runs made."""
    g_lo, g_hi = _log_severity(v_lo), _log_severity(v_hi)
    kept = 0  # +1: lo was kept last step, -1: hi was
    bisect = False
    runs = 0
    while hi - lo > rel_tol * hi:
        w = hi - lo
        if bisect or math.isnan(g_lo) or math.isnan(g_hi) or not g_hi > g_lo:
            x = lo + 0.5 * w
        else:
            x = lo + w * (-g_lo) / (g_hi - g_lo)
            x = min(max(x, lo + 0.05 * w), hi - 0.05 * w)
        v = at(x)
        runs += 1
        if v.met:
            lo, v_lo, g_lo = x, v, _log_severity(v)
            if kept == -1 and not math.isnan(g_hi):
                g_hi *= 0.5  # hi kept twice: Illinois
            kept = -1
        else:
            hi, v_hi, g_hi = x, v, _log_severity(v)
            if kept == 1 and not math.isnan(g_lo):
                g_lo *= 0.5
            kept = 1
        bisect = hi - lo > 0.5 * w
    return lo, v_lo, hi, v_hi, runs


def _finish(
    workload: Workload,
    config: Config,
    latency: StepLaw,
    slo: SLO,
    run: PlanRun,
    rate: float,
    bound: str,
    verdict: Verdict,
    sat: float,
    runs: int,
    why: str,
    in_system: float,
) -> Goodput:
    """The goodput with its Pareto latency (one more run at headroom x rate)."""
    _, res = evaluate(workload, config, latency, slo, run.headroom * rate, run)
    p99 = _p99(res, slo.first_metric)
    return Goodput(rate, bound, verdict, sat, p99, runs + 1, why, in_system)


# A run tells a configuration's steady state when its warm-up turns the requests in the system
# over at least WARMUP_TURNS times and its measured requests at least MEASURED_TURNS times (the
# mean in the system by Little's law at the goodput: a batch of 256 running requests needs a
# warm-up of more than 512).
WARMUP_TURNS = 2
MEASURED_TURNS = 20


def too_short(in_system: float, warmup: int, requests: int) -> bool:
    """Whether a run of `warmup` + `requests` requests is too short for a queue holding
    `in_system` requests on average (``WARMUP_TURNS``, ``MEASURED_TURNS``)."""
    if not math.isfinite(in_system):
        return False
    return warmup < WARMUP_TURNS * in_system or requests < MEASURED_TURNS * in_system


def sizes_needed(in_system: float) -> tuple[int, int]:
    """(--requests, --warmup) long enough for a queue holding `in_system` requests."""
    return (
        max(400, math.ceil(MEASURED_TURNS * in_system)),
        math.ceil(WARMUP_TURNS * in_system),
    )


def result_row(config: Config, g: Goodput, slo: SLO, run: PlanRun | None = None) -> dict[str, Any]:
    """A configuration's row: its settings, goodput and the SLO values at it, the mean requests
    in the system there (``in_system``) and whether the run was too short to tell
    (``too_short``, :func:`too_short`; never without `run`)."""
    row: dict[str, Any] = dict(config.row())
    row.update(
        goodput_rate_per_s=g.rate_per_s if g.bound != "<" else 0.0,
        goodput_bound=g.bound,
        goodput_per_replica_per_s=(g.rate_per_s if g.bound != "<" else 0.0) / config.replicas,
        met=g.met,
        saturation_rate_per_s=g.saturation_per_s,
        pareto_latency_s=g.pareto_latency_s,
    )
    values = as_row(g.verdict.values)
    for col in slo_columns(slo):
        row[col] = values.get(col, math.nan)
    row.update(
        in_system=g.in_system,
        too_short=bool(run is not None and g.too_short(run)),
        runs=g.runs,
        why_not_higher=g.why_not_higher,
    )
    return row


def search(
    workload: Workload,
    configs: Sequence[Config],
    latency: StepLaw,
    slo: SLO,
    rates: RateSpec,
    run: PlanRun,
    *,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """The rows of every configuration (:func:`result_row`), in the configurations' order,
    computed on `workers` threads (default: the machine's cores); `progress(done, total)` after
    each."""
    n = len(configs)
    workers = max(1, min(workers or os.cpu_count() or 1, n or 1))
    rows: list[dict[str, Any] | None] = [None] * n
    sat = SaturationCache(workload, latency, run)
    req, warm = run.sizes(workload)
    sized = replace(run, requests=req, warmup=warm)  # what each run measured

    def one(i: int) -> tuple[int, dict[str, Any]]:
        c = configs[i]
        return i, result_row(c, goodput(workload, c, latency, slo, rates, run, sat), slo, sized)

    if workers == 1:
        for i in range(n):
            rows[i] = one(i)[1]
            if progress is not None:
                progress(i + 1, n)
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = [pool.submit(one, i) for i in range(n)]
            for done, fut in enumerate(as_completed(futures), 1):
                i, row = fut.result()
                rows[i] = row
                if progress is not None:
                    progress(done, n)
    return [r for r in rows if r is not None]
