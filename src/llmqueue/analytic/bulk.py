"""Fixed batch size K: the M/D^K/1 bulk queue of Eq. (25) (Chang 2006, ref. [9]).

The server starts only when K requests wait and then serves exactly K of them for a FIXED time
T (seconds). This is the "fixed-T approximation" of an LLM server: a real batch time varies with
its longest reply (Eq. 18); the default T is E[T_K]. With a = lambda*T < K and z_1..z_{K-1} the
roots of z^K = exp(a(z - 1)) inside the closed unit disc other than z = 1:

    W_q = (1/lambda) * sum_i 1/(1 - z_i) + T*(a - K + 1)/(2(K - a))     (mean wait, s)

K = 1 gives M/D/1: W_q = lambda T^2 / (2(1 - lambda T)).
The roots are found by the contraction z <- w_j exp(a(z - 1)/K) from each K-th root of unity
w_j != 1 (its slope is a|z|/K < 1 in the unit disc), then polished by Newton's method.
"""

from __future__ import annotations

import math

import numpy as np

from llmqueue.errors import InputError, UnstableError

__all__ = ["roots_in_disc", "mdk1_wait", "optimal_k"]


def _check(lam: float, T: float, K: int) -> None:
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"arrival rate lambda must be > 0 requests/s, got {lam}")
    if not (T > 0 and math.isfinite(T)):
        raise InputError(f"batch time T must be > 0 s, got {T}")
    if int(K) != K or K < 1:
        raise InputError(f"fixed batch size K must be an integer >= 1, got {K!r}")


def roots_in_disc(a: float, K: int, tol: float = 1e-14, max_iter: int = 100000) -> np.ndarray:
    """The K - 1 roots of z^K = exp(a(z - 1)) in the unit disc other than z = 1 (0 < a < K)."""
    if K == 1:
        return np.zeros(0, dtype=complex)
    j = np.arange(1, K)
    w = np.exp(2j * np.pi * j / K)
    z = w * np.exp(-a / K)  # start inside the disc
    c = a / K
    for _ in range(max_iter):
        z_new = w * np.exp(c * (z - 1))
        if np.max(np.abs(z_new - z)) < tol:
            z = z_new
            break
        z = z_new
    # Newton polish on g(z) = K log z - a(z - 1) - 2 pi i j (the branch of each root)
    for _ in range(5):
        g = z**K - np.exp(a * (z - 1))
        dg = K * z ** (K - 1) - a * np.exp(a * (z - 1))
        step = g / dg
        z = z - step
        if np.max(np.abs(step)) < 1e-15:
            break
    resid = np.abs(z**K - np.exp(a * (z - 1)))
    if np.any(resid > 1e-9) or np.any(np.abs(z) > 1 + 1e-12):
        raise RuntimeError(
            f"root finding for K = {K}, a = {a} did not converge (residual {resid.max():.2e})"
        )
    return z


def mdk1_wait(lam: float, T: float, K: int) -> float:
    """Eq. (25): mean wait (arrival -> batch start, s) in M/D^K/1, fixed-T approximation."""
    _check(lam, T, K)
    a = lam * T
    if a >= K:
        raise UnstableError(
            f"fixed batch K = {K}: lambda*T = {a:.4g} >= K (lambda = {lam:g}/s, T = {T:.4g} s); "
            f"need lambda < K/T = {K / T:.6g}/s"
        )
    z = roots_in_disc(a, int(K))
    s = float(np.sum(1.0 / (1.0 - z)).real) if K > 1 else 0.0
    return s / lam + T * (a - K + 1) / (2 * (K - a))


def optimal_k(
    lam: float, times: dict[int, float], response: bool = False
) -> tuple[int | None, dict[int, float]]:
    """K* minimising Eq. (25) over the given {K: T_K}; response adds T_K. Unstable K are skipped."""
    vals: dict[int, float] = {}
    for k, t in sorted(times.items()):
        try:
            w = mdk1_wait(lam, t, k)
        except UnstableError:
            continue
        vals[k] = w + (t if response else 0.0)
    if not vals:
        return None, vals
    return min(vals, key=lambda k: vals[k]), vals
