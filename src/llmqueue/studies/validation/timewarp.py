"""A run replayed at the speed its own iterations had, window by window (diagnosis only).

If the machine runs s(t) times slower than the step law at wall time t (the same factor on every
iteration, the speed model behind ``StepLaw.scaled``), the engine does work at the rate 1 / s(t):
in *work time* W(t) = integral_0^t du / s(u) the run is served at the law's own speed. So the
run can be replayed exactly by mapping its arrivals into work time, simulating with the unscaled
law, and mapping every predicted time back (W is increasing, its inverse piecewise linear). With
s constant this is the law scaled by s; with s(t) the per-window speed of the run's own
iterations (:func:`speed_trace`: measured over law-priced time of the iterations that started in
each window) it removes the machine's wander within the run from the prediction, and what error
is left belongs to the scheduler model and the law's shape (KV pressure: the recompute's timing).

It reads the judged run's own iterations, so it is never the result: the ``window_speed``
variant of the error table (:mod:`llmqueue.studies.validation.matrix`). Units: s on the run's
clock; speed factors dimensionless (1: the law's speed, 1.1: 10% slower).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.engines.calibration import measured_and_law
from llmqueue.errors import InputError

__all__ = ["SpeedTrace", "speed_trace", "to_work", "to_wall", "warped_simulation"]

# a window's own speed is used only when it rests on this many iterations (else the run's)
MIN_TRACE_ITERATIONS = 20


@dataclass(frozen=True)
class SpeedTrace:
    """A piecewise-constant speed: ``factors[k]`` on [edges[k], edges[k+1]) (s on the run's
    clock), the first factor before the first edge and the last one after the last edge."""

    edges: np.ndarray
    factors: np.ndarray

    def __post_init__(self) -> None:
        e, f = np.asarray(self.edges, dtype=float), np.asarray(self.factors, dtype=float)
        if e.ndim != 1 or f.ndim != 1 or e.size != f.size + 1 or f.size < 1:
            raise InputError("a speed trace needs k factors and k + 1 edges, k >= 1")
        if not (np.all(np.diff(e) > 0) and np.all(np.isfinite(e))):
            raise InputError("a speed trace's edges must be finite and increasing")
        if not (np.all(np.isfinite(f)) and np.all(f > 0)):
            raise InputError("a speed trace's factors must be finite and > 0")

    def _work_at_edges(self) -> np.ndarray:
        return np.concatenate([[0.0], np.cumsum(np.diff(self.edges) / self.factors)])


def speed_trace(
    steps: pd.DataFrame, law: Any, max_gap_s: float, window_s: float = 15.0
) -> SpeedTrace:
    """The run's speed against `law` per `window_s` window of its iterations' start times
    (module docstring); a window with fewer than :data:`MIN_TRACE_ITERATIONS` iterations (the
    engine mostly idle) takes the run's overall factor."""
    if not (math.isfinite(window_s) and window_s > 0):
        raise InputError(f"speed trace: window must be > 0 s, got {window_s}")
    if len(steps) == 0:
        raise InputError("speed trace: the run has no iterations")
    t, f = measured_and_law(steps, law, max_gap_s)
    start = steps["t_sched_s"].to_numpy(dtype=float)
    overall = float(t.sum() / f.sum())
    lo, hi = float(start.min()), float(steps["t_done_s"].to_numpy(dtype=float).max())
    n = max(int(math.ceil((hi - lo) / window_s)), 1)
    edges = lo + window_s * np.arange(n + 1)
    k = np.minimum(((start - lo) // window_s).astype(int), n - 1)
    factors = np.full(n, overall)
    for w in range(n):
        m = k == w
        if m.sum() >= MIN_TRACE_ITERATIONS and f[m].sum() > 0:
            factors[w] = float(t[m].sum() / f[m].sum())
    return SpeedTrace(edges, factors)


def to_work(t: Any, trace: SpeedTrace) -> np.ndarray:
    """W(t): wall times (s) into work times (s of law time since the trace's first edge)."""
    x = np.asarray(t, dtype=float)
    e, w = trace.edges, trace._work_at_edges()
    out = np.interp(x, e, w)
    before, after = x < e[0], x > e[-1]
    out[before] = (x[before] - e[0]) / trace.factors[0]
    out[after] = w[-1] + (x[after] - e[-1]) / trace.factors[-1]
    return out


def to_wall(w: Any, trace: SpeedTrace) -> np.ndarray:
    """The inverse of :func:`to_work`: work times back into wall times (s)."""
    x = np.asarray(w, dtype=float)
    e, wk = trace.edges, trace._work_at_edges()
    out = np.interp(x, wk, e)
    before, after = x < 0.0, x > wk[-1]
    out[before] = e[0] + x[before] * trace.factors[0]
    out[after] = e[-1] + (x[after] - wk[-1]) * trace.factors[-1]
    return out


def warped_simulation(
    requests: pd.DataFrame, policy: Any, law: Any, trace: SpeedTrace, *,
    seed: int | np.random.SeedSequence = 0, predicted: np.ndarray | None = None,
) -> pd.DataFrame:  # fmt: skip
    """:func:`llmqueue.studies.validation.tables.simulate_table` in work time: the arrivals mapped
    by :func:`to_work`, the unscaled `law`, every predicted time mapped back by :func:`to_wall`."""
    from llmqueue.studies.validation.tables import simulate_table

    warped = requests.assign(arrival_s=to_work(requests["arrival_s"], trace))
    sim = simulate_table(warped, policy, law, seed=seed, predicted=predicted)
    return pd.DataFrame({c: to_wall(sim[c], trace) for c in sim.columns})
