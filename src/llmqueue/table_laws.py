"""Output-token laws read from data (:mod:`llmqueue.tokens` parses their specs): the empirical
law of observed token counts (``trace:PATH:COLUMN``, e.g. the Azure trace) and the law of a table
of quantiles (``quantiles:PATH``). Exact sums throughout; units: tokens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from llmqueue.lazy import lazy_module
from llmqueue.limits import MAX_TOKENS
from llmqueue.tokenlaw import (
    TOKENS_TEXT,
    FloatArray,
    TokenLaw,
    check_batch_size,
    require_law,
    scalar_or_array,
)
from llmqueue.traces import read_columns

stats = lazy_module("scipy.stats")

__all__ = ["EmpiricalLaw", "QuantileTableLaw"]


@dataclass(frozen=True, eq=False)
class EmpiricalLaw(TokenLaw):
    """The empirical law of observed token counts (e.g. a trace column). Exact sums throughout."""

    values: FloatArray  # sorted distinct values
    probs: FloatArray
    spec: str = ""

    @classmethod
    def from_samples(cls, samples: ArrayLike, spec: str = "") -> EmpiricalLaw:
        x = np.asarray(samples, dtype=float)
        spec = spec or "empirical"
        require_law(x.size > 0, spec, "no observations")
        require_law(bool(np.all(np.isfinite(x))), spec, "observations must be finite numbers")
        require_law(bool(np.all(x >= 0)), spec, "token counts must be >= 0")
        require_law(
            bool(np.all(x <= MAX_TOKENS)), spec, f"token counts must be at most {TOKENS_TEXT}"
        )
        vals, counts = np.unique(x, return_counts=True)
        return cls(vals, counts / counts.sum(), spec)

    @cached_property
    def _cum(self) -> FloatArray:
        return np.cumsum(self.probs)

    @property
    def support(self) -> tuple[float, float]:
        return (float(self.values[0]), float(self.values[-1]))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        idx = np.searchsorted(self._cum, rng.random(size) * self._cum[-1], side="right")
        return self.values[np.minimum(idx, self.values.size - 1)]

    def cdf(self, x: ArrayLike) -> Any:
        idx = np.searchsorted(self.values, np.asarray(x, dtype=float), side="right")
        c = np.concatenate([[0.0], self._cum])
        return scalar_or_array(np.minimum(c[idx], 1.0), x)

    def prob_below(self, x: ArrayLike) -> Any:
        idx = np.searchsorted(self.values, np.asarray(x, dtype=float), side="left")
        c = np.concatenate([[0.0], self._cum])
        return scalar_or_array(np.minimum(c[idx], 1.0), x)

    def ppf(self, q: ArrayLike) -> Any:
        idx = np.searchsorted(self._cum, np.asarray(q, dtype=float) - 1e-15, side="left")
        return scalar_or_array(self.values[np.minimum(idx, self.values.size - 1)], q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        la = np.asarray(limit, dtype=float)
        idx = np.searchsorted(self.values, la, side="left")
        partial = np.concatenate([[0.0], np.cumsum(self.probs * self.values**k)])
        below = np.concatenate([[0.0], self._cum])
        with np.errstate(invalid="ignore"):
            tail = np.where(np.isinf(la), 0.0, la**k * np.maximum(1.0 - below[idx], 0.0))
        return scalar_or_array(partial[idx] + tail, limit)

    def order_stat_means(self, b: int) -> FloatArray:
        b = check_batch_size(b)
        cdf = np.minimum(self._cum, 1.0)
        cdf_prev = np.concatenate([[0.0], cdf[:-1]])
        i = np.arange(1, b + 1)[:, None]
        # P(N_(i:b) <= v_j) = P(Binomial(b, F(v_j)) >= i)
        upto = stats.binom.sf(i - 1, b, cdf[None, :])
        upto_prev = stats.binom.sf(i - 1, b, cdf_prev[None, :])
        return np.asarray((upto - upto_prev) @ self.values, dtype=float)

    def expected_max(self, b: int) -> float:
        b = check_batch_size(b)
        cdf = np.minimum(self._cum, 1.0)
        cdf_prev = np.concatenate([[0.0], cdf[:-1]])
        return float(np.dot(self.values, cdf**b - cdf_prev**b))


@dataclass(frozen=True, eq=False)
class QuantileTableLaw(TokenLaw):
    """The law of a table of quantiles: N = Q(U), U uniform on (0, 1), Q linear between the
    points (q_i, x_i), q_0 = 0 < q_1 < ... < q_m = 1, x_0 <= ... <= x_m (tokens); a flat piece
    (x_i = x_{i+1}) is an atom of mass q_{i+1} - q_i. Read from a CSV with the columns
    ``probability`` and ``tokens`` (:meth:`from_csv`). Exact clipped moments: a sum over the
    pieces, each a uniform law on [x_i, x_{i+1}] of mass q_{i+1} - q_i."""

    probs: tuple[float, ...]
    tokens: tuple[float, ...]
    spec: str = field(default="quantiles:table", compare=False)

    def __post_init__(self) -> None:
        q = np.asarray(self.probs, dtype=float)
        x = np.asarray(self.tokens, dtype=float)
        require_law(q.size >= 2 and q.size == x.size, self.spec, "needs at least 2 rows")
        require_law(
            bool(np.all(np.isfinite(q))) and q[0] == 0.0 and q[-1] == 1.0,
            self.spec,
            "probabilities must run from 0 to 1",
        )
        require_law(bool(np.all(np.diff(q) > 0)), self.spec, "probabilities must increase")
        require_law(
            bool(np.all(np.isfinite(x))) and x[0] >= 0 and x[-1] <= MAX_TOKENS,
            self.spec,
            f"tokens must lie in [0, {TOKENS_TEXT}]",
        )
        require_law(bool(np.all(np.diff(x) >= 0)), self.spec, "tokens must not decrease")
        require_law(x[-1] > 0, self.spec, "tokens must not all be 0")

    @classmethod
    def from_csv(cls, path: str | Path, spec: str) -> QuantileTableLaw:
        """The table of a CSV file with the columns ``probability`` and ``tokens``, read by the
        project's trace reader (:func:`llmqueue.traces.read_columns`: a missing file or column,
        a ragged row or a value that is not a finite number is one InputError naming it)."""
        p = Path(path)
        require_law(p.exists(), spec, f"file {str(p)!r} does not exist")
        require_law(p.is_file(), spec, f"{str(p)!r} is not a regular file")
        cols = read_columns(p, ["probability", "tokens"], where=f"token law {spec!r}")
        q = tuple(float(v) for v in cols["probability"])
        x = tuple(float(v) for v in cols["tokens"])
        return cls(q, x, spec=spec)

    @cached_property
    def _qx(self) -> tuple[FloatArray, FloatArray]:
        return np.asarray(self.probs, dtype=float), np.asarray(self.tokens, dtype=float)

    @property
    def support(self) -> tuple[float, float]:
        return (float(self.tokens[0]), float(self.tokens[-1]))

    def sample(self, rng: np.random.Generator, size: int) -> FloatArray:
        return np.asarray(self.ppf(rng.random(size)), dtype=float)

    def _between(self, xa: FloatArray, side: Any) -> FloatArray:
        q, x = self._qx
        i = np.searchsorted(x, xa, side=side)  # nodes below (side "left") or at most xa
        inner = (i > 0) & (i < x.size)
        j = np.clip(i, 1, x.size - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = (xa - x[j - 1]) / (x[j] - x[j - 1])
        mid = q[j - 1] + frac * (q[j] - q[j - 1])
        return np.where(inner, mid, np.where(i == 0, 0.0, 1.0))

    def cdf(self, x: ArrayLike) -> Any:
        return scalar_or_array(self._between(np.asarray(x, dtype=float), "right"), x)

    def prob_below(self, x: ArrayLike) -> Any:
        return scalar_or_array(self._between(np.asarray(x, dtype=float), "left"), x)

    def ppf(self, q: ArrayLike) -> Any:
        qq, x = self._qx
        return scalar_or_array(np.interp(np.asarray(q, dtype=float), qq, x), q)

    def clipped_moment(self, limit: ArrayLike, k: int = 1) -> Any:
        q, x = self._qx
        la = np.maximum(np.asarray(limit, dtype=float), 0.0)
        lim = la.reshape(-1, 1)
        lo, hi, mass = x[:-1], x[1:], np.diff(q)
        a, b = np.minimum(lo, lim), np.minimum(hi, lim)
        with np.errstate(divide="ignore", invalid="ignore"):
            spread = (b ** (k + 1) - a ** (k + 1)) / (k + 1) + np.where(
                np.isinf(lim), 0.0, lim**k * np.maximum(hi - np.maximum(lim, lo), 0.0)
            )
            piece = np.where(hi > lo, spread / (hi - lo), np.minimum(lo, lim) ** k)
        out = (piece * mass).sum(axis=1).reshape(la.shape)
        return scalar_or_array(out, limit)
