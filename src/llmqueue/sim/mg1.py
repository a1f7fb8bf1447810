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

Random numbers (:mod:`llmqueue.sim.rng`, the path every simulator shares): per chunk, one
64-bit PCG64 word per request. Its low 32 bits give the exponential interarrival gap and its
high 32 bits the token count (ziggurats for the log-normal, exponential and deterministic laws,
inside the compiled kernel). Any other token law is sampled per chunk through the shared
compiled sampler (:mod:`llmqueue.sim.laws`). Log-normal tokens are exp(mu + sigma*Z) computed in
float32 (relative error ~1e-7; NumPy's vectorised exp over the chunk when mu + 12*sigma < 80,
else in-kernel, in float64 when mu + sigma*Z >= 80), then clipped in float64. The same seed,
chunk size (default 2**16) and arguments give a bit-identical result. The kernel releases the
GIL, so replications run on threads (:func:`simulate_mg1_replications`).

Quantiles (p50/p90/p95/p99) and the maximum come from the shared recorder
(:mod:`llmqueue.sim.recorder`: a log-linear histogram, error < 0.4% of the value); the wait of
everyone adds an atom of the lost users at tau. Results are a :class:`llmqueue.sim.result.SimResult`:
``wait`` (everyone), and with patience ``served_wait`` (W_qs) and ``loss`` (pi).

The simulator is the independent check of Eq. (1) Pollaczek-Khinchine (with Eq. 2-5 for the
clipped service law) and of Eq. (6)-(9) (M/G/1+D loss pi, served wait W_qs, everyone's wait E[W]).
"""

from __future__ import annotations

import math
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency, service_moments
from llmqueue.sim.jit import kernel
from llmqueue.sim.laws import encode_law, sample_law_chunk
from llmqueue.sim.recorder import NBINS, bit_view, hist_index, histogram_quantiles
from llmqueue.sim.result import Metric, SimResult
from llmqueue.sim.rng import (
    EXP_F,
    EXP_K,
    EXP_W,
    NOR_F,
    NOR_K,
    NOR_W,
    WordStream,
    check_seed,
    child_seeds,
    std_exp,
    std_normal,
)
from llmqueue.sim.stats import Estimate, batch_means
from llmqueue.tokens import DeterministicLaw, ExponentialLaw, LogNormalLaw, TokenLaw

__all__ = ["simulate_mg1", "simulate_mg1_replications", "DEFAULT_WARMUP"]

DEFAULT_WARMUP = 100_000
"""Requests discarded at the start of every simulator unless told otherwise."""

# the ziggurat tables of the exponential and normal samplers, as the kernel takes them
ZIGGURAT = (EXP_K, EXP_W, EXP_F, NOR_K, NOR_W, NOR_F)
# Token-source modes of the kernel.
_MODE_ARRAY = 0  # tokens given per chunk (shared sampler, or NumPy's float32 exp for log-normal)
_MODE_LOGNORMAL = 1
_MODE_EXPONENTIAL = 2
_MODE_DETERMINISTIC = 3


@kernel
def _run_chunk(
    raw, tokens, law, service, v, start, warmup, acc, ziggurat, spare, sp,
):  # fmt: skip
    """Advance the Lindley recursion over one chunk; returns (virtual wait after it, spare index).

    Requests with global index < warmup go to the sink slot (index `batches` of the sums, row 0
    of `hist`); measured request m = g - warmup goes to batch k with bounds[k] <= m < bounds[k+1]
    and to row 1 of `hist`.
    """
    mode, p1, p2 = law
    a, b0, limit, inv_rate, tau = service
    bounds, sum_all, sum_served, n_served, n_lost, hist, fbuf, ibuf, vmax = acc
    ek, ew, ef, nk, nw, nf = ziggurat
    n = raw.size
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
            e, sp = std_exp(np.uint32(r & np.uint64(0xFFFFFFFF)), ek, ew, ef, spare, sp)
            gap = e * inv_rate
            if mode == 1:
                z, sp = std_normal(np.uint32(r >> np.uint64(32)), nk, nw, nf, spare, sp)
                t = p1 + p2 * z
                if t < 80.0:  # float32 exp is 3x faster; its 1e-7 relative error is harmless
                    tok = float(math.exp(np.float32(t)))
                else:
                    tok = math.exp(t)
                s = a * min(tok, limit) + b0
            elif mode == 2:
                e2, sp = std_exp(np.uint32(r >> np.uint64(32)), ek, ew, ef, spare, sp)
                s = a * min(p1 * e2, limit) + b0
            elif mode == 3:
                s = sdet
            else:
                s = a * min(tokens[j], limit) + b0
            if v <= tau:
                s_all += v
                s_srv += v
                c_srv += 1
                hist[row, hist_index(fbuf, ibuf, v)] += 1
                if row == 1 and v > vmax[0]:
                    vmax[0] = v
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
        z, sp = std_normal(np.uint32(raw[j] >> np.uint64(32)), NOR_K, NOR_W, NOR_F, spare, sp)
        out[j] = min(mu + sigma * z, 88.0)
    return sp


# ---------------------------------------------------------------------------------------------
def _is_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check_args(
    law: object,
    latency: object,
    rate_per_s: object,
    limit: object,
    patience_s: object,
    requests: object,
    warmup: object,
    batches: object,
    chunk: object,
    seed: object,
) -> None:
    if not isinstance(law, TokenLaw):
        raise InputError(f"law must be a llmqueue.tokens.TokenLaw, got {type(law).__name__}")
    if not isinstance(latency, LinearLatency):
        raise InputError(
            f"latency must be a llmqueue.latency.LinearLatency, got {type(latency).__name__}"
        )

    def real(name: str, x: object) -> float:
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
    if not _is_int(batches) or batches < 2:  # type: ignore[operator]
        raise InputError(f"batches must be an integer >= 2, got {batches!r}")
    if not _is_int(requests) or requests < 10 * batches:  # type: ignore[operator]
        raise InputError(
            f"requests must be an integer >= 10*batches = {10 * batches}, got {requests!r}"  # type: ignore[operator]
        )
    if not _is_int(warmup) or warmup < 0:  # type: ignore[operator]
        raise InputError(f"warmup must be an integer >= 0, got {warmup!r}")
    check_seed(seed)
    if not _is_int(chunk) or not (1 <= chunk <= 1 << 26):  # type: ignore[operator]
        raise InputError(f"chunk must be an integer in [1, 2**26] requests, got {chunk!r}")


def simulate_mg1(
    law: TokenLaw,
    latency: LinearLatency,
    *,
    rate_per_s: float,
    limit: float = math.inf,
    patience_s: float | None = None,
    requests: int,
    warmup: int = DEFAULT_WARMUP,
    batches: int = 40,
    seed: int | np.random.SeedSequence,
    chunk: int = 1 << 16,
) -> SimResult:
    """Simulate the M/G/1 (or M/G/1+D with ``patience_s``) FCFS queue; see the module docstring.

    Args:
        law: token law of N (tokens); latency: S = a*min(N, limit) + b0 (s).
        rate_per_s: Poisson arrival rate lambda (requests/s), > 0.
        limit: max-token limit l (tokens), > 0; inf for none.
        patience_s: deterministic patience tau (s), > 0; None for patient users.
        requests: measured requests after warm-up (>= 10*batches); warmup: discarded requests.
        batches: number of batches for the batch-means 95% CI (>= 2).
        seed: int or numpy SeedSequence; same seed (and chunk) -> bit-identical result.
        chunk: requests per chunk of random numbers (memory ~ 8*chunk bytes; the result depends
            on it, since the draws are grouped per chunk).

    Returns a SimResult: ``wait`` of everyone (a lost user counts tau); with patience also
    ``served_wait`` (W_qs) and ``loss`` (pi). ``throughput_per_s`` is the served rate.

    Raises:
        InputError: bad argument (the message names it and its allowed range).
        UnstableError: patient users (no patience) and rho = lambda*E[S] >= 1.

    Checks Eq. (1) (with Eq. 2-5) for patient users and Eq. (6)-(9) with patience.
    """
    _check_args(law, latency, rate_per_s, limit, patience_s, requests, warmup, batches, chunk, seed)
    rate = float(rate_per_s)
    lim = float(limit)
    es, _ = service_moments(law, latency, lim)
    rho = rate * es
    if patience_s is None and not rho < 1.0:
        raise UnstableError(
            f"rho = rate_per_s*E[S] = {rate:g}*{es:g} = {rho:.4g} >= 1 at rate_per_s = {rate:g} "
            f"requests/s: patient users (no patience_s) have no steady state; need rate_per_s < "
            f"{1.0 / es:.6g} (or a lower limit, or a patience)"
        )
    tau = math.inf if patience_s is None else float(patience_s)

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
    code = encode_law(law) if mode == _MODE_ARRAY else None

    total = warmup + requests
    per = 0.1 if code is None else code.spare_per_draw + 0.1
    ws = WordStream(seed, int(min(chunk, total) * per) + 1)
    bounds = (np.arange(batches + 1, dtype=np.int64) * requests) // batches
    sum_all = np.zeros(batches + 1)
    sum_served = np.zeros(batches + 1)
    n_served = np.zeros(batches + 1, dtype=np.int64)
    n_lost = np.zeros(batches + 1, dtype=np.int64)
    hist = np.zeros((2, NBINS), dtype=np.int64)
    fbuf, ibuf = bit_view()
    vmax = np.full(1, -math.inf)
    empty = np.zeros(0)
    v = 0.0
    start = 0
    n_buf = min(chunk, total)
    buf32 = np.empty(n_buf if vector_lognormal else 0, dtype=np.float32)
    tok64 = np.empty(n_buf if code is not None else 0)
    kernel_mode = _MODE_ARRAY if vector_lognormal else mode
    while start < total:
        n = min(chunk, total - start)
        raw = ws.words(n)
        spare, sp = ws.spare()
        tokens: np.ndarray = empty
        if code is not None:
            tokens = tok64[:n]
            sp = sample_law_chunk(code, raw, spare, sp, tokens)
        elif vector_lognormal:
            tokens = buf32[:n]
            sp = _lognormal_exponents(raw, p1, p2, tokens, spare, sp)
            np.exp(tokens, out=tokens)
        v, sp = _run_chunk(
            raw,
            tokens,
            (kernel_mode, p1, p2),
            (a, b0, lim, 1.0 / rate, tau),
            v,
            start,
            warmup,
            (bounds, sum_all, sum_served, n_served, n_lost, hist, fbuf, ibuf, vmax),
            ZIGGURAT,
            spare,
            sp,
        )
        ws.used(sp)
        start += n

    served, lost = n_served[:batches], n_lost[:batches]
    count = served + lost
    w_all = batch_means(sum_all[:batches], count)
    w_served = batch_means(sum_served[:batches], served)
    qs = (0.5, 0.9, 0.95, 0.99)
    h = hist[1]
    n_lost_tot = int(lost.sum())
    q_all = histogram_quantiles(h, qs, extra_atom=(tau, n_lost_tot) if n_lost_tot else None)
    q_srv = histogram_quantiles(h, qs)
    if patience_s is not None:  # every wait is <= tau; interpolation inside tau's bin may overshoot
        q_all = np.minimum(q_all, tau)
        q_srv = np.minimum(q_srv, tau)
    vmx = float(vmax[0]) if math.isfinite(vmax[0]) else math.nan
    mx_all = max(vmx, tau) if n_lost_tot else vmx
    wait = Metric(
        w_all.mean,
        w_all.ci95,
        float(q_all[0]),
        float(q_all[1]),
        float(q_all[2]),
        float(q_all[3]),
        mx_all,
    )
    if patience_s is None:
        return SimResult(int(requests), wait, throughput_per_s=rate)
    served_wait = Metric(
        w_served.mean,
        w_served.ci95,
        float(q_srv[0]),
        float(q_srv[1]),
        float(q_srv[2]),
        float(q_srv[3]),
        vmx,
    )
    loss = batch_means(lost.astype(float), count)
    return SimResult(
        int(requests),
        wait,
        served_wait=served_wait,
        loss=Estimate(loss.mean, loss.ci95),
        throughput_per_s=rate * (1.0 - loss.mean),
    )


def simulate_mg1_replications(
    law: TokenLaw,
    latency: LinearLatency,
    *,
    rate_per_s: float,
    replications: int,
    workers: int = 1,
    limit: float = math.inf,
    patience_s: float | None = None,
    requests: int,
    warmup: int = DEFAULT_WARMUP,
    batches: int = 40,
    seed: int | np.random.SeedSequence,
    chunk: int = 1 << 16,
) -> list[SimResult]:
    """Independent replications of :func:`simulate_mg1`, run on `workers` threads.

    Replication i uses the i-th child of `seed` (:func:`llmqueue.sim.rng.child_seeds`), so the
    list is the same whatever `workers` is. The compiled kernel releases the GIL, so threads use
    several cores.
    """
    if not _is_int(replications) or replications < 1:
        raise InputError(f"replications must be an integer >= 1, got {replications!r}")
    if not _is_int(workers) or workers < 1:
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    _check_args(law, latency, rate_per_s, limit, patience_s, requests, warmup, batches, chunk, seed)
    seeds = child_seeds(seed, replications)

    def one(s: np.random.SeedSequence) -> SimResult:
        return simulate_mg1(
            law,
            latency,
            rate_per_s=rate_per_s,
            limit=limit,
            patience_s=patience_s,
            requests=requests,
            warmup=warmup,
            batches=batches,
            seed=s,
            chunk=chunk,
        )

    if workers == 1 or replications == 1:
        return [one(s) for s in seeds]
    with ThreadPoolExecutor(max_workers=min(workers, replications)) as pool:
        return list(pool.map(one, seeds))
