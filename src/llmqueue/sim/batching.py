"""Event simulation of a batching LLM server (Sec. IV, V-C), compiled with Numba.

One FCFS server, Poisson arrivals (rate lambda, requests/s). Policies (:class:`Policy`):

- ``dynamic``: when the server frees it takes every waiting request (at most ``bmax``; None = no
  cap, Eq. 15); if none waits it starts with the next arrival;
- ``fixed``: the server waits until K requests wait and serves exactly K (the M/D^K/1 policy of
  Eq. 25; with random batch times it is M/G^K/1);
- ``elastic``: batches form as in ``dynamic`` (with the same optional ``bmax``), each reply
  leaves as soon as it is complete and nothing joins before the whole batch ends (Eq. 26).

A batch of b with output lengths n_1..n_b (drawn i.i.d. from the token law at batch start) lasts
T_b = t1(b) + t2(b)*max_i n_i (padded, Eq. 18) or Eq. (26) (elastic). ``fixed_time=True`` replaces
it by the constant E[T_b] (Eq. 18 in expectation): the "fixed-T approximation" used by Eq. (25).

Per request: wait = batch start - arrival; response = its reply returned - arrival (the whole
batch for padded batching). Means with 95% batch-means CIs (requests in arrival order cut into
``batches`` equal groups after ``warmup`` requests), and p50/p95/p99 from fixed linear
histograms (O(1) memory in the run length).

Seeding: the Numba generator is seeded with a 32-bit word drawn from a numpy SeedSequence, so a
given (SeedSequence, inputs) gives identical numbers. Adding a policy (e.g. length bins, SJF
order) means one more branch in ``_form_batch`` choosing which waiting requests form a batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numba as nb
import numpy as np

from llmqueue.analytic.batch_time import elastic_mean_batch_time, mean_batch_time
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency
from llmqueue.sim.stats import Estimate, batch_means, histogram_quantiles
from llmqueue.tokens import (
    ClippedLaw,
    DeterministicLaw,
    EmpiricalLaw,
    ExponentialLaw,
    LogNormalLaw,
    TokenLaw,
    TruncNormLaw,
    UniformLaw,
)

__all__ = ["Policy", "SimResult", "simulate", "encode_law", "elastic_times"]

NO_CAP = 1 << 40  # "b_max = infinity"


@dataclass(frozen=True)
class Policy:
    """Batching policy: kind in {dynamic, fixed, elastic}; bmax caps dynamic/elastic batches
    (None = no cap); K is the fixed batch size."""

    kind: str
    bmax: int | None = None
    K: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("dynamic", "fixed", "elastic"):
            raise InputError(f"policy must be dynamic, fixed or elastic, got {self.kind!r}")
        if self.kind == "fixed":
            if self.K is None or int(self.K) != self.K or self.K < 1:
                raise InputError(
                    f"fixed batching needs a batch size K >= 1 (integer), got {self.K!r}"
                )
            if self.bmax is not None:
                raise InputError("fixed batching takes K, not b_max")
        else:
            if self.K is not None:
                raise InputError(f"{self.kind} batching takes b_max, not K")
            if self.bmax is not None and (int(self.bmax) != self.bmax or self.bmax < 1):
                raise InputError(
                    f"b_max must be an integer >= 1 (or none for infinity), got {self.bmax!r}"
                )

    @property
    def k(self) -> int:
        """The fixed batch size K (fixed policy only)."""
        if self.K is None:
            raise InputError(f"policy {self.kind!r} has no fixed batch size K")
        return int(self.K)

    @property
    def threshold(self) -> int:
        return self.k if self.kind == "fixed" else 1

    @property
    def cap(self) -> int:
        if self.kind == "fixed":
            return self.k
        return NO_CAP if self.bmax is None else int(self.bmax)

    @property
    def elastic(self) -> bool:
        return self.kind == "elastic"

    def label(self) -> str:
        if self.kind == "fixed":
            return f"fixed K={self.K}"
        cap = "inf" if self.bmax is None else str(self.bmax)
        return f"{self.kind} b_max={cap}"


@dataclass(frozen=True)
class SimResult:
    wait: Estimate
    response: Estimate
    wait_q: tuple[float, float, float]  # p50, p95, p99 (s)
    response_q: tuple[float, float, float]
    mean_batch: float
    mean_batch_time: float
    requests: int
    n_batches: int
    max_queue: int


# ---- token laws inside Numba ----------------------------------------------------------------
def encode_law(law: TokenLaw) -> tuple[int, np.ndarray, float, np.ndarray, np.ndarray]:
    """(kind, params, cap, values, cum) for the compiled sampler."""
    cap = math.inf
    if isinstance(law, ClippedLaw):
        cap = float(law.cap)
        law = law.base
    empty = np.zeros(1)
    if isinstance(law, LogNormalLaw):
        return 0, np.array([law.mu, law.sigma, 0.0, 0.0]), cap, empty, empty
    if isinstance(law, UniformLaw):
        return 1, np.array([law.low, law.high, 0.0, 0.0]), cap, empty, empty
    if isinstance(law, TruncNormLaw):
        _, _, z = law._ab
        if z < 1e-3:
            raise InputError(
                f"token law {law.spec!r}: truncation keeps {z:.2e} of the mass; too little to simulate"
            )
        return 2, np.array([law.mean_param, law.sd, law.low, law.high]), cap, empty, empty
    if isinstance(law, ExponentialLaw):
        return 3, np.array([law.mean_tokens, 0.0, 0.0, 0.0]), cap, empty, empty
    if isinstance(law, DeterministicLaw):
        return 4, np.array([law.value, 0.0, 0.0, 0.0]), cap, empty, empty
    if isinstance(law, EmpiricalLaw):
        cum = np.cumsum(law.probs)
        return 5, np.zeros(4), cap, law.values.astype(float), cum / cum[-1]
    raise InputError(f"token law {law.spec!r} cannot be simulated")


@nb.njit(cache=True)
def _draw(kind, prm, cap, vals, cum):
    if kind == 0:
        x = math.exp(prm[0] + prm[1] * np.random.standard_normal())
    elif kind == 1:
        x = prm[0] + (prm[1] - prm[0]) * np.random.random()
    elif kind == 2:
        while True:
            x = prm[0] + prm[1] * np.random.standard_normal()
            if prm[2] <= x <= prm[3]:
                break
    elif kind == 3:
        x = prm[0] * np.random.exponential()
    elif kind == 4:
        x = prm[0]
    else:
        i = np.searchsorted(cum, np.random.random(), side="right")
        if i >= vals.size:
            i = vals.size - 1
        x = vals[i]
    return x if x < cap else cap


@nb.njit(cache=True)
def elastic_times(lengths, k1, k2, k3, k4, out):
    """Eq. (26): reply times after the batch start of each member (into out); returns T_b."""
    b = lengths.size
    order = np.argsort(lengths)
    t = k1 * b + k2
    prev = 0.0
    for j in range(b):
        n = lengths[order[j]]
        t += (k3 * (b - j) + k4) * (n - prev)
        prev = n
        out[order[j]] = t
    return t


@nb.njit(cache=True)
def _elastic_times_buf(lengths, b, idx, k1, k2, k3, k4, out):
    """As elastic_times on lengths[:b], sorting an index buffer in place (insertion sort for
    small batches, no allocation; argsort above 32)."""
    if b > 32:
        return elastic_times(lengths[:b], k1, k2, k3, k4, out[:b])
    for i in range(b):
        idx[i] = i
    for i in range(1, b):
        j = i
        v = idx[i]
        while j > 0 and lengths[idx[j - 1]] > lengths[v]:
            idx[j] = idx[j - 1]
            j -= 1
        idx[j] = v
    t = k1 * b + k2
    prev = 0.0
    for j in range(b):
        n = lengths[idx[j]]
        t += (k3 * (b - j) + k4) * (n - prev)
        prev = n
        out[idx[j]] = t
    return t


@nb.njit(cache=True)
def _core(
    seed,
    lam,
    n_req,
    warmup,
    nbat,
    threshold,
    cap_b,
    elastic,
    fixed_time,
    t_tab,
    k1,
    k2,
    k3,
    k4,
    kind,
    prm,
    lcap,
    vals,
    cum,
    nbins,
    w_width,
    r_width,
):
    np.random.seed(seed)
    w_sum = np.zeros(nbat)
    r_sum = np.zeros(nbat)
    cnt = np.zeros(nbat)
    h_w = np.zeros(nbins)
    h_r = np.zeros(nbins)
    capq = 1 << 12
    q = np.empty(capq)
    head = 0
    qlen = 0
    lengths = np.empty(64)
    comp = np.empty(64)
    idx = np.empty(64, dtype=np.int64)
    total = warmup + n_req
    served = 0
    t = 0.0
    mean_ia = 1.0 / lam
    next_arr = np.random.exponential() * mean_ia
    sum_b = 0.0
    sum_d = 0.0
    n_b = 0
    max_q = 0
    table_miss = False
    while served < total:
        # arrivals up to the moment the server frees
        while next_arr <= t or qlen < threshold:
            if qlen == capq:  # grow the ring buffer
                nq = np.empty(2 * capq)
                for i in range(qlen):
                    nq[i] = q[(head + i) % capq]
                q = nq
                head = 0
                capq *= 2
            q[(head + qlen) % capq] = next_arr
            qlen += 1
            if qlen >= threshold and next_arr > t:
                t = next_arr
            next_arr += np.random.exponential() * mean_ia
        if qlen > max_q:
            max_q = qlen
        # _form_batch: FCFS, the first b waiting requests
        b = qlen if qlen < cap_b else cap_b
        if threshold > 1:
            b = threshold
        if b > lengths.size:
            lengths = np.empty(2 * b)
            comp = np.empty(2 * b)
            idx = np.empty(2 * b, dtype=np.int64)
        start = t
        if fixed_time:
            if b < t_tab.size:
                d = t_tab[b]
            else:
                d = np.nan
                table_miss = True
            for i in range(b):
                comp[i] = d
        elif elastic:
            for i in range(b):
                lengths[i] = _draw(kind, prm, lcap, vals, cum)
            d = _elastic_times_buf(lengths, b, idx, k1, k2, k3, k4, comp)
        else:
            mx = 0.0
            for _i in range(b):
                x = _draw(kind, prm, lcap, vals, cum)
                if x > mx:
                    mx = x
            d = k1 * b + k2 + (k3 * b + k4) * mx
            for i in range(b):
                comp[i] = d
        if served >= warmup:
            sum_b += b
            sum_d += d
            n_b += 1
        for i in range(b):
            a = q[head]
            head = (head + 1) % capq
            qlen -= 1
            k = served - warmup
            served += 1
            if k < 0 or k >= n_req:
                continue
            w = start - a
            r = w + comp[i]
            g = (k * nbat) // n_req
            w_sum[g] += w
            r_sum[g] += r
            cnt[g] += 1.0
            iw = int(w / w_width)
            if iw >= nbins or iw < 0:
                iw = nbins - 1
            h_w[iw] += 1.0
            ir = int(r / r_width)
            if ir >= nbins or ir < 0:
                ir = nbins - 1
            h_r[ir] += 1.0
        t = start + d
    return w_sum, r_sum, cnt, h_w, h_r, sum_b, sum_d, n_b, max_q, table_miss


def _seed_word(seed: int | np.random.SeedSequence) -> int:
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    return int(ss.generate_state(1, np.uint32)[0])


def simulate(
    policy: Policy,
    profile: BatchLatency,
    law: TokenLaw,
    lam: float,
    requests: int,
    warmup: int = 10_000,
    batches: int = 40,
    seed: int | np.random.SeedSequence = 0,
    fixed_time: bool = False,
    hist_bins: int = 40_000,
    hist_max_s: float | None = None,
) -> SimResult:
    """Simulate `requests` requests after `warmup` (see the module docstring). Times in s."""
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"arrival rate must be > 0 requests/s, got {lam}")
    if int(requests) != requests or requests < batches * 2:
        raise InputError(
            f"requests must be an integer >= 2*batches ({2 * batches}), got {requests}"
        )
    if warmup < 0 or batches < 2:
        raise InputError("warmup must be >= 0 and batches >= 2")
    if fixed_time and policy.elastic:
        raise InputError("fixed-T mode applies to padded batches (dynamic, fixed), not elastic")
    kind, prm, lcap, vals, cum = encode_law(law)
    b_ref = policy.k if policy.kind == "fixed" else 16  # histogram span, independent of b_max
    if fixed_time:
        n_tab = policy.cap + 1 if policy.cap < NO_CAP else 2049
        t_tab = np.full(n_tab, np.nan)
        for b in range(1, n_tab):
            t_tab[b] = mean_batch_time(profile, law, b)
    else:
        t_tab = np.zeros(1)
    if hist_max_s is None:
        f = elastic_mean_batch_time if policy.elastic else mean_batch_time
        hist_max_s = 400.0 * f(profile, law, b_ref) + 100.0 / lam
    width = hist_max_s / hist_bins
    out = _core(
        _seed_word(seed),
        float(lam),
        int(requests),
        int(warmup),
        int(batches),
        policy.threshold,
        policy.cap,
        policy.elastic,
        bool(fixed_time),
        t_tab,
        profile.k1,
        profile.k2,
        profile.k3,
        profile.k4,
        kind,
        prm,
        lcap,
        vals,
        cum,
        int(hist_bins),
        width,
        width,
    )
    w_sum, r_sum, cnt, h_w, h_r, sum_b, sum_d, n_b, max_q, miss = out
    if miss:
        raise InputError(
            "fixed-T mode: a batch exceeded 2048 requests (no E[T_b] tabulated); the load is too high"
        )
    qs = (0.5, 0.95, 0.99)
    w50, w95, w99 = (float(v) for v in histogram_quantiles(h_w, width, qs))
    r50, r95, r99 = (float(v) for v in histogram_quantiles(h_r, width, qs))
    wq = (w50, w95, w99)
    rq = (r50, r95, r99)
    return SimResult(
        batch_means(w_sum, cnt),
        batch_means(r_sum, cnt),
        wq,
        rq,
        sum_b / max(n_b, 1),
        sum_d / max(n_b, 1),
        int(requests),
        int(n_b),
        int(max_q),
    )
