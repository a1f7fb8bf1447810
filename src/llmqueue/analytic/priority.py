"""Exact mean waits of one-at-a-time servers with a size-based queue order (M/G/1).

- FCFS: Pollaczek-Khinchine, W = lambda E[S^2] / (2 (1 - rho)) (Eq. 1 of the paper).
- Non-preemptive priority by class (Cobham 1954): jobs of class k (1 = served first) wait
  W_k = W0 / ((1 - sigma_{k-1}) (1 - sigma_k)), with W0 = lambda E[S^2] / 2 the mean residual work
  of the job in service and sigma_k the load of classes 1..k.
- Shortest job first (SJF, classes by true size) is the limit of one class per size:
  W(x) = W0 / ((1 - rho(x-)) (1 - rho(x))), rho(x) = lambda E[S 1{N <= x}]; ties (an atom of the
  size law) form one FCFS class. Shortest *predicted* job first (SPJF) orders by a prediction P:
  the same formula with classes by P and the true service times' load, rho(p) = lambda
  E[S 1{P <= p}] (Mitzenmacher's analysis of SPJF, "Scheduling with predictions and the price of
  misprediction", ITCS 2020).

:func:`priority_wait_empirical` evaluates the class formula exactly on a sample of (service
time, key) pairs taken as the joint law (one class per distinct key): exact for a trace's rows,
a Monte Carlo estimate of the integral otherwise. :func:`sjf_wait` integrates the continuous
SJF formula for a token law; :func:`spjf_wait` the SPJF formula for a prediction with a
continuous law given the size (``noisy``, ``exp``, ``uniform`` predictors), where no two
predictions tie: E[W] = E[W0 / (1 - rho(P))^2]. The preemptive-resume orders' mean response
times (:func:`psjf_response`, :func:`srpt_response`, :func:`pspjf_response`) close the module.
Units: seconds, requests per second. Assumes rho < 1 (InputError otherwise); a predictor
independent of the size gives every class the same service law, so the mean wait equals FCFS's
(work conservation, Kleinrock's conservation law).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from llmqueue.errors import InputError, UnstableError
from llmqueue.lazy import lazy_module
from llmqueue.tokens import TokenLaw

integrate = lazy_module("scipy.integrate")

__all__ = [
    "pk_wait",
    "priority_class_waits",
    "priority_wait_empirical",
    "sjf_wait",
    "spjf_wait",
    "psjf_response",
    "srpt_response",
    "pspjf_response",
    "sprpt_response",
]

Conditional = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _check_rate(rate_per_s: float) -> float:
    lam = float(rate_per_s)
    if not (math.isfinite(lam) and lam > 0):
        raise InputError(f"rate_per_s must be a finite rate > 0 requests/s, got {rate_per_s!r}")
    return lam


def pk_wait(rate_per_s: float, mean_s: float, second_moment_s2: float) -> float:
    """Pollaczek-Khinchine mean wait (s) of M/G/1 FCFS."""
    lam = _check_rate(rate_per_s)
    rho = lam * mean_s
    if not rho < 1:
        raise UnstableError(f"rho = {rho:.4g} >= 1: no steady state")
    return lam * second_moment_s2 / (2.0 * (1.0 - rho))


def priority_class_waits(
    rates_per_s: ArrayLike, means_s: ArrayLike, second_moments_s2: ArrayLike
) -> np.ndarray:
    """Cobham's non-preemptive priority waits W_k (s) of classes k = 1..K in priority order."""
    lam = np.asarray(rates_per_s, dtype=float)
    m1 = np.asarray(means_s, dtype=float)
    m2 = np.asarray(second_moments_s2, dtype=float)
    if not (lam.shape == m1.shape == m2.shape) or lam.ndim != 1 or np.any(lam < 0):
        raise InputError("priority classes: rates, means, second moments: equal 1-D, rates >= 0")
    sigma = np.cumsum(lam * m1)
    if not sigma[-1] < 1:
        raise UnstableError(f"rho = {sigma[-1]:.4g} >= 1: no steady state")
    w0 = float(np.sum(lam * m2)) / 2.0
    before = np.concatenate([[0.0], sigma[:-1]])
    return w0 / ((1.0 - before) * (1.0 - sigma))


def priority_wait_empirical(service_s: ArrayLike, keys: ArrayLike, rate_per_s: float) -> float:
    """Mean wait (s) when jobs are served non-preemptively by increasing key (ties FCFS), with
    (service time, key) distributed as the given sample (each pair weight 1/n): Cobham's formula
    with one class per distinct key."""
    lam = _check_rate(rate_per_s)
    s = np.asarray(service_s, dtype=float)
    k = np.asarray(keys, dtype=float)
    if s.shape != k.shape or s.ndim != 1 or s.size == 0:
        raise InputError("service times and keys must be equal, non-empty 1-D arrays")
    order = np.argsort(k, kind="stable")
    ks, ss = k[order], s[order]
    starts = np.flatnonzero(np.concatenate([[True], ks[1:] != ks[:-1]]))
    counts = np.diff(np.concatenate([starts, [ks.size]]))
    sum1 = np.add.reduceat(ss, starts)
    sum2 = np.add.reduceat(ss * ss, starts)
    n = float(s.size)
    rates = lam * counts / n
    waits = priority_class_waits(rates, sum1 / counts, sum2 / counts)
    return float(np.sum(counts * waits) / n)


def sjf_wait(law: TokenLaw, a_s_per_token: float, b0_s: float, rate_per_s: float) -> float:
    """Mean wait (s) of non-preemptive SJF for S = a N + b0 with N ~ `law`, by quadrature over the
    size quantile u: E[W] = integral over (0, 1) of W0 / ((1 - rho(x-)) (1 - rho(x))) at
    x = F^-1(u), with rho(x) = lambda E[S 1{N <= x}] and rho(x-) = lambda E[S 1{N < x}]. The two
    differ only at an atom of the law (a cap, a deterministic or empirical law): its requests form
    one FCFS class, Cobham's class wait; elsewhere the integrand is W0 / (1 - rho(x))^2."""
    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    m1 = a * law.mean() + b0
    m2 = a * a * float(law.clipped_moment(math.inf, 2)) + 2 * a * b0 * law.mean() + b0 * b0
    if not lam * m1 < 1:
        raise UnstableError(f"rho = {lam * m1:.4g} >= 1: no steady state")
    w0 = lam * m2 / 2.0

    def load(x: float, below: float) -> float:  # lambda E[S 1{N <= x}] (below = P(N <= x))
        part = float(law.clipped_moment(x, 1)) - x * (1.0 - below)
        return lam * (a * part + b0 * below)

    def integrand(u: float) -> float:
        x = float(law.ppf(u))
        at, before = float(law.cdf(x)), float(law.prob_below(x))
        r = load(x, at)
        r_minus = r - lam * (a * x + b0) * (at - before)  # the atom at x, if any, left out
        return w0 / ((1.0 - r_minus) * (1.0 - r))

    val, _ = integrate.quad(
        integrand, 0.0, 1.0, points=_quantile_breaks(law), limit=500, epsrel=1e-10
    )
    return float(val)


def _quantile_breaks(law: TokenLaw) -> list[float]:
    """Probabilities where a quadrature over the size quantile splits: a few fixed ones and
    where a law's atoms usually sit (a cap, the smallest value)."""
    points = {0.01, 0.1, 0.5, 0.9, 0.99}
    lo, hi = law.support
    for x in (lo, hi):
        if math.isfinite(x):
            for q in (float(law.prob_below(x)), float(law.cdf(x))):
                if 0.0 < q < 1.0:
                    points.add(q)
    return sorted(points)


def _gauss_legendre(breaks: list[float], nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Composite Gauss-Legendre nodes and weights on [0, 1], one rule of `nodes` points per
    piece between consecutive `breaks`."""
    t, w = np.polynomial.legendre.leggauss(nodes)
    edges = [0.0, *breaks, 1.0]
    xs = [(b - a) / 2.0 * t + (a + b) / 2.0 for a, b in zip(edges[:-1], edges[1:], strict=True)]
    ws = [(b - a) / 2.0 * w for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return np.concatenate(xs), np.concatenate(ws)


def spjf_wait(
    law: TokenLaw,
    a_s_per_token: float,
    b0_s: float,
    rate_per_s: float,
    cdf: Conditional,
    ppf: Conditional,
    *,
    nodes: int = 48,
) -> float:
    """Mean wait (s) of non-preemptive SPJF for S = a N + b0, N ~ `law`, ordered by a prediction
    P whose law given N = x has the continuous cdf ``cdf(p, x)`` and quantile ``ppf(v, x)``
    (Mitzenmacher, ITCS 2020): E[W] = E[W0 / (1 - rho(P))^2], rho(p) = lambda E[S 1{P <= p}],
    W0 = lambda E[S^2] / 2. Ties between predictions have probability 0, so rho(p-) = rho(p).

    Quadrature: composite Gauss-Legendre over the size quantile u (pieces as :func:`sjf_wait`
    splits them) and, for each size, over the prediction's conditional quantile v (pieces
    finer towards v = 1, where a long-tailed prediction sits); rho(p) is the same rule over u.
    About 1e-5 relative on the laws the tests use (`nodes` points per piece)."""
    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    _stable(law, a, b0, lam)
    m2 = a * a * float(law.clipped_moment(math.inf, 2)) + 2 * a * b0 * law.mean() + b0 * b0
    w0 = lam * m2 / 2.0
    return w0 * _by_prediction(
        law, a, b0, lam, cdf, ppf, nodes, lambda s, rho, m2: 1.0 / (1.0 - rho) ** 2
    )


def _stable(law: TokenLaw, a: float, b0: float, lam: float) -> None:
    """UnstableError unless rho = lambda E[a N + b0] < 1."""
    rho = lam * (a * law.mean() + b0)
    if not rho < 1:
        raise UnstableError(f"rho = {rho:.4g} >= 1: no steady state")


# where a quadrature over a prediction's conditional quantile v splits: finer towards v = 1, where
# a long-tailed prediction sits
PREDICTION_BREAKS = [0.5, 0.9, 0.99, 0.999, 0.9999]


def _by_prediction(
    law: TokenLaw,
    a: float,
    b0: float,
    lam: float,
    cdf: Conditional,
    ppf: Conditional,
    nodes: int,
    term: Callable[[float, np.ndarray, np.ndarray], np.ndarray],
) -> float:
    """E[term(S, rho(P), lambda E[S^2 1{P' <= P}] / 2)] over the joint law of the size (S = a N +
    b0) and its prediction P, by composite Gauss-Legendre quadrature over the size quantile u
    (pieces as :func:`sjf_wait` splits them) and, for each size, over the prediction's
    conditional quantile v (pieces finer towards v = 1, where a long-tailed prediction sits);
    rho(p) = lambda E[S 1{P' <= p}] and the second moment by the same rule over u."""
    n, wu = _size_nodes(law, nodes)
    s = a * n + b0
    load, sq = lam * wu * s, lam * wu * s * s / 2.0
    v, wv = _gauss_legendre(PREDICTION_BREAKS, nodes)
    total = 0.0
    for i in range(n.size):
        p = np.asarray(ppf(v, n[i]), dtype=float)  # the predictions of size n[i]
        g = np.asarray(cdf(p[:, None], n[None, :]), dtype=float)
        total += wu[i] * float(np.sum(wv * term(float(s[i]), g @ load, g @ sq)))
    return total


# ---- preemptive-resume orders: mean response times (M/G/1, continuous size laws) -------------
def _continuous(law: TokenLaw, what: str) -> None:
    """InputError for a law with an atom (a cap that holds mass, an empirical or deterministic
    law): the preemptive formulas below assume no two sizes tie."""
    lo, hi = law.support
    for x in (lo, hi):
        if math.isfinite(x) and float(law.cdf(x)) - float(law.prob_below(x)) > 0.0:
            raise InputError(
                f"{what}: the formula here needs a size law without atoms; {law.spec!r} has "
                f"mass {float(law.cdf(x)) - float(law.prob_below(x)):.3g} at {x:g} tokens"
            )
    if lo == hi:
        raise InputError(f"{what}: {law.spec!r} is a single size (an atom)")


def _size_load(
    law: TokenLaw, a: float, b0: float, lam: float, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F(n), E[N 1{N <= n}], rho(n)) at token counts n, S = a N + b0: the load of the requests
    of at most n tokens, from the law's exact clipped moments."""
    f = np.asarray(law.cdf(n), dtype=float)
    e1 = np.asarray(law.clipped_moment(n, 1), dtype=float) - n * (1.0 - f)
    return f, e1, lam * (a * e1 + b0 * f)


def _size_loads(
    law: TokenLaw, a: float, b0: float, lam: float, n: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(F(n), rho(n), lambda E[S^2 1{N <= n}]) at token counts n, S = a N + b0: the load of the
    requests of at most n tokens and their second moment, from the law's exact clipped moments."""
    f, e1, rho = _size_load(law, a, b0, lam, n)
    e2 = np.asarray(law.clipped_moment(n, 2), dtype=float) - n * n * (1.0 - f)
    m2 = lam * (a * a * e2 + 2.0 * a * b0 * e1 + b0 * b0 * f)
    return f, rho, m2


def _size_nodes(law: TokenLaw, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    u, wu = _gauss_legendre(_quantile_breaks(law), nodes)
    return np.asarray(law.ppf(u), dtype=float), wu


def psjf_response(
    law: TokenLaw, a_s_per_token: float, b0_s: float, rate_per_s: float, *, nodes: int = 64
) -> float:
    """Mean response time (s) of preemptive-resume shortest job first, S = a N + b0: a request
    of size x takes T(x) = lambda E[S^2 1{S <= x}] / (2 (1 - rho(x))^2) + x / (1 - rho(x)),
    rho(x) = lambda E[S 1{S <= x}] (Harchol-Balter, "Performance Modeling and Design of
    Computer Systems", Ch. 32; Wierman and Harchol-Balter, SIGMETRICS 2003); E[T] by
    Gauss-Legendre quadrature over the size quantile. A continuous size law (no atoms)."""
    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    _continuous(law, "psjf_response")
    _stable(law, a, b0, lam)
    n, w = _size_nodes(law, nodes)
    _, rho, m2 = _size_loads(law, a, b0, lam, n)
    x = a * n + b0
    return float(np.sum(w * (m2 / (2.0 * (1.0 - rho) ** 2) + x / (1.0 - rho))))


def srpt_response(
    law: TokenLaw, a_s_per_token: float, b0_s: float, rate_per_s: float, *, nodes: int = 64
) -> float:
    """Mean response time (s) of shortest remaining processing time (Schrage and Miller, 1966):
    a request of size x takes T(x) = lambda (E[S^2 1{S <= x}] + x^2 P(S > x)) / (2 (1 -
    rho(x))^2) + integral_0^x dt / (1 - rho(t)), rho(t) = lambda E[S 1{S <= t}]; with S = a N + b0
    the residence integral is b0 + a integral_0^n dm / (1 - rho(a m + b0)) (no request is
    shorter than b0). Quadrature over the size quantile, the residence integral accumulated
    between the nodes. A continuous size law (no atoms)."""
    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    _continuous(law, "srpt_response")
    _stable(law, a, b0, lam)
    n, w = _size_nodes(law, nodes)
    f, rho, m2 = _size_loads(law, a, b0, lam, n)
    x = a * n + b0

    def slowdown(m: float) -> float:  # 1 / (1 - rho) at m tokens
        return 1.0 / (1.0 - float(_size_load(law, a, b0, lam, np.asarray(m))[2]))

    resid = np.empty(n.size)
    prev = float(law.support[0])
    acc = a * prev  # below the smallest size rho = 0
    for i, ni in enumerate(n):
        acc += a * integrate.quad(slowdown, prev, float(ni), limit=200)[0]
        prev = float(ni)
        resid[i] = b0 + acc
    wait = (m2 + lam * x * x * (1.0 - f)) / (2.0 * (1.0 - rho) ** 2)
    return float(np.sum(w * (wait + resid)))


def pspjf_response(
    law: TokenLaw,
    a_s_per_token: float,
    b0_s: float,
    rate_per_s: float,
    cdf: Conditional,
    ppf: Conditional,
    *,
    nodes: int = 48,
) -> float:
    """Mean response time (s) of preemptive-resume shortest *predicted* job first: a request of
    size x and prediction y takes T(x, y) = x / (1 - rho(y)) + lambda E[S^2 1{P <= y}] / (2 (1 -
    rho(y))^2), rho(y) = lambda E[S 1{P <= y}] (the preemptive-resume priority formula with
    classes by prediction, Mitzenmacher, ITCS 2020), for a prediction P with a continuous law
    given the size (``cdf(p, x)``, ``ppf(v, x)``); the quadrature of :func:`spjf_wait`."""
    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    _stable(law, a, b0, lam)

    def term(x: float, rho: np.ndarray, m2: np.ndarray) -> np.ndarray:
        return x / (1.0 - rho) + m2 / (1.0 - rho) ** 2

    return _by_prediction(law, a, b0, lam, cdf, ppf, nodes, term)


def sprpt_response(
    law: TokenLaw,
    a_s_per_token: float,
    b0_s: float,
    rate_per_s: float,
    cdf: Conditional,
    ppf: Conditional,
    *,
    nodes: int = 48,
    grid: int = 600,
) -> float:
    """Mean response time (s) of shortest *predicted* remaining processing time (SPRPT): the
    request with the smallest Y - age runs, Y = a P + b0 its predicted service time, preemptive
    resume (Mitzenmacher, ITCS 2020, Sec. 5; the SOAP analysis of Scully, Harchol-Balter and
    Scheller-Wolf, 2018, Theorem 5.5, with the rank Y - age). A request of size x and predicted
    size y (service times, s) takes

        T(x, y) = lambda A(y) / (2 (1 - rho(y))^2) + H(y) - H((y - x)^+) + (x - y)^+,

    rho(c) = lambda E[S 1{Y < c}] (the load that overtakes a request whose predicted remaining
    time is c), H(c) = integral_0^c dt / (1 - rho(t)) (its residence, rho = 0 below b0), and the
    old work it finds ahead, A(y) = E[S^2 1{Y <= y}] + E[((S - Y + y)^+)^2 1{Y > y}]: a request
    predicted above y runs ahead of it only once its predicted remaining time falls to y.
    With an exact prediction this is Schrage and Miller's SRPT (:func:`srpt_response`).

    Quadrature: the joint (size, prediction) nodes of :func:`spjf_wait`; H and A on a geometric
    grid of `grid` predicted sizes through their exact derivatives (H' = a / (1 - rho), A'(y) =
    2 E[(S - Y + y)^+ 1{Y > y}]), read by cubic Hermite interpolation; the inner expectations
    by Gauss-Legendre over the prediction's conditional quantile. Needs a > 0 and a prediction
    with a continuous law given the size (``noisy``, ``exp``, ``uniform``)."""
    from scipy.interpolate import CubicHermiteSpline

    lam = _check_rate(rate_per_s)
    a, b0 = float(a_s_per_token), float(b0_s)
    if not a > 0:
        raise InputError(f"sprpt_response: needs a per-token time a > 0 s/token, got {a}")
    _stable(law, a, b0, lam)
    n, wu = _size_nodes(law, nodes)
    s = a * n + b0
    load = lam * wu * s

    def rho(q: np.ndarray) -> np.ndarray:  # rho at predicted service b0 + a q, q in tokens
        flat = np.ravel(q)
        out = np.asarray(cdf(flat[:, None], n[None, :]), dtype=float) @ load
        return out.reshape(np.shape(q))

    v, wv = _gauss_legendre(PREDICTION_BREAKS, nodes)
    pred = np.asarray(ppf(v[None, :], n[:, None]), dtype=float)  # [size i, node j], tokens
    qs = np.concatenate([[0.0], np.geomspace(0.5 * pred[pred > 0].min(), pred.max(), grid)])
    # H at the grid: b0 + a integral_0^q dm / (1 - rho(m)), Gauss-Legendre on each interval
    t8, w8 = np.polynomial.legendre.leggauss(8)
    lo, hi = qs[:-1, None], qs[1:, None]
    ms = (hi - lo) / 2.0 * t8[None, :] + (hi + lo) / 2.0
    pieces = np.sum((hi - lo) / 2.0 * w8[None, :] / (1.0 - rho(ms)), axis=1)
    h_q = b0 + a * np.concatenate([[0.0], np.cumsum(pieces)])
    rho_q = rho(qs)
    h_of = CubicHermiteSpline(qs, h_q, a / (1.0 - rho_q))
    # A and its slope at the grid: the part predicted at most q, and the part predicted above q
    # that runs ahead once its predicted remaining time falls to q (q < P < n + q + b0/a)
    tk, wk = _gauss_legendre([0.25, 0.5, 0.75], 16)
    q3, n3 = qs[:, None, None], n[None, :, None]
    v_lo = np.asarray(cdf(qs[:, None], n[None, :]), dtype=float)
    v_hi = np.asarray(cdf(qs[:, None] + n[None, :] + b0 / a, n[None, :]), dtype=float)
    vk = v_lo[:, :, None] + (v_hi - v_lo)[:, :, None] * tk[None, None, :]
    with np.errstate(invalid="ignore"):
        p3 = np.asarray(ppf(np.minimum(vk, 1.0 - 1e-16), n3), dtype=float)
    ahead = np.maximum(a * (n3 + q3 - p3) + b0, 0.0)
    span = (v_hi - v_lo)[:, :, None] * wk[None, None, :]
    first = np.nansum(span * ahead, axis=2)  # E[(S - Y + c)^+ 1{Y > c} | n_i]
    second = np.nansum(span * ahead * ahead, axis=2)
    a_q = (s * s * v_lo + second) @ wu
    a_of = CubicHermiteSpline(qs, a_q, a * 2.0 * (first @ wu))
    total = 0.0
    for i in range(n.size):
        y = pred[i]
        r = rho(y)
        d = a * (y - n[i])  # y - x in service time (s)
        past = np.maximum(d, 0.0)
        h_past = np.where(past <= b0, past, h_of(np.maximum(past - b0, 0.0) / a))
        t = lam * a_of(y) / (2.0 * (1.0 - r) ** 2) + h_of(y) - h_past + np.maximum(-d, 0.0)
        total += wu[i] * float(np.sum(wv * t))
    return total
