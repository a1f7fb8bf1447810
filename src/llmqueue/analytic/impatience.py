"""Impatient users (M/G/1+D): each user waits at most tau seconds, Eq. (6)-(9).

Two methods:

1. The paper's approximation (Eq. 6-8), De Kok & Tijms (1985): interpolate between exponential
   and deterministic service with the same mean, weighted by the squared coefficient of
   variation c^2 of S (needs 0 <= c^2 <= 1)::

       pi  ~ (1 - c^2) pi_det  + c^2 pi_exp
       Wqs ~ (1 - c^2) Wqs_det + c^2 Wqs_exp

2. The exact M/G/1+D solution (beyond the paper): with B(y) = P(S > y), solve the renewal
   equation H(x) = 1 + lambda * int_0^x H(x - y) B(y) dy; then

       pi  = (1 - (1 - rho) H(tau)) / (1 + rho H(tau)),
       Wqs = tau - (int_0^tau H(x) dx) / H(tau),

   where pi is the long-run fraction of lost users and Wqs the mean wait of served users.
   Eq. (9): the mean wait of everyone is E[W] = tau*pi + (1 - pi)*Wqs (a lost user waited tau).

The queue is stable at any rho: rho < 1 is needed only for patient users.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray
from scipy import integrate

from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency
from llmqueue.tokens import ExponentialLaw, TokenLaw

__all__ = [
    "ImpatienceResult",
    "mm1d",
    "md1d",
    "md1d_h",
    "loss_and_wait_from_h",
    "solve_renewal",
    "exact_mg1d",
    "exact_token_limit",
    "de_kok_tijms",
    "w_all",
]


@dataclass(frozen=True)
class ImpatienceResult:
    """Lost fraction pi, mean wait of served users Wqs (s), mean wait of all E[W] (s, Eq. 9)."""

    loss: float
    wqs_s: float
    w_all_s: float
    error_estimate: float = 0.0  # estimated absolute error of loss (exact grid solver)


def w_all(loss: float, wqs_s: float, patience_s: float) -> float:
    """Eq. (9): E[W] = tau*pi + (1 - pi)*Wqs."""
    return patience_s * loss + (1.0 - loss) * wqs_s


def _check(rate: float, patience: float) -> None:
    if not rate > 0:
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate}")
    if not patience > 0:
        raise InputError(f"patience tau must be > 0 s, got {patience}")


def loss_and_wait_from_h(
    rho: float, h_tau: float, int_h: float, patience_s: float
) -> ImpatienceResult:
    """pi, Wqs and E[W] from H(tau) and int_0^tau H (the exact-solution formulas above)."""
    loss = (1.0 - (1.0 - rho) * h_tau) / (1.0 + rho * h_tau)
    wqs = patience_s - int_h / h_tau
    return ImpatienceResult(loss, wqs, w_all(loss, wqs, patience_s))


def mm1d(rate_per_s: float, mean_service_s: float, patience_s: float) -> ImpatienceResult:
    """Closed form for exponential service (M/M/1+D); any rho.

    H(x) = (mu - lambda e^{-theta x}) / theta with theta = mu - lambda, so
    pi = (1 - rho) rho e^{-theta tau} / (1 - rho^2 e^{-theta tau}).
    """
    _check(rate_per_s, patience_s)
    lam, tau = rate_per_s, patience_s
    mu = 1.0 / mean_service_s
    theta = mu - lam
    rho = lam / mu
    if abs(theta * tau) < 1e-9:  # rho = 1: H(x) = 1 + lambda x
        h_tau = 1.0 + lam * tau
        int_h = tau + 0.5 * lam * tau * tau
    elif -theta * tau > 700.0:  # deep overload: H(tau) overflows; its limit H ~ e^{-theta x}
        loss = (rho - 1.0) / rho
        wqs = tau + 1.0 / theta  # tau - int_0^tau H / H(tau) -> tau - 1/(lambda - mu)
        return ImpatienceResult(loss, wqs, w_all(loss, wqs, tau))
    else:
        e = math.exp(-theta * tau)
        h_tau = (mu - lam * e) / theta
        int_h = (mu * tau + (lam / theta) * math.expm1(-theta * tau)) / theta
    return loss_and_wait_from_h(rho, h_tau, int_h, tau)


def md1d_h(x: float, rate_per_s: float, service_s: float) -> float:
    """Closed-form H(x) for deterministic service D (docs/equations.md):
    H(x) = sum_{k=0}^{floor(x/D)} (lambda (kD - x))^k / k! * e^{lambda (x - kD)}."""
    lam, d = rate_per_s, service_s
    total = 0.0
    for k in range(int(math.floor(x / d)) + 1):
        u = x - k * d
        total += (-lam * u) ** k / math.factorial(k) * math.exp(lam * u)
    return total


def md1d(rate_per_s: float, service_s: float, patience_s: float) -> ImpatienceResult:
    """Deterministic service (M/D/1+D) from the closed-form H; any rho.

    The alternating sum is evaluated directly; it is accurate while lambda*tau and tau/D stay
    moderate (as in every use here: tau/D < 20).
    """
    _check(rate_per_s, patience_s)
    if not service_s > 0:
        raise InputError(f"deterministic service time must be > 0 s, got {service_s}")
    tau, d = patience_s, service_s
    if tau / d > 40:
        raise InputError(
            f"M/D/1+D closed form: tau/D = {tau / d:.3g} > 40 is outside its accurate range"
        )
    kinks = [k * d for k in range(1, int(tau / d) + 1) if k * d < tau]
    int_h = integrate.quad(md1d_h, 0.0, tau, args=(rate_per_s, d), points=kinks or None, limit=200)[
        0
    ]
    return loss_and_wait_from_h(rate_per_s * d, md1d_h(tau, rate_per_s, d), int_h, tau)


@njit(cache=True)
def _renewal_kernel(
    dg: NDArray[np.float64], lam: float, n: int
) -> NDArray[np.float64]:  # pragma: no cover
    # Product-trapezoid rule: on each cell [jh, (j+1)h] the tail B is integrated exactly
    # (dg[j] = G((j+1)h) - G(jh), G(y) = E[min(S, y)]) and H is averaged over the cell ends.
    w = 0.5 * dg
    h = np.empty(n + 1)
    h[0] = 1.0
    denom = 1.0 - lam * w[0]
    for i in range(1, n + 1):
        acc = w[i - 1] * h[0]
        for j in range(1, i):
            acc += (w[j] + w[j - 1]) * h[i - j]
        h[i] = (1.0 + lam * acc) / denom
    return h


def solve_renewal(
    expected_min_service: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    rate_per_s: float,
    patience_s: float,
    steps: int,
) -> tuple[float, float]:
    """Solve H on [0, tau] with `steps` cells; return (H(tau), int_0^tau H dx).

    `expected_min_service(y)` = G(y) = E[min(S, y)] = int_0^y P(S > u) du (vectorised). Working
    with G instead of the tail itself keeps the rule exact for tails with jumps (the atom that
    a token limit puts at a*l + b0, or deterministic service).
    """
    grid = np.linspace(0.0, patience_s, steps + 1)
    dg = np.diff(np.asarray(expected_min_service(grid), dtype=float))
    h = _renewal_kernel(dg, float(rate_per_s), steps)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is the caller's to refuse
        return float(h[-1]), float(np.trapezoid(h, grid))


def exact_mg1d(
    expected_min_service: Callable[[NDArray[np.float64]], NDArray[np.float64]],
    mean_service_s: float,
    rate_per_s: float,
    patience_s: float,
    step_s: float = 0.02,
    max_rel_error: float = 1e-4,
    max_steps: int = 1 << 16,
) -> ImpatienceResult:
    """Exact M/G/1+D by the renewal equation, with error control.

    The grid is refined (h, h/2, h/4, ...) until two successive values of pi differ by less
    than max_rel_error * pi; the Richardson extrapolation of the last two (the rule is second
    order) is returned, with |difference| / 3 as the error estimate.
    """
    _check(rate_per_s, patience_s)
    if not step_s > 0:
        raise InputError(f"renewal grid step must be > 0 s, got {step_s}")
    rho = rate_per_s * mean_service_s
    # the grid starts at `step_s` but never finer than max_steps / 4 points over the patience (the
    # work grows with the square of the points); the refinement below controls the error either way
    # the rule needs lambda * (grid step) <= 1/2 (its first weight stays below 1)
    if rate_per_s * patience_s > max_steps / 8:
        raise InputError(
            f"the exact M/G/1+D solution needs lambda * tau <= {max_steps // 8} (arrivals within "
            f"one patience); got {rate_per_s:g}/s x {patience_s:g} s: lower --rate or --patience"
        )

    def solve(n: int) -> ImpatienceResult:
        h_tau, int_h = solve_renewal(expected_min_service, rate_per_s, patience_s, n)
        if not (math.isfinite(h_tau) and math.isfinite(int_h) and h_tau > 0):
            raise InputError(
                f"the exact M/G/1+D solution overflows at rho = {rho:.4g} with lambda * tau = "
                f"{rate_per_s * patience_s:.4g} (deep overload: nearly every user leaves); lower "
                "--rate or --patience"
            )
        return loss_and_wait_from_h(rho, h_tau, int_h, patience_s)

    steps = max(
        8,
        min(int(math.ceil(patience_s / step_s)), max_steps // 4),
        int(math.ceil(2.0 * rate_per_s * patience_s)),
    )

    prev = solve(steps)
    while True:
        steps *= 2
        cur = solve(steps)
        diff = abs(cur.loss - prev.loss)
        if diff <= max_rel_error * max(abs(cur.loss), 1e-300) or steps * 2 > max_steps:
            loss = cur.loss + (cur.loss - prev.loss) / 3.0
            wqs = cur.wqs_s + (cur.wqs_s - prev.wqs_s) / 3.0
            return ImpatienceResult(loss, wqs, w_all(loss, wqs, patience_s), diff / 3.0)
        prev = cur


def _linear_service_g(
    law: TokenLaw, latency: LinearLatency, limit: float
) -> Callable[[NDArray[np.float64]], NDArray[np.float64]]:
    """G(y) = E[min(S, y)] for S = a*min(N, l) + b0: y below b0, else b0 + a*E[min(N, l, (y-b0)/a)]."""
    a, b0 = latency.a_s_per_token, latency.b0_s

    def g(y: NDArray[np.float64]) -> NDArray[np.float64]:
        y = np.asarray(y, dtype=float)
        if a == 0:
            return np.minimum(y, b0)
        cap = np.minimum(limit, np.maximum(y - b0, 0.0) / a)
        return np.where(y <= b0, y, b0 + a * np.asarray(law.clipped_moment(cap, 1), dtype=float))

    return g


def exact_token_limit(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    patience_s: float,
    limit: float = math.inf,
    step_s: float = 0.02,
    max_rel_error: float = 1e-4,
) -> ImpatienceResult:
    """Exact M/G/1+D for S = a*min(N, l) + b0 (the token-limit model with impatient users)."""
    if not limit > 0:
        raise InputError(f"token limit must be > 0 tokens, got {limit}")
    mean_s = latency.a_s_per_token * float(law.clipped_moment(limit, 1)) + latency.b0_s
    return exact_mg1d(
        _linear_service_g(law, latency, limit),
        mean_s,
        rate_per_s,
        patience_s,
        step_s,
        max_rel_error,
    )


def de_kok_tijms(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    patience_s: float,
    limit: float = math.inf,
    exp_reading: str = "same_mean_service",
    step_s: float = 0.02,
    max_rel_error: float = 1e-4,
) -> tuple[ImpatienceResult, float]:
    """The paper's Eq. (6)-(8): De Kok-Tijms interpolation; returns (result, c^2).

    ``exp_reading`` (OPEN in docs/equations.md): ``same_mean_service`` uses an exponential S with mean
    E[S] (M/M/1+D closed form); ``exponential_tokens`` uses S = a*N' + b0 with N' exponential of
    mean E[min(N, l)], solved exactly. Raises InputError if c^2 lies outside [0, 1].
    """
    m1 = float(law.clipped_moment(limit, 1))
    m2 = float(law.clipped_moment(limit, 2))
    a, b0 = latency.a_s_per_token, latency.b0_s
    es = a * m1 + b0
    es2 = a * a * m2 + 2 * a * b0 * m1 + b0 * b0
    c2 = es2 / es**2 - 1.0
    if not -1e-12 <= c2 <= 1 + 1e-12:
        raise InputError(
            f"De Kok-Tijms interpolation needs 0 <= c^2 <= 1 for S; got c^2 = {c2:.4g} at l = {limit:g}"
        )
    c2 = min(max(c2, 0.0), 1.0)
    det = md1d(rate_per_s, es, patience_s)
    if exp_reading == "same_mean_service":
        ex = mm1d(rate_per_s, es, patience_s)
    elif exp_reading == "exponential_tokens":
        ex = exact_token_limit(
            ExponentialLaw(max(m1, 1e-12)),
            latency,
            rate_per_s,
            patience_s,
            math.inf,
            step_s,
            max_rel_error,
        )
    else:
        raise InputError(
            f"impatience_exp_reading must be same_mean_service or exponential_tokens, got {exp_reading!r}"
        )
    loss = (1 - c2) * det.loss + c2 * ex.loss
    wqs = (1 - c2) * det.wqs_s + c2 * ex.wqs_s
    return ImpatienceResult(loss, wqs, w_all(loss, wqs, patience_s)), c2
