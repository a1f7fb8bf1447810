"""Output-token laws: the random number N of tokens a request asks for.

Every law offers the same small interface (after SciPy's distributions), so analytic code never
branches on the law's type:

- ``sample(rng, size)``: i.i.d. draws (tokens, float64);
- ``cdf(x)``, ``sf(x)``, ``ppf(q)``, ``prob_below(x)`` (= P(N < x));
- ``clipped_moment(limit, k)``: E[min(N, l)^k], exact (closed form or exact sum), Eq. (2)-(5);
- ``expected_max(b)``: E[max of b i.i.d. draws] = E[L_b], Eq. (19), (23);
- ``order_stat_means(b)``: E[N_(1:b)], ..., E[N_(b:b)] (elastic batching, Eq. 26).

Convention (docs/equations.md, Eq. 18): N counts the tokens after the first one; no "- 1" appears in
any formula. Continuous laws treat token counts as real numbers, as the paper does.

One spec string parses to a law (:func:`parse_law`)::

    lognormal:mu=7,sigma=0.7            LogNormal(mu, sigma) of ln N
    uniform:low=0,high=2000             U(low, high)
    truncnorm:mean=800,sd=20,high=1600  N(mean, sd^2) truncated to [low, high] (low=0, high=2*mean)
    exponential:mean=500                Exp with the given mean
    deterministic:value=500             N = value
    weibull:shape=0.7,scale=300         P(N > x) = exp(-(x/scale)^shape)
    pareto:alpha=2.5,xm=100             P(N > x) = (xm/x)^alpha for x >= xm (Pareto type I)
    quantiles:PATH                      a table of quantiles (CSV: probability,tokens), linear
                                        between its rows (:class:`QuantileTableLaw`)
    trace:PATH:COLUMN                   empirical law of a CSV column (e.g. the Azure trace)

Any spec takes ``cap=L`` (``lognormal:mu=7,sigma=0.7,cap=4096``, ``trace:PATH:COLUMN:cap=L``):
the law of min(N, L), e.g. a model's context limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from llmqueue.errors import InputError
from llmqueue.lazy import lazy_module
from llmqueue.limits import MAX_TOKENS
from llmqueue.table_laws import EmpiricalLaw, QuantileTableLaw
from llmqueue.tokenlaw import (
    TOKENS_TEXT,
    FloatArray,
    TokenLaw,
    bounded_tokens,
    check_batch_size,
    integrate_tail,
    require_law,
    scalar_or_array,
)
from llmqueue.traces import TRACE_FORM, parse_trace_spec, read_column

# SciPy is imported on first use, so that parsing law specs and profiles (the Snakefile's
# config check, on every run) does not pay its import time.
integrate = lazy_module("scipy.integrate")
special = lazy_module("scipy.special")
stats = lazy_module("scipy.stats")


__all__ = [
    "TokenLaw",
    "LogNormalLaw",
    "UniformLaw",
    "TruncNormLaw",
    "ExponentialLaw",
    "DeterministicLaw",
    "EmpiricalLaw",
    "ClippedLaw",
    "WeibullLaw",
    "ParetoLaw",
    "QuantileTableLaw",
    "parse_law",
    "LAW_FORMS",
    "check_batch_size",
]


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LogNormalLaw(TokenLaw):
    """ln N ~ Normal(mu, sigma^2). Closed-form clipped moments (docs/equations.md, Eq. 3-5):

    E[min(N,l)^k] = e^{k mu + k^2 sigma^2/2} Phi((ln l - mu - k sigma^2)/sigma)
                    + l^k (1 - Phi((ln l - mu)/sigma)).
    """

    mu: float
    sigma: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"lognormal:mu={self.mu:g},sigma={self.sigma:g}")
        require_law(math.isfinite(self.mu), self.spec, "mu must be a finite number")
        require_law(self.sigma > 0 and math.isfinite(self.sigma), self.spec, "sigma must be > 0")
        # log E[N] = mu + sigma^2/2 and log E[N^2] = 2 mu + 2 sigma^2, in log space (no overflow)
        log_max = math.log(MAX_TOKENS)
        require_law(
            self.mu + self.sigma**2 / 2 <= log_max and self.mu + self.sigma**2 <= log_max,
            self.spec,
            f"its mean exp(mu + sigma^2/2) and root mean square exp(mu + sigma^2) must be at most "
            f"{TOKENS_TEXT} (mu + sigma^2 <= {log_max:.4g})",
        )

    @property
    def support(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return rng.lognormal(self.mu, self.sigma, size)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            z = (np.log(np.maximum(xa, 0.0)) - self.mu) / self.sigma
        return scalar_or_array(special.ndtr(z), x)

    def ppf(self, q: ArrayLike) -> Any:
        qa = np.asarray(q, dtype=float)
        return scalar_or_array(np.exp(self.mu + self.sigma * special.ndtri(qa)), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.asarray(limit, dtype=float)
        mu, s = self.mu, self.sigma
        raw = math.exp(k * mu + 0.5 * k * k * s * s)
        with np.errstate(divide="ignore", invalid="ignore"):
            lnl = np.log(la)
            body = raw * special.ndtr((lnl - mu - k * s * s) / s)
            tail = np.where(np.isinf(la), 0.0, la**k * special.ndtr(-(lnl - mu) / s))
        out = np.where(la <= 0, 0.0, body + tail)
        return scalar_or_array(out, limit)

    def order_stat_means(self, b: int) -> FloatArray:
        # Substitute x = exp(mu + sigma z): the integrand decays like a Gaussian in z, so a finite
        # z range of +-40 loses nothing representable. P(N_(i:b) > x) = P(Bin(b, sf) >= b - i + 1)
        # is evaluated through the survival function to keep precision in the upper tail.
        b = check_batch_size(b)
        out = np.empty(b)
        for i in range(1, b + 1):

            def f(z: float, i: int = i) -> float:
                tail = float(stats.binom.sf(b - i, b, special.ndtr(-z)))
                return tail * self.sigma * math.exp(self.mu + self.sigma * z)

            out[i - 1] = _quad_z(f)
        return out

    def expected_max(self, b: int) -> float:
        """E[L_b] by one quadrature over the normal score z (tokens)."""
        b = check_batch_size(b)

        def f(z: float) -> float:
            return (
                -math.expm1(b * float(special.log_ndtr(z)))
                * self.sigma
                * math.exp(self.mu + self.sigma * z)
            )

        return _quad_z(f)


def _quad_z(f: Any) -> float:
    """Integral over z in [-40, 40] (standard-normal scale) split at a few points."""
    pts = [-40.0, -4.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.5, 6.0, 9.0, 40.0]
    return float(
        sum(
            integrate.quad(f, a, c, limit=200, epsabs=1e-11, epsrel=1e-11)[0]
            for a, c in zip(pts[:-1], pts[1:], strict=True)
        )
    )


@dataclass(frozen=True)
class UniformLaw(TokenLaw):
    """N ~ U(low, high). E[L_b] = low + (high - low) b/(b + 1) (Eq. 19 with low = 0)."""

    low: float
    high: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"uniform:low={self.low:g},high={self.high:g}")
        require_law(self.low >= 0, self.spec, "low must be >= 0 tokens")
        require_law(
            self.high > self.low and math.isfinite(self.high), self.spec, "need low < high < inf"
        )
        bounded_tokens(self.high, self.spec, "high")

    @property
    def support(self) -> tuple[float, float]:
        return (self.low, self.high)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return rng.uniform(self.low, self.high, size)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        return scalar_or_array(np.clip((xa - self.low) / (self.high - self.low), 0.0, 1.0), x)

    def ppf(self, q: ArrayLike) -> Any:
        qa = np.asarray(q, dtype=float)
        return scalar_or_array(self.low + qa * (self.high - self.low), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.minimum(np.asarray(limit, dtype=float), self.high)
        lo, w = self.low, self.high - self.low
        inside = (la ** (k + 1) - lo ** (k + 1)) / ((k + 1) * w) + la**k * (self.high - la) / w
        out = np.where(la <= lo, np.maximum(la, 0.0) ** k, inside)
        return scalar_or_array(out, limit)

    def expected_max(self, b: int) -> float:
        """Eq. (19): E[L_b] = low + (high - low) b/(b + 1) (tokens)."""
        b = check_batch_size(b)
        return self.low + (self.high - self.low) * b / (b + 1)

    def order_stat_means(self, b: int) -> FloatArray:
        b = check_batch_size(b)
        return self.low + (self.high - self.low) * np.arange(1, b + 1) / (b + 1)


@dataclass(frozen=True)
class TruncNormLaw(TokenLaw):
    """N ~ Normal(mean, sd^2) truncated to [low, high] (Eq. 21-23); default high = 2*mean."""

    mean_param: float
    sd: float
    low: float = 0.0
    high: float = math.nan
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if math.isnan(self.high):
            object.__setattr__(self, "high", 2.0 * self.mean_param)
        if not self.spec:
            object.__setattr__(
                self,
                "spec",
                f"truncnorm:mean={self.mean_param:g},sd={self.sd:g},low={self.low:g},high={self.high:g}",
            )
        require_law(self.sd > 0, self.spec, "sd must be > 0 tokens")
        require_law(self.low >= 0, self.spec, "low must be >= 0 tokens")
        require_law(
            self.high > self.low and math.isfinite(self.high), self.spec, "need low < high < inf"
        )
        bounded_tokens(abs(self.mean_param), self.spec, "|mean|")
        bounded_tokens(self.sd, self.spec, "sd")
        bounded_tokens(self.high, self.spec, "high")

    @cached_property
    def _ab(self) -> tuple[float, float, float]:
        a = (self.low - self.mean_param) / self.sd
        b = (self.high - self.mean_param) / self.sd
        z = float(special.ndtr(b) - special.ndtr(a))
        if z <= 0:
            raise InputError(f"token law {self.spec!r}: [low, high] holds no probability mass")
        return a, b, z

    @property
    def support(self) -> tuple[float, float]:
        return (self.low, self.high)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        a, b, z = self._ab
        u = rng.random(size)
        return np.clip(
            self.mean_param + self.sd * special.ndtri(special.ndtr(a) + u * z), self.low, self.high
        )

    def cdf(self, x: ArrayLike) -> Any:
        a, _, z = self._ab
        xa = np.clip(np.asarray(x, dtype=float), self.low, self.high)
        return scalar_or_array(
            (special.ndtr((xa - self.mean_param) / self.sd) - special.ndtr(a)) / z, x
        )

    def ppf(self, q: ArrayLike) -> Any:
        a, _, z = self._ab
        qa = np.asarray(q, dtype=float)
        v = np.clip(
            self.mean_param + self.sd * special.ndtri(special.ndtr(a) + qa * z), self.low, self.high
        )
        return scalar_or_array(v, q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        if k not in (1, 2):
            la = np.atleast_1d(np.asarray(limit, dtype=float))
            vals = np.array(
                [
                    self.low**k
                    + integrate.quad(
                        lambda x: k * x ** (k - 1) * self.sf(x), self.low, min(lv, self.high)
                    )[0]
                    for lv in la
                ]
            )
            return scalar_or_array(vals.reshape(np.shape(limit)), limit)
        a, _, z = self._ab
        m, s = self.mean_param, self.sd
        la = np.clip(np.asarray(limit, dtype=float), self.low, self.high)
        beta = (la - m) / s
        dphi = special.ndtr(beta) - special.ndtr(a)
        pdf_a, pdf_b = stats.norm.pdf(a), stats.norm.pdf(beta)
        if k == 1:
            partial = m * dphi - s * (pdf_b - pdf_a)
        else:
            partial = (
                m * m * dphi
                - 2 * m * s * (pdf_b - pdf_a)
                + s * s * (dphi - (beta * pdf_b - a * pdf_a))
            )
        out = partial / z + la**k * (1.0 - dphi / z)
        return scalar_or_array(out, limit)

    def expected_max(self, b: int) -> float:
        """Eq. (23): E[L_b] = high - integral_low^high F(x)^b dx (tokens), F the truncated cdf."""
        b = check_batch_size(b)
        lo, hi = self.low, self.high
        return float(hi - integrate_tail(lambda x: float(self.cdf(x)) ** b, lo, hi, self))


@dataclass(frozen=True)
class ExponentialLaw(TokenLaw):
    """N ~ Exp(mean). Used for the M/M/1 limits in tests and for the De Kok-Tijms reading."""

    mean_tokens: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"exponential:mean={self.mean_tokens:g}")
        require_law(
            self.mean_tokens > 0 and math.isfinite(self.mean_tokens), self.spec, "mean must be > 0"
        )
        bounded_tokens(self.mean_tokens, self.spec, "mean")

    @property
    def support(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return rng.exponential(self.mean_tokens, size)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.maximum(np.asarray(x, dtype=float), 0.0)
        return scalar_or_array(-np.expm1(-xa / self.mean_tokens), x)

    def ppf(self, q: ArrayLike) -> Any:
        return scalar_or_array(-self.mean_tokens * np.log1p(-np.asarray(q, dtype=float)), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        m = self.mean_tokens
        la = np.maximum(np.asarray(limit, dtype=float), 0.0)
        r = la / m
        with np.errstate(invalid="ignore"):
            e = np.where(np.isinf(r), 0.0, np.exp(-r))
            # E[min(N,l)^k] = k! m^k P(Gamma(k+1) <= l/m) + l^k e^{-l/m}
            body = math.factorial(k) * m**k * special.gammainc(k + 1, r)
            tail = np.where(np.isinf(la), 0.0, la**k * e)
        return scalar_or_array(body + tail, limit)

    def expected_max(self, b: int) -> float:
        """E[L_b] = mean * H_b (harmonic number), tokens."""
        b = check_batch_size(b)
        return self.mean_tokens * float(np.sum(1.0 / np.arange(1, b + 1)))


@dataclass(frozen=True)
class DeterministicLaw(TokenLaw):
    """N = value with probability 1 (the M/D/1 limit)."""

    value: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"deterministic:value={self.value:g}")
        require_law(self.value >= 0 and math.isfinite(self.value), self.spec, "value must be >= 0")
        bounded_tokens(self.value, self.spec, "value")

    @property
    def support(self) -> tuple[float, float]:
        return (self.value, self.value)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.full(size, float(self.value))

    def cdf(self, x: ArrayLike) -> Any:
        return scalar_or_array((np.asarray(x, dtype=float) >= self.value).astype(float), x)

    def prob_below(self, x: ArrayLike) -> Any:
        return scalar_or_array((np.asarray(x, dtype=float) > self.value).astype(float), x)

    def ppf(self, q: ArrayLike) -> Any:
        return scalar_or_array(np.full(np.shape(q), float(self.value)), q)

    def expected_max(self, b: int) -> float:
        check_batch_size(b)
        return float(self.value)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.asarray(limit, dtype=float)
        return scalar_or_array(np.minimum(la, self.value) ** k, limit)

    def order_stat_means(self, b: int) -> FloatArray:
        b = check_batch_size(b)
        return np.full(b, float(self.value))


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WeibullLaw(TokenLaw):
    """P(N > x) = exp(-(x / scale)^shape), x >= 0 (shape < 1: heavier tail than exponential; 1:
    exponential). Given by its quantile function scale (-ln(1 - q))^(1/shape). Exact clipped
    moments: E[min(N, l)^k] = scale^k gamma(1 + k/shape, z) + l^k e^-z with z = (l / scale)^shape
    and gamma the lower incomplete gamma function."""

    shape: float
    scale: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"weibull:shape={self.shape:g},scale={self.scale:g}")
        require_law(
            math.isfinite(self.shape) and 0.05 <= self.shape <= 100,
            self.spec,
            "shape must lie in [0.05, 100]",
        )
        require_law(self.scale > 0, self.spec, "scale must be > 0 tokens")
        bounded_tokens(self.scale, self.spec, "scale")
        rms = self.scale * math.exp(0.5 * math.lgamma(1.0 + 2.0 / self.shape))
        require_law(
            rms <= MAX_TOKENS,
            self.spec,
            f"its root mean square scale Gamma(1 + 2/shape)^(1/2) must be at most {TOKENS_TEXT}",
        )

    @property
    def support(self) -> tuple[float, float]:
        return (0.0, math.inf)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return self.scale * rng.weibull(self.shape, size)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.maximum(np.asarray(x, dtype=float), 0.0)
        return scalar_or_array(-np.expm1(-((xa / self.scale) ** self.shape)), x)

    def ppf(self, q: ArrayLike) -> Any:
        qa = np.asarray(q, dtype=float)
        return scalar_or_array(self.scale * (-np.log1p(-qa)) ** (1.0 / self.shape), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.maximum(np.asarray(limit, dtype=float), 0.0)
        a = 1.0 + k / self.shape
        z = (la / self.scale) ** self.shape
        with np.errstate(invalid="ignore", over="ignore"):
            body = self.scale**k * math.gamma(a) * special.gammainc(a, z)
            tail = np.where(np.isinf(la), 0.0, la**k * np.exp(-z))
        return scalar_or_array(body + tail, limit)


@dataclass(frozen=True)
class ParetoLaw(TokenLaw):
    """Pareto type I: P(N > x) = (xm / x)^alpha for x >= xm > 0. Given by its quantile function
    xm (1 - q)^(-1/alpha). Exact clipped moments: for l > xm, E[min(N, l)^k] = alpha xm^alpha
    (l^(k - alpha) - xm^(k - alpha)) / (k - alpha) + l^k (xm / l)^alpha (alpha xm^k ln(l / xm) +
    xm^k for k = alpha), and (l = inf) alpha xm^k / (alpha - k) when alpha > k, inf otherwise.
    Without a cap it needs alpha > 2 (a finite variance: :func:`parse_law`)."""

    alpha: float
    xm: float
    spec: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"pareto:alpha={self.alpha:g},xm={self.xm:g}")
        require_law(
            math.isfinite(self.alpha) and 0.05 <= self.alpha <= 100,
            self.spec,
            "alpha must lie in [0.05, 100]",
        )
        require_law(self.xm > 0, self.spec, "xm must be > 0 tokens")
        bounded_tokens(self.xm, self.spec, "xm")

    @property
    def support(self) -> tuple[float, float]:
        return (self.xm, math.inf)

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return self.xm * (1.0 + rng.pareto(self.alpha, size))

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        with np.errstate(divide="ignore"):
            out = np.where(xa < self.xm, 0.0, -np.expm1(self.alpha * np.log(self.xm / xa)))
        return scalar_or_array(out, x)

    def ppf(self, q: ArrayLike) -> Any:
        qa = np.asarray(q, dtype=float)
        with np.errstate(divide="ignore"):
            return scalar_or_array(self.xm * (1.0 - qa) ** (-1.0 / self.alpha), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.asarray(limit, dtype=float)
        al, xm = self.alpha, self.xm
        out = np.empty(la.shape)
        flat, res = la.reshape(-1), out.reshape(-1)
        for i, lim in enumerate(flat):
            if lim <= xm:
                res[i] = max(lim, 0.0) ** k
            elif math.isinf(lim):
                res[i] = al * xm**k / (al - k) if al > k else math.inf
            elif al == k:
                res[i] = al * xm**k * math.log(lim / xm) + xm**k
            else:
                body = al * xm**al * (lim ** (k - al) - xm ** (k - al)) / (k - al)
                res[i] = body + lim**k * (xm / lim) ** al
        return scalar_or_array(out, limit)


@dataclass(frozen=True, eq=False)
class ClippedLaw(TokenLaw):
    """The law of min(N, cap): a max-token limit or a model's context limit (Eq. 2)."""

    base: TokenLaw
    cap: float
    spec: str = ""

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"{self.base.spec},cap={self.cap:g}")
        require_law(
            self.cap > 0 and math.isfinite(self.cap), self.spec, "cap must be a number > 0 tokens"
        )
        bounded_tokens(self.cap, self.spec, "cap")

    @property
    def support(self) -> tuple[float, float]:
        lo, hi = self.base.support
        return (min(lo, self.cap), min(hi, self.cap))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.minimum(self.base.sample(rng, size), self.cap)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        return scalar_or_array(np.where(xa >= self.cap, 1.0, self.base.cdf(xa)), x)

    def prob_below(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        return scalar_or_array(np.where(xa > self.cap, 1.0, self.base.prob_below(xa)), x)

    def ppf(self, q: ArrayLike) -> Any:
        return scalar_or_array(np.minimum(np.asarray(self.base.ppf(q)), self.cap), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        return self.base.clipped_moment(np.minimum(np.asarray(limit, dtype=float), self.cap), k)

    def truncation_mass(self) -> float:
        """P(N > cap) under the base law: the probability mass the cap removes."""
        return float(self.base.sf(self.cap))


# ---------------------------------------------------------------------------------------------
LAW_FORMS = {
    "lognormal": "lognormal:mu=M,sigma=S (sigma > 0)",
    "uniform": "uniform:low=A,high=B (0 <= A < B)",
    "truncnorm": "truncnorm:mean=M,sd=S[,low=0][,high=2*M] (sd > 0, 0 <= low < high)",
    "exponential": "exponential:mean=M (M > 0)",
    "deterministic": "deterministic:value=V (V >= 0)",
    "weibull": "weibull:shape=K,scale=S (K in [0.05, 100], S > 0)",
    "pareto": "pareto:alpha=A,xm=X (A in [0.05, 100], X > 0; A > 2 without cap=L)",
    "quantiles": "quantiles:PATH (a CSV of probability,tokens rows from probability 0 to 1)",
    "trace": TRACE_FORM,
}
_PARAMS = {
    "lognormal": ({"mu", "sigma"}, set()),
    "uniform": ({"low", "high"}, set()),
    "truncnorm": ({"mean", "sd"}, {"low", "high"}),
    "exponential": ({"mean"}, set()),
    "deterministic": ({"value"}, set()),
    "weibull": ({"shape", "scale"}, set()),
    "pareto": ({"alpha", "xm"}, set()),
}


def _forms() -> str:
    return "; ".join(LAW_FORMS.values()) + "; any of them may add cap=L"


def _parse_number(spec: str, key: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"token law {spec!r}: {key}={text!r} is not a number") from None
    if not math.isfinite(value):
        raise InputError(f"token law {spec!r}: {key} must be finite")
    return value


def parse_law(spec: str, base_dir: str | Path | None = None) -> TokenLaw:
    """Parse a law spec (see the module docstring). Relative trace paths resolve from base_dir."""
    if not isinstance(spec, str) or ":" not in spec:
        raise InputError(f"token law {spec!r} is malformed; allowed forms: {_forms()}")
    kind, _, rest = spec.strip().partition(":")
    kind = kind.strip().lower()
    if kind == "quantiles":
        qpath = Path(rest.strip())
        require_law(bool(rest.strip()), spec, f"expected {LAW_FORMS['quantiles']}")
        if base_dir is not None and not qpath.is_absolute():
            qpath = Path(base_dir) / qpath
        return QuantileTableLaw.from_csv(qpath, spec)
    if kind == "trace":
        ts = parse_trace_spec(spec)
        cap = None if ts.cap_text is None else _parse_number(spec, "cap", ts.cap_text)
        path = Path(ts.path)
        if base_dir is not None and not path.is_absolute():
            path = Path(base_dir) / path
        values = read_column(path, ts.column, where=f"token law {spec!r}")
        law: TokenLaw = EmpiricalLaw.from_samples(values, spec=spec)
        return ClippedLaw(law, cap, spec=spec) if cap is not None else law
    if kind not in _PARAMS:
        raise InputError(f"token law {spec!r}: unknown law {kind!r}; allowed forms: {_forms()}")
    params: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, val = item.partition("=")
        if not eq:
            raise InputError(
                f"token law {spec!r}: {item!r} is not key=value; expected {LAW_FORMS[kind]}"
            )
        key = key.strip()
        if key in params:
            raise InputError(f"token law {spec!r}: {key} given twice")
        params[key] = _parse_number(spec, key, val.strip())
    cap = params.pop("cap", None)
    required, optional = _PARAMS[kind]
    missing = required - params.keys()
    unknown = params.keys() - required - optional
    if missing or unknown:
        what = f"missing {sorted(missing)}" if missing else f"unknown {sorted(unknown)}"
        raise InputError(f"token law {spec!r}: {what}; expected {LAW_FORMS[kind]} [,cap=L]")
    if kind == "lognormal":
        law = LogNormalLaw(params["mu"], params["sigma"], spec=spec)
    elif kind == "uniform":
        law = UniformLaw(params["low"], params["high"], spec=spec)
    elif kind == "truncnorm":
        law = TruncNormLaw(
            params["mean"],
            params["sd"],
            params.get("low", 0.0),
            params.get("high", math.nan),
            spec=spec,
        )
    elif kind == "exponential":
        law = ExponentialLaw(params["mean"], spec=spec)
    elif kind == "weibull":
        law = WeibullLaw(params["shape"], params["scale"], spec=spec)
    elif kind == "pareto":
        law = ParetoLaw(params["alpha"], params["xm"], spec=spec)
        if cap is None:
            require_law(
                law.alpha > 2,
                spec,
                "without cap=L alpha must be > 2 (a finite variance); give a cap for a heavier tail",
            )
            bounded_tokens(
                math.sqrt(float(law.clipped_moment(math.inf, 2))), spec, "its root mean square"
            )
    else:
        law = DeterministicLaw(params["value"], spec=spec)
    return ClippedLaw(law, cap, spec=spec) if cap is not None else law
