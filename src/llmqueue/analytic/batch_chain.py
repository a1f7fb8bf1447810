"""Exact mean wait and response of batching servers by an embedded Markov chain (beyond the paper).

State X = number of requests waiting when a batch ends (= when the next one may start).
Poisson(lambda) arrivals; a batch of b lasts D_b, random (padded Eq. 18: through the batch's
largest output length; elastic Eq. 26: through its largest and its total length) or fixed. The
policy picks the next batch size b(X) and the number left waiting r(X):

- dynamic, cap b_max (None = inf): b = min(max(X, 1), b_max), r = (X - b)^+ (Eq. 15 when uncapped);
- fixed K: the server waits for K requests: b = K, r = (X - K)^+;
- elastic: as dynamic; only the batch-time law and the members' reply times change.

X' = r + A_b with A_b ~ Poisson(lambda D_b) mixed over D_b. Renewal reward per batch gives
mean wait = E_pi[area] / E_pi[b] with area = r*E[D_b] + lambda*E[D_b^2]/2 (plus
sum_{i=X}^{K-1} i/lambda while a fixed-K server collects its batch) and mean response =
(E_pi[area] + E_pi[sum of members' reply times after the start]) / E_pi[b]. For unbounded dynamic
batching this is docs/equations.md's (E_pi[lambda D^2/2] + E_pi[B D]) / E_pi[B].

The state space is truncated at S (rows renormalised); S doubles until the mass leaving it per
batch is below ``tol`` (1e-12). Where lambda*E[D_b] >= b for some b (unbounded dynamic batching
with a heavy-tailed law: no steady state in the strict sense, docs/equations.md) the chain is cut at
that b* and the result carries ``metastable = True`` and the escape probability per batch; above
``escape_tol`` it is reported as unstable (UnstableError), never as a number.

Token laws are discretized (:func:`llmqueue.analytic.batch_time.discretize`): exact for traces
and deterministic laws, O(h^2) quantile-grid error (about 1e-4 relative at h = 0.04) otherwise.
Units: seconds, requests/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numba as nb
import numpy as np
from scipy import stats

from llmqueue.analytic.batch_time import BatchStats, DiscreteLaw, batch_stats, discretize
from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import BatchLatency
from llmqueue.policy import Policy
from llmqueue.tokens import TokenLaw

__all__ = ["PaddedModel", "ElasticModel", "FixedTimeModel", "ChainResult", "solve", "model_for"]


class _Model:
    name = "model"

    def __init__(self) -> None:
        self._stats: dict[int, BatchStats] = {}

    def stats(self, b: int) -> BatchStats:
        if b not in self._stats:
            self._stats[b] = self._compute_stats(b)
        return self._stats[b]

    def _compute_stats(self, b: int) -> BatchStats:  # pragma: no cover - abstract
        raise NotImplementedError

    def arrivals(self, b: int, lam: float, n: int) -> np.ndarray:  # pragma: no cover - abstract
        """P(A_b = j), j = 0..n-1: Poisson(lambda*D_b) arrivals during a batch of b."""
        raise NotImplementedError

    def arrivals_many(self, bs, lam: float, n: int) -> dict[int, np.ndarray]:
        return {int(b): self.arrivals(int(b), lam, n) for b in sorted(set(int(v) for v in bs))}


@nb.njit(cache=True)
def _poisson_mix_nb(mu, w, n):
    out = np.zeros(n)
    for k in range(mu.size):
        m = mu[k]
        wk = w[k]
        if wk <= 1e-300:
            continue
        if m <= 0.0:
            out[0] += wk
            continue
        mode = int(m)
        if mode >= n:
            mode = n - 1
        lp = mode * math.log(m) - m - math.lgamma(mode + 1.0)
        pm = math.exp(lp)
        v = pm
        j = mode
        while j >= 0:  # downwards from the mode
            out[j] += wk * v
            if v < 1e-300 or (v < 1e-20 * pm and j < mode - 10):
                break
            v *= j / m
            j -= 1
        v = pm * m / (mode + 1.0)
        j = mode + 1
        while j < n:  # upwards
            out[j] += wk * v
            if v < 1e-300 or (v < 1e-20 * pm and j > mode + 10):
                break
            j += 1
            v *= m / j
    return out


def _poisson_mix(mu: np.ndarray, w: np.ndarray, n: int) -> np.ndarray:
    """sum_k w_k * Poisson(j; mu_k) for j = 0..n-1 (terms below 1e-20 of a node's mode dropped)."""
    return _poisson_mix_nb(
        np.ascontiguousarray(mu, dtype=float), np.ascontiguousarray(w, dtype=float), int(n)
    )


class PaddedModel(_Model):
    """Random padded batch times D_b = t1(b) + t2(b)*L_b (Eq. 18)."""

    name = "padded"

    def __init__(self, profile: BatchLatency, law: TokenLaw, h: float = 0.04) -> None:
        super().__init__()
        self.profile, self.law = profile, law
        self.dlaw: DiscreteLaw = discretize(law, h)

    def _compute_stats(self, b: int) -> BatchStats:
        return batch_stats(self.profile, self.dlaw, b, elastic=False)

    def _max_weights(self, b: int) -> np.ndarray:
        F = self.dlaw.cum
        Fp = np.concatenate([[0.0], F[:-1]])
        return F**b - Fp**b

    def arrivals(self, b: int, lam: float, n: int) -> np.ndarray:
        d = self.profile.t1(b) + self.profile.t2(b) * self.dlaw.x
        return _poisson_mix(lam * d, self._max_weights(b), n)


class ElasticModel(PaddedModel):
    """Elastic batch times D_b = t1(b) + k4*max n_i + k3*sum n_i (Eq. 26); the arrivals law by
    inverting its probability generating function with an FFT. The default quantile grid is
    coarser (h = 0.08, error about 4e-4 relative) to keep the transform cheap."""

    name = "elastic"

    def __init__(self, profile: BatchLatency, law: TokenLaw, h: float = 0.08) -> None:
        super().__init__(profile, law, h)

    def _compute_stats(self, b: int) -> BatchStats:
        return batch_stats(self.profile, self.dlaw, b, elastic=True)

    def arrivals(self, b: int, lam: float, n: int) -> np.ndarray:
        return self.arrivals_many([b], lam, n)[b]

    def arrivals_many(self, bs, lam: float, n: int) -> dict[int, np.ndarray]:
        """P(A_b = j), j < n, for every b in bs: G(z) = E[z^A] = E[exp(lambda (z - 1) D_b)] with
        G = e^{theta t1(b)} sum_k e^{theta k4 x_k} (H_k^b - H_{k-1}^b), H_k = sum_{l<=k} p_l e^{theta k3 x_l},
        inverted on a circle of radius r (r^J = 1e-6, J >= 2n points), which damps aliasing."""
        pr = self.profile
        keep = self.dlaw.p > 0
        xk, pk = self.dlaw.x[keep], self.dlaw.p[keep]
        J = 64
        while J < 2 * n:
            J *= 2
        r = 10.0 ** (-6.0 / J)
        z = r * np.exp(2j * np.pi * np.arange(J) / J)
        theta = lam * (z - 1.0)
        H = np.cumsum(pk[None, :] * np.exp(np.outer(theta, pr.k3 * xk)), axis=1)
        E4 = np.exp(np.outer(theta, pr.k4 * xk))
        scale = r ** -np.arange(n)
        want = np.array(sorted(set(int(b) for b in bs)), dtype=np.int64)
        G = _elastic_transforms(H, E4, want)
        out: dict[int, np.ndarray] = {}
        for i, b in enumerate(want):
            g = np.exp(theta * pr.t1(int(b))) * G[i]
            a = np.fft.fft(g).real[:n] / J * scale
            out[int(b)] = np.maximum(a, 0.0)
        return out


@nb.njit(cache=True)
def _elastic_transforms(H, E4, want):
    """G_b(theta_j) / e^{theta_j t1(b)} = sum_k E4[j,k] (H[j,k]^b - H[j,k-1]^b) for each b in want
    (ascending), by running powers of H (one fused pass per b)."""
    J, K = H.shape
    out = np.zeros((want.size, J), dtype=np.complex128)
    Hb = np.ones((J, K), dtype=np.complex128)
    bcur = 0
    for i in range(want.size):
        steps = want[i] - bcur
        bcur = want[i]
        for j in range(J):
            prev = 0j
            acc = 0j
            for k in range(K):
                v = Hb[j, k]
                h = H[j, k]
                for _ in range(steps):
                    v *= h
                Hb[j, k] = v
                acc += E4[j, k] * (v - prev)
                prev = v
            out[i, j] = acc
    return out


class FixedTimeModel(_Model):
    """Deterministic batch times D_b = time(b): the fixed-T approximation (T = E[T_b]) or Inoue's
    linear model (14), D_b = alpha_b*b + tau0."""

    name = "fixed_time"

    def __init__(self, time_of_b) -> None:
        super().__init__()
        self.time_of_b = time_of_b

    def _compute_stats(self, b: int) -> BatchStats:
        t = float(self.time_of_b(b))
        return BatchStats(b, t, t * t, b * t)

    def arrivals(self, b: int, lam: float, n: int) -> np.ndarray:
        return stats.poisson.pmf(np.arange(n), lam * self.stats(b).mean_d)


def model_for(
    policy: Policy, profile: BatchLatency, law: TokenLaw, fixed_time: bool = False, h: float = 0.04
) -> _Model:
    """The batch-time model a policy implies (elastic -> ElasticModel; fixed_time -> E[T_b])."""
    if fixed_time:
        if policy.elastic:
            raise InputError("fixed-T mode applies to padded batches, not elastic")
        from llmqueue.analytic.batch_time import mean_batch_time

        return FixedTimeModel(lambda b: mean_batch_time(profile, law, b))
    return ElasticModel(profile, law, 2 * h) if policy.elastic else PaddedModel(profile, law, h)


@dataclass(frozen=True)
class ChainResult:
    wait: float  # mean wait, arrival -> batch start (s)
    response: float  # mean response, arrival -> own reply (s)
    mean_batch: float  # mean batch size
    mean_batch_time: float  # mean batch duration (s)
    states: int  # truncation level S
    leak: float  # probability per batch of leaving the truncated state space
    metastable: bool = False
    notes: list[str] = field(default_factory=list)


def _policy_b(policy: Policy, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if policy.kind == "fixed":
        b = np.full_like(x, policy.k)
    else:
        b = np.minimum(np.maximum(x, 1), policy.cap)
    r = np.maximum(x - b, 0)
    return b, r


def _solve_truncated(model: _Model, lam: float, policy: Policy, S: int):
    x = np.arange(S + 1)
    b, r = _policy_b(policy, x)
    P = np.zeros((S + 1, S + 1))
    overflow = np.zeros(S + 1)
    cache = model.arrivals_many(b, lam, S + 1)
    for i in range(S + 1):
        pmf = cache[int(b[i])]
        n = S + 1 - int(r[i])
        row = pmf[:n]
        tot = row.sum()
        overflow[i] = max(0.0, 1.0 - tot)
        P[i, int(r[i]) :] = row / tot
    A = P.T - np.eye(S + 1)
    A[-1, :] = 1.0
    rhs = np.zeros(S + 1)
    rhs[-1] = 1.0
    pi = np.linalg.solve(A, rhs)
    pi = np.maximum(pi, 0.0)
    pi /= pi.sum()
    return pi, b, r, float(pi @ overflow)


def solve(
    model: _Model,
    lam: float,
    policy: Policy,
    tol: float = 1e-12,
    escape_tol: float = 1e-9,
    s_max: int = 2048,
) -> ChainResult:
    """Mean wait and response (s) of `policy` at rate `lam` (see the module docstring)."""
    if not (lam > 0 and math.isfinite(lam)):
        raise InputError(f"arrival rate lambda must be > 0 requests/s, got {lam}")
    notes: list[str] = []
    bcap = policy.K if policy.kind == "fixed" else (None if policy.bmax is None else policy.bmax)
    S_cut = None
    if bcap is not None:
        ed_cap = model.stats(int(bcap)).mean_d
        if lam * ed_cap >= bcap:
            what = "K" if policy.kind == "fixed" else "b_max"
            raise UnstableError(
                f"{policy.label()}: lambda*E[T_b] = {lam * ed_cap:.4g} >= {what} = {bcap} at b = {bcap} "
                f"(lambda = {lam:g}/s, E[T_b] = {ed_cap:.4g} s); need lambda < {bcap / ed_cap:.6g}/s"
            )
        S = max(64, min(4 * int(bcap), 256))
    else:
        # unbounded: where does the drift lambda E[D_b] - b turn non-negative for good?
        # (it is >= 0 at small b; escape needs it >= 0 again after a stable stretch)
        S = 64
        seen_stable = False
        for bb in range(1, s_max + 1):
            up = lam * model.stats(bb).mean_d >= bb
            if not up:
                seen_stable = True
            elif seen_stable:
                S_cut = bb
                break
        if not seen_stable:
            raise UnstableError(
                f"{policy.label()}: lambda*E[T_b] >= b for every b <= {s_max} (lambda = {lam:g}/s): "
                "batches only grow; no steady state"
            )
    while True:
        S_use = min(S, S_cut) if S_cut is not None else S
        pi, b, r, leak = _solve_truncated(model, lam, policy, S_use)
        if S_cut is not None and S >= S_cut:
            if leak > escape_tol:
                raise UnstableError(
                    f"{policy.label()}: lambda*E[T_b] >= b from b = {S_cut} on (lambda = {lam:g}/s); "
                    f"the queue escapes with probability {leak:.2e} per batch: no steady state"
                )
            notes.append(
                f"metastable: lambda*E[T_b] >= b for b >= {S_cut}; state space cut there, escape "
                f"probability {leak:.2e} per batch"
            )
            break
        if leak <= tol:
            break
        if S >= s_max and leak <= escape_tol:
            notes.append(
                f"state space cut at {S} waiting requests; mass {leak:.2e} per batch leaves it"
            )
            break
        if S >= s_max:
            raise UnstableError(
                f"{policy.label()}: the chain does not settle within {s_max} waiting requests at "
                f"lambda = {lam:g}/s (mass {leak:.2e} per batch leaves): unstable"
            )
        S = min(2 * S, s_max)
    if S_cut is not None and not any(n.startswith("metastable") for n in notes):
        notes.append(
            f"metastable: lambda*E[T_b] >= b for b >= {S_cut}, beyond the state space kept "
            f"({S_use}); mass {leak:.2e} per batch leaves it"
        )
    st = [model.stats(int(v)) for v in b]
    ed = np.array([s.mean_d for s in st])
    ed2 = np.array([s.mean_d2 for s in st])
    resp = np.array([s.response_sum for s in st])
    area = r * ed + 0.5 * lam * ed2
    if policy.kind == "fixed":
        K = policy.k
        x = np.arange(b.size)
        collect = np.where(x < K, (K * (K - 1) / 2 - x * (x - 1) / 2) / lam, 0.0)
        area = area + collect
    served = float(pi @ b)
    wait = float(pi @ area) / served
    response = float(pi @ (area + resp)) / served
    return ChainResult(
        wait, response, served, float(pi @ ed), int(b.size - 1), leak, S_cut is not None, notes
    )
