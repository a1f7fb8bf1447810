"""M/G/1 FCFS simulator with optional deterministic patience (Sec. III), Numba-compiled.

Model
-----
- Poisson arrivals at ``rate_per_s`` requests/s (i.i.d. exponential gaps);
- one server, first come first served, one request at a time;
- service time S = a*min(N, l) + b0 (Eq. 3-5; a in s/token, b0 in s), N drawn i.i.d. from the
  token law, l the max-token limit (``limit``, tokens; inf for none);
- optional deterministic patience tau = ``patience_s`` (M/G/1+D): a user whose virtual waiting
  time V on arrival exceeds tau leaves at once (lost) and adds no work; otherwise the user waits
  exactly V and is served in full. A lost user counts as having waited tau in the mean wait of
  everyone, as Eq. (9) does: E[W] = tau*pi + (1 - pi)*W_qs.

Method
------
Workload (Lindley) recursion on the virtual waiting time seen by arrival n:
``V_{n+1} = max(0, V_n + S_n*1{served} - A_{n+1})``, starting from an empty system. The run is
processed in chunks of ``chunk`` requests, so memory is O(chunk + histogram), independent of the
run length. The first ``warmup`` requests are discarded; the remaining ``requests`` are cut into
``batches`` equal consecutive batches, and the 95% confidence half-widths are batch-means
Student-t intervals (:func:`llmqueue.sim.stats.batch_means`).

Random numbers: per chunk, one 64-bit word per request from a NumPy ``Generator(PCG64)`` seeded
with ``seed``. Its low 32 bits give the exponential interarrival gap and its high 32 bits the
token count for the log-normal, exponential and deterministic laws, through a 256-layer ziggurat
(Marsaglia & Tsang 2000; the 32-bit variant NumPy's float32 samplers use, 23-bit mantissa), all
inside the compiled kernel; the rare rejections (about 2%) and retries take words from a spare
stream drawn from the same generator (refilled between chunks, several times more words than a
chunk can need). Any other token law is sampled per chunk with its own
``law.sample(rng, chunk)`` (float64). Log-normal tokens are exp(mu + sigma*Z) computed in float32
(relative error ~1e-7; NumPy's vectorised exp over the chunk when mu + 12*sigma < 80, else
in-kernel, in float64 when mu + sigma*Z >= 80), then clipped in float64. The same
seed, chunk size (default 2**16: as fast as larger chunks here, 0.5 MiB of draws) and arguments
give a bit-identical result. The kernel releases the GIL, so replications run on threads
(:func:`simulate_mg1_replications`).

Quantiles (p50/p95/p99) come from a fixed linear histogram of the served users' waits over
[0, ``hist_max_s``] with ``HIST_BINS`` bins plus an overflow bin (a quantile in the overflow bin
is reported as +inf); the wait of everyone adds an atom of the lost users at tau. Default
``hist_max_s``: tau*(1 + 2/HIST_BINS) with patience (every wait is <= tau, so no overflow), else
40*(W_q + E[S]) with W_q from Pollaczek-Khinchine (Eq. 1); the bin width bounds the quantile
error (linear interpolation inside a bin).

The simulator is the independent check of Eq. (1) Pollaczek-Khinchine (with Eq. 2-5 for the
clipped service law) and of Eq. (6)-(9) (M/G/1+D loss pi, served wait W_qs, everyone's wait E[W]).
"""

from __future__ import annotations

import math
import numbers
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency, service_moments
from llmqueue.sim.stats import Estimate, batch_means, histogram_quantiles
from llmqueue.tokens import DeterministicLaw, ExponentialLaw, LogNormalLaw, TokenLaw

__all__ = ["MG1SimResult", "simulate_mg1", "simulate_mg1_replications", "HIST_BINS"]

HIST_BINS = 4096
"""Regular bins of the wait histogram (one more bin holds the overflow)."""

_SPARE_MARGIN = 4096

# Token-source modes of the kernel.
_MODE_ARRAY = 0  # tokens given per chunk (law.sample)
_MODE_LOGNORMAL = 1
_MODE_EXPONENTIAL = 2
_MODE_DETERMINISTIC = 3


# ---------------------------------------------------------------------------------------------
# Ziggurat tables (Marsaglia & Tsang 2000), 256 layers, 23-bit mantissa.
def _ziggurat_tables(
    f: Any, f_inv: Any, r: float, tail_area: float, bits: int = 23, n: int = 256
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """k (uint32), w, f tables: index 0 is the base strip (with the tail), n-1 the bottom layer."""
    m = float(2**bits)
    v = r * f(r) + tail_area  # area of each layer
    k = np.zeros(n, dtype=np.uint32)
    w = np.zeros(n)
    ft = np.zeros(n)
    q = v / f(r)
    k[0] = np.uint32((r / q) * m)
    w[0] = q / m
    w[n - 1] = r / m
    ft[0] = 1.0
    ft[n - 1] = f(r)
    x, prev = r, r
    for i in range(n - 2, 0, -1):
        x = f_inv(v / x + f(x))
        k[i + 1] = np.uint32((x / prev) * m)
        prev = x
        ft[i] = f(x)
        w[i] = x / m
    k[1] = 0
    return k, w, ft


_NOR_R = 3.6541528853610087963519472518
_EXP_R = 7.69711747013104972
_NOR_K, _NOR_W, _NOR_F = _ziggurat_tables(
    lambda x: math.exp(-0.5 * x * x),
    lambda y: math.sqrt(-2.0 * math.log(y)),
    _NOR_R,
    math.sqrt(math.pi / 2.0) * math.erfc(_NOR_R / math.sqrt(2.0)),
)
_EXP_K, _EXP_W, _EXP_F = _ziggurat_tables(
    lambda x: math.exp(-x), lambda y: -math.log(y), _EXP_R, math.exp(-_EXP_R)
)


_U53 = 1.0 / 9007199254740992.0  # 2**-53


@njit(cache=True, nogil=True, inline="always")
def _spare_word(spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Next 64-bit word of the spare stream (rejection paths only).

    The caller keeps at least SPARE_MARGIN words ahead; the wrap-around only guards memory safety.
    """
    if sp >= spare.size:
        sp = 0
    return spare[sp], sp + 1


@njit(cache=True, nogil=True, inline="always")
def _spare_uniform(spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Uniform on (0, 1] with 53 bits, from the spare stream."""
    w, sp = _spare_word(spare, sp)
    return ((w >> np.uint64(11)) + np.uint64(1)) * _U53, sp


@njit(cache=True, nogil=True, inline="always")
def _std_exp(r32, kt, wt, ft, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Standard exponential from 32 random bits (ziggurat); rejections draw from `spare`."""
    while True:
        ri = r32 >> np.uint32(1)
        idx = ri & np.uint32(0xFF)
        ri = ri >> np.uint32(8)
        x = ri * wt[idx]
        if ri < kt[idx]:
            return x, sp
        if idx == 0:  # tail beyond r: r + Exp(1) (memoryless)
            u, sp = _spare_uniform(spare, sp)
            return _EXP_R - math.log(u), sp
        u, sp = _spare_uniform(spare, sp)
        if (ft[idx - 1] - ft[idx]) * u + ft[idx] < math.exp(-x):
            return x, sp
        w, sp = _spare_word(spare, sp)
        r32 = np.uint32(w & np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True, inline="always")
def _std_normal(r32, kt, wt, ft, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Standard normal from 32 random bits (ziggurat); rejections draw from `spare`."""
    while True:
        idx = r32 & np.uint32(0xFF)
        sign = (r32 >> np.uint32(8)) & np.uint32(1)
        rabs = r32 >> np.uint32(9)
        x = rabs * wt[idx]
        if sign:
            x = -x
        if rabs < kt[idx]:
            return x, sp
        if idx == 0:  # tail beyond r (Marsaglia 1964)
            while True:
                u1, sp = _spare_uniform(spare, sp)
                u2, sp = _spare_uniform(spare, sp)
                xx = -math.log(u1) / _NOR_R
                yy = -math.log(u2)
                if yy + yy > xx * xx:
                    return (-(_NOR_R + xx) if sign else _NOR_R + xx), sp
        u, sp = _spare_uniform(spare, sp)
        if (ft[idx - 1] - ft[idx]) * u + ft[idx] < math.exp(-0.5 * x * x):
            return x, sp
        w, sp = _spare_word(spare, sp)
        r32 = np.uint32(w & np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True)
def _run_chunk(
    raw,
    tokens,
    mode,
    p1,
    p2,
    a,
    b0,
    limit,
    inv_rate,
    tau,
    v,
    start,
    warmup,
    bounds,
    sum_all,
    sum_served,
    n_served,
    n_lost,
    hist,
    inv_w,
    ek,
    ew,
    ef,
    nk,
    nw,
    nf,
    spare,
    sp,
):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Advance the Lindley recursion over one chunk; returns (virtual wait after it, spare index).

    Requests with global index < warmup go to the sink slot (index `batches` of the sums, row 0
    of `hist`); measured request m = g - warmup goes to batch k with bounds[k] <= m < bounds[k+1]
    and to row 1 of `hist`.
    """
    n = raw.size
    nbins = hist.shape[1] - 1
    nbatch = bounds.size - 1
    total = bounds[nbatch]
    sdet = a * min(p1, limit) + b0
    i = 0
    while i < n:
        g = start + i
        if g < warmup:
            end = min(n, warmup - start)
            k = nbatch
            row = 0
        else:
            m = g - warmup
            k = (m * nbatch) // total
            while k + 1 <= nbatch - 1 and bounds[k + 1] <= m:
                k += 1
            while k > 0 and bounds[k] > m:
                k -= 1
            end = min(n, bounds[k + 1] + warmup - start)
            row = 1
        s_all = 0.0
        s_srv = 0.0
        c_srv = 0
        c_lost = 0
        for j in range(i, end):
            r = raw[j]
            e, sp = _std_exp(np.uint32(r & np.uint64(0xFFFFFFFF)), ek, ew, ef, spare, sp)
            gap = e * inv_rate
            if mode == 1:
                z, sp = _std_normal(np.uint32(r >> np.uint64(32)), nk, nw, nf, spare, sp)
                t = p1 + p2 * z
                if t < 80.0:  # float32 exp is 3x faster; its 1e-7 relative error is harmless
                    tok = float(math.exp(np.float32(t)))
                else:
                    tok = math.exp(t)
                s = a * min(tok, limit) + b0
            elif mode == 2:
                e2, sp = _std_exp(np.uint32(r >> np.uint64(32)), ek, ew, ef, spare, sp)
                s = a * min(p1 * e2, limit) + b0
            elif mode == 3:
                s = sdet
            else:
                s = a * min(tokens[j], limit) + b0
            if v <= tau:
                s_all += v
                s_srv += v
                c_srv += 1
                x = v * inv_w
                b = nbins if x >= nbins else int(x)
                hist[row, b] += 1
                v += s
            else:
                s_all += tau
                c_lost += 1
            v -= gap
            if v < 0.0:
                v = 0.0
        sum_all[k] += s_all
        sum_served[k] += s_srv
        n_served[k] += c_srv
        n_lost[k] += c_lost
        i = end
    return v, sp


@njit(cache=True, nogil=True)
def _lognormal_exponents(raw, mu, sigma, out, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """out[j] = mu + sigma*Z_j (float32), Z_j normal from the high 32 bits of raw[j].

    NumPy's float32 exp (SIMD) then turns them into tokens: about 1.2x faster than a scalar exp
    inside the Lindley loop. Capped at 88 (float32 exp overflows above 88.7).
    """
    for j in range(raw.size):
        z, sp = _std_normal(np.uint32(raw[j] >> np.uint64(32)), _NOR_K, _NOR_W, _NOR_F, spare, sp)
        out[j] = min(mu + sigma * z, 88.0)
    return sp


@njit(cache=True, nogil=True)
def _fill_standard(kind, raw, spare, out, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Test hook: the kernel's standard exponential (kind 0, low 32 bits of each word) or normal
    (kind 1, high 32 bits) draws, one per word of `raw`, the rejections reading `spare` from
    index `sp` on; returns the spare index after them."""
    for j in range(raw.size):
        r = raw[j]
        if kind == 0:
            out[j], sp = _std_exp(
                np.uint32(r & np.uint64(0xFFFFFFFF)), _EXP_K, _EXP_W, _EXP_F, spare, sp
            )
        else:
            out[j], sp = _std_normal(
                np.uint32(r >> np.uint64(32)), _NOR_K, _NOR_W, _NOR_F, spare, sp
            )
    return sp


# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MG1SimResult:
    """Output of :func:`simulate_mg1`. Times in seconds; `loss` a fraction in [0, 1].

    w_all: mean wait in queue of everyone (a lost user counts tau, Eq. 9); w_served: mean wait of
    served users (W_qs; W_q without patience); loss: fraction of users lost (pi, Eq. 6-8; 0 without
    patience). Quantiles: of the wait of everyone (wait_*) and of served users (served_*); +inf
    when the quantile lies beyond the histogram range.
    """

    requests: int
    w_all: Estimate
    w_served: Estimate
    loss: Estimate
    wait_p50: float
    wait_p95: float
    wait_p99: float
    served_p50: float
    served_p95: float
    served_p99: float

    def to_dict(self) -> dict[str, Any]:
        """Flat, JSON-friendly dict; non-finite numbers (inf quantile, nan) become None."""

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        out: dict[str, Any] = {"requests": int(self.requests)}
        for key in ("w_all", "w_served", "loss"):
            est: Estimate = getattr(self, key)
            out[key] = num(est.mean)
            out[f"{key}_ci95"] = num(est.ci95)
        for key in ("wait_p50", "wait_p95", "wait_p99", "served_p50", "served_p95", "served_p99"):
            out[key] = num(getattr(self, key))
        return out


def _is_int(x: Any) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_args(
    law: Any,
    latency: Any,
    rate_per_s: Any,
    limit: Any,
    patience_s: Any,
    requests: Any,
    warmup: Any,
    batches: Any,
    hist_max_s: Any,
    chunk: Any,
    seed: Any,
) -> None:
    if not isinstance(law, TokenLaw):
        raise InputError(f"law must be a llmqueue.tokens.TokenLaw, got {type(law).__name__}")
    if not isinstance(latency, LinearLatency):
        raise InputError(
            f"latency must be a llmqueue.latency.LinearLatency, got {type(latency).__name__}"
        )

    def real(name: str, x: Any) -> float:
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or math.isnan(float(x)):
            raise InputError(f"{name} must be a number, got {x!r}")
        return float(x)

    rate = real("rate_per_s", rate_per_s)
    if not (0 < rate < math.inf):
        raise InputError(
            f"rate_per_s must be a finite arrival rate > 0 requests/s, got {rate_per_s!r}"
        )
    if not real("limit", limit) > 0:
        raise InputError(f"limit must be > 0 tokens (inf for no limit), got {limit!r}")
    if patience_s is not None:
        tau = real("patience_s", patience_s)
        if not (0 < tau < math.inf):
            raise InputError(
                f"patience_s must be a finite patience > 0 s (None for patient users), got {patience_s!r}"
            )
    if not _is_int(batches) or batches < 2:
        raise InputError(f"batches must be an integer >= 2, got {batches!r}")
    if not _is_int(requests) or requests < 10 * batches:
        raise InputError(
            f"requests must be an integer >= 10*batches = {10 * batches}, got {requests!r}"
        )
    if not _is_int(warmup) or warmup < 0:
        raise InputError(f"warmup must be an integer >= 0, got {warmup!r}")
    if hist_max_s is not None:
        h = real("hist_max_s", hist_max_s)
        if not (0 < h < math.inf):
            raise InputError(
                f"hist_max_s must be a finite time > 0 s (None for the default), got {hist_max_s!r}"
            )
    if not (isinstance(seed, np.random.SeedSequence) or (_is_int(seed) and seed >= 0)):
        raise InputError(f"seed must be an integer >= 0 or a numpy SeedSequence, got {seed!r}")
    if not _is_int(chunk) or not (1 <= chunk <= 1 << 26):
        raise InputError(f"chunk must be an integer in [1, 2**26] requests, got {chunk!r}")


def simulate_mg1(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    *,
    limit: float = math.inf,
    patience_s: float | None = None,
    requests: int,
    warmup: int = 100_000,
    batches: int = 40,
    seed: int | np.random.SeedSequence,
    hist_max_s: float | None = None,
    chunk: int = 1 << 16,
) -> MG1SimResult:
    """Simulate the M/G/1 (or M/G/1+D with ``patience_s``) FCFS queue; see the module docstring.

    Args:
        law: token law of N (tokens); latency: S = a*min(N, limit) + b0 (s).
        rate_per_s: Poisson arrival rate lambda (requests/s), > 0.
        limit: max-token limit l (tokens), > 0; inf for none.
        patience_s: deterministic patience tau (s), > 0; None for patient users.
        requests: measured requests after warm-up (>= 10*batches); warmup: discarded requests.
        batches: number of batches for the batch-means 95% CI (>= 2).
        seed: int or numpy SeedSequence; same seed (and chunk) -> bit-identical result.
        hist_max_s: upper end of the wait histogram (s); default as in the module docstring.
        chunk: requests per chunk of random numbers (memory ~ 8*chunk bytes; the result depends
            on it, since the draws are grouped per chunk).

    Raises:
        InputError: bad argument (the message names it and its allowed range).
        UnstableError: patient users (no patience) and rho = lambda*E[S] >= 1.

    Checks Eq. (1) (with Eq. 2-5) for patient users and Eq. (6)-(9) with patience.
    """
    _check_args(
        law,
        latency,
        rate_per_s,
        limit,
        patience_s,
        requests,
        warmup,
        batches,
        hist_max_s,
        chunk,
        seed,
    )
    rate = float(rate_per_s)
    lim = float(limit)
    es, es2 = service_moments(law, latency, lim)
    rho = rate * es
    if patience_s is None and not rho < 1.0:
        raise UnstableError(
            f"rho = rate_per_s*E[S] = {rate:g}*{es:g} = {rho:.4g} >= 1 at rate_per_s = {rate:g} "
            f"requests/s: patient users (no patience_s) have no steady state; need rate_per_s < "
            f"{1.0 / es:.6g} (or a lower limit, or a patience)"
        )
    tau = math.inf if patience_s is None else float(patience_s)
    if hist_max_s is not None:
        hmax = float(hist_max_s)
    elif patience_s is not None:
        hmax = tau * (1.0 + 2.0 / HIST_BINS)
    else:
        wq = rate * es2 / (2.0 * (1.0 - rho))
        hmax = 40.0 * (wq + es)
    inv_w = HIST_BINS / hmax

    a, b0 = float(latency.a_s_per_token), float(latency.b0_s)
    vector_lognormal = False
    if isinstance(law, LogNormalLaw):
        mode, p1, p2 = _MODE_LOGNORMAL, float(law.mu), float(law.sigma)
        # float32 exp in a separate vectorised pass, unless exp could come near float32 overflow
        vector_lognormal = p1 + 12.0 * p2 < 80.0
    elif isinstance(law, ExponentialLaw):
        mode, p1, p2 = _MODE_EXPONENTIAL, float(law.mean_tokens), 0.0
    elif isinstance(law, DeterministicLaw):
        mode, p1, p2 = _MODE_DETERMINISTIC, float(law.value), 0.0
    else:
        mode, p1, p2 = _MODE_ARRAY, 0.0, 0.0

    rng = np.random.Generator(np.random.PCG64(seed))
    bounds = (np.arange(batches + 1, dtype=np.int64) * requests) // batches
    sum_all = np.zeros(batches + 1)
    sum_served = np.zeros(batches + 1)
    n_served = np.zeros(batches + 1, dtype=np.int64)
    n_lost = np.zeros(batches + 1, dtype=np.int64)
    hist = np.zeros((2, HIST_BINS + 1), dtype=np.int64)
    empty = np.zeros(0)
    total = warmup + requests
    v = 0.0
    start = 0
    need = min(chunk, total) // 4 + _SPARE_MARGIN  # far above the ~0.06 words/request used
    spare = np.zeros(0, dtype=np.uint64)
    sp = 0
    buf32 = np.empty(min(chunk, total) if vector_lognormal else 0, dtype=np.float32)
    kernel_mode = _MODE_ARRAY if vector_lognormal else mode
    while start < total:
        n = min(chunk, total - start)
        raw = rng.bit_generator.random_raw(n)
        tokens: np.ndarray = law.sample(rng, n) if mode == _MODE_ARRAY else empty
        if spare.size - sp < need:
            spare = rng.bit_generator.random_raw(4 * need)
            sp = 0
        if vector_lognormal:
            tokens = buf32[:n]
            sp = _lognormal_exponents(raw, p1, p2, tokens, spare, sp)
            np.exp(tokens, out=tokens)
        v, sp = _run_chunk(
            raw,
            tokens,
            kernel_mode,
            p1,
            p2,
            a,
            b0,
            lim,
            1.0 / rate,
            tau,
            v,
            start,
            warmup,
            bounds,
            sum_all,
            sum_served,
            n_served,
            n_lost,
            hist,
            inv_w,
            _EXP_K,
            _EXP_W,
            _EXP_F,
            _NOR_K,
            _NOR_W,
            _NOR_F,
            spare,
            sp,
        )
        start += n

    served, lost = n_served[:batches], n_lost[:batches]
    count = served + lost
    w_all = batch_means(sum_all[:batches], count)
    w_served = batch_means(sum_served[:batches], served)
    if patience_s is None:
        loss = Estimate(0.0, 0.0)
    else:
        loss = batch_means(lost.astype(float), count)
    width = 1.0 / inv_w
    qs = (0.5, 0.95, 0.99)
    h = hist[1]
    n_lost_tot = int(lost.sum())
    wq_all = histogram_quantiles(h, width, qs, extra_atom=(tau, n_lost_tot) if n_lost_tot else None)
    wq_srv = histogram_quantiles(h, width, qs)
    if patience_s is not None:  # every wait is <= tau; interpolation inside tau's bin may overshoot
        wq_all = np.minimum(wq_all, tau)
        wq_srv = np.minimum(wq_srv, tau)
    return MG1SimResult(
        int(requests),
        w_all,
        w_served,
        loss,
        float(wq_all[0]),
        float(wq_all[1]),
        float(wq_all[2]),
        float(wq_srv[0]),
        float(wq_srv[1]),
        float(wq_srv[2]),
    )


def _child_seeds(seed: int | np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """n independent child seeds; unlike SeedSequence.spawn it does not mutate `seed`."""
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    base = tuple(ss.spawn_key)
    return [
        np.random.SeedSequence(ss.entropy, spawn_key=base + (i,), pool_size=ss.pool_size)
        for i in range(n)
    ]


def simulate_mg1_replications(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    *,
    replications: int,
    workers: int = 1,
    limit: float = math.inf,
    patience_s: float | None = None,
    requests: int,
    warmup: int = 100_000,
    batches: int = 40,
    seed: int | np.random.SeedSequence,
    hist_max_s: float | None = None,
    chunk: int = 1 << 16,
) -> list[MG1SimResult]:
    """Independent replications of :func:`simulate_mg1`, run on `workers` threads.

    Replication i uses the i-th child of `seed` (``SeedSequence(seed).spawn(replications)[i]``,
    computed without mutating a SeedSequence passed in), so the list is the same whatever
    `workers` is. The compiled kernel releases the GIL, so threads use several cores.
    """
    if not _is_int(replications) or replications < 1:
        raise InputError(f"replications must be an integer >= 1, got {replications!r}")
    if not _is_int(workers) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    _check_args(
        law,
        latency,
        rate_per_s,
        limit,
        patience_s,
        requests,
        warmup,
        batches,
        hist_max_s,
        chunk,
        seed,
    )
    seeds = _child_seeds(seed, replications)

    def one(s: np.random.SeedSequence) -> MG1SimResult:
        return simulate_mg1(
            law,
            latency,
            rate_per_s,
            limit=limit,
            patience_s=patience_s,
            requests=requests,
            warmup=warmup,
            batches=batches,
            seed=s,
            hist_max_s=hist_max_s,
            chunk=chunk,
        )

    if workers == 1 or replications == 1:
        return [one(s) for s in seeds]
    with ThreadPoolExecutor(max_workers=min(workers, replications)) as pool:
        return list(pool.map(one, seeds))
