"""Choosing the max-token limit l: Eq. (10)-(13).

Utility of a user who wanted x tokens under limit l: U(l, x) = 1 if x <= l, else g(l/x), with
g increasing, g(0) = 0, g(1) = 1. The paper leaves g open; we use the family g(r) = r^gamma,
gamma = 1 fixed in advance (a gamma chosen to hit the paper's optimum is "back_solved").

- Patient users:   F1(l) = alpha E[U] - (1 - alpha) W_q(l),              maximised s.t. rho(l) < 1
- Impatient users: F2(l) = alpha E[U] - (1 - alpha) W_qs(l) - c pi(l),   no stability constraint
(W in seconds, so (1 - alpha) is a price per second of waiting and c a price per lost user.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, special

from llmqueue.errors import InputError
from llmqueue.tokens import ClippedLaw, EmpiricalLaw, LogNormalLaw, TokenLaw

__all__ = [
    "expected_utility",
    "objective_patient",
    "objective_impatient",
    "Optimum",
    "argmax_on_grid",
]


def _check_gamma(gamma: float) -> None:
    if not gamma > 0:
        raise InputError(f"utility exponent gamma must be > 0, got {gamma}")


def expected_utility(law: TokenLaw, limits: ArrayLike, gamma: float = 1.0) -> NDArray[np.float64]:
    """E[U(l, N)] = P(N <= l) + E[(l/N)^gamma; N > l] for each limit l (Eq. 10 with g(r) = r^gamma).

    Closed form for log-normal N: with z = (ln l - mu)/sigma,
    E[U] = Phi(z) + l^gamma e^{-gamma mu + gamma^2 sigma^2/2} Phi(-z - gamma sigma).
    Exact sum for an empirical law; quadrature in the quantile variable otherwise.
    """
    _check_gamma(gamma)
    lim = np.atleast_1d(np.asarray(limits, dtype=float))
    if np.any(~(lim > 0)):
        raise InputError("every token limit must be > 0 tokens")
    base = law.base if isinstance(law, ClippedLaw) else law
    if isinstance(base, LogNormalLaw) and not isinstance(law, ClippedLaw):
        mu, s = base.mu, base.sigma
        z = (np.log(lim) - mu) / s
        return np.asarray(
            special.ndtr(z)
            + lim**gamma
            * math.exp(-gamma * mu + 0.5 * gamma**2 * s**2)
            * special.ndtr(-z - gamma * s),
            dtype=float,
        )
    if isinstance(law, EmpiricalLaw):
        v, p = law.values, law.probs
        ratio = np.where(
            v[None, :] <= lim[:, None],
            1.0,
            (lim[:, None] / np.maximum(v[None, :], 1e-300)) ** gamma,
        )
        return np.asarray(ratio @ p, dtype=float)
    out = np.empty(lim.size)
    for i, lv in enumerate(lim):
        f_l = float(law.cdf(lv))
        if f_l >= 1.0:
            out[i] = 1.0
            continue
        tail = integrate.quad(
            lambda u, lv=lv: (lv / float(law.ppf(u))) ** gamma, f_l, 1.0, limit=200
        )[0]
        out[i] = f_l + tail
    return out


def objective_patient(utility: ArrayLike, wq_s: ArrayLike, alpha: float) -> NDArray[np.float64]:
    """F1 = alpha E[U] - (1 - alpha) W_q, Eq. (10); nan where W_q is nan (rho >= 1)."""
    _check_alpha(alpha)
    return alpha * np.asarray(utility, dtype=float) - (1 - alpha) * np.asarray(wq_s, dtype=float)


def objective_impatient(
    utility: ArrayLike, wqs_s: ArrayLike, loss: ArrayLike, alpha: float, loss_cost: float
) -> NDArray[np.float64]:
    """F2 = alpha E[U] - (1 - alpha) W_qs - c pi, Eq. (11)."""
    _check_alpha(alpha)
    if not loss_cost >= 0:
        raise InputError(f"loss cost c must be >= 0, got {loss_cost}")
    return (
        alpha * np.asarray(utility, dtype=float)
        - (1 - alpha) * np.asarray(wqs_s, dtype=float)
        - loss_cost * np.asarray(loss, dtype=float)
    )


def _check_alpha(alpha: float) -> None:
    if not 0 < alpha <= 1:
        raise InputError(f"weight alpha must lie in (0, 1], got {alpha}")


@dataclass(frozen=True)
class Optimum:
    """The best grid point: limit l* (tokens), objective value, and whether it sits on the grid edge."""

    limit: float
    value: float
    index: int
    at_edge: bool


def argmax_on_grid(limits: ArrayLike, objective: ArrayLike) -> Optimum:
    """Eq. (12)-(13) on a grid: the limit with the largest finite objective (first on ties)."""
    lim = np.asarray(limits, dtype=float)
    obj = np.asarray(objective, dtype=float)
    ok = np.isfinite(obj)
    if not ok.any():
        raise InputError("no grid point has a finite objective (every point unstable?)")
    idx = int(np.nanargmax(np.where(ok, obj, -np.inf)))
    return Optimum(float(lim[idx]), float(obj[idx]), idx, idx in (0, lim.size - 1))
