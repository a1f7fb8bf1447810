"""What a plan's rows say: the best configuration, the fewest replicas that carry a target rate,
and the Pareto front of goodput per replica against latency.

- **best**: the highest goodput per replica (requests/s per replica; ties: the lower Pareto
  latency, then fewer replicas);
- **fewest replicas** for a target rate: the configurations whose goodput reaches the target
  (or, searched at one rate, that meet the SLOs there), the fewest replicas among them and, for
  those, the highest goodput;
- **Pareto front**: a configuration is on it when no other has at least its goodput per replica
  and at most its Pareto latency (the p99 of the SLOs' first metric at headroom x goodput), one
  of the two strictly better. Configurations of goodput 0, or that miss the SLOs (``met``
  false), are never on it and dominate none.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["best", "fewest_replicas", "pareto_front"]

Row = dict[str, Any]


def _carries(row: Row) -> bool:
    """Whether the row has a goodput: met its SLOs at a rate above 0 (a row that misses them,
    e.g. one of a slice written with ``=`` before one-rate misses got ``<``, carries nothing)."""
    return bool(row["goodput_bound"] != "<" and row["goodput_rate_per_s"] > 0 and row["met"])


def best(rows: Sequence[Row]) -> Row | None:
    """The best configuration (module docstring), or None when none meets the SLOs."""
    ok = [r for r in rows if _carries(r) and r["met"]]
    if not ok:
        return None
    return max(
        ok,
        key=lambda r: (r["goodput_per_replica_per_s"], -_finite(r["pareto_latency_s"]),
                       -r["replicas"]),
    )  # fmt: skip


def _finite(x: float) -> float:
    return x if math.isfinite(x) else math.inf


def fewest_replicas(rows: Sequence[Row], target_per_s: float, one_rate: bool) -> Row | None:
    """The configuration with the fewest replicas that carries `target_per_s` (module
    docstring), or None when none does."""
    if one_rate:
        ok = [r for r in rows if r["met"]]
    else:
        ok = [r for r in rows if _carries(r) and r["goodput_rate_per_s"] >= target_per_s]
    if not ok:
        return None
    return min(ok, key=lambda r: (r["replicas"], -r["goodput_rate_per_s"]))


def pareto_front(rows: Sequence[Row]) -> list[bool]:
    """Whether each row is on the Pareto front (module docstring)."""
    pts = [
        (r["goodput_per_replica_per_s"], _finite(r["pareto_latency_s"])) if _carries(r) else None
        for r in rows
    ]
    out = []
    for i, p in enumerate(pts):
        if p is None or not math.isfinite(p[1]):
            out.append(False)
            continue
        dominated = any(
            q is not None
            and j != i
            and q[0] >= p[0]
            and q[1] <= p[1]
            and (q[0] > p[0] or q[1] < p[1])
            for j, q in enumerate(pts)
        )
        out.append(not dominated)
    return out
