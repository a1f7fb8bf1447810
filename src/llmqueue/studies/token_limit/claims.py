"""Claims 3-5 (the token-limit study) from its tables, through one
:class:`llmqueue.claims.ClaimBook`.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from llmqueue.analytic.tradeoff import (
    argmax_on_grid,
)
from llmqueue.claims import ClaimBook, ClaimRow, solved_parameter_row
from llmqueue.latency import LinearLatency
from llmqueue.tokens import TokenLaw

# Why a time or fraction computed with an independent latency profile can miss the paper's.
PROFILE_MISS = (
    "the latency law (a, b0) differs from the one the paper used, which it does not state"
)


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
    the main one carry its name as an id suffix and the scope ``reading``: a latency law the
    paper does not state). A back-solved profile's rows are ``back_solved`` for the claims it was
    solved from and ``conditional`` (within tolerance) for the others (:meth:`ClaimBook.judge`).

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
            scope=None if profile == main_profile else "reading",
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
        wq_p, wq_b = _at(pat, lp, "formula_wait_mean_s"), _at(pat, lb, "formula_wait_mean_s")
        sim_note = ""
        if np.isfinite(_at(pat, lp, "sim_wait_mean_s")):
            sim_note = f"; simulation {_at(pat, lp, 'sim_wait_mean_s'):.4g} +- {_at(pat, lp, 'sim_wait_ci95_s'):.2g} s"
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
        pi_p, pi_b = _at(imp, li, "exact_loss"), _at(imp, lb, "exact_loss")
        note = f"exact M/G/1+D; interpolation (6)-(8) gives {_at(imp, li, 'interp_loss'):.4g}"
        if "sim_loss" in imp and np.isfinite(_at(imp, li, "sim_loss")):
            note += f"; simulation {_at(imp, li, 'sim_loss'):.4g} +- {_at(imp, li, 'sim_loss_ci95'):.2g}"
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
                f"{100 * (1 - _at(imp, li, 'interp_loss') / _at(imp, lb, 'interp_loss')):.4g}%",
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
