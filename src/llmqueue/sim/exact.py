"""Exact mean waits by queue order, where a formula applies: shared by the operator CLI and
every study.

A one-at-a-time server (batch former ``none``, one server, Poisson arrivals from token laws or
trace rows, a steady state) has the mean wait of a formula for every queue order of
:data:`llmqueue.policy.QUEUE_ORDERS`, chosen by the formula its record names
(:attr:`llmqueue.policy.QueueOrder.exact`) in one table (:data:`FORMULAS` over a trace's rows;
:func:`exact_wait` dispatches token laws the same way); an order of the registry that has no
formula gets None, and a name outside the registry is an InputError:

- ``pollaczek_khinchine`` (``fcfs``): Pollaczek-Khinchine with the exact moments of S = t1(1) + t2(1) N (a starvation guard
  changes nothing under FCFS);
- ``cobham_by_size`` (``sjf``): Cobham's non-preemptive priority formula with one class per size: exact sums over a
  trace's rows or an empirical law, quadrature over the size quantile otherwise (atoms such as a
  cap handled, :func:`llmqueue.analytic.priority.sjf_wait`);
- ``cobham_by_prediction`` (``spjf``): classes by predicted size, loads by true service times (Mitzenmacher 2020): exact
  over a trace's rows when each row carries its own prediction; by quadrature over a token law
  for a prediction with a continuous law given the size (``noisy``, ``exp``, ``uniform``:
  :func:`llmqueue.analytic.priority.spjf_wait`); for a ``buckets`` classifier one class per
  predicted class, exact from the law's partial moments and the classifier's error
  probabilities; otherwise (a trace's rows without predictions of their own) the joint law of
  (size, prediction) is sampled from the workload and the formula evaluated on the sample, a
  Monte Carlo estimate whose standard error is reported.

A preemptive order (``psjf``, ``srpt``, ``pspjf``, ``sprpt``; one server) over a continuous token
law: its mean response time by quadrature less E[S], the mean time a request is in the system
unserved.

Several servers (one at a time each, FCFS unless said): ``random`` routing to c replicas is c
independent queues at rate lambda / c, each with the one-server formula of its order (any law);
with exponential service (an exponential token law, S = a N) the central queue is M/M/c (Erlang
C) and ``round_robin`` is E_c/M/1 per replica (:mod:`llmqueue.analytic.multiserver`). Other routers
and laws have no formula here (None).

Units: seconds, requests/s, tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from llmqueue.analytic.multiserver import mmc_wait, round_robin_mm_wait
from llmqueue.analytic.priority import (
    pk_wait,
    priority_class_waits,
    priority_wait_empirical,
    psjf_response,
    pspjf_response,
    sjf_wait,
    spjf_wait,
    sprpt_response,
    srpt_response,
)
from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw
from llmqueue.policy import SJF_ORDER, Policy, QueueOrder, queue_order
from llmqueue.sim.engine import static_law
from llmqueue.sim.predictors import Buckets, Oracle
from llmqueue.sim.workload import PoissonWorkload, TraceWorkload, Workload
from llmqueue.tokens import EmpiricalLaw, ExponentialLaw, TokenLaw

__all__ = ["ExactWait", "FORMULAS", "row_mean_wait", "service_times", "exact_wait"]

Latency = BatchLatency | LinearLatency | StepLaw


@dataclass(frozen=True)
class ExactWait:
    """A mean wait (s) by a formula, the formula it comes from, and the standard error of its
    evaluation (0 for a closed form; > 0 when the formula's integral over a joint law of size and
    prediction is evaluated by Monte Carlo)."""

    wait_s: float
    method: str
    se_s: float = 0.0


def service_times(latency: BatchLatency | LinearLatency, tokens: np.ndarray) -> np.ndarray:
    """S = t1(1) + t2(1) N (s) of one request served alone, for output tokens N."""
    k = static_law(latency)
    return (k[0] + k[1]) + (k[2] + k[3]) * np.asarray(tokens, dtype=float)


# One formula per name of QueueOrder.exact, over rows (service time s, true size n, predicted
# size p; rate): the mean wait (s) and the method's name. The one place an exact wait is chosen.
RowFormula = Callable[[np.ndarray, np.ndarray, np.ndarray | None, float], tuple[float, str]]


def _fcfs_rows(
    s: np.ndarray, n: np.ndarray, p: np.ndarray | None, rate_per_s: float
) -> tuple[float, str]:
    return pk_wait(
        rate_per_s, float(s.mean()), float((s * s).mean())
    ), "Pollaczek-Khinchine over the trace rows"


def _sjf_rows(
    s: np.ndarray, n: np.ndarray, p: np.ndarray | None, rate_per_s: float
) -> tuple[float, str]:
    return priority_wait_empirical(
        s, n, rate_per_s
    ), "Cobham, one class per size, over the trace rows"


def _spjf_rows(
    s: np.ndarray, n: np.ndarray, p: np.ndarray | None, rate_per_s: float
) -> tuple[float, str]:
    if p is None:
        raise InputError("spjf's exact wait needs each row's predicted size")
    return (
        priority_wait_empirical(s, p, rate_per_s),
        "Cobham, classes by each row's prediction (loads by true sizes), over the trace rows",
    )


FORMULAS: dict[str, RowFormula] = {
    "pollaczek_khinchine": _fcfs_rows,
    "cobham_by_size": _sjf_rows,
    "cobham_by_prediction": _spjf_rows,
}


def row_mean_wait(
    order: str,
    service_s: np.ndarray,
    sizes: np.ndarray,
    predicted: np.ndarray | None,
    rate_per_s: float,
) -> tuple[float, str] | None:
    """The exact mean wait (s) and its method of a one-at-a-time server whose requests are drawn
    uniformly from rows (service time, true size, predicted size) with Poisson arrivals at
    `rate_per_s`, under queue order `order` (its record's formula in :data:`FORMULAS`; None for an
    order without one). Raises :class:`~llmqueue.errors.UnstableError` when rho >= 1."""
    exact = queue_order(order).exact  # InputError for a name outside the registry
    if exact is None:
        return None
    formula = FORMULAS[exact]
    return formula(np.asarray(service_s, dtype=float), np.asarray(sizes), predicted, rate_per_s)


def _classes(service_s: np.ndarray, probs: np.ndarray, rate: float) -> float:
    """Cobham's mean wait over classes in priority order with probabilities `probs`."""
    waits = priority_class_waits(rate * probs, service_s, service_s * service_s)
    return float(np.sum(probs * waits))


def _monte_carlo(
    workload: Workload, latency: Latency, order: QueueOrder, seed: Any, samples: int
) -> ExactWait:
    """Cobham's formula over `samples` draws of (size, key) from the workload, with the standard
    error of the estimate from 10 equal sub-samples."""
    ch = next(workload.chunks(seed, min(int(samples), 1 << 22), False))
    keys = ch.output if order.key == "size" else ch.pred
    s = service_times(latency, ch.output)  # type: ignore[arg-type]
    rate_per_s = workload.rate_per_s
    value = priority_wait_empirical(s, keys, rate_per_s)
    parts = [
        priority_wait_empirical(a, b, rate_per_s)
        for a, b in zip(np.array_split(s, 10), np.array_split(keys, 10), strict=True)
    ]
    # each tenth has about 10x the variance of the whole sample's estimate
    se = float(np.std(parts, ddof=1) / math.sqrt(10.0))
    what = "size" if order.key == "size" else "predicted size"
    return ExactWait(
        value,
        f"Cobham, classes by {what} (loads by true sizes), Monte Carlo evaluation over "
        f"{ch.output.size} draws of the workload",
        se,
    )


def exact_wait(
    workload: Workload,
    policy: Policy,
    latency: Latency,
    *,
    seed: int | np.random.SeedSequence,
    samples: int = 2_000_000,
) -> ExactWait | None:
    """The mean wait of a one-at-a-time server by a formula (module docstring; ``none``, one
    server, Poisson arrivals from token laws or trace rows), else None; None also when rho >= 1
    (no steady state). For trace rows without predictions of their own the formula is evaluated
    by Monte Carlo over `samples` draws (stream `seed`)."""
    if policy.kind != "none":
        return None
    if policy.servers != 1:
        return _servers_wait(workload, policy, latency, seed=seed, samples=samples)
    order = queue_order(policy.order)
    if order.preemptive:  # with a preemption limit no formula here
        return (
            None if policy.preempt_limit is not None else _preemptive_wait(workload, order, latency)
        )
    if order.key == "predicted_size" and isinstance(workload.predictor, Oracle):
        order = SJF_ORDER  # a perfect prediction orders as the true size
    if order.exact is None:
        return None
    if policy.guard_s is not None and not order.by_arrival:
        return None
    if isinstance(latency, StepLaw) or not isinstance(workload, PoissonWorkload | TraceWorkload):
        return None
    rate_per_s = workload.rate_per_s
    try:
        if isinstance(workload, TraceWorkload):
            n = workload.output_tokens
            if order.key == "predicted_size" and workload.row_pred is None:
                return _monte_carlo(workload, latency, order, seed, samples)
            found = row_mean_wait(
                order.name, service_times(latency, n), n, workload.row_pred, rate_per_s
            )
            if found is None:
                return None
            wait, method = found
            return ExactWait(wait, method)
        law = workload.output
        a, b0 = _service_line(latency)
        if order.exact == "pollaczek_khinchine":
            m1 = a * law.mean() + b0
            m2 = a * a * float(law.clipped_moment(math.inf, 2)) + 2 * a * b0 * law.mean() + b0 * b0
            return ExactWait(pk_wait(rate_per_s, m1, m2), "Pollaczek-Khinchine, exact moments of S")
        if order.exact == "cobham_by_size":
            if isinstance(law, EmpiricalLaw):
                return ExactWait(
                    _classes(service_times(latency, law.values), law.probs, rate_per_s),
                    "Cobham, one class per size, exact sum over the law's values",
                )
            return ExactWait(
                sjf_wait(law, a, b0, rate_per_s), "Cobham, one class per size (quadrature)"
            )
        if order.exact == "cobham_by_prediction":
            if isinstance(workload.predictor, Buckets):
                return ExactWait(
                    _buckets_wait(law, a, b0, rate_per_s, workload.predictor),
                    "Cobham, one class per predicted class (loads by true sizes), exact clipped "
                    "moments of each size class and the classifier's error probabilities",
                )
            cond = workload.predictor.conditional()
            if cond is not None:
                return ExactWait(
                    spjf_wait(law, a, b0, rate_per_s, *cond),
                    "Cobham, classes by predicted size (loads by true sizes), quadrature over "
                    "the size and the prediction's conditional law",
                )
            return _monte_carlo(workload, latency, order, seed, samples)
        raise InputError(
            f"order {order.name!r}: no token-law evaluation of formula {order.exact!r}"
        )
    except UnstableError:
        return None


def _buckets_wait(
    law: TokenLaw, a: float, b0: float, rate_per_s: float, predictor: Buckets
) -> float:
    """Cobham's mean wait with one class per *predicted* class of a ``buckets`` classifier: true
    class i holds the sizes in [e_(i-1), e_i) (the compiled predictor's convention), and is
    predicted as class i - 1 or i + 1 with probability pe each (the end classes stay instead of
    leaving the range); each predicted class is a mixture of true classes, so its rate, mean and
    second moment of S = a N + b0 follow from the law's exact partial moments."""
    edges = np.asarray(predictor.edges(), dtype=float)
    k = edges.size + 1

    def below(e: np.ndarray, j: int) -> np.ndarray:  # E[N^j 1{N < e}], e may be infinite
        out = np.empty(e.size)
        for i, x in enumerate(e):
            if math.isinf(x):
                out[i] = float(law.clipped_moment(math.inf, j)) if j else 1.0
            else:
                p = float(law.prob_below(x))
                out[i] = p if j == 0 else float(law.clipped_moment(x, j)) - x**j * (1.0 - p)
        return out

    upper = np.concatenate([edges, [math.inf]])
    lower = np.concatenate([[0.0], edges])
    part = [below(upper, j) - below(lower, j) for j in range(3)]  # by true class
    prob = part[0]
    s1 = a * part[1] + b0 * prob  # E[S 1{class i}]
    s2 = a * a * part[2] + 2.0 * a * b0 * part[1] + b0 * b0 * prob
    pe = float(predictor.pe)
    move = np.eye(k) * (1.0 - 2.0 * pe)  # move[i, j]: P(predicted j | true i)
    for i in range(k):
        move[i, max(i - 1, 0)] += pe
        move[i, min(i + 1, k - 1)] += pe
    p_j, m1_j, m2_j = prob @ move, s1 @ move, s2 @ move
    keep = p_j > 0
    waits = priority_class_waits(
        rate_per_s * p_j[keep], m1_j[keep] / p_j[keep], m2_j[keep] / p_j[keep]
    )
    return float(np.sum(p_j[keep] * waits))


def _service_line(latency: BatchLatency | LinearLatency) -> tuple[float, float]:
    """(a, b0) of a request's service time alone, S = t1(1) + t2(1) N = b0 + a N (s/token, s)."""
    k = static_law(latency)
    return float(k[2] + k[3]), float(k[0] + k[1])


def _preemptive_wait(workload: Workload, order: QueueOrder, latency: Latency) -> ExactWait | None:
    """A preemptive order's mean wait (time in the system not served: response - S) over a
    continuous token law: the mean response time of its formula less E[S]
    (:func:`llmqueue.analytic.priority.psjf_response`, ``srpt_response``, ``pspjf_response``,
    ``sprpt_response``);
    None for a trace, a law with atoms or a prediction without a continuous conditional law."""
    if isinstance(latency, StepLaw) or type(workload) is not PoissonWorkload:
        return None
    law = workload.output
    a, b0 = _service_line(latency)
    rate = workload.rate_per_s
    key = order.key
    if isinstance(workload.predictor, Oracle):  # a perfect prediction orders as the true size
        key = {"predicted_size": "size", "predicted_remaining": "remaining_size"}.get(key, key)
    try:
        if key == "size":
            t, how = psjf_response(law, a, b0, rate), "preemptive-resume priority by size"
        elif key == "remaining_size":
            t, how = srpt_response(law, a, b0, rate), "Schrage-Miller SRPT"
        elif key == "predicted_size" and (cond := workload.predictor.conditional()) is not None:
            t = pspjf_response(law, a, b0, rate, *cond)
            how = "preemptive-resume priority by predicted size"
        elif (
            key == "predicted_remaining" and (cond := workload.predictor.conditional()) is not None
        ):
            t = sprpt_response(law, a, b0, rate, *cond)
            how = "SPRPT by the SOAP rank predicted size - age"
        else:
            return None
    except (InputError, UnstableError):
        return None
    return ExactWait(t - (a * law.mean() + b0), f"{how} (quadrature), response less E[S]")


def _servers_wait(
    workload: Workload,
    policy: Policy,
    latency: Latency,
    *,
    seed: int | np.random.SeedSequence,
    samples: int,
) -> ExactWait | None:
    """:func:`exact_wait` of c > 1 one-at-a-time servers (module docstring), else None."""
    c = policy.replicas
    if policy.router == "random":
        one = replace(policy, servers=1, replicas=1, router="central")
        found = exact_wait(
            workload.at_rate(workload.rate_per_s / c), one, latency, seed=seed, samples=samples
        )
        if found is None:
            return None
        return ExactWait(
            found.wait_s,
            f"random routing: {c} independent queues at rate lambda/{c}, each by {found.method}",
            found.se_s,
        )
    if not queue_order(policy.order).by_arrival or policy.router not in ("central", "round_robin"):
        return None
    if not isinstance(workload, PoissonWorkload) or not isinstance(workload.output, ExponentialLaw):
        return None
    if isinstance(latency, StepLaw):
        return None
    a, b0 = _service_line(latency)
    if b0 != 0.0 or a <= 0.0:
        return None  # exponential service needs S = a N
    mu = 1.0 / (a * workload.output.mean())
    rate_per_s = workload.rate_per_s
    if rate_per_s >= c * mu:
        return None
    if policy.router == "central":
        return ExactWait(mmc_wait(rate_per_s, mu, c), f"M/M/{c}, Erlang C")
    return ExactWait(
        round_robin_mm_wait(rate_per_s, mu, c),
        f"round robin: E_{c}/M/1 per replica (sigma = A*(mu (1 - sigma)))",
    )
