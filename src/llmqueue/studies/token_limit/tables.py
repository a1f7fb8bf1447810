"""The token-limit study's tables: one row per max-token limit l of the grid, with the closed
form, the exact solution and the simulation side by side; the utility trade-off and its optimum
against gamma. Units: tokens, seconds, requests per second.
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
from llmqueue.latency import LinearLatency
from llmqueue.schema import with_defaults
from llmqueue.seeds import seed_sequence
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.tokens import TokenLaw

Progress = Callable[[str], None]


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
            "formula_wait_mean_s": c.wq_s,
        }
    )
    cols = [
        "sim_wait_mean_s",
        "sim_wait_ci95_s",
        "sim_wait_p50_s",
        "sim_wait_p95_s",
        "sim_wait_p99_s",
    ]
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


def impatience_settings(given: Mapping[str, Any] | None) -> dict[str, Any]:
    """``exp_reading``, ``step_s`` and ``max_rel_error`` of the impatient curves: config
    ``token_limit.impatience_exp_reading`` and ``token_limit.exact``, each key `given` leaves out
    taken from the schema's defaults."""
    given = dict(given or {})
    tl = with_defaults(
        {
            "exact": {k: v for k, v in given.items() if k != "exp_reading"},
            **({"impatience_exp_reading": given["exp_reading"]} if "exp_reading" in given else {}),
        },
        "token_limit",
    )
    return dict(tl["exact"], exp_reading=tl["impatience_exp_reading"])


def impatient_table(
    law: TokenLaw,
    latency: LinearLatency,
    rate_per_s: float,
    patience_s: float,
    limits: np.ndarray,
    sim: SimSettings | None,
    seed_root: int,
    impatience: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Fig. 4b-4c: pi(l), W_qs(l), E[W](l) by Eq. (6)-(9), by the exact M/G/1+D solution and by
    simulation. `impatience`: as :func:`sweep_table`."""
    imp = impatience_settings(impatience)
    exp_reading, step_s = str(imp["exp_reading"]), float(imp["step_s"])
    max_rel_error = float(imp["max_rel_error"])
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
            "interp_loss": interp.loss,
            "interp_served_wait_mean_s": interp.wqs_s,
            "interp_wait_mean_s": interp.w_all_s,
            "exact_loss": exact.loss,
            "exact_loss_err": exact.error_estimate,
            "exact_served_wait_mean_s": exact.wqs_s,
            "exact_wait_mean_s": exact.w_all_s,
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
                sim_loss=r.loss.mean,
                sim_loss_ci95=r.loss.ci95,
                sim_served_wait_mean_s=r.served_wait.mean,
                sim_served_wait_ci95_s=r.served_wait.ci95,
                sim_wait_mean_s=r.wait.mean,
                sim_wait_ci95_s=r.wait.ci95,
                sim_wait_p50_s=r.wait.p50,
                sim_wait_p95_s=r.wait.p95,
                sim_wait_p99_s=r.wait.p99,
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
    (:func:`impatience_settings`). The profile's a and b0 stand beside the limit in every row."""
    if patience_s is None:
        df = patient_table(law, latency, rate_per_s, limits, sim, seed_root, progress)
    else:
        df = impatient_table(
            law,
            latency,
            rate_per_s,
            patience_s,
            limits,
            sim,
            seed_root,
            impatience,
            progress,
        )
    df.insert(1, "a_s_per_token", latency.a_s_per_token)
    df.insert(2, "b0_s", latency.b0_s)
    return df


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
            "f1": objective_patient(
                eu, patient["formula_wait_mean_s"], float(cfg["alpha_patient"])
            ),
            "f2_exact": objective_impatient(
                eu,
                impatient["exact_served_wait_mean_s"],
                impatient["exact_loss"],
                float(cfg["alpha_impatient"]),
                float(cfg["loss_cost"]),
            ),
            "f2_interp": objective_impatient(
                eu,
                impatient["interp_served_wait_mean_s"],
                impatient["interp_loss"],
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
