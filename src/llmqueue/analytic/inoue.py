"""Inoue's closed-form bound for dynamic batching (Eq. 14-16; Inoue, Perf. Eval. 2021).

Model (14): a batch of b requests takes alpha_b*b + tau0 seconds (deterministic, linear);
dynamic batching (15): when the server frees it takes every waiting request, else it waits for
the next arrival. Eq. (16) bounds the mean RESPONSE time (wait + own batch time), valid when
lambda*alpha_b < 1:

    phi0 = (alpha_b + tau0)/(2(1 - lambda alpha_b)) * (1 + 2 lambda tau0 + (1 - lambda tau0)/(1 + lambda alpha_b))
    phi1 = 1.5 tau0/(1 - lambda alpha_b) + (alpha_b/2)(lambda alpha_b + 2)/(1 - lambda^2 alpha_b^2)
    bound = min(phi0, phi1)

For LLMs (Sec. IV-B) alpha_b, tau0 come from the linear bound (20) (see
:func:`llmqueue.analytic.batch_time.uniform_linear_bound`) or from a least-squares line of E[T_b]
(:func:`llmqueue.analytic.batch_time.fit_alpha_tau`).

:func:`phi0_public_variant` is the form with (1 + lambda tau0) in the last denominator found in
public code; it is NOT a bound (lambda = 0.5, alpha_b = 0.1, tau0 = 1: 1.351 < exact 1.402) and is
kept only so tests can show that.
"""

from __future__ import annotations

import math
from typing import Any

from llmqueue.errors import InputError, UnstableError

__all__ = ["phi0", "phi1", "bound", "phi0_public_variant", "check_stable", "below_exact"]


def below_exact(curve: Any, exact: Any, rel: float = 1e-9) -> Any:
    """Mask of the points where an Eq. (16) curve lies below the exact mean response (s) by more
    than `rel` (the exact chain's truncation). Eq. (16) with (alpha_b, tau0) from Eq. (20) is a
    bound; with a least-squares (alpha_b, tau0) it may fall below the exact value, and where it
    does it is a fit, not a bound (docs/equations.md, Eq. 16)."""
    import numpy as np

    c = np.asarray(curve, dtype=float)
    e = np.asarray(exact, dtype=float)
    return np.isfinite(c) & np.isfinite(e) & (c < e * (1.0 - rel))


def _check(lam: float, alpha_b: float, tau0: float) -> None:
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"arrival rate lambda must be > 0 requests/s, got {lam}")
    if not (alpha_b >= 0 and math.isfinite(alpha_b)):
        raise InputError(f"alpha_b must be >= 0 s/request, got {alpha_b}")
    if not (tau0 >= 0 and math.isfinite(tau0)) or alpha_b + tau0 <= 0:
        raise InputError(f"tau0 must be >= 0 s (alpha_b + tau0 > 0), got {tau0}")


def check_stable(lam: float, alpha_b: float, tau0: float) -> None:
    """Raise UnstableError unless lambda*alpha_b < 1 (Inoue's stability condition)."""
    _check(lam, alpha_b, tau0)
    if lam * alpha_b >= 1:
        raise UnstableError(
            f"Inoue bound (16): lambda*alpha_b = {lam * alpha_b:.4g} >= 1 (lambda = {lam:g}/s, "
            f"alpha_b = {alpha_b:g} s): dynamic batching is unstable; need lambda < {1 / alpha_b:.6g}"
        )


def phi0(lam: float, alpha_b: float, tau0: float) -> float:
    """phi0 of Eq. (16), s."""
    check_stable(lam, alpha_b, tau0)
    la = lam * alpha_b
    return (alpha_b + tau0) / (2 * (1 - la)) * (1 + 2 * lam * tau0 + (1 - lam * tau0) / (1 + la))


def phi1(lam: float, alpha_b: float, tau0: float) -> float:
    """phi1 of Eq. (16), s."""
    check_stable(lam, alpha_b, tau0)
    la = lam * alpha_b
    return 1.5 * tau0 / (1 - la) + 0.5 * alpha_b * (la + 2) / (1 - la * la)


def bound(lam: float, alpha_b: float, tau0: float) -> float:
    """Eq. (16): min(phi0, phi1), an upper bound on the mean response time (s)."""
    return min(phi0(lam, alpha_b, tau0), phi1(lam, alpha_b, tau0))


def phi0_public_variant(lam: float, alpha_b: float, tau0: float) -> float:
    """The circulating variant with (1 + lambda*tau0) in the last denominator: NOT a bound."""
    check_stable(lam, alpha_b, tau0)
    la = lam * alpha_b
    return (
        (alpha_b + tau0)
        / (2 * (1 - la))
        * (1 + 2 * lam * tau0 + (1 - lam * tau0) / (1 + lam * tau0))
    )
