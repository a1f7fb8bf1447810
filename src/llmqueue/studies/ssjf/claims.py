"""Claim 10 (SSJF, arXiv 2404.08509): the mean-JCT reduction and the throughput ratio of SSJF
(with its starvation guard) over FCFS, per setting and batching mode, read by SSJF's protocol and
in steady state, each judged against the published range with the reason of a miss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from llmqueue.claims import ClaimBook, ClaimRow
from llmqueue.errors import InputError
from llmqueue.studies.ssjf.spec import MODES, QUANTITIES

__all__ = ["claim_values", "claims_rows"]


# ---- claims ----------------------------------------------------------------------------------


def claim_values(
    protocol: pd.DataFrame, poisson: pd.DataFrame, setting: str, mode: str, load: float
) -> dict[str, float]:
    """SSJF (with its starvation guard) vs FCFS for one (setting, mode): mean-JCT reduction (%)
    and throughput ratio, by SSJF's protocol (means over runs) and in steady state (Poisson at
    `load`); SJF's reduction (with the guard) beside them (``sjf_*``) and the protocol's
    offered load."""
    pr = protocol[(protocol["setting"] == setting) & (protocol["mode"] == mode)]
    runs = pr.groupby("policy")[["jct_mean_s", "throughput_per_s"]].mean()
    ps = poisson[
        (poisson["setting"] == setting)
        & (poisson["mode"] == mode)
        & np.isclose(poisson["load"], load)
    ].set_index("policy")
    if runs.empty or ps.empty:
        raise InputError(f"no results for setting {setting!r}, mode {mode!r} at load {load:g}")

    def at(df: pd.DataFrame, policy: str, col: str) -> float:
        return float(df.loc[policy, col])  # type: ignore[arg-type]

    def gain(df: pd.DataFrame, policy: str) -> float:
        return 100.0 * (1.0 - at(df, policy, "jct_mean_s") / at(df, "FCFS", "jct_mean_s"))

    def ratio(df: pd.DataFrame) -> float:
        return at(df, "SSJF+guard", "throughput_per_s") / at(df, "FCFS", "throughput_per_s")

    return {
        "jct_protocol": gain(runs, "SSJF+guard"),
        "jct_steady": gain(ps, "SSJF+guard"),
        "thr_protocol": ratio(runs),
        "thr_steady": ratio(ps),
        "offered_load": float(pr["offered_load"].iloc[0]),
        "mode_load": float(pr["mode_load"].iloc[0]),
        "batched_padding": float(mode == "dynamic"),
        "batched": float(mode != "none"),
        "sjf_unguarded_steady": gain(ps, "SJF"),
        "sjf_jct_protocol": gain(runs, "SJF+guard"),
        "sjf_jct_steady": gain(ps, "SJF+guard"),
    }


def claim_tag(setting: str, mode: str) -> str:
    """The tag a reference claim's text starts with, naming its setting and batching mode."""
    return f"[{setting}, {mode}]"


def _miss(quantity: str, ours: float, lo: float, hi: float, v: Mapping[str, float]) -> str:
    """One line: why our number falls outside the published range."""
    load = v["mode_load"]
    if quantity == "thr_steady":
        return (
            "below capacity every order completes what arrives, so the steady-state rate is the "
            "arrival rate and the ratio is 1 (SSJF's 2.2-3.6x counts early completions)"
        )
    if quantity == "thr_protocol":
        if load < 1:
            return (
                f"the 50 jobs arrive at {load:.2f}x this mode's capacity: few wait, so every "
                "order finishes them alike"
            )
        return (
            f"SSJF's reading counts jobs done by the 25th-percentile completion of a run "
            f"{load:.1f}x over capacity; with these lengths putting short jobs first gains "
            f"{ours:.2f}x, not 2.2-3.6x"
        )
    what = "SSJF's protocol" if quantity == "jct_protocol" else "steady state"
    sjf = v["sjf_jct_protocol"] if quantity == "jct_protocol" else v["sjf_jct_steady"]
    if ours < lo and sjf < lo:
        if load < 1 and quantity == "jct_protocol":
            return (
                f"the jobs arrive at {load:.2f}x this mode's capacity, so little waits to be "
                f"reordered: even SJF with true lengths gains {sjf:.1f}%"
            )
        if v["batched"]:
            nog = (
                f" ({v['sjf_unguarded_steady']:.1f}% without the guard)"
                if quantity == "jct_steady"
                else ""
            )
            return (
                f"even SJF with true lengths gains only {sjf:.1f}%{nog} in {what}: a batching "
                "server serves several waiting requests at once, so fewer are left to reorder"
            )
        if quantity == "jct_steady":
            return (
                f"even SJF with true lengths gains only {sjf:.1f}% with the starvation guard "
                f"({v['sjf_unguarded_steady']:.1f}% without): at this load the guard often "
                "serves by age"
            )
        return f"even SJF with true lengths gains only {sjf:.1f}% in {what}"
    if ours < lo:
        return (
            f"SJF with true lengths gains {sjf:.1f}% in {what}; the learned predictor recovers "
            "only part of it"
        )
    return (
        f"larger gain in {what} (SJF with true lengths: {sjf:.1f}%): in a batch that lasts its "
        "longest job, ordering by length also pairs similar lengths, which cuts padding"
        if v["batched_padding"]
        else f"larger gain in {what} (SJF with true lengths: {sjf:.1f}%)"
    )


def claims_rows(
    book: ClaimBook,
    protocol: pd.DataFrame,
    poisson: pd.DataFrame,
    predictors: pd.DataFrame,
    settings: Sequence[str],
    ssjf_model: str,
    load: float,
) -> list[ClaimRow]:
    """Claim 10: per setting and batching mode, SSJF's mean-JCT reduction and throughput ratio
    over FCFS by SSJF's protocol and in steady state, judged against the published ranges
    (reference rows ``10a`` .. in the order settings x :data:`MODES` x :data:`QUANTITIES`)."""
    ids = book.ids("10")
    want = len(settings) * len(MODES) * len(QUANTITIES)
    if len(ids) != want:
        raise InputError(
            f"data/reference/claims_ssjf.csv has {len(ids)} claim-10 rows; the config's "
            f"{len(settings)} settings x {len(MODES)} modes x {len(QUANTITIES)} quantities "
            f"need {want}"
        )
    pr = predictors[predictors["predictor"] == f"learned:{ssjf_model}"]
    if pr.empty:
        raise InputError(f"no score for the learned {ssjf_model} in the predictor table")
    q = pr.iloc[0]
    guard = poisson.loc[poisson["policy"] == "SSJF+guard", "guard_s"]
    pred_note = (
        f"SSJF = learned {ssjf_model} predictor (held-out Kendall tau {q['kendall_tau']:.2f}, "
        f"5-class accuracy {q['accuracy']:.2f}) with the {float(guard.iloc[0]):g}-s "
        "starvation guard"
    )
    rows = []
    it = iter(ids)
    for setting in settings:
        for mode in MODES:
            v = claim_values(protocol, poisson, setting, mode, load)
            for quantity in QUANTITIES:
                cid = next(it)
                tag = claim_tag(setting, mode)
                if not book.claim(cid).startswith(tag):
                    raise InputError(
                        f"claim {cid}: its text must start with {tag!r} (settings x modes x "
                        f"quantities order), got {book.claim(cid)[:40]!r}"
                    )
                tol = book.tolerance(cid)
                paper = book.paper(cid)
                lo, hi = paper - tol.value, paper + tol.value
                ours = float(v[quantity])
                how = (
                    f"SSJF's protocol ({int(protocol['jobs'].iloc[0])} jobs x "
                    f"{int(protocol['run'].max()) + 1} runs at {v['mode_load']:.2f}x this mode's capacity)"
                    if quantity.endswith("protocol")
                    else f"steady state, Poisson at load {load:g}"
                )
                rows.append(
                    book.judge(
                        cid,
                        ours,
                        f"{pred_note}; {how}; published range {lo:g}-{hi:g}",
                        miss=_miss(quantity, ours, lo, hi, v),
                    )
                )
    return rows
