"""Output analysis shared by the simulators: batch means.

A run (after warm-up) is cut into B equal consecutive batches; the batch means are treated as
approximately i.i.d. normal, giving the 95% Student-t confidence half-width
t_{0.975, B-1} * sd(batch means) / sqrt(B). Quantiles come from the recorder's histogram
(:func:`llmqueue.sim.recorder.histogram_quantiles`), so memory stays O(1) in the run length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
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
