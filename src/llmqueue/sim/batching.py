"""The paper's batching server (Sec. IV, V-C): one FCFS queue, Poisson arrivals, each request's
output length i.i.d. from a token law; a thin front of the serving engine
(:mod:`llmqueue.sim.engine`).

Policies (:class:`llmqueue.policy.Policy`): ``dynamic`` (every waiting request, at most ``bmax``;
None = no cap, Eq. 15), ``fixed`` (waits until K wait, serves exactly K: the M/D^K/1 policy of
Eq. 25, M/G^K/1 with random batch times), ``elastic`` (dynamic batches whose replies leave as
they finish, Eq. 26). A batch of b lasts T_b = t1(b) + t2(b) * max_i n_i (padded, Eq. 18) or
Eq. (26); ``fixed_time=True`` replaces it by the constant E[T_b] (Eq. 18 in expectation): the
"fixed-T approximation" of Eq. (25).

Per request: wait = batch start - arrival; response = its reply - arrival (the whole batch for
padded batching). The paper draws the lengths when a batch starts; the engine draws them on
arrival: under FCFS with i.i.d. lengths the two are the same in distribution.
"""

from __future__ import annotations

import numpy as np

from llmqueue.analytic.batch_time import mean_batch_time
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency
from llmqueue.policy import FCFS_ORDER, NO_CAP, Policy
from llmqueue.sim.engine import DEFAULT_BATCHES, DEFAULT_WARMUP, run
from llmqueue.sim.result import SimResult
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import TokenLaw

__all__ = ["simulate", "fixed_time_table"]

FIXED_T_MAX_BATCH = 2048


def fixed_time_table(policy: Policy, law: TokenLaw, latency: BatchLatency) -> np.ndarray:
    """E[T_b] (s) for b = 0..cap (entry 0 unused): the batch times of the fixed-T approximation;
    b_max = inf tabulates up to 2048 (a larger batch is an error)."""
    n = policy.cap + 1 if policy.cap < NO_CAP else FIXED_T_MAX_BATCH + 1
    tab = np.full(n, np.nan)
    for b in range(1, n):
        tab[b] = mean_batch_time(latency, law, b)
    return tab


def simulate(
    policy: Policy,
    law: TokenLaw,
    latency: BatchLatency,
    *,
    rate_per_s: float,
    requests: int,
    warmup: int = DEFAULT_WARMUP,
    batches: int = DEFAULT_BATCHES,
    seed: int | np.random.SeedSequence,
    fixed_time: bool = False,
) -> SimResult:
    """Simulate the batching server at Poisson rate `rate_per_s` (requests/s); see the module
    docstring. Returns the engine's SimResult (wait, response, ttft = wait + t1(b))."""
    if policy.kind not in ("dynamic", "fixed", "elastic", "none"):
        raise InputError(
            f"the paper's batching server takes dynamic, fixed or elastic, not {policy.kind}"
        )
    if policy.order != FCFS_ORDER.name or policy.servers != 1:
        raise InputError(
            "the paper's batching server is one FCFS server (use llmqueue.sim.engine.run)"
        )
    table = fixed_time_table(policy, law, latency) if fixed_time else None
    res = run(
        PoissonWorkload(law, rate_per_s),
        policy,
        latency,
        requests=requests,
        warmup=warmup,
        batches=batches,
        seed=seed,
        batch_time_table=table,
    )
    if fixed_time and res.response is not None and not np.isfinite(res.response.mean):
        raise InputError(
            f"fixed-T mode: a batch exceeded {FIXED_T_MAX_BATCH} requests (no E[T_b] tabulated); "
            "the load is too high"
        )
    return res
