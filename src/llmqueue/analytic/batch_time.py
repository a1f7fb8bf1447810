"""Batch times of an LLM server (Sec. IV-B to IV-D, Eq. 17-24 and 26).

Batch time (Eq. 18): T_b = t1(b) + t2(b)*L_b with t1(b) = k1*b + k2 (s), t2(b) = k3*b + k4
(s/token) and L_b the largest output-token count N in the batch (padding to the longest reply).
N counts the tokens after the first one (docs/equations.md); no "- 1" appears anywhere.

- E[L_b] is the token law's own ``expected_max(b)`` (:mod:`llmqueue.tokens`: Eq. 19 for U(low,
  high), Eq. 23 for the truncated Gaussian, one quadrature for the log-normal, exact sums for
  traces);
- :func:`mean_batch_time` E[T_b] (Eq. 18, 20); :func:`throughput` mu_b = b/E[T_b] (Eq. 24);
- :func:`uniform_linear_bound` (alpha_b, tau0) of Eq. (20); :func:`fit_alpha_tau` the
  least-squares line of E[T_b] over a b range (the alternative input to Inoue's bound);
- :func:`elastic_mean_batch_time` E[T_b] under elastic batching (Eq. 26);
- :func:`discretize` a token law as atoms (x_k, p_k) for the exact Markov chains;
- :func:`batch_stats` the moments of the batch duration D and of the members' reply times for
  padded (dynamic / fixed) and elastic batches, exact for a discretized law.

Elastic identities used (derived from Eq. 26 with t2(m) = k3*m + k4): the reply of the member
with n_i tokens comes after c_i = t1(b) + k4*n_i + k3*sum_j min(n_i, n_j) seconds, hence the
batch lasts D = t1(b) + k4*max_i n_i + k3*sum_i n_i.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from llmqueue.errors import InputError
from llmqueue.grids import arithmetic_grid
from llmqueue.latency import BatchLatency
from llmqueue.latency_fits import fit_linear_latency
from llmqueue.lazy import lazy_module
from llmqueue.tokens import (
    ClippedLaw,
    DeterministicLaw,
    EmpiricalLaw,
    ExponentialLaw,
    LogNormalLaw,
    TokenLaw,
    check_batch_size,
)

# SciPy is imported on first use, so that parsing law specs and profiles (the Snakefile's
# config check, on every run) does not pay its import time.
special = lazy_module("scipy.special")

FloatArray = NDArray[np.float64]

__all__ = [
    "mean_batch_time",
    "throughput",
    "best_throughput",
    "uniform_linear_bound",
    "fit_alpha_tau",
    "elastic_mean_batch_time",
    "DiscreteLaw",
    "discretize",
    "BatchStats",
    "batch_stats",
    "rate_grid",
    "decode_context",
]


def mean_batch_time(profile: BatchLatency, law: TokenLaw, b: int) -> float:
    """E[T_b] = t1(b) + t2(b)*E[L_b] (s), Eq. (18) and (20)."""
    return float(profile.t1(b) + profile.t2(b) * law.expected_max(b))


def throughput(profile: BatchLatency, law: TokenLaw, b: int) -> float:
    """mu_b = b / E[T_b] (requests/s), Eq. (24)."""
    return b / mean_batch_time(profile, law, b)


def best_throughput(profile: BatchLatency, law: TokenLaw, b_max: int) -> tuple[int, float]:
    """(argmax_b mu_b, max_b mu_b) over b = 1..b_max (requests/s)."""
    mus = [throughput(profile, law, b) for b in range(1, int(b_max) + 1)]
    i = int(np.argmax(mus))
    return i + 1, float(mus[i])


def uniform_linear_bound(profile: BatchLatency, m2: float) -> tuple[float, float]:
    """(alpha_b, tau0) of Eq. (20) for N ~ U(0, m2): E[T_b] <= alpha_b*b + tau0 with
    alpha_b = k1 + k3*m2 (s/request) and tau0 = k2 + k4*m2 (s)."""
    if not (m2 > 0 and math.isfinite(m2)):
        raise InputError(f"m2 (upper end of U(0, m2), tokens) must be > 0, got {m2}")
    return profile.k1 + profile.k3 * m2, profile.k2 + profile.k4 * m2


def fit_alpha_tau(
    profile: BatchLatency, law: TokenLaw, b_lo: int, b_hi: int, elastic: bool = False
) -> tuple[float, float]:
    """Least-squares line E[T_b] ~ alpha_b*b + tau0 over b = b_lo..b_hi (s/request, s)."""
    if not (1 <= b_lo < b_hi):
        raise InputError(f"fit range needs 1 <= b_lo < b_hi, got {b_lo}..{b_hi}")
    bs = np.arange(int(b_lo), int(b_hi) + 1)
    f = elastic_mean_batch_time if elastic else mean_batch_time
    ts = np.array([f(profile, law, int(b)) for b in bs])
    fit = fit_linear_latency(bs, ts)
    return max(fit.slope, 0.0), max(fit.intercept, 0.0)


def elastic_mean_batch_time(profile: BatchLatency, law: TokenLaw, b: int) -> float:
    """E[T_b] under elastic batching, Eq. (26) in expectation (s).

    Eq. (26): T_b = t1(b) + sum_i t2(b - i + 1)*(n_(i) - n_(i-1)). With t2 linear this sums to
    t1(b) + k4*L_b + k3*(sum of all b lengths), so E[T_b] = t1(b) + k4*E[L_b] + k3*b*E[N].
    """
    return float(profile.t1(b) + profile.k4 * law.expected_max(b) + profile.k3 * b * law.mean())


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiscreteLaw:
    """Atoms x (ascending, tokens) with probabilities p (summing to 1): a token law discretized
    for the exact chains. Exact for empirical and deterministic laws; for continuous laws the
    atoms are the quantiles at cell centres of a normal-score grid (error O(h^2))."""

    x: FloatArray
    p: FloatArray
    exact: bool

    @property
    def cum(self) -> FloatArray:
        return np.minimum(np.cumsum(self.p), 1.0)


def discretize(law: TokenLaw, h: float = 0.04, zmax: float = 8.0) -> DiscreteLaw:
    """Discretize a token law (see :class:`DiscreteLaw`). h is the normal-score cell width."""
    if isinstance(law, DeterministicLaw):
        return DiscreteLaw(np.array([float(law.value)]), np.array([1.0]), True)
    if isinstance(law, EmpiricalLaw):
        return DiscreteLaw(law.values.astype(float), law.probs / law.probs.sum(), True)
    if isinstance(law, ClippedLaw):
        base = discretize(law.base, h, zmax)
        x = np.minimum(base.x, law.cap)
        return DiscreteLaw(x, base.p, base.exact)
    edges = np.arange(-zmax, zmax + h / 2, h)
    cdf_e = special.ndtr(edges)
    cdf_e[0], cdf_e[-1] = 0.0, 1.0
    p = np.diff(cdf_e)
    mid = 0.5 * (edges[:-1] + edges[1:])
    if isinstance(law, LogNormalLaw):
        x = np.exp(law.mu + law.sigma * mid)
    elif isinstance(law, ExponentialLaw):
        x = -law.mean_tokens * special.log_ndtr(-mid)
    else:
        x = np.asarray(law.ppf(special.ndtr(mid)), dtype=float)
    if not np.all(np.isfinite(x)):
        raise InputError(f"token law {law.spec!r}: quantiles are not finite; cannot discretize")
    return DiscreteLaw(x, p / p.sum(), False)


@dataclass(frozen=True)
class BatchStats:
    """Moments for one batch size b (s, s^2): E[D], E[D^2] of the batch duration and
    E[sum over members of (reply time - batch start)]."""

    b: int
    mean_d: float
    mean_d2: float
    response_sum: float


def batch_stats(profile: BatchLatency, dlaw: DiscreteLaw, b: int, elastic: bool) -> BatchStats:
    """Exact moments of a padded (Eq. 18) or elastic (Eq. 26) batch of b for a discrete law."""
    b = check_batch_size(b)
    x, p = dlaw.x, dlaw.p
    F = dlaw.cum
    Fprev = np.concatenate([[0.0], F[:-1]])
    pm = F**b - Fprev**b  # P(max = x_k)
    em, em2 = float(pm @ x), float(pm @ x**2)
    t1, t2 = float(profile.t1(b)), float(profile.t2(b))
    if not elastic:
        ed = t1 + t2 * em
        ed2 = t1 * t1 + 2 * t1 * t2 * em + t2 * t2 * em2
        return BatchStats(b, ed, ed2, b * ed)
    k3, k4 = profile.k3, profile.k4
    en, en2 = float(p @ x), float(p @ x**2)
    es = b * en
    es2 = b * en2 + b * (b - 1) * en * en
    G = np.cumsum(p * x)
    Gprev = np.concatenate([[0.0], G[:-1]])
    if b > 1:
        ems = float(x @ (b * (G * F ** (b - 1) - Gprev * Fprev ** (b - 1))))
    else:
        ems = em2
    ed = t1 + k4 * em + k3 * es
    ed2 = t1 * t1 + 2 * t1 * (k4 * em + k3 * es) + k4 * k4 * em2 + 2 * k4 * k3 * ems + k3 * k3 * es2
    # E[min(N1, N2)] = sum_k x_k * P(min = x_k), P(min >= x_k) = (1 - Fprev_k)^2
    sf_prev = 1.0 - Fprev
    sf = 1.0 - F
    emin = float(x @ (sf_prev**2 - sf**2))
    resp = b * t1 + k4 * es + k3 * (es + b * (b - 1) * emin)
    return BatchStats(b, ed, ed2, resp)


def rate_grid(
    profile: BatchLatency, law: TokenLaw, b_range: int, start: float, stop: float, step: float
) -> tuple[FloatArray, float, int]:
    """lambda grid = fractions (start..stop by step) of the best mu_b over b = 1..b_range, so no
    point is drawn in an unstable region by accident. Returns (rates, best mu_b, its b)."""
    if not (0 < start <= stop < 1.0 + 1e-12) or step <= 0:
        raise InputError(
            f"rate fractions need 0 < start <= stop <= 1 and step > 0, got {start}, {stop}, {step}"
        )
    b_best, mu = best_throughput(profile, law, b_range)
    fr = arithmetic_grid(start, stop, step, what="rate fractions")
    return fr * mu, mu, b_best


def decode_context(prompt_tokens: np.ndarray, output_tokens: np.ndarray, batch: int) -> float:
    """Mean KV context (tokens) a decode step reads per sequence, for `batch` requests of rows
    drawn from (prompt, output): the prompt plus the tokens decoded so far, averaged over the
    decode steps. Without padding (batch 1, or replies that leave when done) a reply of n tokens
    spends n steps at contexts P + 0..n-1: E[P] + E[N^2] / (2 E[N]). A padded batch decodes to its
    longest reply L_b: E[P] + E[L_b^2] / (2 E[L_b]), with P(L_b <= x) = F(x)^b of the rows' law.
    (Full batches of `batch`: at low load a dynamic batch is smaller and decodes less.)"""
    n = np.asarray(output_tokens, dtype=float)
    vals, counts = np.unique(n, return_counts=True)
    cdf = np.cumsum(counts) / n.size
    pmf = cdf ** int(batch) - np.concatenate([[0.0], cdf[:-1]]) ** int(batch)
    m1, m2 = float(pmf @ vals), float(pmf @ (vals * vals))
    return float(np.mean(prompt_tokens)) + m2 / (2.0 * m1)
