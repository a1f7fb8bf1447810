"""The token-limit study (paper Sec. III and V-B; Fig. 4a-4d; claims 3-5) as pure table builders.

Every table has one row per max-token limit l of the grid, with the closed form, the exact
solution and the simulation side by side. Units: tokens, seconds, requests per second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.analytic.impatience import de_kok_tijms, exact_token_limit
from llmqueue.analytic.mg1 import token_limit_curve
from llmqueue.analytic.tradeoff import (
    argmax_on_grid,
    expected_utility,
    objective_impatient,
    objective_patient,
)
from llmqueue.claims import ClaimBook, ClaimRow, solved_parameter_row
from llmqueue.grids import grid_from_config
from llmqueue.latency import LinearLatency
from llmqueue.seeds import seed_sequence
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.tokens import TokenLaw

Progress = Callable[[str], None]

# Why a time or fraction computed with an independent latency profile can miss the paper's.
PROFILE_MISS = (
    "the latency law (a, b0) differs from the one the paper used, which it does not state"
)


def simulate_point(
    law: TokenLaw,
    latency: LinearLatency,
    rate: float,
    limit: float,
    patience: float | None,
    sim: SimSettings,
    seed: np.random.SeedSequence,
) -> SimResult:
    """Simulate one limit: the one call of the M/G/1 simulator from the studies and the CLI.

    The result's ``wait`` is everyone's wait (a lost user counts tau, Eq. 9); with patience its
    ``served_wait`` is W_qs and ``loss`` the lost fraction pi."""
    from llmqueue.sim.mg1 import simulate_mg1

    return simulate_mg1(
        law,
        latency,
        rate_per_s=rate,
        limit=limit,
        patience_s=patience,
        requests=sim.measured(None),
        warmup=sim.warmup,
        batches=sim.batches,
        seed=seed,
    )


def patient_table(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    limits: np.ndarray,
    sim: SimSettings | None,
    seed_root: int,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Fig. 4a: W_q(l) by Eq. (1)-(5) and by simulation (unstable points: no numbers)."""
    c = token_limit_curve(law, latency, rate_per_s, limits)
    df = pd.DataFrame(
        {
            "limit_tokens": c.limits,
            "p_below": np.asarray(law.prob_below(c.limits), dtype=float),
            "mean_tokens": c.mean_tokens,
            "mean_service_s": c.mean_service_s,
            "second_moment_s2": c.second_moment_s2,
            "rho": c.rho,
            "unstable": c.unstable,
            "wq_formula_s": c.wq_s,
        }
    )
    cols = ["wq_sim_s", "wq_sim_ci95_s", "wq_sim_p50_s", "wq_sim_p95_s", "wq_sim_p99_s"]
    for col in cols:
        df[col] = math.nan
    df["sim_requests"] = 0
    if sim is None:
        return df
    for i, lim in enumerate(c.limits):
        if c.unstable[i]:
            continue
        r = simulate_point(
            law,
            latency,
            rate_per_s,
            float(lim),
            None,
            sim,
            seed_sequence(seed_root, "token_limit", "patient", float(lim)),
        )
        w = r.wait
        df.loc[i, cols] = [w.mean, w.ci95, w.p50, w.p95, w.p99]
        df.loc[i, "sim_requests"] = r.requests
        if progress:
            progress(
                f"patient l={lim:g}: W_q formula {c.wq_s[i]:.4g} s, sim {w.mean:.4g} +- {w.ci95:.2g} s"
            )
    return df


def impatient_table(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    patience_s: float,
    limits: np.ndarray,
    sim: SimSettings | None,
    seed_root: int,
    exp_reading: str = "same_mean_service",
    step_s: float = 0.02,
    max_rel_error: float = 1e-4,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Fig. 4b-4c: pi(l), W_qs(l), E[W](l) by Eq. (6)-(9), by the exact M/G/1+D solution and by simulation."""
    c = token_limit_curve(law, latency, rate_per_s, limits)
    rows = []
    for i, lim in enumerate(c.limits):
        interp, scv = de_kok_tijms(
            law, latency, rate_per_s, patience_s, float(lim), exp_reading, step_s, max_rel_error
        )
        exact = exact_token_limit(
            law, latency, rate_per_s, patience_s, float(lim), step_s, max_rel_error
        )
        row = {
            "limit_tokens": float(lim),
            "rho": float(c.rho[i]),
            "mean_service_s": float(c.mean_service_s[i]),
            "scv": scv,
            "loss_interp": interp.loss,
            "wqs_interp_s": interp.wqs_s,
            "w_all_interp_s": interp.w_all_s,
            "loss_exact": exact.loss,
            "loss_exact_err": exact.error_estimate,
            "wqs_exact_s": exact.wqs_s,
            "w_all_exact_s": exact.w_all_s,
        }
        if sim is not None:
            r = simulate_point(
                law,
                latency,
                rate_per_s,
                float(lim),
                patience_s,
                sim,
                seed_sequence(seed_root, "token_limit", "impatient", float(lim)),
            )
            assert r.loss is not None and r.served_wait is not None  # patience given
            row.update(
                loss_sim=r.loss.mean,
                loss_sim_ci95=r.loss.ci95,
                wqs_sim_s=r.served_wait.mean,
                wqs_sim_ci95_s=r.served_wait.ci95,
                w_all_sim_s=r.wait.mean,
                w_all_sim_ci95_s=r.wait.ci95,
                wait_p50_s=r.wait.p50,
                wait_p95_s=r.wait.p95,
                wait_p99_s=r.wait.p99,
                sim_requests=r.requests,
            )
            if progress:
                progress(
                    f"impatient l={lim:g}: pi exact {exact.loss:.4g}, sim {r.loss.mean:.4g} +- {r.loss.ci95:.2g}"
                )
        rows.append(row)
    return pd.DataFrame(rows)


def sweep_table(
    law: TokenLaw,
    latency: LinearLatency,
    limits: np.ndarray,
    rate_per_s: float,
    patience_s: float | None,
    sim: SimSettings | None,
    seed_root: int,
    impatience: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """The table of one scenario: :func:`patient_table` without patience, :func:`impatient_table`
    with it, whose `impatience` settings are ``exp_reading``, ``step_s`` and ``max_rel_error``
    (config ``token_limit.impatience_exp_reading`` and ``token_limit.exact``; defaults where
    absent). The profile's a and b0 stand beside the limit in every row."""
    if patience_s is None:
        df = patient_table(law, latency, rate_per_s, limits, sim, seed_root, progress)
    else:
        imp = dict(impatience or {})
        df = impatient_table(
            law,
            latency,
            rate_per_s,
            patience_s,
            limits,
            sim,
            seed_root,
            str(imp.get("exp_reading", "same_mean_service")),
            float(imp.get("step_s", 0.02)),
            float(imp.get("max_rel_error", 1e-4)),
            progress,
        )
    df.insert(1, "a_s_per_token", latency.a_s_per_token)
    df.insert(2, "b0_s", latency.b0_s)
    return df


def gamma_grid(tradeoff: Mapping[str, Any]) -> np.ndarray:
    """The gammas of config ``token_limit.tradeoff.gamma_sweep``; without one, the fixed gamma."""
    sweep = tradeoff.get("gamma_sweep")
    if not sweep:
        return np.array([float(tradeoff["gamma"])])
    return grid_from_config(sweep, "token_limit.tradeoff.gamma_sweep")


def tradeoff_table(
    law: TokenLaw,
    patient: pd.DataFrame,
    impatient: pd.DataFrame,
    cfg: Mapping[str, Any],
    gamma: float | None = None,
) -> pd.DataFrame:
    """Fig. 4d: F1(l) (patient) and F2(l) (impatient; exact and interpolated pi, W_qs), Eq. (10)-(11)."""
    g = float(cfg["gamma"] if gamma is None else gamma)
    limits = patient["limit_tokens"].to_numpy()
    if not np.array_equal(limits, impatient["limit_tokens"].to_numpy()):
        raise ValueError("patient and impatient tables must share the l grid")
    eu = expected_utility(law, limits, g)
    return pd.DataFrame(
        {
            "limit_tokens": limits,
            "gamma": g,
            "utility": eu,
            "f1": objective_patient(eu, patient["wq_formula_s"], float(cfg["alpha_patient"])),
            "f2_exact": objective_impatient(
                eu,
                impatient["wqs_exact_s"],
                impatient["loss_exact"],
                float(cfg["alpha_impatient"]),
                float(cfg["loss_cost"]),
            ),
            "f2_interp": objective_impatient(
                eu,
                impatient["wqs_interp_s"],
                impatient["loss_interp"],
                float(cfg["alpha_impatient"]),
                float(cfg["loss_cost"]),
            ),
        }
    )


def gamma_sweep_table(
    law: TokenLaw,
    patient: pd.DataFrame,
    impatient: pd.DataFrame,
    cfg: Mapping[str, Any],
    gammas: np.ndarray,
) -> pd.DataFrame:
    """For each gamma of g(r) = r^gamma: the optimal limits l1* (F1) and l2* (F2, exact / interp)."""
    rows = []
    for g in gammas:
        t = tradeoff_table(law, patient, impatient, cfg, float(g))
        o1 = argmax_on_grid(t["limit_tokens"], t["f1"])
        o2 = argmax_on_grid(t["limit_tokens"], t["f2_exact"])
        o2i = argmax_on_grid(t["limit_tokens"], t["f2_interp"])
        rows.append(
            {
                "gamma": float(g),
                "l1_star": o1.limit,
                "l1_at_edge": o1.at_edge,
                "l2_star_exact": o2.limit,
                "l2_exact_at_edge": o2.at_edge,
                "l2_star_interp": o2i.limit,
                "l2_interp_at_edge": o2i.at_edge,
            }
        )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------------------------
def _at(df: pd.DataFrame, limit: float, col: str) -> float:
    hit = df.loc[np.isclose(df["limit_tokens"], limit), col]
    if hit.empty:
        raise ValueError(f"limit {limit} is not on the grid")
    return float(hit.iloc[0])


def claims_rows(
    book: ClaimBook,
    law: TokenLaw,
    profiles: Mapping[str, LinearLatency],
    tables: Mapping[str, Mapping[str, pd.DataFrame]],
    claim_limits: Mapping[str, float],
    main_profile: str,
) -> list[ClaimRow]:
    """Claims 3-5 (docs/figures.md): one row per number, per profile (rows of other profiles than
    the main one carry its name as an id suffix). A back-solved profile's rows are ``back_solved``
    only for the claims it was solved from (:meth:`ClaimBook.judge`).

    `tables[profile]` holds ``patient``, ``impatient``, ``tradeoff``; the main profile also
    ``gamma_sweep``.
    """
    lp, li, lb = claim_limits["patient"], claim_limits["impatient"], claim_limits["baseline"]

    def row(
        cid: str, ours: float, profile: str, note: str, suffix: str = "", miss: str = ""
    ) -> ClaimRow:
        lat = profiles[profile]
        return book.judge(
            cid,
            ours,
            note,
            row_id=cid if not suffix else f"{cid}-{suffix}",
            claim=f"{book.claim(cid)} [profile {profile}: a = {lat.a_s_per_token:.5g} s/token, "
            f"b0 = {lat.b0_s:.4g} s]",
            profile=lat,
            miss=miss,
        )

    rows: list[ClaimRow] = []
    for profile, t in tables.items():
        suffix = "" if profile == main_profile else profile
        pat, imp, tr = t["patient"], t["impatient"], t["tradeoff"]
        gamma = float(tr["gamma"].iloc[0])
        o1 = argmax_on_grid(tr["limit_tokens"], tr["f1"])
        o2 = argmax_on_grid(tr["limit_tokens"], tr["f2_exact"])
        o2i = argmax_on_grid(tr["limit_tokens"], tr["f2_interp"])
        step = float(np.diff(tr["limit_tokens"]).min())
        grid_note = f"l grid {tr['limit_tokens'].min():g}:{tr['limit_tokens'].max():g}:{step:g}, g(r) = r^{gamma:g}"
        rows.append(
            row(
                "3a",
                o1.limit,
                profile,
                grid_note,
                suffix,
                miss=f"with gamma = {gamma:g} fixed in advance F1 peaks at {o1.limit:g}; g is not given in the paper",
            )
        )
        wq_p, wq_b = _at(pat, lp, "wq_formula_s"), _at(pat, lb, "wq_formula_s")
        sim_note = ""
        if np.isfinite(_at(pat, lp, "wq_sim_s")):
            sim_note = f"; simulation {_at(pat, lp, 'wq_sim_s'):.4g} +- {_at(pat, lp, 'wq_sim_ci95_s'):.2g} s"
        rows.append(
            row(
                "3b",
                wq_p,
                profile,
                f"Pollaczek-Khinchine Eq. (1)-(5){sim_note}",
                suffix,
                miss=PROFILE_MISS,
            )
        )
        rows.append(
            row(
                "3c",
                100 * (1 - wq_p / wq_b),
                profile,
                f"W_q({lp:g}) = {wq_p:.4g} s, W_q({lb:g}) = {wq_b:.4g} s",
                suffix,
                miss=PROFILE_MISS,
            )
        )
        rows.append(
            row(
                "4a",
                o2.limit,
                profile,
                f"F2 with exact M/G/1+D; {grid_note}",
                suffix,
                miss=f"F2 peaks at {o2.limit:g}: the loss cost c*pi dominates for every gamma tried (see 4a-gamma)",
            )
        )
        rows.append(
            row(
                "4a",
                o2i.limit,
                profile,
                f"F2 with the De Kok-Tijms interpolation (6)-(8); {grid_note}",
                f"{suffix}-interp" if suffix else "interp",
                miss=f"F2 peaks at {o2i.limit:g}: the loss cost c*pi dominates",
            )
        )
        pi_p, pi_b = _at(imp, li, "loss_exact"), _at(imp, lb, "loss_exact")
        note = f"exact M/G/1+D; interpolation (6)-(8) gives {_at(imp, li, 'loss_interp'):.4g}"
        if "loss_sim" in imp and np.isfinite(_at(imp, li, "loss_sim")):
            note += f"; simulation {_at(imp, li, 'loss_sim'):.4g} +- {_at(imp, li, 'loss_sim_ci95'):.2g}"
        rows.append(
            row(
                "4b",
                pi_p,
                profile,
                note,
                suffix,
                miss=PROFILE_MISS,
            )
        )
        rows.append(
            row(
                "4c",
                100 * (1 - pi_p / pi_b),
                profile,
                f"exact pi({li:g}) = {pi_p:.4g}, pi({lb:g}) = {pi_b:.4g}; interpolation gives "
                f"{100 * (1 - _at(imp, li, 'loss_interp') / _at(imp, lb, 'loss_interp')):.4g}%",
                suffix,
                miss=PROFILE_MISS,
            )
        )
        if "gamma_sweep" in t:
            sw = t["gamma_sweep"]
            span = f"gamma grid {sw['gamma'].min():g}:{sw['gamma'].max():g}"
            for cid, col, target in (("3a", "l1_star", lp), ("4a", "l2_star_exact", li)):
                hits = sw.loc[np.isclose(sw[col], target), "gamma"].to_numpy()
                found = ", ".join(f"{v:g}" for v in sorted(set(sw[col].astype(float))))
                rows.append(
                    solved_parameter_row(
                        f"{cid}-gamma" if not suffix else f"{cid}-{suffix}-gamma",
                        f"Which gamma of g(r) = r^gamma gives l* = {target:g} "
                        f"({'F1' if cid == '3a' else 'F2 exact'}); profile {profile}",
                        target,
                        [float(g) for g in hits],
                        "gamma",
                        span
                        if hits.size
                        else f"no gamma on the {span} reaches it; optima found: {found}",
                    )
                )
    for cid, lim in (("5a", lp), ("5b", li)):
        p = 100 * float(law.prob_below(lim))
        rows.append(
            book.judge(
                cid, p, "exact cdf of the token law", claim=f"{book.claim(cid)} [{law.spec}]"
            )
        )
    return rows
