"""Claim 10 (SSJF, arXiv 2404.08509): the mean-JCT reduction and the throughput ratio of SSJF
(with its starvation guard) over FCFS, in three groups of rows (docs/studies/ssjf.md):

- ``10a*`` (group a): SSJF's inputs, SSJF's protocol (the rate average) and the serving semantics
  of SSJF's simulator, per batching mode: do the published numbers follow from the published
  data?
- ``10b*`` (group b): the same inputs and protocol, this engine's serving: does the gain survive
  a modern scheduler?
- ``10c*`` (group c): the Azure trace's lengths and our learned predictor, per cost model and
  mode, by SSJF's protocol at one rate and in steady state: does it transfer? (The steady-state
  throughput ratio is 1 by construction below capacity: it tests nothing and has no row.)

Each row is judged against the published range, with the reason of a miss in its note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from llmqueue.claims import ClaimBook, ClaimRow
from llmqueue.errors import InputError
from llmqueue.studies.ssjf.groups import rate_reading
from llmqueue.studies.ssjf.spec import (
    MODES,
    OFFICIAL_GROUPS,
    OFFICIAL_QUANTITIES,
    QUANTITIES,
    Official,
)

__all__ = ["claim_values", "claim_tag", "claims_rows", "official_claims_rows", "sweep_reading"]

# how each group serves each batching mode, in words (the notes of groups a and b)
SERVING = {
    ("a", "none"): "one job at a time",
    ("a", "dynamic"): (
        "batches of at most {b} lasting their longest job, FCFS waiting up to {to:g} s to fill one"
    ),
    ("a", "continuous"): (
        "SSJF's continuous batching: batches of at most {b} re-formed when their shortest job "
        "ends, the others back in the queue (rebatch), every job running for its own run time "
        "whatever the batch, FCFS waiting up to {to:g} s to fill a batch"
    ),
    ("b", "none"): "one job at a time",
    ("b", "dynamic"): "batches of at most {b} lasting their longest job, no FCFS timeout",
    ("b", "continuous"): (
        "iteration-level continuous batching of at most {b} (vLLM's scheduler) priced by the "
        "cost model's step law, with no per-job cost, no FCFS timeout"
    ),
}


def _reading(
    groups: pd.DataFrame, group: str, setting: str, mode: str, policy: str
) -> pd.DataFrame:
    g = groups[
        (groups["group"] == group)
        & (groups["setting"] == setting)
        & (groups["mode"] == mode)
        & (groups["policy"] == policy)
    ]
    if g.empty:
        raise InputError(f"no SSJF readings for group {group}, {setting}, {mode}, {policy}")
    return g


def _avg(g: pd.DataFrame) -> pd.Series:
    return g[g["reading"] == "rates"].iloc[0]


def _per_rate(g: pd.DataFrame, col: str, fmt: str) -> str:
    r = g[g["reading"] == "rate"].sort_values("nominal_rate_per_s")
    return ", ".join(
        f"{x:g}: {fmt.format(v)}" for x, v in zip(r["nominal_rate_per_s"], r[col], strict=True)
    )


# ---- group c: Azure lengths, the learned predictor --------------------------------------------------
def claim_values(
    protocol: pd.DataFrame,
    poisson: pd.DataFrame,
    setting: str,
    mode: str,
    load: float,
    rate_per_s: float = 1.0,
) -> dict[str, float]:
    """SSJF (with its starvation guard) vs FCFS for one (setting, mode) of group c: mean-JCT
    reduction (%) and throughput ratio by SSJF's protocol at `rate_per_s` (means over runs) and
    the JCT reduction in steady state (Poisson at `load`); SJF's reduction (with the guard)
    beside them (``sjf_*``), the protocol's offered load, and the same readings averaged over
    every rate of the protocol table (``*_rates``), as SSJF's evaluation reads them."""
    pr = protocol[(protocol["setting"] == setting) & (protocol["mode"] == mode)]
    at_rate = pr[np.isclose(pr["nominal_rate_per_s"], rate_per_s)]
    runs = at_rate.groupby("policy")[["jct_mean_s", "throughput_per_s"]].mean()
    by_rate = pr.groupby(["policy", "nominal_rate_per_s"])[["jct_mean_s", "throughput_per_s"]]
    rates = by_rate.mean().groupby("policy").mean()
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
        "jct_rates": gain(rates, "SSJF+guard"),
        "thr_rates": ratio(rates),
        "n_rates": float(pr["nominal_rate_per_s"].nunique()),
        "offered_load": float(at_rate["offered_load"].iloc[0]),
        "mode_load": float(at_rate["mode_load"].iloc[0]),
        "batched_padding": float(mode == "dynamic"),
        "batched": float(mode != "none"),
        "sjf_unguarded_steady": gain(ps, "SJF"),
        "sjf_jct_protocol": gain(runs, "SJF+guard"),
        "sjf_jct_steady": gain(ps, "SJF+guard"),
    }


def claim_tag(*parts: str) -> str:
    """The tag a reference claim's text starts with: its group, then setting and mode
    (``[a, none]``, ``[c, ssjf_cost, dynamic]``)."""
    return "[" + ", ".join(parts) + "]"


def _miss(quantity: str, ours: float, lo: float, hi: float, v: Mapping[str, float]) -> str:
    """One line: why our number (group c) falls outside the published range."""
    load = v["mode_load"]
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


def _rates_note(quantity: str, v: Mapping[str, float], rates: str) -> str:
    """What SSJF's rate average does to a protocol reading of group c."""
    what = f"{v['jct_rates']:.1f}%" if quantity == "jct_protocol" else f"{v['thr_rates']:.2f}x"
    return (
        f"averaged over rates {rates} per s as SSJF's evaluation does, the same policies give "
        f"{what}"
    )


def claims_rows(
    book: ClaimBook,
    protocol: pd.DataFrame,
    poisson: pd.DataFrame,
    predictors: pd.DataFrame,
    settings: Sequence[str],
    ssjf_model: str,
    load: float,
    rate_per_s: float = 1.0,
) -> list[ClaimRow]:
    """Group c: per setting and batching mode, SSJF's mean-JCT reduction by SSJF's protocol at
    one rate and in steady state, and its throughput ratio by SSJF's protocol, judged against
    the published ranges (reference rows ``10c*`` in the order settings x :data:`MODES` x
    :data:`QUANTITIES`)."""
    ids = book.ids("10c")
    want = len(settings) * len(MODES) * len(QUANTITIES)
    if len(ids) != want:
        raise InputError(
            f"src/llmqueue/studies/ssjf/reference_claims.csv has {len(ids)} claim-10c rows; the config's "
            f"{len(settings)} settings x {len(MODES)} modes x {len(QUANTITIES)} quantities "
            f"need {want}"
        )
    pr = predictors[predictors["predictor"] == f"learned:{ssjf_model}"]
    if pr.empty:
        raise InputError(f"no score for the learned {ssjf_model} in the predictor table")
    q = pr.iloc[0]
    guard = poisson.loc[poisson["policy"] == "SSJF+guard", "guard_s"]
    pred_note = (
        f"Azure held-out rows; SSJF = learned {ssjf_model} predictor (Kendall tau "
        f"{q['kendall_tau']:.2f}, 5-class accuracy {q['accuracy']:.2f}) with the "
        f"{float(guard.iloc[0]):g}-s starvation guard"
    )
    rates = "/".join(f"{x:g}" for x in sorted(protocol["nominal_rate_per_s"].unique()))
    rows = []
    it = iter(ids)
    for setting in settings:
        for mode in MODES:
            v = claim_values(protocol, poisson, setting, mode, load, rate_per_s)
            for quantity in QUANTITIES:
                cid = next(it)
                tag = claim_tag("c", setting, mode)
                _check_tag(book, cid, tag)
                tol = book.tolerance(cid)
                paper = book.paper(cid)
                lo, hi = paper - tol.value, paper + tol.value
                ours = float(v[quantity])
                if quantity.endswith("protocol"):
                    how = (
                        f"SSJF's protocol at rate {rate_per_s:g} per s only "
                        f"({int(protocol['jobs'].iloc[0])} jobs x "
                        f"{int(protocol['run'].max()) + 1} runs at {v['mode_load']:.2f}x this "
                        "mode's capacity)"
                    )
                    if v["n_rates"] > 1:
                        how += "; " + _rates_note(quantity, v, rates)
                else:
                    how = f"steady state, Poisson at load {load:g}"
                rows.append(
                    book.judge(
                        cid,
                        ours,
                        f"{pred_note}; {how}; published range {lo:g}-{hi:g}",
                        miss=_miss(quantity, ours, lo, hi, v),
                    )
                )
    return rows


# ---- groups a and b: SSJF's inputs and protocol ---------------------------------------------------
def _check_tag(book: ClaimBook, cid: str, tag: str) -> None:
    if not book.claim(cid).startswith(tag):
        raise InputError(
            f"claim {cid}: its text must start with {tag!r} (groups, settings, modes and "
            f"quantities in order), got {book.claim(cid)[:40]!r}"
        )


def _official_miss(
    quantity: str, mode: str, avg: pd.Series, sjf: pd.Series, ssjf: pd.DataFrame,
    lo: float, hi: float, sjf_dynamic: float,
) -> str:  # fmt: skip
    """Why a reading of group a or b falls outside the published range."""
    if quantity == "thr_rates":
        low = ssjf[ssjf["reading"] == "rate"].sort_values("nominal_rate_per_s").iloc[0]
        return (
            f"SJF with true lengths reaches {sjf['throughput_ratio']:.2f}x; SSJF's ratio grows "
            f"with the rate ({low['throughput_ratio']:.2f}x at {low['nominal_rate_per_s']:g} per s) "
            "and the average over rates sets it"
        )
    ours = float(avg["jct_reduction_pct"])
    sjf_gain = float(sjf["jct_reduction_pct"])
    text = f"SJF with true lengths gains {sjf_gain:.1f}%"
    if mode == "continuous" and ours < lo:
        text += (
            f" ({sjf_dynamic:.1f}% with dynamic batching: a continuous batch lets its short jobs "
            "leave before its long ones, which spares FCFS part of its head-of-line blocking)"
        )
    text += (
        f"; the proxy's classes (Kendall tau {avg['kendall_tau']:.2f}) recover "
        f"{100 * ours / sjf_gain:.0f}% of it"
    )
    if ours > hi:
        text = f"a larger gain than published; {text}"
    return text


def sweep_reading(sweep: pd.DataFrame, policy: str = "SSJF+guard") -> tuple[dict, str]:
    """SSJF's reading over a batch-size sweep (:func:`official.official_sweep_table`): at each
    batch size the rate reading of :func:`groups.rate_reading` (means over runs, then rates),
    then the means over the batch sizes before the ratio (``jct_reduction_pct``,
    ``throughput_ratio``, %, x); with a text of the reading at each batch size."""
    each = {
        int(str(b)): rate_reading(runs, policy)
        for b, runs in sweep.groupby("batch_size", sort=True)
    }
    if not each:
        raise InputError("the batch-size sweep of SSJF's inputs has no runs")

    def mean(key: str) -> float:
        return float(np.mean([r[key] for r in each.values()]))

    out = {
        "jct_reduction_pct": 100.0 * (1.0 - mean("jct_mean_s") / mean("fcfs_jct_mean_s")),
        "throughput_ratio": mean("throughput_per_s") / mean("fcfs_throughput_per_s"),
    }
    text = ", ".join(
        f"{b}: {r['jct_reduction_pct']:.1f}% / {r['throughput_ratio']:.2f}x"
        for b, r in each.items()
    )
    return out, text


def official_claims_rows(
    book: ClaimBook,
    groups: pd.DataFrame,
    official: Official,
    jobs: int,
    runs: int,
    guard_s: float,
    sweep: pd.DataFrame | None = None,
) -> list[ClaimRow]:
    """Groups a and b: per batching mode, SSJF's mean-JCT reduction and throughput ratio over
    FCFS on SSJF's inputs by SSJF's protocol (the rate average, :mod:`groups`), judged against
    the published ranges (reference rows ``10a*`` then ``10b*``, each in the order
    :data:`MODES` x :data:`OFFICIAL_QUANTITIES`). With `sweep` (group a's continuous batching at
    every batch size SSJF's run script sweeps) that mode's rows read the whole sweep
    (:func:`sweep_reading`); the configured batch size's reading stays in their notes."""
    swept = sweep_reading(sweep) if sweep is not None and not sweep.empty else None
    setting = official.setting
    rows = []
    for group in OFFICIAL_GROUPS:
        ids = book.ids(f"10{group}")
        want = len(MODES) * len(OFFICIAL_QUANTITIES)
        if len(ids) != want:
            raise InputError(
                f"src/llmqueue/studies/ssjf/reference_claims.csv has {len(ids)} claim-10{group} rows; "
                f"{len(MODES)} modes x {len(OFFICIAL_QUANTITIES)} quantities need {want}"
            )
        it = iter(ids)
        for mode in MODES:
            ssjf = _reading(groups, group, setting, mode, "SSJF+guard")
            sjf = _avg(_reading(groups, group, setting, mode, "SJF+guard"))
            avg = _avg(ssjf)
            rates = "/".join(f"{x:g}" for x in sorted(ssjf["nominal_rate_per_s"].dropna()))
            serving = SERVING[(group, mode)].format(
                b=official.batch_size,
                to=official.fcfs_batch_timeout_s,
            )
            guard = (
                f"SJF and SSJF with the starvation guard at {guard_s:g} s or "
                f"{official.guard_factor:g}x a job's run time"
                if group == "a"
                else f"SJF and SSJF with the {guard_s:g}-s starvation guard"
            )
            for quantity in OFFICIAL_QUANTITIES:
                cid = next(it)
                _check_tag(book, cid, claim_tag(group, mode))
                tol = book.tolerance(cid)
                paper = book.paper(cid)
                lo, hi = paper - tol.value, paper + tol.value
                if quantity == "jct_rates":
                    ours, ci = float(avg["jct_reduction_pct"]), float(avg["jct_reduction_ci95"])
                    per = _per_rate(ssjf, "jct_reduction_pct", "{:.1f}%")
                    val = f"{ours:.1f} +- {ci:.1f}%"
                else:
                    ours, ci = float(avg["throughput_ratio"]), float(avg["throughput_ratio_ci95"])
                    per = _per_rate(ssjf, "throughput_ratio", "{:.2f}x")
                    val = f"{ours:.2f} +- {ci:.2f}x"
                sjf_dyn = _avg(_reading(groups, group, setting, "dynamic", "SJF+guard"))
                note = (
                    f"SSJF's inputs (their proxy model's classes {avg['predictor']}: Kendall tau "
                    f"{avg['kendall_tau']:.2f}, class accuracy {avg['accuracy']:.2f}); SSJF's "
                    f"protocol ({jobs} jobs x {runs} runs at each of rates {rates} per s, means "
                    f"over runs and rates before the ratio: {val} over runs); {serving}; "
                    f"{guard}; per rate: {per}"
                )
                if swept is not None and group == "a" and mode == "continuous":
                    sizes = sorted(int(b) for b in sweep["batch_size"].unique())  # type: ignore[index]
                    key = "jct_reduction_pct" if quantity == "jct_rates" else "throughput_ratio"
                    note += (
                        f"; ours = the same reading over SSJF's batch sizes {sizes[0]}-{sizes[-1]} "
                        f"(means over runs, rates and batch sizes before the ratio), as its run "
                        f"script sweeps them; at the batch size {official.batch_size} alone: "
                        f"{val}; by batch size (JCT reduction / throughput ratio): {swept[1]}"
                    )
                    ours = float(swept[0][key])
                if group == "b":
                    a = _avg(_reading(groups, "a", setting, mode, "SSJF+guard"))
                    note += "; served as SSJF's simulator serves (group a): " + (
                        f"{a['jct_reduction_pct']:.1f}%"
                        if quantity == "jct_rates"
                        else f"{a['throughput_ratio']:.2f}x"
                    )
                note += f"; published range {lo:g}-{hi:g}"
                rows.append(
                    book.judge(
                        cid,
                        ours,
                        note,
                        miss=(
                            f"over the whole sweep the reading lies outside the published range "
                            f"{lo:g}-{hi:g}"
                            if swept is not None and group == "a" and mode == "continuous"
                            else _official_miss(
                                quantity,
                                mode,
                                avg,
                                sjf,
                                ssjf,
                                lo,
                                hi,
                                float(sjf_dyn["jct_reduction_pct"]),
                            )
                        ),  # fmt: skip
                    )
                )
    return rows
