"""The interface every output-token law offers (:class:`TokenLaw`, after SciPy's distributions)
and what the laws of :mod:`llmqueue.tokens` share: the batch-size check, the one tail integrator
behind E[L_b] (Eq. 19, 23) and the order-statistic means (Eq. 26), and the checks of a law's
parameters (token counts at most ``MAX_TOKENS``, :mod:`llmqueue.limits`). Units: tokens.
"""

from __future__ import annotations

import math
import warnings
from abc import ABC, abstractmethod
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from llmqueue.errors import InputError
from llmqueue.lazy import lazy_module
from llmqueue.limits import MAX_TOKENS

# SciPy is imported on first use (module docstring of llmqueue.tokens)
integrate = lazy_module("scipy.integrate")
stats = lazy_module("scipy.stats")

FloatArray = NDArray[np.float64]

__all__ = [
    "FloatArray",
    "TokenLaw",
    "check_batch_size",
    "integrate_tail",
    "require_law",
    "bounded_tokens",
    "scalar_or_array",
    "TOKENS_TEXT",
]


def scalar_or_array(values: FloatArray, like: ArrayLike) -> Any:
    """`values` as a float when `like` (the argument a law was called with) is a scalar."""
    return float(values) if np.ndim(like) == 0 else values


class TokenLaw(ABC):
    """A law of the output-token count N >= 0 (tokens)."""

    spec: str

    # ---- distribution -------------------------------------------------------------------
    @abstractmethod
    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        """Draw `size` i.i.d. token counts (float64)."""

    @abstractmethod
    def cdf(self, x: ArrayLike) -> Any:
        """P(N <= x)."""

    def sf(self, x: ArrayLike) -> Any:
        """P(N > x)."""
        return 1.0 - np.asarray(self.cdf(x))

    def prob_below(self, x: ArrayLike) -> Any:
        """P(N < x); equals cdf(x) for continuous laws."""
        return self.cdf(x)

    @abstractmethod
    def ppf(self, q: ArrayLike) -> Any:
        """Quantile function (inverse of the cdf)."""

    @property
    @abstractmethod
    def support(self) -> tuple[float, float]:
        """(lowest, highest) possible value; highest may be inf."""

    # ---- moments ------------------------------------------------------------------------
    @abstractmethod
    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        """E[min(N, l)^k] for a limit l (tokens; may be inf, may be an array). Eq. (2)."""

    def mean(self) -> float:
        return float(self.clipped_moment(math.inf, 1))

    def var(self) -> float:
        return float(self.clipped_moment(math.inf, 2)) - self.mean() ** 2

    # ---- batch order statistics ----------------------------------------------------------
    def expected_max(self, b: int) -> float:
        """E[L_b] = E[max of b i.i.d. draws] = lo + integral_lo^hi (1 - F(x)^b) dx (tokens).

        The general form of Eq. (19) and (23) (docs/equations.md, "Any law"); laws with a closed
        form or an exact sum override it. This is the one place E[L_b] is computed.
        """
        b = check_batch_size(b)
        lo, hi = self.support
        return float(lo + integrate_tail(lambda x: 1.0 - float(self.cdf(x)) ** b, lo, hi, self))

    def order_stat_means(self, b: int) -> FloatArray:
        """E[N_(i:b)] for i = 1..b (ascending): the integral of P(N_(i:b) > x) over x >= lo.

        P(N_(i:b) > x) = P(Binomial(b, F(x)) <= i - 1). Numeric quadrature for continuous laws.
        """
        b = check_batch_size(b)
        lo, hi = self.support
        out = np.empty(b)
        for i in range(1, b + 1):
            out[i - 1] = lo + integrate_tail(
                lambda x, i=i: stats.binom.cdf(i - 1, b, self.cdf(x)), lo, hi, self
            )
        return out


def check_batch_size(b: Any) -> int:
    """The batch size b as an int; InputError unless it is an integer >= 1 (the one check)."""
    try:
        ok = int(b) == b and b >= 1
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok:
        raise InputError(f"batch size b must be an integer >= 1, got {b!r}")
    return int(b)


def integrate_tail(func: Any, lo: float, hi: float, law: TokenLaw) -> float:
    """Integral of a tail function over [lo, hi] (hi may be inf) with quantile breakpoints: the one
    tail integrator behind E[L_b] and the order-statistic means."""
    if hi <= lo:
        return 0.0
    if math.isfinite(hi):
        pts = sorted({float(law.ppf(q)) for q in (0.01, 0.1, 0.5, 0.9, 0.99)} - {lo, hi})
        pts = [x for x in pts if lo < x < hi]
        val, _ = integrate.quad(
            func, lo, hi, points=pts or None, limit=400, epsabs=1e-10, epsrel=1e-10
        )
        return float(val)
    edges = [lo] + [float(law.ppf(q)) for q in (0.5, 0.9, 0.99, 0.9999, 1 - 1e-8)]
    total = 0.0
    for a, c in zip(edges[:-1], edges[1:], strict=True):
        if c > a:
            total += integrate.quad(func, a, c, limit=400, epsabs=1e-10, epsrel=1e-10)[0]
    # beyond the 1 - 1e-8 quantile: a heavy tail (Weibull, Pareto) makes QUADPACK warn of roundoff
    # on values below its absolute tolerance; the piece's mass is below 1e-8 of the law's
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        total += integrate.quad(func, edges[-1], math.inf, limit=400, epsabs=1e-12, epsrel=1e-10)[0]
    return float(total)


def require_law(cond: bool, spec: str, msg: str) -> None:
    """InputError naming the law `spec` and `msg` unless `cond`."""
    if not cond:
        raise InputError(f"token law {spec!r}: {msg}")


# A law's token counts stay at most MAX_TOKENS (llmqueue.limits): its parameters, its mean and its
# standard deviation; a law whose moments would overflow (e.g. lognormal:mu=700) is refused here.
TOKENS_TEXT = f"{MAX_TOKENS:g} tokens"


def bounded_tokens(x: float, spec: str, what: str, lo: float = 0.0) -> None:
    """InputError unless `x` (law `spec`'s `what`, tokens) is finite and in [lo, MAX_TOKENS]."""
    require_law(
        math.isfinite(x) and lo <= x <= MAX_TOKENS,
        spec,
        f"{what} must lie in [{lo:g}, {TOKENS_TEXT}]",
    )
