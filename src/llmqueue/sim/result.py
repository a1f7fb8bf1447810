"""The one result type of every simulator (:class:`SimResult`) and its per-quantity summary
(:class:`Metric`). Times in seconds, rates in requests (or tokens) per second.

A quantity a simulator does not produce is ``None`` (e.g. TTFT for the M/G/1 queue) and a count
it does not track is 0. An unstable run (the queue grows without bound, see
:mod:`llmqueue.sim.engine`) has ``unstable = True``; its means are not steady-state values and
:meth:`SimResult.to_json`, the one JSON form of a run, reports them as null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from llmqueue.sim.stats import Estimate

__all__ = ["Metric", "SimResult"]


def _num(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def _same(a: Any, b: Any) -> bool:
    """Equality in which NaN equals NaN (a quantity nothing was recorded for)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


@dataclass(frozen=True, eq=False)
class Metric:
    """A simulated quantity: mean with its 95% confidence half-width (batch means), quantiles
    from the recorder's histogram (error < 0.4% of the value; +inf beyond 2**40 s) and the
    largest value seen. Seconds."""

    mean: float
    ci95: float
    p50: float
    p90: float
    p95: float
    p99: float
    max: float

    @property
    def estimate(self) -> Estimate:
        return Estimate(self.mean, self.ci95)

    def to_json(self) -> dict[str, float | None]:
        return {f.name: _num(getattr(self, f.name)) for f in fields(self)}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Metric):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in fields(self))

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class SimResult:
    """What a simulation measured over its measured requests (after warm-up).

    wait: arrival -> service start (batch start, admission); response: arrival -> the request's
    last token (its job completion time, JCT); ttft: arrival -> first token; tpot: (response -
    ttft) / (tokens - 1), per request with >= 2 tokens; served_wait / loss: with patience (M/G/1+D),
    the wait of served users and the lost fraction (then ``wait`` counts a lost user as waiting
    tau, Eq. 9). Throughput: requests (tokens) completed per second while the measured requests
    arrived. mean_batch / mean_batch_time: batches (iterations) started in that window.
    prefix_hit_share (prefix caching): of the prompt tokens of the requests first admitted in that
    window, the share found in the cache at admission (NaN without prefix caching).
    """

    requests: int
    wait: Metric
    response: Metric | None = None
    ttft: Metric | None = None
    tpot: Metric | None = None
    served_wait: Metric | None = None
    loss: Estimate | None = None
    throughput_per_s: float = math.nan
    tokens_per_s: float = math.nan
    mean_batch: float = math.nan
    mean_batch_time: float = math.nan
    kv_utilisation: float = math.nan
    prefix_hit_share: float = math.nan
    preemptions: int = 0
    rejected: int = 0
    max_queue: int = 0
    unstable: bool = False
    note: str = ""
    per_request: Any = field(default=None, repr=False, compare=False)
    events: int = field(default=0, repr=False, compare=False)

    def __eq__(self, other: object) -> bool:
        """Same numbers (NaN equals NaN); the per-request table is not compared."""
        if not isinstance(other, SimResult):
            return NotImplemented
        return all(
            _same(getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if f.name not in ("per_request", "events")
        )

    __hash__ = None  # type: ignore[assignment]

    def to_json(self, exact: Any = None) -> dict[str, Any]:
        """The one JSON form of a run (``llmqueue simulate --json`` prints it): ``requests``;
        ``wait``, ``ttft``, ``jct`` (the response), ``tpot`` and ``served_wait``, each
        {mean, ci95, p50, p90, p95, p99, max} (s) or null where the simulator has none; ``loss``
        {mean, ci95} with patience; ``throughput_per_s``, ``tokens_per_s``, ``mean_batch``,
        ``mean_batch_time``, ``kv_utilisation`` (and ``prefix_hit_share`` with prefix caching); ``preemptions``, ``rejected``, ``max_queue``;
        ``unstable`` (then every statistic and rate is null: no steady state); ``note``.
        Non-finite numbers are null. `exact` (an :class:`llmqueue.sim.exact.ExactWait`) adds
        ``exact``, ``exact_se`` and ``exact_method`` inside ``wait``."""
        u = bool(self.unstable)

        def metric(m: Metric | None) -> dict[str, float | None] | None:
            if m is None:
                return None
            d = m.to_json()
            return {k: None for k in d} if u else d

        out: dict[str, Any] = {"requests": int(self.requests)}
        for key, name in (
            ("wait", "wait"),
            ("ttft", "ttft"),
            ("jct", "response"),
            ("tpot", "tpot"),
            ("served_wait", "served_wait"),
        ):
            out[key] = metric(getattr(self, name))
        if exact is not None:
            out["wait"]["exact"] = float(exact.wait_s)
            out["wait"]["exact_se"] = float(exact.se_s)
            out["wait"]["exact_method"] = str(exact.method)
        if self.loss is not None:
            out["loss"] = {
                "mean": None if u else _num(self.loss.mean),
                "ci95": None if u else _num(self.loss.ci95),
            }
        for name in (
            "throughput_per_s",
            "tokens_per_s",
            "mean_batch",
            "mean_batch_time",
            "kv_utilisation",
        ):
            out[name] = None if u else _num(getattr(self, name))
        if not math.isnan(self.prefix_hit_share):
            out["prefix_hit_share"] = None if u else _num(self.prefix_hit_share)
        for name in ("preemptions", "rejected", "max_queue"):
            out[name] = int(getattr(self, name))
        out["unstable"] = u
        if self.note:
            out["note"] = self.note
        return out
