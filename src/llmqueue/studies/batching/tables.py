"""The batching study's tables: one (policy, lambda) point by formula, bound, exact chain and
simulation; the lambda sweeps of Fig. 5, 6a and 6b; Fig. 3's batch times. Units: s, requests/s,
tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.analytic import batch_chain as bc
from llmqueue.analytic import batch_time as bt
from llmqueue.analytic import bulk, inoue
from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import BatchLatency
from llmqueue.policy import Policy
from llmqueue.seeds import seed_sequence
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.batching.spec import ChainSettings, SweepSpec
from llmqueue.tokens import TokenLaw, parse_law

__all__ = [
    "PointResult",
    "evaluate_point",
    "Curve",
    "sweep_curves",
    "sweep_table",
    "kstar_table",
    "fig3a_table",
    "fig3b_table",
]


Progress = Callable[[str], None]


NAN = math.nan


# ---- one (policy, lambda) point ---------------------------------------------------------------
def _simulate_point(
    policy: Policy,
    profile: BatchLatency,
    law: TokenLaw,
    rate_per_s: float,
    sim: SimSettings,
    seed: np.random.SeedSequence,
    fixed_time: bool,
) -> SimResult:
    """The one call of the batching simulator in this module."""
    from llmqueue.sim.batching import simulate

    return simulate(
        policy,
        law,
        profile,
        rate_per_s=rate_per_s,
        requests=sim.measured(None),
        warmup=sim.warmup,
        batches=sim.batches,
        seed=seed,
        fixed_time=fixed_time,
    )


@dataclass(frozen=True)
class PointResult:
    """Every number of one (policy, lambda) point; an unstable point has no numbers (nan).

    formula_*: Eq. (25) with T = E[T_K] (fixed K only); bound_response: Eq. (16) (dynamic /
    elastic with (alpha_b, tau0) given); exact: the embedded Markov chain; sim: the simulation.
    """

    policy: Policy
    rate_per_s: float
    unstable: bool = False
    metastable: bool = False
    notes: tuple[str, ...] = ()
    formula_wait: float = NAN
    formula_response: float = NAN
    bound_response: float = NAN
    exact: bc.ChainResult | None = None
    sim: SimResult | None = None

    @property
    def note(self) -> str:
        return "; ".join(self.notes)

    def row(self) -> dict[str, Any]:
        """The flat CSV row of the sweep tables (column names as in results/batching/*.csv)."""
        p, ex, s = self.policy, self.exact, self.sim
        return {
            "policy": p.kind,
            "K": p.K if p.kind == "fixed" else NAN,
            "bmax": NAN if p.kind == "fixed" or p.bmax is None else p.bmax,
            "rate_per_s": self.rate_per_s,
            "unstable": self.unstable,
            "metastable": self.metastable,
            "note": self.note,
            "formula_wait_mean_s": self.formula_wait,
            "formula_jct_mean_s": self.formula_response,
            "bound_jct_mean_s": self.bound_response,
            "exact_wait_mean_s": ex.wait if ex else NAN,
            "exact_jct_mean_s": ex.response if ex else NAN,
            "exact_mean_batch": ex.mean_batch if ex else NAN,
            "sim_wait_mean_s": s.wait.mean if s else NAN,
            "sim_wait_ci95_s": s.wait.ci95 if s else NAN,
            "sim_jct_mean_s": s.response.mean if s and s.response else NAN,
            "sim_jct_ci95_s": s.response.ci95 if s and s.response else NAN,
            "sim_wait_p50_s": s.wait.p50 if s else NAN,
            "sim_wait_p95_s": s.wait.p95 if s else NAN,
            "sim_wait_p99_s": s.wait.p99 if s else NAN,
            "sim_jct_p50_s": s.response.p50 if s and s.response else NAN,
            "sim_jct_p95_s": s.response.p95 if s and s.response else NAN,
            "sim_jct_p99_s": s.response.p99 if s and s.response else NAN,
            "sim_mean_batch": s.mean_batch if s else NAN,
        }


def evaluate_point(
    policy: Policy,
    profile: BatchLatency,
    law: TokenLaw,
    rate_per_s: float,
    *,
    model: Any = None,
    bound: tuple[float, float] | None = None,
    sim: SimSettings | None = None,
    seed: np.random.SeedSequence | None = None,
    fixed_time: bool = False,
    exact: bool = True,
    chain: ChainSettings | None = None,
) -> PointResult:
    """Every number for one (policy, lambda); see :class:`PointResult`.

    `model`: the chain's batch-time model (default: the policy's own, :func:`batch_chain.model_for`);
    `bound`: (alpha_b, tau0) of Inoue's bound (16); `sim` with `seed` adds the simulation
    (`fixed_time`: constant batch time E[T_b], the fixed-T approximation). Points that are
    unstable (Eq. 25, the chain) get ``unstable = True`` and no numbers, with the reason in notes.
    """
    chain = chain or ChainSettings.from_config({})
    notes: list[str] = []
    unstable = metastable = False
    fw = fr = bnd = NAN
    if policy.kind == "fixed":
        T = bt.mean_batch_time(profile, law, policy.k)
        try:
            fw = bulk.mdk1_wait(rate_per_s, T, policy.k)
            fr = fw + T
        except UnstableError as err:
            unstable = True
            notes.append(str(err))
    elif bound is not None:
        try:
            bnd = inoue.bound(rate_per_s, *bound)
        except UnstableError as err:
            notes.append(f"bound: {err}")
    res = None
    if exact and not unstable:
        try:
            mdl = model or bc.model_for(policy, profile, law, h=chain.grid_h)
            res = bc.solve(mdl, rate_per_s, policy, chain.tol, chain.escape_tol)
            metastable = res.metastable
            notes.extend(res.notes)
        except UnstableError as err:
            unstable = True
            notes.append(str(err))
    summary = None
    if sim is not None and not unstable:
        if seed is None:
            raise InputError("a simulated point needs its seed (a numpy SeedSequence)")
        summary = _simulate_point(policy, profile, law, rate_per_s, sim, seed, fixed_time)
    return PointResult(
        policy, rate_per_s, unstable, metastable, tuple(notes), fw, fr, bnd, res, summary
    )


# ---- sweeps over lambda -----------------------------------------------------------------------
@dataclass(frozen=True)
class Curve:
    """One curve of a sweep: a policy, random or fixed batch times, and the (alpha_b, tau0) of
    Inoue's bound (16) from Eq. (20) (`bound`) and from a least-squares fit (`fitted_bound`)."""

    label: str
    policy: Policy
    fixed_time: bool = False
    bound: tuple[float, float] | None = None
    fitted_bound: tuple[float, float] | None = None


def sweep_curves(spec: SweepSpec, profile: BatchLatency, law: TokenLaw) -> list[Curve]:
    """The curves of one sweep (see :class:`SweepSpec`)."""
    if spec.curves == "fixed_batch":
        out = []
        for K in spec.fixed_K:
            out.append(Curve(f"fixed K={K}", Policy("fixed", K=K)))
            out.append(Curve(f"fixed K={K} fixed-T", Policy("fixed", K=K), fixed_time=True))
        return out
    if spec.curves == "bmax":
        out = [
            Curve(f"dynamic b_max={'inf' if b is None else b}", Policy("dynamic", bmax=b))
            for b in spec.bmax
        ]
        return [*out, Curve("elastic", Policy("elastic"))]
    lo, hi = spec.bound_fit_range or (1, spec.b_range)
    low, high = law.support
    eq20 = (
        bt.uniform_linear_bound(profile, high)
        if law.spec.startswith("uniform") and low == 0
        else None
    )
    return [
        Curve(
            "dynamic",
            Policy("dynamic"),
            bound=eq20,
            fitted_bound=bt.fit_alpha_tau(profile, law, lo, hi),
        ),
        Curve(
            "elastic",
            Policy("elastic"),
            fitted_bound=bt.fit_alpha_tau(profile, law, lo, hi, elastic=True),
        ),
    ]


def _bound_or_nan(rate: float, params: tuple[float, float]) -> float:
    try:
        return inoue.bound(rate, *params)
    except UnstableError:  # lambda alpha_b >= 1: the bound does not exist there
        return NAN


def sweep_table(
    spec: SweepSpec,
    profile: BatchLatency,
    law: TokenLaw,
    sim: SimSettings,
    chain: ChainSettings,
    seed_root: int,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """One row per (curve, lambda): :meth:`PointResult.row` plus the curve, the grid position,
    the profile and, for curves with bounds, their (alpha_b, tau0) and values."""
    rates, mu_best, b_best = bt.rate_grid(profile, law, spec.b_range, *spec.rates)
    if progress:
        progress(f"profile {profile}, law {law.spec}, best mu_b {mu_best:.4g}/s at b={b_best}")
    rows = []
    for ci, curve in enumerate(sweep_curves(spec, profile, law)):
        model = (
            bc.FixedTimeModel(lambda b: bt.mean_batch_time(profile, law, b))
            if curve.fixed_time
            else bc.model_for(curve.policy, profile, law, h=chain.grid_h)
        )
        for ri, lam in enumerate(rates):
            pt = evaluate_point(
                curve.policy,
                profile,
                law,
                float(lam),
                model=model,
                bound=curve.bound,
                sim=sim,
                seed=seed_sequence(seed_root, spec.stream, ci, ri),
                fixed_time=curve.fixed_time,
                chain=chain,
            )
            row = pt.row()
            row.update(
                {
                    "curve": curve.label,
                    "mode": "fixed_T" if curve.fixed_time else "random_T",
                    "rate_fraction": float(lam / mu_best),
                    "best_mu": mu_best,
                    "best_b": b_best,
                    "profile": profile.name,
                    "profile_source": profile.source,
                    "verdict": profile.verdict,
                    "tokens": law.spec,
                    "sim_requests": sim.requests,
                }
            )
            if curve.fitted_bound is not None:
                a, t = curve.fitted_bound
                row["bound_fit_alpha"], row["bound_fit_tau0"] = a, t
                row["bound_fit_jct_mean_s"] = _bound_or_nan(float(lam), (a, t))
            if curve.bound is not None:
                row["bound_alpha"], row["bound_tau0"] = curve.bound
            rows.append(row)
            if progress:
                progress(
                    f"{curve.label} lam={lam:.4g} unstable={row['unstable']} "
                    f"exact={row['exact_jct_mean_s']:.4g} sim={row['sim_jct_mean_s']:.4g}"
                    f"+-{row['sim_jct_ci95_s']:.2g}"
                )
    return pd.DataFrame(rows)


def kstar_table(
    profile: BatchLatency,
    law: TokenLaw,
    rate_per_s: float,
    k_range: tuple[int, int],
    sim: SimSettings,
    chain: ChainSettings,
    seed_root: int,
    stream: int,
) -> pd.DataFrame:
    """Claim 8: every fixed K of `k_range` at one lambda: Eq. (25) (fixed T), the exact chain and
    the simulation with random batch times, and T_K = E[T_K]. Every K is simulated with the same
    seed (stream, 99): common random numbers (the same arrivals and output lengths for every K),
    so the differences between K that pick K* are not drowned in run-to-run noise."""
    lo, hi = k_range
    rows = []
    for K in range(int(lo), int(hi) + 1):
        pol = Policy("fixed", K=K)
        pt = evaluate_point(
            pol,
            profile,
            law,
            float(rate_per_s),
            model=bc.model_for(pol, profile, law, h=chain.grid_h),
            sim=sim,
            seed=seed_sequence(seed_root, stream, 99),
            chain=chain,
        )
        row = pt.row()
        row.update(
            {
                "T_K": bt.mean_batch_time(profile, law, K),
                "profile": profile.name,
                "verdict": profile.verdict,
            }
        )
        rows.append(row)
    return pd.DataFrame(rows)


# ---- Fig. 3 -----------------------------------------------------------------------------------
def fig3a_table(
    law: TokenLaw,
    profiles: Sequence[BatchLatency],
    b_max: int,
    mc_samples: int,
    seed_root: int,
) -> pd.DataFrame:
    """Fig. 3a: E[L_b] (the law's own, Eq. 19/23) with a Monte Carlo check (mean of
    `mc_samples` maxima, 95% CI) and E[T_b] per profile, padded (Eq. 18) and elastic (Eq. 26),
    for b = 1..b_max. Seeds (3, b)."""
    rows = []
    for b in range(1, int(b_max) + 1):
        rng = np.random.default_rng(seed_sequence(seed_root, 3, b))
        x = law.sample(rng, int(mc_samples) * b).reshape(-1, b).max(axis=1)
        row: dict[str, Any] = {
            "b": b,
            "tokens": law.spec,
            "EL": law.expected_max(b),
            "EL_mc": x.mean(),
            "EL_mc_ci95": 1.96 * x.std(ddof=1) / math.sqrt(x.size),
        }
        for p in profiles:
            row[f"ET_{p.name}"] = bt.mean_batch_time(p, law, b)
            row[f"ET_elastic_{p.name}"] = bt.elastic_mean_batch_time(p, law, b)
        rows.append(row)
    return pd.DataFrame(rows)


def fig3b_table(
    profiles: Sequence[BatchLatency], specs: Sequence[str], b_max: int, base_dir: str = "."
) -> pd.DataFrame:
    """Fig. 3b: E[T_b] (Eq. 18) and mu_b = b/E[T_b] (Eq. 24) per profile and token law."""
    laws = {spec: parse_law(spec, base_dir) for spec in specs}
    rows = []
    for p in profiles:
        for spec, law in laws.items():
            for b in range(1, int(b_max) + 1):
                et = bt.mean_batch_time(p, law, b)
                rows.append(
                    {
                        "profile": p.name,
                        "verdict": p.verdict,
                        "tokens": spec,
                        "b": b,
                        "ET": et,
                        "mu": b / et,
                    }
                )
    return pd.DataFrame(rows)
