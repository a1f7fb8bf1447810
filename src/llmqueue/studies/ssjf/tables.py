"""The SSJF study's tables (:mod:`llmqueue.studies.ssjf`): the held-out trace rows, the predictors
scored alike, FCFS capacity per batching mode, JCT against load, the gain against predictor
quality, the starvation guard and SSJF's own protocol. Units: s, requests/s, tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.policy import FCFS_ORDER, SPJF_ORDER, Policy
from llmqueue.predictor.features import FeatureSpec, HeldOutTrace, read_heldout
from llmqueue.predictor.model import LengthModel
from llmqueue.predictor.scoring import score_predictions
from llmqueue.predictor.training import train_length_model
from llmqueue.seeds import seed_sequence
from llmqueue.sim.exact import row_mean_wait
from llmqueue.sim.predictors import Learned, Predictor, parse_predictor, row_predictions
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.ssjf.spec import (
    ARRIVALS,
    MODES,
    POLICIES,
    PROTOCOL_POLICIES,
    PolicySpec,
    Setting,
)
from llmqueue.traces import TraceRows

__all__ = [
    "StudyTrace",
    "load_trace",
    "train_model",
    "row_predictions",
    "predictor_table",
    "capacity_table",
    "jct_table",
    "quality_table",
    "starvation_table",
    "protocol_throughput",
    "slotted_arrivals",
    "protocol_run",
    "protocol_table",
]


Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


# ---- the trace and the predictors ------------------------------------------------------------------
StudyTrace = HeldOutTrace  # the study's trace and its held-out part


def load_trace(path: str, columns: Mapping[str, str], train_fraction: float) -> StudyTrace:
    """The study's trace (config ``ssjf.trace``) split at `train_fraction`."""
    return read_heldout(path, columns, train_fraction, where="ssjf.trace")


def train_model(trace: StudyTrace, kind: str, cfg: Mapping[str, Any], seed: int) -> LengthModel:
    """The learned predictor of config ``ssjf.learned`` (trained on the rows before the split)."""
    return train_length_model(
        trace.rows,
        kind,
        train_fraction=trace.split / trace.rows.n,
        validation_fraction=float(cfg["validation_fraction"]),
        features=FeatureSpec(tuple(int(m) for m in cfg["history"]), float(cfg["known_after_s"])),
        classes=str(cfg["classes"]),
        max_iter=int(cfg["max_iter"]),
        learning_rate=float(cfg["learning_rate"]),
        seed=seed,
    )


def _learned_predictor(model: LengthModel, label: str) -> Learned:
    return Learned(label, model)


def _size_blind(spec: str) -> bool:
    return spec.replace(" ", "") in ("buckets:k=2,pe=0.5", "buckets:k=2,acc=0")


def predictor_table(
    trace: StudyTrace, specs: Sequence[str], models: Mapping[str, LengthModel], seed: int
) -> pd.DataFrame:
    """Every predictor scored on the held-out rows (accuracy over SSJF's 5 classes, Kendall's
    tau, MAE): the specs of config ``ssjf.quality.predictors`` and the learned models."""
    rows = []
    for i, spec in enumerate(specs):
        pred = parse_predictor(spec)
        p = row_predictions(pred, trace, seed_sequence(seed, "ssjf", "predictors", i))
        kind = "size-blind" if _size_blind(spec) else spec.partition(":")[0]
        rows.append({"predictor": spec, "kind": kind, **_score(trace, p)})
    for kind, model in models.items():
        p = row_predictions(_learned_predictor(model, kind), trace, 0)
        rows.append(
            {
                "predictor": f"learned:{kind}",
                "kind": "learned",
                **_score(trace, p),
                "iterations": model.meta.get("iterations"),
                "train_rows": model.meta.get("train_rows"),
            }
        )
    return pd.DataFrame(rows)


def _score(trace: StudyTrace, pred: np.ndarray) -> dict[str, Any]:
    return score_predictions(trace.test.output_tokens, pred).to_dict()


# ---- the simulations -----------------------------------------------------------------------------
def _engine(
    workload: Any,
    policy: Policy,
    latency: BatchLatency | StepLaw,
    sim: SimSettings,
    seed: np.random.SeedSequence,
    *,
    per_request: bool = False,
    last_arrival: int | None = None,
) -> SimResult:
    """The one call of the serving engine in this module."""
    from llmqueue.sim.engine import run

    total = workload.total
    requests = sim.measured(total)
    return run(
        workload,
        policy,
        latency,
        requests=requests,
        warmup=sim.warmup,
        batches=sim.batches,
        seed=seed,
        per_request=per_request,
        last_arrival=last_arrival,
    )


def _workload(
    arrivals: str,
    test: TraceRows,
    predictor: Predictor,
    row_pred: np.ndarray | None,
    rate_per_s: float,
) -> Any:
    from llmqueue.sim.workload import ReplayWorkload, TraceWorkload

    if arrivals == "poisson":
        return TraceWorkload(
            test.prompt_tokens,
            test.output_tokens,
            rate_per_s,
            predictor,
            "held-out trace rows",
            row_pred,
        )
    w = ReplayWorkload(
        test.arrival_s,
        test.prompt_tokens,
        test.output_tokens,
        predictor=predictor,
        source="held-out trace rows",
        time_of_day_s=test.time_of_day_s,
        row_pred=row_pred,
    )
    return w.at_rate(rate_per_s)


def capacity_table(
    trace: StudyTrace, settings: Sequence[Setting], requests: int, seed: int
) -> pd.DataFrame:
    """FCFS capacity (requests/s) of every (setting, mode) on the held-out rows: the rate the
    loads are fractions of (:func:`llmqueue.sim.capacity.max_rate`)."""
    from llmqueue.sim.capacity import max_rate
    from llmqueue.sim.workload import TraceWorkload

    test = trace.test
    w = TraceWorkload(test.prompt_tokens, test.output_tokens, 1.0)
    rows = []
    for s in settings:
        for mode in MODES:
            cap = max_rate(
                w,
                s.policy(mode),
                s.latency(mode),
                requests=requests,
                seed=seed_sequence(seed, "ssjf", "capacity", s.name, mode),
            )
            rows.append(
                {
                    "setting": s.name,
                    "mode": mode,
                    "policy": s.policy(mode).label(),
                    "capacity_per_s": cap.rate_per_s,
                    "method": cap.method,
                }
            )
    return pd.DataFrame(rows)


def _capacity(cap: pd.DataFrame, setting: str, mode: str) -> float:
    row = cap[(cap["setting"] == setting) & (cap["mode"] == mode)]
    if row.empty:
        raise InputError(f"no capacity for setting {setting!r}, mode {mode!r}")
    return float(row["capacity_per_s"].iloc[0])


def _exact_jct(
    setting: Setting, trace: StudyTrace, spec: PolicySpec, keys: np.ndarray | None, rate: float
) -> float:
    """Exact mean JCT with no batching (no guard): the order's formula over the held-out rows
    (:func:`llmqueue.sim.exact.row_mean_wait`: Pollaczek-Khinchine for FCFS, Cobham's priority
    formula by the sort key otherwise), nan where the load is >= 1."""
    s = setting.service_s(trace.test.output_tokens)
    try:
        found = row_mean_wait(spec.order, s, trace.test.output_tokens, keys, rate)
    except UnstableError:
        return math.nan
    return math.nan if found is None else float(found[0] + s.mean())


def _metrics(res: SimResult) -> dict[str, Any]:
    jct = res.response
    assert jct is not None
    nan = math.nan
    bad = res.unstable
    return {
        "jct_mean_s": nan if bad else jct.mean,
        "jct_ci95_s": nan if bad else jct.ci95,
        "jct_p99_s": nan if bad else jct.p99,
        "jct_max_s": nan if bad else jct.max,
        "wait_mean_s": nan if bad else res.wait.mean,
        "wait_ci95_s": nan if bad else res.wait.ci95,
        "wait_p99_s": nan if bad else res.wait.p99,
        "wait_max_s": nan if bad else res.wait.max,
        "throughput_per_s": res.throughput_per_s,
        "unstable": bool(res.unstable),
        "note": res.note,
    }


def jct_table(
    trace: StudyTrace,
    settings: Sequence[Setting],
    capacity: pd.DataFrame,
    ssjf: LengthModel,
    arrivals: str,
    loads: Sequence[float],
    sim: SimSettings,
    guard_s: float,
    seed: int,
    progress: Progress = _quiet,
) -> pd.DataFrame:
    """Mean / p99 / max JCT and wait of every policy of :data:`POLICIES` per (setting, mode,
    load): Poisson arrivals with held-out rows (``poisson``) or the held-out rows at their own
    timestamps, time-scaled (``replay``); the exact mean JCT where it exists (no batching)."""
    if arrivals not in ARRIVALS:
        raise InputError(f"arrivals must be one of {ARRIVALS}, got {arrivals!r}")
    learned = _learned_predictor(ssjf, f"{ssjf.kind}")
    keys = row_predictions(learned, trace, 0)
    tau = _score(trace, keys)["kendall_tau"]
    test = trace.test
    rows = []
    for s in settings:
        for mode in MODES:
            cap = _capacity(capacity, s.name, mode)
            for li, load in enumerate(loads):
                rate = float(load) * cap
                point = seed_sequence(seed, "ssjf", "jct", arrivals, s.name, mode, li)
                for label, spec in POLICIES.items():
                    pred: Predictor = learned if spec.learned else parse_predictor("oracle")
                    w = _workload(arrivals, test, pred, keys if spec.learned else None, rate)
                    pol = s.policy(mode, spec.order, guard_s if spec.guard else None)
                    res = _engine(w, pol, s.latency(mode), sim, point)
                    exact = math.nan
                    if mode == "none" and not spec.guard and arrivals == "poisson":
                        exact = _exact_jct(s, trace, spec, keys, rate)
                    rows.append(
                        {
                            "arrivals": arrivals,
                            "setting": s.name,
                            "mode": mode,
                            "batching": s.policy(mode).label(),
                            "policy": label,
                            "order": spec.order,
                            "guard_s": guard_s if spec.guard else math.nan,
                            "predictor": f"learned:{ssjf.kind}" if spec.learned else "oracle",
                            "kendall_tau": tau if spec.learned else 1.0,
                            "load": float(load),
                            "rate_per_s": rate,
                            "capacity_per_s": cap,
                            **_metrics(res),
                            "exact_jct_mean_s": exact,
                        }
                    )
                progress(f"{arrivals} {s.name} {mode} load {load:g}: done")
    return pd.DataFrame(rows)


def quality_table(
    trace: StudyTrace,
    setting: Setting,
    capacity: pd.DataFrame,
    specs: Sequence[str],
    models: Mapping[str, LengthModel],
    load: float,
    sim: SimSettings,
    seed: int,
    progress: Progress = _quiet,
) -> pd.DataFrame:
    """Mean-JCT gain over FCFS (%) against predictor quality (Kendall's tau on the held-out
    rows), per batching mode, Poisson arrivals at `load`; with no batching also the exact gain
    (Cobham's formula with classes by prediction)."""
    test = trace.test
    entries: list[tuple[str, str, Predictor, np.ndarray | None]] = [
        ("FCFS", FCFS_ORDER.name, parse_predictor("oracle"), None)
    ]
    for i, text in enumerate(specs):
        compiled = parse_predictor(text)
        k = row_predictions(compiled, trace, seed_sequence(seed, "ssjf", "predictors", i))
        entries.append((text, SPJF_ORDER.name, compiled, k))
    for kind, model in models.items():
        lp = _learned_predictor(model, kind)
        entries.append((f"learned:{kind}", SPJF_ORDER.name, lp, row_predictions(lp, trace, 0)))
    rows = []
    for mode in MODES:
        rate = float(load) * _capacity(capacity, setting.name, mode)
        point = seed_sequence(seed, "ssjf", "quality", setting.name, mode)
        base = math.nan
        base_exact = math.nan
        for name, order, pred, keys in entries:
            # a compiled predictor's error is fixed per held-out row (the same keys the exact
            # formula and the score use), so it enters the simulation as row predictions
            w = _workload("poisson", test, pred, keys, rate)
            res = _engine(w, setting.policy(mode, order), setting.latency(mode), sim, point)
            m = _metrics(res)
            exact = math.nan
            if mode == "none":
                exact = _exact_jct(setting, trace, PolicySpec(order, False, False), keys, rate)
            if name == "FCFS":
                base, base_exact = m["jct_mean_s"], exact
            score = _score(trace, keys) if keys is not None else {}
            rows.append(
                {
                    "setting": setting.name,
                    "mode": mode,
                    "predictor": name,
                    "kind": FCFS_ORDER.name
                    if keys is None
                    else ("size-blind" if _size_blind(name) else name.partition(":")[0]),
                    "kendall_tau": score.get("kendall_tau", math.nan),
                    "accuracy": score.get("accuracy", math.nan),
                    "mae_tokens": score.get("mae_tokens", math.nan),
                    "load": float(load),
                    "rate_per_s": rate,
                    **m,
                    "gain_pct": 100.0 * (1.0 - m["jct_mean_s"] / base),
                    "exact_jct_mean_s": exact,
                    "exact_gain_pct": 100.0 * (1.0 - exact / base_exact),
                }
            )
        progress(f"quality {setting.name} {mode}: done")
    return pd.DataFrame(rows)


def starvation_table(
    trace: StudyTrace,
    setting: Setting,
    capacity: pd.DataFrame,
    ssjf: LengthModel,
    mode: str,
    load: float,
    guards_s: Sequence[float | None],
    sim: SimSettings,
    seed: int,
) -> pd.DataFrame:
    """Mean, p99 and max wait of FCFS, SJF and SSJF with each starvation guard (None: none),
    Poisson arrivals at `load` (the trade-off of SSJF's guard)."""
    learned = _learned_predictor(ssjf, ssjf.kind)
    keys = row_predictions(learned, trace, 0)
    rate = float(load) * _capacity(capacity, setting.name, mode)
    point = seed_sequence(seed, "ssjf", "starvation", setting.name, mode)
    rows = []
    for label in ("FCFS", "SJF", "SSJF"):
        spec = POLICIES[label]
        for g in guards_s if label != "FCFS" else [None]:
            pred: Predictor = learned if spec.learned else parse_predictor("oracle")
            w = _workload("poisson", trace.test, pred, keys if spec.learned else None, rate)
            res = _engine(w, setting.policy(mode, spec.order, g), setting.latency(mode), sim, point)
            rows.append(
                {
                    "setting": setting.name,
                    "mode": mode,
                    "policy": label,
                    "guard_s": math.nan if g is None else float(g),
                    "load": float(load),
                    "rate_per_s": rate,
                    **_metrics(res),
                }
            )
    return pd.DataFrame(rows)


def protocol_throughput(finish_s: np.ndarray, percentile: float = 25.0) -> float:
    """SSJF's "throughput": pos / finish_time[pos], finish times sorted (s from the start of the
    run), pos = int(percentile of the indices 0..n-1): jobs done per second early in the run."""
    f = np.sort(np.asarray(finish_s, dtype=float))
    pos = int(np.percentile(np.arange(f.size), percentile))
    return float(pos / f[pos]) if f[pos] > 0 else math.nan


def slotted_arrivals(rng: np.random.Generator, jobs: int, rate: float) -> np.ndarray:
    """SSJF's Poisson arrivals: Poisson(rate) jobs in each whole-second slot (jobs arrive at
    integer times), the first `jobs` of them."""
    slots: list[int] = []
    t = 0
    while len(slots) < jobs:
        slots.extend([t] * int(rng.poisson(rate)))
        t += 1
    return np.asarray(slots[:jobs], dtype=float)


def protocol_run(
    arrival_s: np.ndarray,
    prompt: np.ndarray,
    output: np.ndarray,
    policy: Policy,
    latency: BatchLatency | StepLaw,
    seed: np.random.SeedSequence,
    percentile: float,
    predictor: Predictor | None = None,
    row_pred: np.ndarray | None = None,
) -> dict[str, float]:
    """One run of SSJF's protocol: the jobs (arrival s, prompt and output tokens, a prediction
    per job or none) served until all have finished; their mean JCT (s), SSJF's throughput
    (:func:`protocol_throughput`, finish times from t = 0) and the last finish (s)."""
    from llmqueue.sim.workload import ReplayWorkload

    arr = np.asarray(arrival_s, dtype=float)
    jobs = arr.size
    w = ReplayWorkload(
        arr,
        prompt,
        output,
        predictor=predictor if predictor is not None else parse_predictor("oracle"),
        row_pred=row_pred,
    )
    res = _engine(
        w, policy, latency, SimSettings(jobs, 0, 2), seed, per_request=True, last_arrival=jobs
    )
    tab = res.per_request
    fin = tab[:, 7] + arr[0]  # the replay starts its clock at the first arrival
    return {
        "jct_mean_s": float(np.mean(tab[:, 7] - tab[:, 1])),
        "throughput_per_s": protocol_throughput(fin, percentile),
        "makespan_s": float(np.max(fin)),
    }


def protocol_table(
    trace: StudyTrace,
    settings: Sequence[Setting],
    capacity: pd.DataFrame,
    ssjf: LengthModel,
    jobs: int,
    runs: int,
    rate_per_s: float,
    reference: str,
    percentile: float,
    guard_s: float,
    seed: int,
    rates_per_s: Sequence[float] = (),
) -> pd.DataFrame:
    """SSJF's evaluation protocol: `runs` runs of `jobs` jobs (rows drawn without replacement
    from the held-out rows) arriving in whole-second slots at `rate_per_s` in setting
    `reference` without batching; every other (setting, batching mode) runs at the same fraction
    of its own FCFS capacity (the slot is scaled by the ratio of the capacities), so that no
    mode is judged at a load where little waits to be reordered. Policies: FCFS, and SJF and SSJF with the starvation
    guard `guard_s`, as SSJF's scheduler always runs it. Per run and policy: mean JCT and SSJF's
    throughput (:func:`protocol_throughput`), finish times counted from the start of the run.

    `rates_per_s`: further rates (in `reference`'s units, column ``nominal_rate_per_s``) at which
    the same runs are made, each with its own jobs: the rates SSJF's evaluation averages over."""
    learned = _learned_predictor(ssjf, ssjf.kind)
    keys_all = row_predictions(learned, trace, 0)
    test = trace.test
    ref_cap = _capacity(capacity, reference, "none")
    nominal = [float(rate_per_s), *(float(x) for x in rates_per_s if x != rate_per_s)]
    rows = []
    for s in settings:
        cap_none = _capacity(capacity, s.name, "none")
        for mode in MODES:
            slot_s = ref_cap / _capacity(capacity, s.name, mode)
            for rate in nominal:
                for r in range(runs):
                    # the same jobs everywhere at one rate; the reading rate keeps its streams
                    keys: tuple[str | int, ...] = (r,) if rate == rate_per_s else (r, f"{rate:g}")
                    ss = seed_sequence(seed, "ssjf", "protocol", *keys)
                    rng = np.random.default_rng(ss)
                    idx = np.sort(rng.choice(test.n, size=jobs, replace=False))
                    idx = rng.permutation(idx)
                    arr = slotted_arrivals(rng, jobs, rate) * slot_s
                    if arr[-1] <= arr[0]:
                        arr[-1] = arr[0] + slot_s  # a replay needs two distinct times
                    for label in PROTOCOL_POLICIES:
                        spec = POLICIES[label]
                        pol = s.policy(mode, spec.order, guard_s if spec.guard else None)
                        got = protocol_run(
                            arr,
                            test.prompt_tokens[idx],
                            test.output_tokens[idx],
                            pol,
                            s.latency(mode),
                            ss,
                            percentile,
                            predictor=learned if spec.learned else None,
                            row_pred=keys_all[idx] if spec.learned else None,
                        )
                        rows.append(
                            {
                                "setting": s.name,
                                "mode": mode,
                                "run": r,
                                "policy": label,
                                "jobs": jobs,
                                "nominal_rate_per_s": rate,
                                "rate_per_s": rate / slot_s,
                                "slot_s": slot_s,
                                "offered_load": rate / slot_s / cap_none,
                                "mode_load": rate / slot_s / _capacity(capacity, s.name, mode),
                                **got,
                            }
                        )
    return pd.DataFrame(rows)
