"""The highest sustainable arrival rate of a policy (requests/s): its service rate under a
backlog that never empties.

Closed forms where they exist (static formers, one FCFS queue, i.i.d. lengths, c servers):
``none`` c / E[S] with S = t1(1) + t2(1) N; ``fixed`` c K / E[T_K]; ``dynamic`` / ``elastic`` with a
finite b_max c b_max / E[T_b_max] (Eq. 24 at b = b_max; elastic with Eq. 26 in expectation),
since a saturated server always takes full batches. Otherwise (continuous batching, unbounded
b_max, a trace) by simulation: every request arrives at once (a saturated queue served in FCFS
order), and the rate is the number of completions between the 25th and the 75th percentile of
the completion times divided by that span (the middle half, away from the start-up and the
drain). Lengths come from the workload, the time law and sizes from the policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from llmqueue.analytic.batch_time import elastic_mean_batch_time, mean_batch_time
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.policy import Policy
from llmqueue.sim.engine import run, static_law
from llmqueue.sim.workload import PoissonWorkload, Workload

__all__ = ["Capacity", "max_rate"]


@dataclass(frozen=True)
class Capacity:
    """Highest sustainable rate (requests/s) and how it was obtained ("formula" or "simulation")."""

    rate_per_s: float
    method: str
    note: str = ""


def _formula(
    workload: Workload, policy: Policy, latency: BatchLatency | LinearLatency
) -> Capacity | None:
    if not isinstance(workload, PoissonWorkload):
        return None
    k = static_law(latency)
    prof = (
        BatchLatency(float(k[0]), float(k[1]), float(k[2]), float(k[3]), name="capacity")
        if k[2] + k[3] > 0
        else None
    )
    if prof is None:
        return None
    c = policy.servers
    law = workload.output
    if policy.kind == "none":
        es = prof.t1(1) + prof.t2(1) * law.mean()
        return Capacity(c / float(es), "formula", "c / E[S], S = t1(1) + t2(1) N")
    b = policy.k if policy.kind == "fixed" else policy.bmax
    if b is None:
        return None
    t = elastic_mean_batch_time(prof, law, b) if policy.elastic else mean_batch_time(prof, law, b)
    return Capacity(c * b / t, "formula", f"c b / E[T_b] at b = {b} (Eq. 24)")


def max_rate(
    workload: Workload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    *,
    requests: int = 200_000,
    seed: int | np.random.SeedSequence = 0,
) -> Capacity:
    """The policy's service rate under saturation (module docstring)."""
    if policy.kind != "continuous" and isinstance(latency, (BatchLatency, LinearLatency)):
        cap = _formula(workload, policy, latency)
        if cap is not None:
            return cap
    if requests < 1000:
        raise InputError(f"max_rate needs >= 1000 simulated requests, got {requests}")
    fcfs = replace(policy, order="fcfs", guard_s=None)
    burst = workload.at_rate(1e12)  # everyone arrives at once
    if burst.total is not None and burst.total < requests:
        requests = int(burst.total)
    res = run(
        burst,
        fcfs,
        latency,
        requests=requests,
        warmup=0,
        batches=10,
        seed=seed,
        per_request=True,
        last_arrival=requests,
    )
    fin = res.per_request[:, 7]
    fin = np.sort(fin[np.isfinite(fin)])
    if fin.size < 100:
        raise InputError("max_rate: too few requests finished to measure a service rate")
    lo, hi = int(0.25 * fin.size), int(0.75 * fin.size)
    span = float(fin[hi] - fin[lo])
    if not span > 0:
        return Capacity(math.inf, "simulation", "every request finished at once")
    return Capacity(
        (hi - lo) / span,
        "simulation",
        f"saturated FCFS queue of {fin.size} requests, completions between the 25th and 75th "
        "percentile of their finish times",
    )
