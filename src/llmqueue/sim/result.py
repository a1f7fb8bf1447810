"""The one result type of every simulator (:class:`SimResult`) and its per-quantity summary
(:class:`Metric`). Times in seconds, rates in requests (or tokens) per second.

A quantity a simulator does not produce is ``None`` (e.g. TTFT for the M/G/1 queue) and a count
it does not track is 0. An unstable run (the queue grows without bound, see
:mod:`llmqueue.sim.engine`) has ``unstable = True``; its means are not steady-state values and
:meth:`SimResult.to_json` reports them as null.
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

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (nested metrics; non-finite numbers as null; means of an unstable run
        as null)."""
        out: dict[str, Any] = {"requests": int(self.requests), "unstable": bool(self.unstable)}
        for name in ("wait", "response", "ttft", "tpot", "served_wait"):
            m = getattr(self, name)
            if m is None:
                continue
            d = m.to_json()
            if self.unstable:
                d = {k: None for k in d}
            out[name] = d
        if self.loss is not None:
            out["loss"] = {"mean": _num(self.loss.mean), "ci95": _num(self.loss.ci95)}
        for name in (
            "throughput_per_s",
            "tokens_per_s",
            "mean_batch",
            "mean_batch_time",
            "kv_utilisation",
        ):
            out[name] = _num(getattr(self, name))
        for name in ("preemptions", "rejected", "max_queue"):
            out[name] = int(getattr(self, name))
        if self.note:
            out["note"] = self.note
        return out
