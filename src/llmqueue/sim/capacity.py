"""The highest sustainable arrival rate of a policy (requests/s): its service rate under a
backlog that never empties.

Closed forms where they exist (static formers, one FCFS queue, i.i.d. lengths, c servers):
``none`` c / E[S] with S = t1(1) + t2(1) N; ``fixed`` c K / E[T_K]; ``dynamic`` / ``elastic`` with a
finite b_max c b_max / E[T_b_max] (Eq. 24 at b = b_max; elastic with Eq. 26 in expectation),
since a saturated server always takes full batches. ``multibin`` (Multi-Bin Batching, arXiv
2412.04504) with Poisson arrivals, U(l_min, l_max) lengths, bins by the true length at the
equal-probability edges (Lemma 4.1) and a batch time t1(B) + t2(B) x longest (the paper's
constant + time per token x longest, or Eq. 18 at b = B): c x Theorem 4.2,
c B / (t1(B) + t2(B) (m + (1/k)(B/(B+1) l_max + 1/(B+1) l_min - m))), method ``theorem 4.2``
(:mod:`llmqueue.analytic.multibin`; a flush timeout never fires under saturation). Otherwise
(continuous batching, unbounded b_max, a trace, another length law or predictor, given edges) by
simulation, :func:`saturated_rate`: every request arrives at once (a saturated queue served in
FCFS order), and the rate is the number of completions after the 25th and up to the 75th
percentile of the completion times divided by that span (the middle half, away from the start-up
and the drain; counted by time, since a batch's members finish together). Lengths come from the workload, the time law and sizes from the policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from llmqueue.analytic import multibin as mb
from llmqueue.analytic.batch_time import elastic_mean_batch_time, mean_batch_time
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.policy import FCFS_ORDER, Policy
from llmqueue.sim.engine import run, static_law
from llmqueue.sim.predictors import Oracle
from llmqueue.sim.workload import PoissonWorkload, Workload
from llmqueue.tokens import UniformLaw

__all__ = [
    "Capacity",
    "exact_rate",
    "max_rate",
    "saturated_rate",
    "THEOREM_4_2",
    "CAPACITY_ROWS",
    "check_capacity_rows",
]

# saturated_rate measures a service rate on at least this many requests (of a replayed trace)
CAPACITY_ROWS = 1000


def check_capacity_rows(workload: Workload, where: str, flag: str) -> None:
    """Refuse (InputError naming `where` and `flag`, what asks for the rate) a replayed trace
    too short to measure a saturation rate on: fewer than :data:`CAPACITY_ROWS` rows."""
    if workload.total is not None and workload.total < CAPACITY_ROWS:
        raise InputError(
            f"{where}: {workload.total} rows; {flag} measures the saturation rate on at "
            f"least {CAPACITY_ROWS} requests of a replayed trace: give a longer trace"
        )


THEOREM_4_2 = "theorem 4.2"


@dataclass(frozen=True)
class Capacity:
    """Highest sustainable rate (requests/s) and how it was obtained: "formula" (a closed form
    of a static former), "theorem 4.2" (Multi-Bin Batching, uniform lengths) or "simulation"."""

    rate_per_s: float
    method: str
    note: str = ""


def _multibin_theorem(
    workload: Workload, policy: Policy, latency: BatchLatency | LinearLatency
) -> Capacity | None:
    """c x Theorem 4.2 where it applies (module docstring), else None."""
    if not (
        isinstance(workload, PoissonWorkload)
        and isinstance(workload.output, UniformLaw)
        and isinstance(workload.predictor, Oracle)
    ):
        return None
    law, b, k = workload.output, policy.k, policy.bins
    if policy.bin_edges is not None:
        want = mb.equal_probability_edges(law, k)
        if not np.allclose(np.asarray(policy.bin_edges, dtype=float), want, rtol=1e-9, atol=0):
            return None
    t1, t2 = mb.batch_coefficients(latency, b)
    if not t2 > 0:
        return None
    mean_len = mb.uniform_mean_batch_length(b, k, law.low, law.high)
    rate = policy.servers * b / (t1 + t2 * mean_len)
    return Capacity(
        rate,
        THEOREM_4_2,
        f"c x Theorem 4.2 (Guldogan et al., arXiv 2412.04504): c B / (t1(B) + t2(B) E[L]), "
        f"c = {policy.servers}, B = {b}, k = {k} equal-probability bins of "
        f"U({law.low:g}, {law.high:g}), E[L] = m + (1/k)(B/(B+1) l_max + 1/(B+1) l_min - m) "
        f"= {mean_len:.6g} tokens, t1(B) = {t1:.6g} s, t2(B) = {t2:.6g} s/token",
    )


def _formula(
    workload: Workload, policy: Policy, latency: BatchLatency | LinearLatency
) -> Capacity | None:
    if policy.kind == "multibin":
        return _multibin_theorem(workload, policy, latency)
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


def exact_rate(
    workload: Workload, policy: Policy, latency: BatchLatency | LinearLatency | StepLaw
) -> Capacity | None:
    """The highest sustainable rate by a closed form (or Theorem 4.2) where one applies, else
    None; never simulates (cheap: the stability check of a run)."""
    if policy.kind != "continuous" and isinstance(latency, (BatchLatency, LinearLatency)):
        return _formula(workload, policy, latency)
    return None


def max_rate(
    workload: Workload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    *,
    requests: int = 200_000,
    seed: int | np.random.SeedSequence = 0,
) -> Capacity:
    """The policy's service rate under saturation (module docstring): a closed form (or Theorem
    4.2) where one applies, else :func:`saturated_rate`."""
    cap = exact_rate(workload, policy, latency)
    if cap is not None:
        return cap
    return saturated_rate(workload, policy, latency, requests=requests, seed=seed)


def saturated_rate(
    workload: Workload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    *,
    requests: int = 200_000,
    seed: int | np.random.SeedSequence = 0,
) -> Capacity:
    """The service rate of a simulated saturated queue (module docstring), whatever closed form
    exists: `requests` requests arrive at once and are served in FCFS order (Multi-Bin: into
    their bins; the partly full bins left at the end are never served and not counted)."""
    if requests < 1000:
        raise InputError(f"max_rate needs >= 1000 simulated requests, got {requests}")
    fcfs = replace(policy, order=FCFS_ORDER.name, guard_s=None)
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
    # the completions in (fin[lo], fin[hi]]: a batch's members finish together, so count them by
    # time, not by index (hi - lo would be off by up to a batch)
    done = int(np.searchsorted(fin, fin[hi], side="right") - np.searchsorted(fin, fin[lo], "right"))
    what = "FCFS queue"
    if policy.kind == "multibin":
        what = f"queue put into {policy.bins} bins by predicted length, full batches FCFS"
    return Capacity(
        done / span,
        "simulation",
        f"saturated {what} of {fin.size} requests, completions between the 25th and 75th "
        "percentile of their finish times",
    )
