"""Fits of the latency laws (:mod:`llmqueue.latency`) to measurements: least squares with R^2 and
95% confidence intervals for S = a*N + b0 (Eq. 3, :func:`fit_linear_latency`) and the step law
(:func:`fit_step_law`); non-negative least squares on hat functions of the decode count for the
shaped law (:func:`fit_shaped_step_law`, knots from :data:`SHAPE_KNOT_GRID`), the split law
(:func:`fit_split_step_law`) and the packed law (:func:`fit_packed_step_law`). Units: seconds,
tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from llmqueue.errors import InputError
from llmqueue.latency import (
    PackedStepLaw,
    ShapedStepLaw,
    SplitStepLaw,
    StepLaw,
)
from llmqueue.lazy import lazy_module

stats = lazy_module("scipy.stats")

__all__ = [
    "SHAPE_KNOT_GRID",
    "LinearFit",
    "fit_linear_latency",
    "StepLawFit",
    "fit_step_law",
    "fit_shaped_step_law",
    "fit_split_step_law",
    "fit_packed_step_law",
]


# the knot grid a shaped law is fitted on: dense where CPU decode steps bend (small batches)
SHAPE_KNOT_GRID = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


def _hat_basis(d: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Columns of the piecewise-linear interpolation weights of d on the knots (d <= last knot)."""
    out = np.zeros((d.size, knots.size))
    for k in range(knots.size):
        e = np.zeros(knots.size)
        e[k] = 1.0
        out[:, k] = np.interp(d, knots, e)
    return out


def _knots_on(d: np.ndarray, min_points: int) -> list[int]:
    """Knots of a shaped law on decode counts `d`: 0, the points of :data:`SHAPE_KNOT_GRID` below
    the largest count with at least `min_points` counts between the previous knot and the next
    grid point, and the largest count."""
    top = int(d.max())
    grid = [k for k in SHAPE_KNOT_GRID if k < top] + [top]
    knots = [0]
    for i, k in enumerate(grid[:-1]):
        nxt = grid[i + 1]
        if k > 0 and int(((d > knots[-1]) & (d < nxt)).sum()) >= min_points:
            knots.append(k)
    knots.append(top)
    return knots


def fit_shaped_step_law(
    decode_seqs: ArrayLike,
    prefill_tokens: ArrayLike,
    context_tokens: ArrayLike,
    time_s: ArrayLike,
    *,
    min_points: int = 5,
    name: str = "shaped fit",
    source: str = "non-negative least squares",
    verdict: str = "measured",
) -> ShapedStepLaw:
    """Fit :class:`ShapedStepLaw` to measured iterations (each point one iteration, as
    :func:`fit_step_law`). Knots: 0 and the points of :data:`SHAPE_KNOT_GRID` up to the largest
    decode count seen, each kept only when at least `min_points` iterations decode between its
    neighbours (so every g(knot) rests on data), and the largest decode count seen; g at the
    knots, c_pre and c_ctx by non-negative least squares on the hat functions; the slope beyond
    the last knot is that of the last segment."""
    from scipy.optimize import nnls

    d, p, c, y = (
        np.asarray(v, dtype=float) for v in (decode_seqs, prefill_tokens, context_tokens, time_s)
    )
    if not (d.shape == p.shape == c.shape == y.shape) or d.ndim != 1:
        raise InputError("fit_shaped_step_law needs four 1-D arrays of equal length")
    if y.size < 8 or np.ptp(p) == 0 or np.ptp(c) == 0 or d.max() < 1:
        raise InputError(
            f"fit_shaped_step_law needs >= 8 iterations varying in prefill tokens, context and "
            f"decoding sequences, got {y.size}"
        )
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise InputError("fit_shaped_step_law: iteration times must be finite and > 0 s")
    knots = _knots_on(d, min_points)
    kn = np.asarray(knots, dtype=float)
    x = np.column_stack([_hat_basis(d, kn), p, c])
    coef, _ = nnls(x, y)
    g = coef[: kn.size]
    slope = (g[-1] - g[-2]) / (kn[-1] - kn[-2])
    return ShapedStepLaw(
        float(g[0]),
        float(max(slope, 0.0)),
        float(coef[-1]),
        name,
        source,
        verdict,
        c_pre_s=float(coef[-2]),
        knots=tuple(int(k) for k in knots),
        values_s=tuple(float(v) for v in g),
    )


def fit_split_step_law(
    decode_seqs: ArrayLike,
    prefill_tokens: ArrayLike,
    context_tokens: ArrayLike,
    time_s: ArrayLike,
    *,
    attention: bool = True,
    min_points: int = 5,
    name: str = "split fit",
    source: str = "non-negative least squares",
    verdict: str = "measured",
) -> SplitStepLaw:
    """Fit :class:`SplitStepLaw` to measured iterations (each point one iteration, times in s).

    One non-negative least squares over all iterations: g at the knots (chosen as in
    :func:`fit_shaped_step_law`, on the decode-only iterations' decode counts) and c_ctx from the
    decode-only iterations; g(0), c_pre, c_ctx_pre and (with `attention`) c_attn from the
    iterations with a prefill (`attention` False fixes c_attn = 0). The slope beyond the last
    knot is that of the last segment between decode knots, or c_pre (s per sequence: a further
    sequence as one more token) when g has one decode knot or that slope is not positive. Needs
    at least 8 decode-only iterations that decode and 4 with a prefill, varying in prefill tokens.
    """
    from scipy.optimize import nnls

    d, p, c, y = (
        np.asarray(v, dtype=float) for v in (decode_seqs, prefill_tokens, context_tokens, time_s)
    )
    if not (d.shape == p.shape == c.shape == y.shape) or d.ndim != 1:
        raise InputError("fit_split_step_law needs four 1-D arrays of equal length")
    pre = p > 0
    dec = ~pre & (d >= 1)
    if int(dec.sum()) < 8 or int(pre.sum()) < 4 or np.ptp(p[pre]) == 0:
        raise InputError(
            f"fit_split_step_law needs >= 8 decode-only iterations and >= 4 with a prefill, "
            f"varying in prefill tokens; got {int(dec.sum())} and {int(pre.sum())}"
        )
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise InputError("fit_split_step_law: iteration times must be finite and > 0 s")
    keep = dec | pre  # an iteration that neither decodes nor prefills carries no information
    d, p, c, y, pre = d[keep], p[keep], c[keep], y[keep], pre[keep]
    knots = _knots_on(d[~pre], min_points)
    kn = np.asarray(knots, dtype=float)
    hat = _hat_basis(np.minimum(d, kn[-1]), kn) * (~pre)[:, None]
    hat[:, 0] += pre  # g(0): the fixed cost of an iteration with a prefill
    cols = [hat, c * ~pre, (d + p) * pre, c * pre]
    if attention:
        cols.append(p * c)
    coef, _ = nnls(np.column_stack(cols), y)
    g = coef[: kn.size]
    rest = coef[kn.size :]
    # beyond the last knot: the last decode segment's slope; c_pre per sequence when g has one
    # decode knot or that slope is not positive (each further sequence one more token)
    slope = (g[-1] - g[-2]) / (kn[-1] - kn[-2]) if kn.size > 2 else 0.0
    slope = slope if slope > 0 else rest[1]
    return SplitStepLaw(
        float(g[0]),
        float(slope),
        float(rest[0]),
        name,
        source,
        verdict,
        c_pre_s=float(rest[1]),
        knots=tuple(int(k) for k in knots),
        values_s=tuple(float(v) for v in g),
        c_ctx_pre_s=float(rest[2]),
        c_attn_s=float(rest[3]) if attention else 0.0,
    )


@dataclass(frozen=True)
class LinearFit:
    """Least-squares fit y = slope*x + intercept with R^2 and 95% confidence intervals."""

    slope: float
    intercept: float
    r2: float
    slope_ci95: tuple[float, float]
    intercept_ci95: tuple[float, float]
    n: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["slope_ci95"] = list(self.slope_ci95)
        d["intercept_ci95"] = list(self.intercept_ci95)
        return d


def fit_linear_latency(x: ArrayLike, y: ArrayLike) -> LinearFit:
    """Ordinary least squares of y on x (e.g. seconds on tokens, Fig. 2a; t1 on b, Fig. 2b)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise InputError("fit needs two 1-D arrays of equal length")
    n = xa.size
    if n < 2 or np.ptp(xa) == 0:
        raise InputError(f"fit needs at least 2 distinct x values, got {n} points")
    res = stats.linregress(xa, ya)
    r2 = float(res.rvalue**2) if n > 2 else 1.0
    if n > 2:
        t = float(stats.t.ppf(0.975, n - 2))
        s_ci = (float(res.slope - t * res.stderr), float(res.slope + t * res.stderr))
        i_ci = (
            float(res.intercept - t * res.intercept_stderr),
            float(res.intercept + t * res.intercept_stderr),
        )
    else:
        s_ci = (math.nan, math.nan)
        i_ci = (math.nan, math.nan)
    return LinearFit(float(res.slope), float(res.intercept), r2, s_ci, i_ci, n)


@dataclass(frozen=True)
class StepLawFit:
    """Least squares of iteration times on (1, decode_seqs + prefill_tokens, context_tokens).

    Coefficients in s, s/token, s per cached token; their 95% CIs; R^2; the relative residuals
    (fitted / measured - 1) point by point, in input order; n points. A coefficient that the
    unconstrained fit makes negative is refitted at 0 (non-negative least squares) and named in
    ``clipped``.
    """

    c0_s: float
    c_tok_s: float
    c_ctx_s: float
    ci95: dict[str, tuple[float, float]]
    r2: float
    rel_residuals: tuple[float, ...]
    n: int
    clipped: tuple[str, ...] = ()

    def law(
        self, name: str = "fit", source: str = "least squares", verdict: str = "measured"
    ) -> StepLaw:
        return StepLaw(self.c0_s, self.c_tok_s, self.c_ctx_s, name, source, verdict)

    def to_dict(self) -> dict[str, Any]:
        rr = np.abs(np.asarray(self.rel_residuals))
        return {
            "c0_s": self.c0_s,
            "c_tok_s": self.c_tok_s,
            "c_ctx_s": self.c_ctx_s,
            "ci95": {k: list(v) for k, v in self.ci95.items()},
            "r2": self.r2,
            "n": self.n,
            "max_abs_rel_residual": float(rr.max()) if rr.size else math.nan,
            "median_abs_rel_residual": float(np.median(rr)) if rr.size else math.nan,
            "rel_residuals": [float(x) for x in self.rel_residuals],
            "clipped": list(self.clipped),
        }


def fit_step_law(
    decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike, time_s: ArrayLike
) -> StepLawFit:
    """Fit :class:`StepLaw` to measured iterations by (non-negative) least squares.

    Each point is one iteration: `decode_seqs` sequences decoded, `prefill_tokens` prompt tokens
    prefilled, `context_tokens` KV tokens read, `time_s` its measured duration (s). Needs at least
    4 points that vary both in tokens and in context.
    """
    from scipy.optimize import nnls

    d, p, c, y = (
        np.asarray(v, dtype=float) for v in (decode_seqs, prefill_tokens, context_tokens, time_s)
    )
    if not (d.shape == p.shape == c.shape == y.shape) or d.ndim != 1:
        raise InputError("fit_step_law needs four 1-D arrays of equal length")
    n = y.size
    tok = d + p
    if n < 4 or np.ptp(tok) == 0 or np.ptp(c) == 0:
        raise InputError(
            f"fit_step_law needs >= 4 iterations varying in tokens and in context, got {n}"
        )
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise InputError("fit_step_law: iteration times must be finite and > 0 s")
    x = np.column_stack([np.ones(n), tok, c])
    names = ("c0_s", "c_tok_s", "c_ctx_s")
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    clipped: tuple[str, ...] = ()
    if np.any(coef < 0):
        coef, _ = nnls(x, y)
        clipped = tuple(nm for nm, v in zip(names, coef, strict=True) if v == 0.0)
    fitted = x @ coef
    resid = y - fitted
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((resid**2).sum()) / ss_tot if ss_tot > 0 else 1.0
    ci: dict[str, tuple[float, float]] = {}
    dof = n - 3
    if dof > 0:
        s2 = float((resid**2).sum()) / dof
        try:
            cov = s2 * np.linalg.inv(x.T @ x)
            t = float(stats.t.ppf(0.975, dof))
            for k, nm in enumerate(names):
                half = t * math.sqrt(max(cov[k, k], 0.0))
                ci[nm] = (float(coef[k] - half), float(coef[k] + half))
        except np.linalg.LinAlgError:
            pass
    for nm in names:
        ci.setdefault(nm, (math.nan, math.nan))
    return StepLawFit(
        float(coef[0]),
        float(coef[1]),
        float(coef[2]),
        ci,
        r2,
        tuple(float(v) for v in fitted / y - 1.0),
        int(n),
        clipped,
    )


def fit_packed_step_law(
    decode_seqs: ArrayLike,
    prefill_tokens: ArrayLike,
    context_tokens: ArrayLike,
    time_s: ArrayLike,
    name: str = "packed",
) -> PackedStepLaw:
    """:class:`PackedStepLaw` fitted to measured iterations by non-negative least squares on
    (1, d + p, c, (d + p) c); needs >= 5 iterations that vary in tokens and in context."""
    from scipy.optimize import nnls

    d, p, c, y = (
        np.asarray(v, dtype=float) for v in (decode_seqs, prefill_tokens, context_tokens, time_s)
    )
    if not (d.shape == p.shape == c.shape == y.shape) or d.ndim != 1:
        raise InputError("fit_packed_step_law needs four 1-D arrays of equal length")
    tok = d + p
    if y.size < 5 or np.ptp(tok) == 0 or np.ptp(c) == 0:
        raise InputError(
            f"fit_packed_step_law needs >= 5 iterations varying in tokens and in context, got {y.size}"
        )
    if not (np.all(np.isfinite(y)) and np.all(y > 0)):
        raise InputError("fit_packed_step_law: iteration times must be finite and > 0 s")
    x = np.column_stack([np.ones_like(y), tok, c, tok * c])
    scale = np.maximum(np.abs(x).max(axis=0), 1e-300)
    coef, _ = nnls(x / scale, y)
    coef = coef / scale
    if coef[0] == 0 and coef[1] == 0:
        raise InputError("fit_packed_step_law: the fit leaves no fixed or per-token cost")
    return PackedStepLaw(float(coef[0]), float(coef[1]), float(coef[2]), name,
                         "non-negative least squares", "measured", c_qk_s=float(coef[3]))  # fmt: skip
