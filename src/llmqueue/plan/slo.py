"""Service-level objectives (SLOs) of a serving configuration, and whether a run meets them.

Two kinds, combinable (``llmqueue plan --slo``):

- a **bound on a statistic**: ``METRIC_STAT=SECONDS``, e.g. ``ttft_p99=2`` (the 99th percentile of
  the time to first token at most 2 s), ``tpot_mean=0.1``, ``jct_p90=30``; METRIC is ``wait``
  (arrival to first admission), ``ttft`` (to the first token), ``tpot`` (time per output token
  after the first, requests of >= 2 tokens) or ``jct`` (to the last token), STAT is ``mean``,
  ``p50``, ``p90``, ``p95`` or ``p99``; the statistics are the engine's (batch means; quantiles
  from its histogram, error < 0.4%);
- a **per-request deadline with an attainment**: ``METRIC=SECONDS`` (``ttft=2,tpot=0.1``) and
  ``attainment=FRACTION``: at least that share of the measured requests meets *every* deadline
  at once (DistServe's goodput, Zhong et al., OSDI 2024; ``attainment`` defaults to 0.9 when a
  deadline is given). A request of one output token has no TPOT and meets a TPOT deadline.

A run meets its SLOs when it is stable, rejects no request (a request larger than the KV budget
can never be served) and meets every bound and the attainment. Times in seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.limits import MAX_TIME_S
from llmqueue.sim.result import SimResult

__all__ = ["METRICS", "STATS", "Bound", "Deadline", "SLO", "Verdict", "parse_slo", "SLO_FORM"]

METRICS = ("wait", "ttft", "tpot", "jct")
STATS = ("mean", "p50", "p90", "p95", "p99")
DEFAULT_ATTAINMENT = 0.9
SLO_FORM = (
    "METRIC_STAT=SECONDS (ttft_p99=2, tpot_mean=0.1; METRIC wait, ttft, tpot, jct; STAT mean, p50, "
    "p90, p95, p99) or per-request deadlines METRIC=SECONDS with attainment=FRACTION "
    "(ttft=2,tpot=0.1,attainment=0.9), comma-separated"
)

# SimResult's field of each metric
_FIELD = {"wait": "wait", "ttft": "ttft", "tpot": "tpot", "jct": "response"}
# per-request table columns (llmqueue.sim.engine.PER_REQUEST_COLUMNS)
_ARR, _OUT, _START, _FIRST, _FINISH = 1, 3, 5, 6, 7


@dataclass(frozen=True)
class Bound:
    """METRIC's STAT at most ``limit_s`` seconds."""

    metric: str
    stat: str
    limit_s: float

    @property
    def name(self) -> str:
        return f"{self.metric}_{self.stat}"


@dataclass(frozen=True)
class Deadline:
    """One request's METRIC at most ``limit_s`` seconds."""

    metric: str
    limit_s: float


@dataclass(frozen=True)
class Verdict:
    """Whether a run meets the SLOs, each bound's value (s; ``<metric>_<stat>``) and the share
    of requests meeting every deadline (``attainment``), inf / 0 for an unstable run; ``why``:
    the first SLO missed ("" when met); ``severity``: the largest of value / limit over the
    bounds and required / achieved attainment (<= 1 when every SLO is met; inf for an unstable
    run or one that rejects requests), what the goodput search interpolates."""

    met: bool
    values: dict[str, float]
    why: str = ""
    severity: float = math.nan


@dataclass(frozen=True)
class SLO:
    """The bounds and the deadlines (with their attainment) a configuration must meet."""

    bounds: tuple[Bound, ...] = ()
    deadlines: tuple[Deadline, ...] = ()
    attainment: float = DEFAULT_ATTAINMENT

    @property
    def needs_table(self) -> bool:
        """Whether checking needs every request's times (the deadlines do)."""
        return bool(self.deadlines)

    @property
    def first_metric(self) -> str:
        """The metric named first (the Pareto figure's latency axis)."""
        return self.bounds[0].metric if self.bounds else self.deadlines[0].metric

    def describe(self) -> str:
        parts = [f"{b.name} <= {b.limit_s:g} s" for b in self.bounds]
        if self.deadlines:
            each = " and ".join(f"{d.metric} <= {d.limit_s:g} s" for d in self.deadlines)
            parts.append(f"{self.attainment:.0%} of requests with {each}")
        return "; ".join(parts)

    def check(self, res: SimResult, table: np.ndarray | None, measured: slice) -> Verdict:
        """The verdict of one run; `table`: its per-request table (when :attr:`needs_table`),
        `measured`: the rows of its measured requests."""
        values: dict[str, float] = {}
        if res.unstable:
            values.update({b.name: math.inf for b in self.bounds})
            if self.deadlines:
                values["attainment"] = 0.0
            why = "no steady state (the queue grows without bound)"
            return Verdict(False, values, why, math.inf)
        why = ""
        severity = 0.0
        for b in self.bounds:
            metric = getattr(res, _FIELD[b.metric])
            v = float(getattr(metric, b.stat)) if metric is not None else math.nan
            values[b.name] = v
            severity = max(severity, v / b.limit_s if v == v else math.inf)
            if not why and not v <= b.limit_s:
                why = f"{b.name} = {v:.4g} s > {b.limit_s:g} s"
        if self.deadlines:
            if table is None:
                raise InputError("deadline SLOs need the run's per-request table")
            share = _attainment(table[measured], self.deadlines)
            values["attainment"] = share
            severity = max(severity, self.attainment / share if share > 0 else math.inf)
            if not why and share < self.attainment:
                why = f"attainment {share:.3f} < {self.attainment:g}"
        if res.rejected > 0:
            severity = math.inf
            if not why:
                why = f"{res.rejected} requests can never fit the KV budget"
        return Verdict(not why, values, why, severity)


def _attainment(rows: np.ndarray, deadlines: tuple[Deadline, ...]) -> float:
    """Share of `rows` (per-request table rows) meeting every deadline; an unfinished or
    rejected request (NaN times) meets none."""
    if rows.shape[0] == 0:
        return 0.0
    ok = np.isfinite(rows[:, _FINISH])
    for d in deadlines:
        if d.metric == "wait":
            v = rows[:, _START] - rows[:, _ARR]
        elif d.metric == "ttft":
            v = rows[:, _FIRST] - rows[:, _ARR]
        elif d.metric == "jct":
            v = rows[:, _FINISH] - rows[:, _ARR]
        else:  # tpot: requests of one token have none and meet it
            n = rows[:, _OUT]
            with np.errstate(invalid="ignore", divide="ignore"):
                v = np.where(n >= 2, (rows[:, _FINISH] - rows[:, _FIRST]) / (n - 1), 0.0)
        ok &= v <= d.limit_s
    return float(ok.mean())


def _seconds(text: str, item: str, flag: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"{flag} {item!r}: {text!r} is not a number of seconds") from None
    if not (0 < v <= MAX_TIME_S):
        raise InputError(f"{flag} {item!r}: the limit must lie in (0, {MAX_TIME_S:g}] s")
    return v


def parse_slo(text: str, *, flag: str = "--slo") -> SLO:
    """Parse ``ttft_p99=2,tpot_p99=0.1`` or ``ttft=2,tpot=0.1,attainment=0.9`` (module
    docstring); InputError naming the flag, the bad item and the allowed form."""
    bounds: list[Bound] = []
    deadlines: list[Deadline] = []
    attainment: float | None = None
    seen: set[str] = set()
    items = [s.strip() for s in str(text).split(",") if s.strip()]
    if not items:
        raise InputError(f"{flag}: give at least one SLO: {SLO_FORM}")
    for item in items:
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq:
            raise InputError(f"{flag} {item!r}: expected KEY=VALUE; {SLO_FORM}")
        metric, under, stat = key.partition("_")
        if key != "attainment" and (metric not in METRICS or (under and stat not in STATS)):
            # a suffix must be a statistic: `ttft_` or `ttft_p42` is no SLO, not a deadline
            raise InputError(f"{flag} {item!r}: unknown SLO {key!r}; {SLO_FORM}")
        if key in seen:
            raise InputError(f"{flag}: {key} given twice")
        seen.add(key)
        if key == "attainment":
            try:
                attainment = float(val)
            except ValueError:
                attainment = math.nan
            if not (0 < attainment <= 1):
                raise InputError(f"{flag} {item!r}: attainment must be a fraction in (0, 1]")
            continue
        limit = _seconds(val.strip(), item, flag)
        if stat:
            bounds.append(Bound(metric, stat, limit))
        else:
            deadlines.append(Deadline(metric, limit))
    if attainment is not None and not deadlines:
        raise InputError(f"{flag}: attainment applies to per-request deadlines (ttft=2, ...)")
    return SLO(tuple(bounds), tuple(deadlines), attainment or DEFAULT_ATTAINMENT)


def slo_columns(slo: SLO) -> list[str]:
    """The columns a plan writes for these SLOs: ``<metric>_<stat>_s`` and ``attainment``."""
    cols = [f"{b.name}_s" for b in slo.bounds]
    if slo.deadlines:
        cols.append("attainment")
    return cols


def as_row(values: dict[str, Any]) -> dict[str, float]:
    """A verdict's values under their column names (:func:`slo_columns`)."""
    return {(k if k == "attainment" else f"{k}_s"): float(v) for k, v in values.items()}
