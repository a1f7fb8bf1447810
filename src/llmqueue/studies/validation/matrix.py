"""The held-out validation matrix: the three papers' policies on vLLM, predicted by the serving
model and, where one applies, by the paper's closed form. Units: s, requests/s.

Per group (:mod:`llmqueue.studies.validation.matrix_spec`; one engine shape, its own calibration)
and judged run, the serving engine (:func:`llmqueue.sim.engine.run`) replays the run's request
table (the measured arrival times, prompt and output tokens, and for SSJF the priority vLLM was
given) under the policy the engine's settings map to (:func:`group_policy`) and a step law fitted
on the group's **calibration iterations only** (:func:`calibration_laws`):

- ``split`` (:func:`llmqueue.latency_fits.fit_split_step_law`, the prediction): decode-only
  iterations g(d) + c_ctx c with g piecewise linear in the number of decoding sequences,
  iterations with a prefill g(0) + c_pre (d + p) + c_ctx_pre c; the form that leave-one-batch-out
  cross-validation on the calibration batches chooses (:mod:`llmqueue.studies.validation.law_form`);
  ``shaped`` (:func:`llmqueue.latency_fits.fit_shaped_step_law`): one g(d) and one context price for
  every iteration, prefill tokens priced apart; ``linear``: the one linear law
  c0 + c_tok (decode_seqs + prefill_tokens) + c_ctx context (calibration_fit.json). Config
  ``validation.matrix_compare.law`` names the prediction; the others are reported beside it;
- ``paper`` (policies ``none`` and ``dynamic``): the paper's own model on the same arrivals, the
  M/G/1 of Sec. III with the per-request law S = a N + b0 (:func:`request_law`, N the tokens
  after the first) or Sec. IV's elastic batches (Eq. 26) with Eq. (18) written from the linear
  step law (:func:`llmqueue.latency.batch_law_from_step`);
- ``warmup_speed``: the prediction's law times the engine's speed in the run's warm-up, before
  any judged request arrived (:func:`speed_factor` over the iterations that ended before the
  first judged arrival; the warm-up requests are never judged): a speed probe taken in the same
  engine session just before the judged requests, the shape still the calibration's;
- ``probe_scaled`` (groups measured with the protocol, :mod:`llmqueue.engines.protocol`): the
  prediction's law times the speed factor of the probe served right before the run
  (:mod:`llmqueue.studies.validation.protocol`): information available before the run starts;
- ``session_law`` (diagnosis of the calibration's noise): the prediction's law fitted on the
  calibration rounds of the run's own engine session only;
- ``run_speed`` (diagnosis, never the result): the prediction's law times the engine's speed
  over the whole run (one number per run, read from the judged run): what the calibrated shape
  and the scheduler model give when only the machine's mean speed is known;
- ``in_situ_law`` (diagnosis, never the result): the linear law fitted on the run's own
  iterations;
- ``window_speed`` (diagnosis, never the result): the prediction's law at the speed the run's own
  iterations had in each ``speed_window_s`` window (:mod:`llmqueue.studies.validation.timewarp`:
  the run replayed in work time), which takes the machine's wander within the run out of the
  prediction: what error is left belongs to the scheduler model and the law's shape.

Metrics per request (:func:`request_metrics`): wait (arrival -> the engine's first admission of it;
the step log's ``admitted_ids``), TTFT, JCT (arrival -> last token, client side) and TPOT
((finish - first token) / (n - 1), n >= 2). Per run and variant (:func:`run_row`): measured and
predicted mean, p50, p90, p99 JCT, mean and p90 TTFT, mean TPOT, mean and p90 wait, their relative
errors (predicted / measured - 1), per-request Pearson and Spearman correlations of JCT and TTFT,
the achieved load (measured arrival rate / measured capacity) and the contention flags recorded
with the run. Closed forms (:func:`closed_forms`): for ``none`` runs Pollaczek-Khinchine with
clipped tokens, Eq. (1)-(5), at the planned rate, with the trace's empirical length law and the
calibrated per-request law; for ``dynamic`` runs the exact embedded chain of the elastic batch
queue (b_max = max_num_seqs) and Inoue's bound (16) with (alpha_b, tau0) the least-squares line of
E[T_b] over b = 1..b_max (its deterministic-batch-time assumption does not hold; said in the row).
The measured mean wait's 95% CI is a batch-means interval (``ci_batches`` batches in arrival
order), the p90's an order-statistic interval at the batch-means effective sample size.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import pandas as pd

from llmqueue.engines.calibration import measured_and_law
from llmqueue.engines.requests import PRIORITY_ORDERS
from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency, StepLaw, batch_law_from_step
from llmqueue.latency_fits import fit_linear_latency
from llmqueue.policy import Policy, queue_order
from llmqueue.seeds import seed_sequence
from llmqueue.studies.validation.matrix_spec import GroupData, MatrixCompareSettings
from llmqueue.studies.validation.protocol import (
    probe_columns,
    probe_factors,
    session_calibration,
    speed_factor,
)
from llmqueue.studies.validation.tables import (
    calibration_law,
    engine_policy,
    fit_form,
    in_situ_law,
    simulate_table,
    steplaw_check,
)
from llmqueue.studies.validation.timewarp import speed_trace, warped_simulation

__all__ = [
    "ORDER_OF_PRIORITY",
    "METRICS",
    "ERROR_METRICS",
    "calibration_laws",
    "request_law",
    "group_policy",
    "paper_policy",
    "request_metrics",
    "run_row",
    "batch_means_ci",
    "quantile_ci",
    "closed_forms",
    "compare_group",
    "speed_windows",
    "speed_factor",
    "speed_timeline",
    "LAW_CHECK",
    "token_limit_rows",
]

# vLLM's priority per run (llmqueue.engines.groups.PRIORITIES) -> the engine's queue order
ORDER_OF_PRIORITY = {p: o.name for p, o in PRIORITY_ORDERS.items()}

# (metric, statistic) pairs of the error table; columns <source>_<metric>_<stat>_s and
# <metric>_<stat>_rel_error
METRICS = (
    ("jct", "mean"),
    ("jct", "p50"),
    ("jct", "p90"),
    ("jct", "p99"),
    ("ttft", "mean"),
    ("ttft", "p90"),
    ("tpot", "mean"),
    ("wait", "mean"),
    ("wait", "p90"),
)

# the step law on the run's own iterations (law / measured - 1 of their total time; steplaw_check)
LAW_CHECK = (
    "law_total_rel_error",
    "law_prefill_rel_error",
    "law_decode_rel_error",
    "law_after_idle_rel_error",
)

# the metrics summarised over all runs (median and largest |relative error|), BLIS's format
ERROR_METRICS = ("jct_mean", "jct_p50", "jct_p90", "jct_p99", "ttft_mean", "ttft_p90", "tpot_mean")


# ---- laws and policies ------------------------------------------------------------------------
def calibration_laws(data: GroupData) -> dict[str, StepLaw]:
    """The group's step laws, all fitted on its calibration iterations only: ``linear``
    (calibration_fit.json), ``shaped`` and ``split`` (:func:`_fitted` on calibration_steps.csv's
    iteration times)."""
    return {
        "linear": calibration_law(data.fits),
        "shaped": _fitted("shaped", data.calibration, data),
        "split": _fitted("split", data.calibration, data),
    }


def _fitted(form: str, cal: pd.DataFrame, data: GroupData, part: str = "") -> StepLaw:
    """Law `form` (:func:`llmqueue.studies.validation.tables.fit_form`) fitted on calibration rows
    `cal` (all of the group's, or one session's: `part` names it)."""
    return fit_form(
        form, cal, name=f"vllm-{data.name}-{form}{'-' + part if part else ''}",
        source=f"{data.folder}/calibration_steps.csv{' (' + part + ')' if part else ''}",
    )  # fmt: skip


def request_law(data: GroupData) -> tuple[LinearLatency, dict[str, Any]]:
    """The per-request law S = a*N + b0 (Eq. 3; N the tokens after the first) of a ``none`` group,
    fitted on its calibration requests whose prompt has the group's fixed length: a request's
    time is the sum of its iterations' times (one request at a time, max_num_seqs 1), from the
    iteration that admits it to the one before the next admission. Returns the law and the fit
    (R^2, points)."""
    cal = data.calibration
    prompt = data.spec.trace.prompt_tokens
    starts = np.flatnonzero(cal["admitted_ids"].fillna("").astype(str).str.len().to_numpy() > 0)
    if starts.size < 3:
        raise InputError(f"{data.folder}: the calibration admitted fewer than 3 requests")
    bounds = [*starts.tolist(), len(cal)]
    n_after, time_s = [], []
    t = cal["time_s"].to_numpy(dtype=float)
    pre = cal["prefill_tokens"].to_numpy(dtype=float)
    dec = cal["decode_seqs"].to_numpy(dtype=float)
    for i, j in zip(bounds[:-1], bounds[1:], strict=True):
        if prompt is not None and pre[i:j].sum() != prompt:
            continue
        n_after.append(float(dec[i:j].sum()))
        time_s.append(float(t[i:j].sum()))
    if len(set(n_after)) < 2:
        raise InputError(
            f"{data.folder}: the calibration has no requests of >= 2 lengths at prompt {prompt}"
        )
    fit = fit_linear_latency(n_after, time_s)
    law = LinearLatency(
        max(fit.slope, 0.0), max(fit.intercept, 0.0), f"vllm-{data.name}-request",
        f"{data.folder}/calibration_steps.csv (calibration requests)",
    )  # fmt: skip
    return law, {"a_s_per_token": law.a_s_per_token, "b0_s": law.b0_s, "r2": fit.r2, "n": fit.n}


def group_policy(
    data: GroupData, table: str, kv_model: str = "paged", kv_budget: str = "usable"
) -> Policy:
    """The engine's settings as the serving engine's policy
    (:func:`llmqueue.studies.validation.tables.engine_policy`), with the run's queue order."""
    prio = data.run_spec(table).priority
    return engine_policy(data.settings, kv_model, kv_budget, ORDER_OF_PRIORITY[prio])


def _decode_context_of(data: GroupData, table: str) -> float:
    """The mean context a decode step reads per sequence in the run's requests when replies leave
    as they finish (:func:`llmqueue.analytic.batch_time.decode_context` at batch 1): E[P] +
    E[N^2] / (2 E[N]), N the decode steps (tokens after the first)."""
    from llmqueue.analytic.batch_time import decode_context

    req = data.requests[table]
    return decode_context(
        req["prompt_tokens"].to_numpy(dtype=float),
        req["output_tokens"].to_numpy(dtype=float) - 1.0,
        1,
    )


def paper_policy(
    data: GroupData, table: str, laws: Mapping[str, StepLaw]
) -> tuple[Policy, Any] | None:
    """The paper's own model of a ``none`` or ``dynamic`` group (module docstring): the policy and
    its law; None for other groups."""
    if data.policy == "none":
        return Policy("none"), request_law(data)[0]
    if data.policy == "dynamic":
        return Policy("elastic", bmax=int(data.settings["max_num_seqs"])), _eq18(data, table, laws)
    return None


def _eq18(data: GroupData, table: str, laws: Mapping[str, StepLaw]) -> Any:
    """Eq. (18) of a dynamic group, written from its linear calibration law at the group's fixed
    prompt (else the run's mean prompt) and the run's mean decode context."""
    prompt = float(data.spec.trace.prompt_tokens or 0.0)
    if not prompt:
        prompt = float(data.requests[table]["prompt_tokens"].mean())
    return batch_law_from_step(
        laws["linear"], prompt, _decode_context_of(data, table), name=f"vllm-{data.name}-eq18"
    )


# ---- per request and per run ------------------------------------------------------------------
def request_metrics(
    requests: pd.DataFrame, sim: pd.DataFrame | None = None
) -> dict[str, np.ndarray]:
    """Per request (all rows): wait, ttft, jct, tpot (s; tpot NaN for one-token replies),
    measured (from `requests`) or, with `sim` (:func:`llmqueue.studies.validation.tables.simulate_table`),
    predicted."""
    arr = requests["arrival_s"].to_numpy(dtype=float)
    n = requests["output_tokens"].to_numpy(dtype=float)
    if sim is None:
        start = requests["engine_start_s"].to_numpy(dtype=float)
        first = requests["first_token_s"].to_numpy(dtype=float)
        fin = requests["finish_s"].to_numpy(dtype=float)
    else:
        start, first, fin = (
            sim[c].to_numpy(dtype=float) for c in ("start_s", "first_token_s", "finish_s")
        )
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(n >= 2, (fin - first) / (n - 1.0), np.nan)
    return {"wait": start - arr, "ttft": first - arr, "jct": fin - arr, "tpot": tpot}


def _stat(x: np.ndarray, stat: str) -> float:
    x = x[np.isfinite(x)]
    if x.size == 0:
        return math.nan
    if stat == "mean":
        return float(x.mean())
    return float(np.percentile(x, float(stat[1:])))


def _corr(a: np.ndarray, b: np.ndarray, method: Literal["pearson", "spearman"]) -> float:
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 3:
        return math.nan
    return float(pd.Series(a[ok]).corr(pd.Series(b[ok]), method=method))


def run_row(
    measured: Mapping[str, np.ndarray], predicted: Mapping[str, np.ndarray], keep: np.ndarray
) -> dict[str, Any]:
    """The error-table cells of one run and variant over the requests `keep` (the measured ones):
    ``measured_<m>_<s>_s``, ``predicted_<m>_<s>_s``, ``<m>_<s>_rel_error`` for :data:`METRICS`,
    and the per-request correlations of JCT and TTFT."""
    row: dict[str, Any] = {"requests": int(keep.sum())}
    for m, s in METRICS:
        a, b = _stat(measured[m][keep], s), _stat(predicted[m][keep], s)
        row[f"measured_{m}_{s}_s"] = a
        row[f"predicted_{m}_{s}_s"] = b
        row[f"{m}_{s}_rel_error"] = b / a - 1.0 if a > 0 else math.nan
    for m in ("jct", "ttft"):
        row[f"{m}_pearson"] = _corr(measured[m][keep], predicted[m][keep], "pearson")
        row[f"{m}_spearman"] = _corr(measured[m][keep], predicted[m][keep], "spearman")
    return row


def batch_means_ci(x: np.ndarray, batches: int) -> tuple[float, float, float]:
    """(mean, 95% CI half-width, effective sample size) of a sequence in time order by batch
    means over `batches` contiguous batches (t quantile, batches - 1 degrees of freedom)."""
    from scipy import stats

    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    if x.size < 2 * batches:
        return float(x.mean()) if x.size else math.nan, math.nan, math.nan
    b = x.size // batches
    means = x[: b * batches].reshape(batches, b).mean(axis=1)
    s_b = float(means.std(ddof=1))
    half = float(stats.t.ppf(0.975, batches - 1)) * s_b / math.sqrt(batches)
    s2 = float(x.var(ddof=1))
    n_eff = min(float(x.size), s2 / (s_b**2) * batches) if s_b > 0 else float(x.size)
    return float(x.mean()), half, n_eff


def quantile_ci(x: np.ndarray, q: float, n_eff: float) -> tuple[float, float]:
    """95% interval of the q-quantile of `x` from order statistics at `n_eff` effective samples
    (normal approximation of the binomial count below it)."""
    x = np.sort(np.asarray(x, dtype=float)[np.isfinite(x)])
    if x.size == 0 or not (n_eff > 1):
        return math.nan, math.nan
    half = 1.96 * math.sqrt(q * (1 - q) / n_eff)
    lo = x[max(int(math.floor((q - half) * x.size)), 0)]
    hi = x[min(int(math.ceil((q + half) * x.size)), x.size - 1)]
    return float(lo), float(hi)


# a speed window's median is kept only when it rests on this many iterations
MIN_WINDOW_ITERATIONS = 20


def _window_medians(
    ts: np.ndarray, r: np.ndarray, window_s: float
) -> list[tuple[float, int, float]]:
    """(start, iterations, median of `r`) of each consecutive `window_s` window of the start
    times `ts` from their first, windows with fewer than :data:`MIN_WINDOW_ITERATIONS` left out."""
    out = []
    w0 = float(ts.min()) if ts.size else 0.0
    while ts.size and w0 <= ts.max():
        m = (ts >= w0) & (ts < w0 + window_s)
        if m.sum() >= MIN_WINDOW_ITERATIONS:
            out.append((w0, int(m.sum()), float(np.median(r[m]))))
        w0 += window_s
    return out


def speed_windows(
    steps: pd.DataFrame, law: Any, max_gap_s: float, window_s: float = 15.0
) -> dict[str, float]:
    """How steady the engine's speed was during a run: the run's iterations (times as the
    calibration counts them) against `law`, the median of measured / law per `window_s` window of
    the run (:func:`_window_medians`); returns the smallest and largest window median and their
    ratio (``speed_spread``: 0 for a machine whose speed never changed). Diagnosis only: it reads
    the judged run."""
    t, f = measured_and_law(steps, law, max_gap_s)
    meds = [m for _, _, m in _window_medians(steps["t_sched_s"].to_numpy(dtype=float), t / f,
                                               window_s)]  # fmt: skip
    if not meds:
        return {
            "speed_window_min": math.nan,
            "speed_window_max": math.nan,
            "speed_spread": math.nan,
        }
    return {
        "speed_window_min": min(meds),
        "speed_window_max": max(meds),
        "speed_spread": max(meds) / min(meds) - 1.0,
    }


def speed_timeline(data: GroupData, law: Any, max_gap_s: float, window_s: float) -> pd.DataFrame:
    """The engine's speed through each engine session of a group, phase after phase in step
    order: the calibration (session 1; under the protocol each round in its own session, on its
    own clock), every recorded run (capacity bursts and judged runs; repeats in their own
    sessions), each phase's iterations (as the calibration counts
    them) against `law` in consecutive `window_s` windows of the phase's own clock
    (:func:`_window_medians`). Phases are laid back to back (``t_s``: the window's start, s since
    the session's first phase began, the gaps between phases left out). Per window: ``speed`` =
    median of measured / law over its iterations (1: as fast as the law says). Diagnosis: it
    reads the judged runs."""
    runs = data.meta.get("runs", {})
    phases: list[tuple[int, int, str, str, pd.DataFrame]] = []
    cal = data.calibration
    if {"session", "round"} <= set(cal.columns):  # the protocol's rounds, each on its own clock
        for _, part in cal.groupby(["session", "round"], sort=False):
            session, rnd = int(part["session"].iloc[0]), int(part["round"].iloc[0])
            phases.append((session, int(part["step"].min()), f"calibration{rnd}",
                           "calibration", part))  # fmt: skip
    else:
        phases.append((1, int(cal["step"].min()), "calibration", "calibration", cal))
    for name, st in data.steps.items():
        if len(st) == 0:
            continue
        info = runs.get(name, {})
        kind = "judged" if name in data.judged else "capacity"
        phases.append((int(info.get("session") or 1), int(st["step"].min()), name, kind, st))
    phases.sort(key=lambda x: (x[0], x[1]))
    out = []
    offset: dict[int, float] = {}
    for session, _, name, kind, st in phases:
        t, f = measured_and_law(st, law, max_gap_s)
        ts = st["t_sched_s"].to_numpy(dtype=float)
        t0 = float(ts.min())
        base = offset.get(session, 0.0)
        for w0, n, med in _window_medians(ts, t / f, window_s):
            out.append({
                "group": data.name, "session": session, "phase": name, "kind": kind,
                "t_s": base + (w0 - t0), "window_s": window_s, "iterations": n, "speed": med,
            })  # fmt: skip
        offset[session] = base + (float(st["t_done_s"].max()) - t0)
    return pd.DataFrame(
        out,
        columns=["group", "session", "phase", "kind", "t_s", "window_s", "iterations", "speed"],
    )


# ---- closed forms ------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _scaled_outputs(
    file: str, input_column: str, output_column: str, rows: str, train_fraction: float,
    scale: float, max_model_len: int,
) -> np.ndarray:  # fmt: skip
    """The output lengths of every candidate trace row, scaled and clipped as the request tables
    were (:func:`llmqueue.engines.requests.scale_lengths`): read once per trace and setting."""
    from llmqueue.engines.requests import candidate_rows, read_trace_lengths, scale_lengths

    prompt, output = read_trace_lengths(file, input_column, output_column)
    idx = candidate_rows(len(prompt), rows, train_fraction)
    _, out = scale_lengths(prompt[idx], output[idx], scale, max_model_len)
    out = out.astype(float)
    out.flags.writeable = False
    return out


def _length_law(data: GroupData, token_limit: int | None) -> Any:
    """The empirical law of N (tokens after the first) the group's requests are drawn from: every
    candidate trace row, scaled and clipped as the request tables were, then min(n, l) - 1."""
    from llmqueue.tokens import EmpiricalLaw

    tr = data.spec.trace
    n = _scaled_outputs(
        tr.file, tr.input_column, tr.output_column, tr.rows, float(tr.train_fraction),
        float(tr.scale), int(data.settings["max_model_len"]),
    )  # fmt: skip
    if token_limit is not None:
        n = np.minimum(n, float(token_limit))
    return EmpiricalLaw.from_samples(n - 1.0, spec=f"{tr.file} x {tr.scale:g}")


def closed_forms(
    data: GroupData, table: str, measured: Mapping[str, np.ndarray], keep: np.ndarray,
    laws: Mapping[str, StepLaw], ci_batches: int,
) -> dict[str, Any] | None:  # fmt: skip
    """The paper's closed form of one run (module docstring) beside the measured mean wait (and
    JCT) with their 95% CIs; None for groups without one (continuous batching)."""
    if data.policy not in ("none", "dynamic"):
        return None
    info = data.run_meta(table)
    rate = float(info["rate_per_s"])
    lim = data.run_spec(table).token_limit
    wait = measured["wait"][keep]
    jct = measured["jct"][keep]
    mw, mw_half, n_eff = batch_means_ci(wait, ci_batches)
    mj, mj_half, _ = batch_means_ci(jct, ci_batches)
    p_lo, p_hi = quantile_ci(wait, 0.9, n_eff)
    row: dict[str, Any] = {
        "group": data.name,
        "run": table,
        "policy": data.policy,
        "rate_per_s": rate,
        "token_limit": lim,
        "measured_wait_mean_s": mw,
        "measured_wait_mean_ci95_s": mw_half,
        "measured_wait_p90_s": _stat(wait, "p90"),
        "measured_wait_p90_ci_lo_s": p_lo,
        "measured_wait_p90_ci_hi_s": p_hi,
        "measured_jct_mean_s": mj,
        "measured_jct_mean_ci95_s": mj_half,
        "effective_requests": n_eff,
    }
    law = _length_law(data, None if lim is None else int(lim))
    if data.policy == "none":
        from llmqueue.analytic.mg1 import token_limit_point

        lat, fit = request_law(data)
        pt = token_limit_point(law, lat, rate, math.inf)
        es = pt["mean_service"]
        row.update({
            "model": "M/G/1 FCFS, Pollaczek-Khinchine with clipped tokens, Eq. (1)-(5)",
            "rho": pt["rho"], "exact_wait_mean_s": pt["wq"], "exact_jct_mean_s": pt["wq"] + es,
            "request_law_a_s": fit["a_s_per_token"], "request_law_b0_s": fit["b0_s"],
            "request_law_r2": fit["r2"],
            "assumptions": "Poisson arrivals, i.i.d. lengths from the trace, S = a N + b0 "
            "(calibration requests); the measured run is finite and starts empty",
        })  # fmt: skip
    else:
        from llmqueue.analytic.batch_chain import ElasticModel, solve
        from llmqueue.analytic.batch_time import fit_alpha_tau
        from llmqueue.analytic.inoue import bound

        bmax = int(data.settings["max_num_seqs"])
        eq18 = _eq18(data, table, laws)
        pol = Policy("elastic", bmax=bmax)
        ch = solve(ElasticModel(eq18, law), rate, pol)
        alpha, tau0 = fit_alpha_tau(eq18, law, 1, bmax, elastic=True)
        try:
            bnd = bound(rate, alpha, tau0)
        except InputError:
            bnd = math.nan
        row.update({
            "model": "elastic batch queue (Eq. 26, b_max = max_num_seqs), exact embedded chain",
            "rho": rate * ch.mean_batch_time / ch.mean_batch if ch.mean_batch > 0 else math.nan,
            "exact_wait_mean_s": ch.wait, "exact_jct_mean_s": ch.response,
            "bound16_jct_mean_s": bnd, "bound16_alpha_b_s": alpha, "bound16_tau0_s": tau0,
            "eq18_k1": eq18.k1, "eq18_k2": eq18.k2, "eq18_k3": eq18.k3, "eq18_k4": eq18.k4,
            "assumptions": "Poisson arrivals, i.i.d. lengths, Eq. (18) from the linear step law; "
            "bound (16) assumes a deterministic batch time alpha_b b + tau0, which does not hold "
            "(a batch lasts until its longest reply)",
        })  # fmt: skip
    for key in ("wait", "jct"):
        ex, m, h = (
            row[f"exact_{key}_mean_s"],
            row[f"measured_{key}_mean_s"],
            row[f"measured_{key}_mean_ci95_s"],
        )
        row[f"exact_{key}_rel_error"] = ex / m - 1.0 if m > 0 else math.nan
        row[f"exact_{key}_in_ci"] = bool(abs(ex - m) <= h) if math.isfinite(h) else None
    return row


# ---- one group ---------------------------------------------------------------------------------
def _flags(info: Mapping[str, Any]) -> str:
    return "|".join(str(f) for f in (info.get("contention") or {}).get("flags", []))


def compare_group(
    data: GroupData, cfg: MatrixCompareSettings
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The comparison rows (one per judged run x variant), the per-request predictions and the
    closed-form rows of one group."""
    laws = calibration_laws(data)
    rows, preds, closed = [], [], []
    engine = data.settings
    factors = probe_factors(data.probes, laws[cfg.law], data.max_gap_s)
    session_laws: dict[int, StepLaw | None] = {}
    for table in data.judged:
        req = data.requests[table]
        info = data.run_meta(table)
        spec = data.run_spec(table)
        keep = ~req["warmup"].to_numpy(dtype=bool)
        measured = request_metrics(req)
        pol = group_policy(data, table, cfg.kv_model, cfg.kv_budget)
        predicted_len = None
        if queue_order(pol.order).needs_prediction:
            predicted_len = req["priority"].to_numpy(dtype=float)
        variants: list[tuple[str, Policy, Any]] = [
            ("prediction", pol, laws[cfg.law]),
            *((f"{o}_law", pol, laws[o]) for o in cfg.other_laws),
        ]
        paper = paper_policy(data, table, laws)
        if paper is not None:
            variants.append(("paper", *paper))
        max_gap = data.max_gap_s
        steps = data.steps[table]
        first_judged = float(req.loc[keep, "arrival_s"].min())
        k_warm, n_warm = speed_factor(steps, laws[cfg.law], max_gap, until_s=first_judged)
        k_run, _ = speed_factor(steps, laws[cfg.law], max_gap)
        if n_warm:
            variants.append(("warmup_speed", pol, laws[cfg.law].scaled(k_warm)))
        probed = probe_columns(factors, table)
        if math.isfinite(probed["probe_before_factor"]):
            variants.append(
                ("probe_scaled", pol, laws[cfg.law].scaled(probed["probe_before_factor"]))
            )
        session = int(info.get("session", 1))
        if session not in session_laws:  # one fit per engine session, shared by its runs
            own_cal = session_calibration(data.calibration, session)
            session_laws[session] = (
                None if own_cal is None else _fitted(cfg.law, own_cal, data, f"session{session}")
            )
        if session_laws[session] is not None:
            variants.append(("session_law", pol, session_laws[session]))
        variants.append(("run_speed", pol, laws[cfg.law].scaled(k_run)))
        trace = speed_trace(steps, laws[cfg.law], max_gap, cfg.speed_window_s)
        own = in_situ_law(data.fits, table)
        if own is not None:
            variants.append(("in_situ_law", pol, own))
        variants.append(("window_speed", pol, laws[cfg.law]))
        base = {
            **speed_windows(steps, laws[cfg.law], max_gap, cfg.speed_window_s),
            "warmup_speed_factor": k_warm,
            "warmup_speed_iterations": n_warm,
            "run_speed_factor": k_run,
            **probed,
            "block": int(info.get("block", 0)),
            "group": data.name,
            "policy": data.policy,
            "run": table,
            "config_run": str(info.get("run", table)),
            "session": int(info.get("session", 1)),
            "priority": spec.priority,
            "token_limit": spec.token_limit,
            "engine": str(engine.get("engine", "vllm")),
            "machine": str(data.meta.get("hardware_id", "unknown")),
            "settings": (
                f"max_num_seqs {engine['max_num_seqs']}, max_num_batched_tokens "
                f"{engine['max_num_batched_tokens']}, {engine['usable_kv_tokens']} KV tokens, "
                f"chunked prefill {'on' if engine['enable_chunked_prefill'] else 'off'}, "
                f"{engine['scheduling_policy']}, admission "
                f"{(engine.get('engine_core') or {}).get('admission_rule', 'vllm')}"
            ),
            "model": data.spec.model.name,
            "trace": data.spec.trace.name,
            "planned_load": float(info["load"]),
            "achieved_load": float(info["achieved_load"]),
            "rate_per_s": float(info["rate_per_s"]),
            "measured_rate_per_s": float(info["measured_rate_per_s"]),
            "preempted_share": float(info.get("preempted_share", 0.0)),
            "measured_preemptions": int(info.get("preemptions", 0)),
            "flags": _flags(info),
            # how often another thread took the model's core (NaN in runs that predate it)
            "model_preemptions_per_s": float(
                (info.get("contention") or {}).get("model_preemptions_per_s", math.nan)
            ),
        }
        for variant, p, law in variants:
            seed = seed_sequence(cfg.seed, "validation", "matrix", data.name, table, variant)
            # the paper's laws count the tokens after the first (N of Eq. 3, L_b of Eq. 18)
            served = (
                req.assign(output_tokens=req["output_tokens"] - 1) if variant == "paper" else req
            )
            if variant == "window_speed":
                sim = warped_simulation(served, p, law, trace, seed=seed, predicted=predicted_len)
            else:
                sim = simulate_table(served, p, law, seed=seed, predicted=predicted_len)
            predicted = request_metrics(req, sim)
            check = (
                steplaw_check(data.steps[table], law, max_gap)
                if isinstance(law, StepLaw) and variant != "window_speed" else {}
            )  # fmt: skip
            rows.append({
                **base, "variant": variant, "simulated_policy": p.label(),
                "law": getattr(law, "name", type(law).__name__),
                **run_row(measured, predicted, keep),
                **{k: check.get(k, math.nan) for k in LAW_CHECK},
            })  # fmt: skip
            preds.append(pd.DataFrame({
                "group": data.name, "run": table, "variant": variant,
                "request_id": req["request_id"].to_numpy(), "warmup": ~keep,
                "arrival_s": req["arrival_s"].to_numpy(dtype=float),
                "prompt_tokens": req["prompt_tokens"].to_numpy(),
                "output_tokens": req["output_tokens"].to_numpy(),
                **{f"measured_{m}_s": measured[m] for m in ("wait", "ttft", "jct", "tpot")},
                **{f"predicted_{m}_s": predicted[m] for m in ("wait", "ttft", "jct", "tpot")},
            }))  # fmt: skip
        cf = closed_forms(data, table, measured, keep, laws, cfg.ci_batches)
        if cf is not None:
            closed.append(cf)
    return pd.DataFrame(rows), pd.concat(preds, ignore_index=True), pd.DataFrame(closed)


def token_limit_rows(data: GroupData, points: int = 200) -> pd.DataFrame:
    """The paper's Fig. 4a curve for a ``none`` group: W_q(l) and the mean JCT W_q + E[S] by
    Eq. (1)-(5) at the group's planned rate (its runs share one), for limits l = 1..the largest
    output length (`points` of them, whole tokens), with the calibrated per-request law and the
    trace's empirical length law; rho >= 1 rows have NaN waits."""
    from llmqueue.analytic.mg1 import token_limit_curve

    if data.policy != "none":
        raise InputError(f"group {data.name}: the token-limit curve needs policy none")
    rates = {float(data.run_meta(t)["rate_per_s"]) for t in data.judged}
    if len(rates) != 1:
        raise InputError(f"group {data.name}: the runs have several planned rates {sorted(rates)}")
    (rate,) = rates
    law = _length_law(data, None)
    lat, fit = request_law(data)
    top = float(law.support[1]) + 1.0
    limits = np.unique(np.rint(np.geomspace(1.0, top, int(points))))
    c = token_limit_curve(law, lat, rate, limits - 1.0 + 1e-9)
    return pd.DataFrame({
        "token_limit": limits, "rate_per_s": rate, "rho": c.rho,
        "mean_tokens": c.mean_tokens + 1.0, "mean_service_s": c.mean_service_s,
        "exact_wait_mean_s": c.wq_s, "exact_jct_mean_s": c.wq_s + c.mean_service_s,
        "request_law_a_s": fit["a_s_per_token"], "request_law_b0_s": fit["b0_s"],
    })  # fmt: skip
