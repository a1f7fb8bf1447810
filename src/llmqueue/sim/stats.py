"""Output analysis shared by the simulators: batch means and streaming histogram quantiles.

A run (after warm-up) is cut into B equal consecutive batches; the batch means are treated as
approximately i.i.d. normal, giving the 95% Student-t confidence half-width
t_{0.975, B-1} * sd(batch means) / sqrt(B). Quantiles come from a fixed linear histogram, so
memory stays O(1) in the run length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats


@dataclass(frozen=True)
class Estimate:
    """A simulated mean with its 95% confidence half-width (same units as the mean)."""

    mean: float
    ci95: float

    @property
    def rel_ci(self) -> float:
        return self.ci95 / abs(self.mean) if self.mean else math.inf


def batch_means(sums: ArrayLike, counts: ArrayLike) -> Estimate:
    """Batch-means estimate of a ratio mean (sum over all batches / count over all batches).

    `sums[i]` and `counts[i]` are the total and the number of observations in batch i. The
    point estimate is the pooled ratio; its CI uses the spread of the per-batch ratios.
    """
    s = np.asarray(sums, dtype=float)
    c = np.asarray(counts, dtype=float)
    total = c.sum()
    if total <= 0:
        return Estimate(math.nan, math.nan)
    mean = float(s.sum() / total)
    ok = c > 0
    if ok.sum() < 2:
        return Estimate(mean, math.nan)
    per = s[ok] / c[ok]
    b = per.size
    half = float(stats.t.ppf(0.975, b - 1) * per.std(ddof=1) / math.sqrt(b))
    return Estimate(mean, half)


def histogram_quantiles(
    counts: ArrayLike, bin_width: float, qs: ArrayLike, extra_atom: tuple[float, int] | None = None
) -> NDArray[np.float64]:
    """Quantiles of values binned in [k*w, (k+1)*w), k = 0..K-1, the last bin being overflow.

    Linear interpolation inside a bin; a quantile landing in the overflow bin is +inf (the
    histogram did not reach that far). `extra_atom` = (value, count) adds a point mass, e.g. the
    patience tau of lost users.
    """
    cnt = np.asarray(counts, dtype=float).copy()
    k = cnt.size
    edges = np.arange(k + 1, dtype=float) * bin_width
    if extra_atom is not None and extra_atom[1] > 0:
        value, n = extra_atom
        idx = min(int(value / bin_width), k - 1)
        cnt[idx] += n
    total = cnt.sum()
    out = np.full(np.size(qs), math.nan)
    if total <= 0:
        return out
    cum = np.cumsum(cnt)
    for j, q in enumerate(np.atleast_1d(np.asarray(qs, dtype=float))):
        target = q * total
        i = int(np.searchsorted(cum, target, side="left"))
        if i >= k - 1:
            out[j] = math.inf
            continue
        before = cum[i - 1] if i > 0 else 0.0
        frac = (target - before) / cnt[i] if cnt[i] > 0 else 0.0
        out[j] = edges[i] + frac * bin_width
    return out
