"""M/G/1 FCFS with a max-token limit: Eq. (1)-(5) of the paper.

A request asking for N tokens gets min(N, l) tokens and takes S = a*min(N, l) + b0 seconds
(Eq. 3). Poisson arrivals at rate lambda (requests/s), one server, first come first served.
The mean wait in queue is Pollaczek-Khinchine (Eq. 1):

    W_q = lambda * E[S^2] / (2 * (1 - rho)),  rho = lambda * E[S] < 1,

with E[S], E[S^2] from the exact clipped moments of the token law (Eq. 2, 4, 5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency
from llmqueue.tokens import TokenLaw

__all__ = ["pk_wait", "TokenLimitCurve", "token_limit_curve", "token_limit_point"]


def pk_wait(rate_per_s: float, mean_s: float, second_moment_s2: float) -> float:
    """Pollaczek-Khinchine mean wait in queue (s), Eq. (1); raises UnstableError if rho >= 1."""
    if not rate_per_s > 0:
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    rho = rate_per_s * mean_s
    if rho >= 1:
        raise UnstableError(
            f"rho = lambda*E[S] = {rho:.4g} >= 1 (lambda = {rate_per_s:g}/s, E[S] = {mean_s:.4g} s): "
            "patient users have no steady state; lower the rate or the limit"
        )
    return rate_per_s * second_moment_s2 / (2.0 * (1.0 - rho))


@dataclass(frozen=True)
class TokenLimitCurve:
    """Eq. (1)-(5) evaluated on a grid of limits l (tokens). Unstable points have wq = nan."""

    limits: NDArray[np.float64]
    mean_tokens: NDArray[np.float64]  # E[min(N, l)]
    mean_service_s: NDArray[np.float64]  # E[S]
    second_moment_s2: NDArray[np.float64]  # E[S^2]
    rho: NDArray[np.float64]
    wq_s: NDArray[np.float64]
    unstable: NDArray[np.bool_]

    @property
    def scv(self) -> NDArray[np.float64]:
        """Squared coefficient of variation c^2 = Var(S)/E[S]^2."""
        return self.second_moment_s2 / self.mean_service_s**2 - 1.0


def token_limit_curve(
    law: TokenLaw, latency: LinearLatency, rate_per_s: float, limits: ArrayLike
) -> TokenLimitCurve:
    """Eq. (1)-(5) on a grid of limits; rho >= 1 points are flagged unstable (wq = nan), not raised."""
    if not rate_per_s > 0:
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    lim = np.atleast_1d(np.asarray(limits, dtype=float))
    if np.any(~(lim > 0)):
        raise InputError(f"every token limit must be > 0 tokens, got min {lim.min()}")
    a, b0 = latency.a_s_per_token, latency.b0_s
    m1 = np.asarray(law.clipped_moment(lim, 1), dtype=float)
    m2 = np.asarray(law.clipped_moment(lim, 2), dtype=float)
    es = a * m1 + b0
    es2 = a * a * m2 + 2 * a * b0 * m1 + b0 * b0
    rho = rate_per_s * es
    unstable = rho >= 1
    with np.errstate(divide="ignore", invalid="ignore"):
        wq = np.where(unstable, math.nan, rate_per_s * es2 / (2 * (1 - rho)))
    return TokenLimitCurve(lim, m1, es, es2, rho, wq, unstable)


def token_limit_point(
    law: TokenLaw, latency: LinearLatency, rate_per_s: float, limit: float
) -> dict[str, float]:
    """One limit (or l = inf for no limit): rho, E[S], E[S^2], W_q. Raises if rho >= 1."""
    if not limit > 0:
        raise InputError(f"token limit must be > 0 tokens, got {limit}")
    c = token_limit_curve(law, latency, rate_per_s, [limit])
    if c.unstable[0]:
        pk_wait(rate_per_s, float(c.mean_service_s[0]), float(c.second_moment_s2[0]))
    return {
        "rho": float(c.rho[0]),
        "mean_service": float(c.mean_service_s[0]),
        "second_moment": float(c.second_moment_s2[0]),
        "wq": float(c.wq_s[0]),
    }
