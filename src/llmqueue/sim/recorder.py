"""The one recorder of every simulator: batch means for the mean and its CI, a log-linear
histogram for the quantiles, and the maximum. O(1) memory in the run length.

- **Batch means**: the measured requests (after warm-up), in arrival order, are cut into ``B``
  equal consecutive batches; per metric, the sum and count of each batch give the pooled mean and
  a 95% Student-t half-width over the batch ratios (:func:`llmqueue.sim.stats.batch_means`).
- **Histogram**: 256 linear sub-buckets per power of two from 2**-30 s (about 1 ns) to 2**40 s,
  plus an underflow bin (0 and anything below 2**-30) and an overflow bin; a value's bin comes
  from its float64 exponent and top 8 mantissa bits (no logarithm), so the bins cover every scale
  without a range to guess. Quantiles interpolate linearly inside a bin, so their error is below
  one bin width: 1/256 (0.4%) of the value.
- **Maximum** of each metric over the measured requests (e.g. the longest wait: starvation).

Compiled code records into three arrays made by :func:`new_arrays` through :func:`record`
(or :func:`hist_index` where a kernel aggregates its sums itself); :func:`finish` turns them
into :class:`llmqueue.sim.result.Metric` objects.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from llmqueue.sim.result import Metric
from llmqueue.sim.stats import batch_means

__all__ = [
    "SUB",
    "E_MIN",
    "E_MAX",
    "NBINS",
    "new_arrays",
    "bit_view",
    "hist_index",
    "record",
    "finish",
    "histogram_quantiles",
    "bin_edges",
]

SUB = 256  # linear sub-buckets per power of two (8 mantissa bits)
E_MIN = -30  # 2**-30 s ~ 0.93 ns: below it, the underflow bin
E_MAX = 40  # 2**40 s ~ 35,000 years: from it, the overflow bin
NBINS = (E_MAX - E_MIN) * SUB + 2


def new_arrays(metrics: int, batches: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(sums[m, b], counts[m, b], hist[m, NBINS], maxima[m]) for `metrics` metrics."""
    return (
        np.zeros((metrics, batches)),
        np.zeros((metrics, batches)),
        np.zeros((metrics, NBINS), dtype=np.int64),
        np.full(metrics, -math.inf),
    )


def bit_view() -> tuple[np.ndarray, np.ndarray]:
    """A one-element float64 buffer and its int64 view, for :func:`hist_index`."""
    f = np.zeros(1)
    return f, f.view(np.int64)


@njit(cache=True, nogil=True, inline="always")
def hist_index(fbuf, ibuf, x):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Histogram bin of x >= 0 (s): 0 = underflow, NBINS - 1 = overflow."""
    if not x > 0.0:
        return 0
    fbuf[0] = x
    bits = ibuf[0]
    e = ((bits >> 52) & 0x7FF) - 1023
    if e < E_MIN:
        return 0
    if e >= E_MAX:
        return NBINS - 1
    return 1 + (e - E_MIN) * SUB + ((bits >> 44) & 0xFF)


@njit(cache=True, nogil=True, inline="always")
def record(sums, counts, hist, maxima, fbuf, ibuf, m, g, x):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Record value x (>= 0) of metric m for a request of measurement batch g."""
    sums[m, g] += x
    counts[m, g] += 1.0
    hist[m, hist_index(fbuf, ibuf, x)] += 1
    if x > maxima[m]:
        maxima[m] = x


def bin_edges() -> tuple[np.ndarray, np.ndarray]:
    """(lower edge, width) of every bin, seconds; the overflow bin has width inf."""
    lo = np.empty(NBINS)
    wd = np.empty(NBINS)
    lo[0], wd[0] = 0.0, 2.0**E_MIN
    e = np.repeat(np.arange(E_MIN, E_MAX), SUB).astype(float)
    s = np.tile(np.arange(SUB), E_MAX - E_MIN).astype(float)
    lo[1:-1] = np.exp2(e) * (1.0 + s / SUB)
    wd[1:-1] = np.exp2(e) / SUB
    lo[-1], wd[-1] = 2.0**E_MAX, math.inf
    return lo, wd


_EDGES = bin_edges()


def histogram_quantiles(
    hist: np.ndarray, qs: tuple[float, ...], extra_atom: tuple[float, int] | None = None
) -> np.ndarray:
    """Quantiles of the values counted in `hist` (one row of a recorder); linear inside a bin.

    A quantile in the overflow bin is +inf; `extra_atom` = (value, count) adds a point mass (the
    patience tau of lost users in M/G/1+D). NaN when nothing was recorded.
    """
    cnt = np.asarray(hist, dtype=float).copy()
    lo, wd = _EDGES
    if extra_atom is not None and extra_atom[1] > 0:
        value, n = extra_atom
        f, iv = bit_view()
        cnt[_hist_index_py(f, iv, float(value))] += n
    total = cnt.sum()
    out = np.full(len(qs), math.nan)
    if total <= 0:
        return out
    cum = np.cumsum(cnt)
    for j, q in enumerate(qs):
        target = q * total
        i = int(np.searchsorted(cum, target, side="left"))
        if i >= NBINS - 1:
            out[j] = math.inf
            continue
        before = cum[i - 1] if i > 0 else 0.0
        frac = (target - before) / cnt[i] if cnt[i] > 0 else 0.0
        out[j] = lo[i] + min(max(frac, 0.0), 1.0) * wd[i]
    return out


def _hist_index_py(f: np.ndarray, iv: np.ndarray, x: float) -> int:
    return int(hist_index(f, iv, x))


def finish(
    sums: np.ndarray,
    counts: np.ndarray,
    hist: np.ndarray,
    maxima: np.ndarray,
    m: int,
    extra_atom: tuple[float, int] | None = None,
) -> Metric:
    """The :class:`Metric` of metric m: pooled mean with its 95% CI, p50/p90/p95/p99, max."""
    est = batch_means(sums[m], counts[m])
    p50, p90, p95, p99 = histogram_quantiles(hist[m], (0.5, 0.9, 0.95, 0.99), extra_atom)
    mx = float(maxima[m]) if math.isfinite(maxima[m]) else math.nan
    return Metric(est.mean, est.ci95, float(p50), float(p90), float(p95), float(p99), mx)
