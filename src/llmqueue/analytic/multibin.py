"""Multi-Bin Batching in closed form (Guldogan et al., arXiv 2412.04504, Sec. 3-5).

The model (their Sec. 3): Poisson(lambda) arrivals; a request goes to one of k bins by its
(predicted) output length; each bin forms batches of exactly B; full batches wait in one FCFS
queue for c identical servers; a batch lasts t1(B) + t2(B) * (its longest output), their
"constant + time per token x longest request" (Eq. 18 of 2407.05347 at a fixed batch size B is
the same form: t1(B) = k1 B + k2, t2(B) = k3 B + k4). Bins are [e_{j-1}, e_j) with e_0 = 0 and
e_k = inf (a length equal to an edge goes to the upper bin, as in :mod:`llmqueue.sim.multibin`).

- :func:`uniform_expected_max`: E[max of B i.i.d. U(a, b)] = B/(B+1) b + 1/(B+1) a (their Eq. 17;
  v1's Eq. 8 swaps a and b);
- :func:`equal_probability_edges`: Lemma 4.1, the best edges are the equal-probability quantiles
  F^-1(i/k) (uniform: l_min + (i/k)(l_max - l_min));
- :func:`theorem_4_2`: Theorem 4.2, throughput_k = B / (m + (1/k)(B/(B+1) l_max + 1/(B+1) l_min
  - m)) for U(l_min, l_max), mean m, batch time = longest length (requests per time unit);
- :func:`capacity`: the same quantity for any token law, any edges and the neighbour-bin error
  model of their Sec. 6 (a request of true bin i is put in bin i - 1 or i + 1 with probability
  p_e each; an end bin's one neighbour with p_e): under saturation every batch is full and bin j
  forms a fraction p_j of the batches, so the highest sustainable rate is
  c B / sum_j p_j E[T_j], E[T_j] = t1(B) + t2(B) E[max of B draws of the lengths put in bin j].
  Exact: the members of bin j are i.i.d. from the length law conditioned on landing there; E[max]
  comes from the law's own ``expected_max`` (:mod:`llmqueue.tokens`: closed form for the
  uniform, exact sums for a trace, one quadrature otherwise);
- :func:`latency_lower_bound`: Lemma 5.1, E[latency] >= E[T] + (B - 1) k / (2 lambda): the mean
  batch time a request sees plus the mean time its bin takes to fill (the i-th member of a batch
  waits for B - i more arrivals at rate lambda p_j: (B - 1)/(2 lambda p_j) on average, which sums
  to (B - 1) k / (2 lambda) over the k non-empty bins whatever their p_j). The wait for a free
  server is left out, hence a lower bound.

Units: tokens, seconds, requests/s (the synthetic setting of their Sec. 6.1 uses time = tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency
from llmqueue.lazy import lazy_module
from llmqueue.tokens import EmpiricalLaw, TokenLaw, UniformLaw, check_batch_size

integrate = lazy_module("scipy.integrate")

FloatArray = NDArray[np.float64]

__all__ = [
    "uniform_expected_max",
    "uniform_mean_batch_length",
    "theorem_4_2",
    "equal_probability_edges",
    "TruncatedLaw",
    "MixtureLaw",
    "bin_laws",
    "neighbour_error_matrix",
    "predicted_bin_laws",
    "batch_coefficients",
    "BinCapacity",
    "capacity",
    "latency_lower_bound",
]


# ---- Theorem 4.2 as printed (uniform lengths, batch time = longest length) ---------------------
def _check_uniform(b: int, k: int, l_min: float, l_max: float) -> tuple[int, int]:
    b = check_batch_size(b)
    if not (isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1):
        raise InputError(f"number of bins k must be an integer >= 1, got {k!r}")
    if not (0 <= l_min < l_max < math.inf):
        raise InputError(f"need 0 <= l_min < l_max < inf (tokens), got {l_min}, {l_max}")
    return b, int(k)


def uniform_expected_max(b: int, l_min: float, l_max: float) -> float:
    """E[max of b i.i.d. U(l_min, l_max)] = b/(b+1) l_max + 1/(b+1) l_min (tokens), Eq. (17)."""
    b = check_batch_size(b)
    return b / (b + 1) * l_max + l_min / (b + 1)


def uniform_mean_batch_length(b: int, k: int, l_min: float, l_max: float) -> float:
    """E[longest length of a batch] averaged over k equal-probability bins of U(l_min, l_max):
    m + (1/k)(E[max of b] - m), m = (l_min + l_max)/2 (tokens); the denominator of Thm. 4.2."""
    b, k = _check_uniform(b, k, l_min, l_max)
    m = (l_min + l_max) / 2
    return m + (uniform_expected_max(b, l_min, l_max) - m) / k


def theorem_4_2(b: int, k: int, l_min: float, l_max: float) -> float:
    """Theorem 4.2: the throughput of k-bin batching for U(l_min, l_max) lengths and batch time
    = the longest length (requests per time unit; one server); rises with k to b/m."""
    return b / uniform_mean_batch_length(b, k, l_min, l_max)


# ---- bins of any law (Lemma 4.1) -----------------------------------------------------------
def equal_probability_edges(law: TokenLaw, k: int) -> FloatArray:
    """Lemma 4.1: the k - 1 edges F^-1(i/k), i = 1..k-1 (tokens; empty for k = 1)."""
    if not (isinstance(k, int | np.integer) and not isinstance(k, bool) and k >= 1):
        raise InputError(f"number of bins k must be an integer >= 1, got {k!r}")
    if k == 1:
        return np.zeros(0)
    return np.asarray(law.ppf(np.arange(1, k) / k), dtype=float).reshape(-1)


@dataclass(frozen=True, eq=False)
class TruncatedLaw(TokenLaw):
    """The law of N given lo <= N < hi (a bin of a continuous law; `mass` = P(lo <= N < hi) > 0).
    E[max of b] by the generic tail integral of :class:`llmqueue.tokens.TokenLaw`."""

    base: TokenLaw
    lo: float
    hi: float
    spec: str = ""

    def __post_init__(self) -> None:
        if not self.spec:
            object.__setattr__(self, "spec", f"{self.base.spec} in [{self.lo:g}, {self.hi:g})")
        if not self.mass > 0:
            raise InputError(f"{self.spec}: the bin holds no probability")

    @cached_property
    def _below_lo(self) -> float:
        return float(self.base.prob_below(self.lo))

    @cached_property
    def mass(self) -> float:
        top = 1.0 if self.hi == math.inf else float(self.base.prob_below(self.hi))
        return top - self._below_lo

    @property
    def support(self) -> tuple[float, float]:
        blo, bhi = self.base.support
        return (max(self.lo, blo), min(self.hi, bhi))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        u = rng.random(size)
        return np.asarray(self.ppf(u), dtype=float)

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        g = (
            np.asarray(self.base.cdf(np.minimum(xa, self.support[1]))) - self._below_lo
        ) / self.mass
        out = np.where(xa < self.support[0], 0.0, np.clip(g, 0.0, 1.0))
        out = np.where(xa >= self.support[1], 1.0, out)
        return float(out) if np.ndim(x) == 0 else out

    def ppf(self, q: ArrayLike) -> Any:
        qa = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
        lo, hi = self.support
        out = np.clip(np.asarray(self.base.ppf(self._below_lo + qa * self.mass)), lo, hi)
        return float(out) if np.ndim(q) == 0 else out

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        """E[min(N, l)^k] = lo^k + integral_lo^l k x^(k-1) P(N > x) dx, by quadrature."""
        lo, hi = self.support

        def one(lim: float) -> float:
            top = min(lim, hi)
            if top <= lo:
                return max(lim, 0.0) ** k
            val = integrate.quad(
                lambda x: k * x ** (k - 1) * (1.0 - float(self.cdf(x))),
                lo,
                top,
                limit=400,
                epsabs=1e-10,
                epsrel=1e-10,
            )[0]
            return float(lo**k + val)

        la = np.asarray(limit, dtype=float)
        out = np.vectorize(one, otypes=[float])(la)
        return float(out) if np.ndim(limit) == 0 else out


@dataclass(frozen=True, eq=False)
class MixtureLaw(TokenLaw):
    """A mixture sum_i w_i L_i of laws (the lengths in one predicted bin under prediction errors).
    E[max of b] = lo + integral (1 - F(x)^b) dx over the pieces between the components' support
    ends (quadrature; an infinite tail split at the components' quantiles)."""

    components: tuple[TokenLaw, ...]
    weights: tuple[float, ...]
    spec: str = "mixture"

    def __post_init__(self) -> None:
        w = np.asarray(self.weights, dtype=float)
        if len(self.components) != w.size or w.size == 0 or np.any(w < 0) or not w.sum() > 0:
            raise InputError("mixture: one weight >= 0 per component, not all 0")
        object.__setattr__(self, "weights", tuple(float(x) for x in w / w.sum()))

    @property
    def support(self) -> tuple[float, float]:
        sup = [c.support for c, w in zip(self.components, self.weights, strict=True) if w > 0]
        return (min(s[0] for s in sup), max(s[1] for s in sup))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        which = rng.choice(len(self.components), size=size, p=np.asarray(self.weights))
        out = np.empty(size)
        for i, c in enumerate(self.components):
            sel = which == i
            out[sel] = c.sample(rng, int(sel.sum()))
        return out

    def cdf(self, x: ArrayLike) -> Any:
        xa = np.asarray(x, dtype=float)
        out = sum(
            w * np.asarray(c.cdf(xa)) for c, w in zip(self.components, self.weights, strict=True)
        )
        out = np.clip(np.asarray(out, dtype=float), 0.0, 1.0)
        return float(out) if np.ndim(x) == 0 else out

    def ppf(self, q: ArrayLike) -> Any:
        """By bisection on the cdf (60 halvings of the support; used for breakpoints only)."""
        lo, hi = self.support
        top = hi if math.isfinite(hi) else max(float(c.ppf(1 - 1e-12)) for c in self.components)
        qa = np.atleast_1d(np.asarray(q, dtype=float))
        a, b = np.full(qa.shape, lo), np.full(qa.shape, top)
        for _ in range(60):
            mid = (a + b) / 2
            below = np.asarray(self.cdf(mid)) < qa
            a, b = np.where(below, mid, a), np.where(below, b, mid)
        return float(b[0]) if np.ndim(q) == 0 else b

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        out = sum(
            w * np.asarray(c.clipped_moment(limit, k), dtype=float)
            for c, w in zip(self.components, self.weights, strict=True)
        )
        return float(out) if np.ndim(limit) == 0 else np.asarray(out)

    def expected_max(self, b: int) -> float:
        b = check_batch_size(b)
        lo, hi = self.support
        pts = sorted({x for c in self.components for x in c.support if math.isfinite(x)})
        pts = [x for x in pts if lo <= x <= hi]
        if not math.isfinite(hi):
            tail = [c for c in self.components if not math.isfinite(c.support[1])]
            extra = {float(c.ppf(q)) for c in tail for q in (0.5, 0.9, 0.99, 0.9999, 1 - 1e-8)}
            pts = sorted(set(pts) | {x for x in extra if x > lo})

        def f(x: float) -> float:
            return 1.0 - float(self.cdf(x)) ** b

        total = 0.0
        for a, c in zip(pts[:-1], pts[1:], strict=True):
            if c > a:
                total += integrate.quad(f, a, c, limit=400, epsabs=1e-10, epsrel=1e-10)[0]
        if not math.isfinite(hi):
            total += integrate.quad(f, pts[-1], math.inf, limit=400, epsabs=1e-12)[0]
        return float(lo + total)


def _conditional(law: TokenLaw, lo: float, hi: float) -> tuple[float, TokenLaw | None]:
    """(P(lo <= N < hi), the law of N given it; None when the bin is empty)."""
    if isinstance(law, EmpiricalLaw):
        sel = (law.values >= lo) & (law.values < hi)
        p = float(law.probs[sel].sum() / law.probs.sum())
        if p <= 0:
            return 0.0, None
        return p, EmpiricalLaw(law.values[sel], law.probs[sel] / law.probs[sel].sum(), law.spec)
    blo, bhi = law.support
    below = float(law.prob_below(lo))
    top = 1.0 if hi == math.inf else float(law.prob_below(hi))
    p = top - below
    if p <= 1e-15:
        return 0.0, None
    if isinstance(law, UniformLaw):
        return p, UniformLaw(max(lo, blo), min(hi, bhi))
    return p, TruncatedLaw(law, lo, hi)


def _check_edges(edges: ArrayLike) -> FloatArray:
    e = np.asarray(edges, dtype=float).reshape(-1)
    if np.any(~np.isfinite(e)) or np.any(np.diff(e) < 0):
        raise InputError(f"bin edges must be finite and non-decreasing (tokens), got {e.tolist()}")
    return e


def bin_laws(law: TokenLaw, edges: ArrayLike) -> list[tuple[float, TokenLaw | None]]:
    """[(p_j, law of N in bin j)] for the bins [e_{j-1}, e_j) (e_0 = -inf, e_k = inf)."""
    e = _check_edges(edges)
    bounds = [-math.inf, *e.tolist(), math.inf]
    return [_conditional(law, a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def neighbour_error_matrix(k: int, pe: float) -> FloatArray:
    """M[i, j] = P(predicted bin j | true bin i) of the neighbour-bin error model (Sec. 6): i - 1
    and i + 1 with probability pe each (an end bin: its one neighbour with pe), else i."""
    if not (0.0 <= pe <= 0.5):
        raise InputError(f"prediction error p_e must be in [0, 0.5], got {pe}")
    m = np.zeros((k, k))
    for i in range(k):
        if i > 0:
            m[i, i - 1] = pe
        if i < k - 1:
            m[i, i + 1] = pe
        m[i, i] = 1.0 - m[i].sum()
    return m


def _merge_empirical(parts: list[EmpiricalLaw], w: FloatArray) -> EmpiricalLaw:
    vals = np.concatenate([p.values for p in parts])
    probs = np.concatenate([wi * p.probs / p.probs.sum() for p, wi in zip(parts, w, strict=True)])
    u, inv = np.unique(vals, return_inverse=True)
    return EmpiricalLaw(u, np.bincount(inv, weights=probs) / probs.sum(), parts[0].spec)


def predicted_bin_laws(
    law: TokenLaw, edges: ArrayLike, pe: float = 0.0
) -> list[tuple[float, TokenLaw | None]]:
    """[(p_j, law of the TRUE lengths put in bin j)] under the neighbour-bin error model: bin j
    holds a mixture of the true bins i with weights P(true i) M[i, j] (exact sums for a trace)."""
    true = bin_laws(law, edges)
    k = len(true)
    m = neighbour_error_matrix(k, pe)
    out: list[tuple[float, TokenLaw | None]] = []
    for j in range(k):
        w = np.array([true[i][0] * m[i, j] for i in range(k)])
        keep = [i for i in range(k) if w[i] > 0 and true[i][1] is not None]
        pj = float(w.sum())
        if not keep or pj <= 0:
            out.append((0.0, None))
            continue
        comps = [true[i][1] for i in keep]
        ws = w[keep] / w[keep].sum()
        if len(comps) == 1:
            out.append((pj, comps[0]))
        elif all(isinstance(c, EmpiricalLaw) for c in comps):
            out.append((pj, _merge_empirical(comps, ws)))  # type: ignore[arg-type]
        else:
            out.append((pj, MixtureLaw(tuple(comps), tuple(ws))))  # type: ignore[arg-type]
    return out


def batch_coefficients(latency: BatchLatency | LinearLatency, b: int) -> tuple[float, float]:
    """(t1(B), t2(B)) in (s, s/token): T = t1(B) + t2(B) x longest output. A LinearLatency
    S = a N + b0 is the paper's law: constant b0, time per token a."""
    b = check_batch_size(b)
    if isinstance(latency, LinearLatency):
        return float(latency.b0_s), float(latency.a_s_per_token)
    if isinstance(latency, BatchLatency):
        return float(latency.t1(b)), float(latency.t2(b))
    raise InputError(
        f"Multi-Bin batch time needs a LinearLatency or BatchLatency, got {type(latency).__name__}"
    )


@dataclass(frozen=True)
class BinCapacity:
    """The highest sustainable rate of Multi-Bin Batching and what it is made of.

    rate_per_s: c B / E[T] (requests/s); mean_batch_s: E[T] = sum_j p_j E[T_j] (s), the mean
    batch time a request sees; bin_probs p_j and bin_batch_s E[T_j] per bin (bins with p_j = 0
    have E[T_j] = nan); bins: the number of non-empty bins.
    """

    rate_per_s: float
    mean_batch_s: float
    bin_probs: tuple[float, ...]
    bin_batch_s: tuple[float, ...]
    bins: int
    edges: tuple[float, ...] = field(default=())


def capacity(
    law: TokenLaw,
    latency: BatchLatency | LinearLatency,
    batch: int,
    *,
    bins: int | None = None,
    edges: ArrayLike | None = None,
    servers: int = 1,
    pe: float = 0.0,
) -> BinCapacity:
    """Highest sustainable rate of Multi-Bin Batching (module docstring): c B / sum_j p_j E[T_j].

    Give `bins` (k; edges at the equal-probability quantiles, Lemma 4.1) or `edges` (tokens).
    `pe`: the neighbour-bin error probability (0 = bins by the true length). For U(l_min, l_max)
    with equal-probability bins and pe = 0 this is Theorem 4.2 (times c, with time per token
    t2(B) and a constant t1(B)).
    """
    b = check_batch_size(batch)
    if (bins is None) == (edges is None):
        raise InputError("give the number of bins or the bin edges, not both")
    if not (isinstance(servers, int) and servers >= 1):
        raise InputError(f"servers must be an integer >= 1, got {servers!r}")
    e = equal_probability_edges(law, bins) if bins is not None else _check_edges(edges)  # type: ignore[arg-type]
    t1, t2 = batch_coefficients(latency, b)
    parts = predicted_bin_laws(law, e, pe)
    probs = tuple(p for p, _ in parts)
    times = tuple(t1 + t2 * lw.expected_max(b) if lw is not None else math.nan for _, lw in parts)
    mean_t = float(sum(p * t for p, t in zip(probs, times, strict=True) if p > 0))
    return BinCapacity(
        servers * b / mean_t,
        mean_t,
        probs,
        times,
        sum(1 for p in probs if p > 0),
        tuple(float(x) for x in e),
    )


def latency_lower_bound(mean_batch_s: float, batch: int, bins: int, rate_per_s: float) -> float:
    """Lemma 5.1: E[latency] >= E[T] + (B - 1) k / (2 lambda) (s); k = non-empty bins."""
    b = check_batch_size(batch)
    if not (rate_per_s > 0 and math.isfinite(rate_per_s)):
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    if not (isinstance(bins, int | np.integer) and bins >= 1):
        raise InputError(f"bins must be an integer >= 1, got {bins!r}")
    return float(mean_batch_s + (b - 1) * int(bins) / (2.0 * rate_per_s))
