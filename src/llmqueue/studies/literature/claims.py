"""Claim 12 (the literature): one row per published number of
``src/llmqueue/studies/literature/reference_claims.csv``, judged through one :class:`llmqueue.claims.ClaimBook`.

A row whose setting the engine expresses compares the engine's simulated mean with the published
one under the row's tolerance class; its note gives the 95% CI, the run's length and the exact
value with its formula. A miss says whether the engine agrees with the exact formula (then the
published number is what differs) or not. A row without a setting is not expressed: its
reference row says why.
"""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.claims import ClaimBook, ClaimRow, Tolerance

__all__ = ["claims_rows"]


def _note(r: dict) -> str:
    sim, ci = float(r["sim_response_mean_s"]), float(r["sim_response_ci95_s"])
    note = (
        f"{r['order']} at load {float(r['rate_per_s']):g}, sizes {r['tokens']}, predictor "
        f"{r['predictor']}: engine {sim:.5g} +- {ci:.2g} (95% CI, {int(r['sim_requests'])} "
        "requests)"
    )
    exact = float(r["exact_response_mean_s"])
    if math.isfinite(exact):
        note += f"; exact {exact:.5g} ({r['exact_method']})"
    else:
        note += "; no exact formula here"
    return note


def _miss(r: dict, paper: float, tol: Tolerance) -> str:
    sim, ci = float(r["sim_response_mean_s"]), float(r["sim_response_ci95_s"])
    exact = float(r["exact_response_mean_s"])
    if not math.isfinite(exact):
        return "the engine differs from the published number (no exact formula here to say which)"
    if tol.holds(paper, exact):
        return (
            f"the exact formula ({exact:.5g}) matches the published number and the engine's run "
            "does not"
        )
    if abs(sim - exact) <= 2.0 * ci:
        return (
            f"the engine agrees with the exact formula ({exact:.5g}), which the published "
            f"{paper:g} does not: the published number is what differs"
        )
    return f"the engine, the exact formula ({exact:.5g}) and the published number all differ"


def claims_rows(book: ClaimBook, reference: pd.DataFrame, table: pd.DataFrame) -> list[ClaimRow]:
    """Claim 12's rows: `reference` the reference table (with its setting, order, rate_per_s and
    reason columns), `table` the study's results (:func:`.tables.literature_table`)."""
    rows: list[ClaimRow] = []
    by_point = {
        (str(r["setting"]), str(r["order"]), float(r["rate_per_s"])): r
        for r in table.to_dict("records")
    }
    for ref in reference.to_dict("records"):
        cid = str(ref["id"])
        setting = ref.get("setting")
        if not isinstance(setting, str) or not setting:
            rows.append(book.not_expressed(cid, str(ref["reason"])))
            continue
        r = by_point[(setting, str(ref["order"]), float(ref["rate_per_s"]))]
        note = _note(r)
        if isinstance(ref.get("reason"), str) and ref["reason"]:
            note += f"; {ref['reason']}"
        rows.append(
            book.judge(
                cid,
                float(r["sim_response_mean_s"]),
                note,
                miss=_miss(r, book.paper(cid), book.tolerance(cid)),
            )
        )
    return rows
