"""The vLLM validation study's tables: vLLM's engine settings as a policy, the calibrated step
law, every request's predicted TTFT and JCT beside the measured ones, the error rows per run and
metric, the step law checked on a run's own iterations, and the Markdown table. Units: s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.engines.engine import FIFO_SCHEDULING, SCHEDULING_POLICIES
from llmqueue.engines.environment import ENGINE_ENVS
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.latency_fits import (
    fit_packed_step_law,
    fit_shaped_step_law,
    fit_split_step_law,
    fit_step_law,
)
from llmqueue.markdown import md_table
from llmqueue.policy import DEFAULT_ORDER, Policy, queue_order
from llmqueue.seeds import seed_sequence
from llmqueue.studies.validation.spec import (
    COMPARISON_COLUMNS,
    FIT_KEYS,
    KV_BUDGETS,
    KV_MODELS,
    PREDICTION_COLUMNS,
    SETTINGS_KEYS,
    STATS,
    STEP_LAW_FORMS,
    VARIANTS,
    CompareSettings,
    RunData,
)

__all__ = [
    "engine_policy",
    "unmodelled_rules",
    "calibration_law",
    "in_situ_law",
    "replay",
    "simulate_table",
    "predict",
    "error_rows",
    "steplaw_check",
    "compare_run",
    "settings_note",
    "markdown_table",
]


# ---- the mapping: engine settings -> policy, fit -> step law ------------------------------
def engine_policy(
    settings: Mapping[str, Any],
    kv_model: str = "paged",
    kv_budget: str = "usable",
    order: str = DEFAULT_ORDER,
) -> Policy:
    """vLLM's engine settings (``settings.json``) as a continuous-batching policy.

    max_num_seqs -> bmax; max_num_batched_tokens -> the iteration's token budget (with chunked
    prefill a prompt is cut to what is left of it; without, ``chunked_prefill`` False: admitted
    only when it fits whole); the KV budget in tokens: ``usable_kv_tokens`` (vLLM keeps one null
    block aside) or ``kv_tokens`` (``kv_budget: all``), in blocks of ``block_size``
    (``kv_model: paged``) or token-granular (``tokens``); admission ``on_demand`` (the whole
    prompt must fit at admission, KV grows as tokens are computed, the newest request is
    preempted and recomputed when it runs out); the scheduler's admission rule
    (``engine_core.admission_rule``): vLLM's own, or ``batch_queue`` (admissions only when
    nothing runs, :mod:`llmqueue.engines.admission`) -> ``batch_queue``. `order`: the queue
    order of vLLM's ``priority`` scheduling (``sjf``: priority = the true output length,
    ``spjf``: a prediction; ties by arrival); with ``fcfs`` scheduling it must be ``fcfs``.
    Settings the model does not have are refused with an InputError naming them: prefix
    caching, swap preemption, admission on the first chunk only, a watermark, a per-request
    prefill cap, asynchronous scheduling.

    Hugging Face transformers' continuous batching (``engine: transformers``,
    :mod:`llmqueue.engines.hf_engine`) maps onto the same policy with admission ``per_chunk``
    (its FIFO scheduler: KV pages taken chunk by chunk, a waiting request that does not fit
    passed over, a starved request reset to the back with admissions paused until a request
    finishes) and ``kv_margin`` = its ``safety_margin``: its request cap, token budget, pages,
    decodes before prompt chunks, chunked prompts and FCFS order are the model's as they are for
    vLLM. One rule is not: its cap counts the requests a step schedules, so a starved request
    leaves room for another; :func:`unmodelled_rules` names the runs where that happened.
    """
    if kv_model not in KV_MODELS or kv_budget not in KV_BUDGETS:
        raise InputError(f"kv_model in {KV_MODELS}, kv_budget in {KV_BUDGETS}")
    missing = [k for k in SETTINGS_KEYS if k not in settings]
    if missing:
        raise InputError(f"engine settings lack {missing}")
    if settings["scheduling_policy"] not in SCHEDULING_POLICIES:
        raise InputError(
            f"engine setting scheduling_policy = {settings['scheduling_policy']!r} is not in the "
            "serving model (fcfs, priority)"
        )
    if settings["scheduling_policy"] == FIFO_SCHEDULING and not queue_order(order).by_arrival:
        raise InputError(f"queue order {order!r} needs vLLM's scheduling_policy priority")
    rule = str((settings.get("engine_core") or {}).get("admission_rule", "vllm"))
    if rule not in ("vllm", "batch_queue"):
        raise InputError(f"engine admission rule {rule!r} is not in the serving model")
    engine = str(settings.get("engine", "vllm"))
    if engine not in ENGINE_ENVS:
        raise InputError(
            f"engine {engine!r} is not in the serving model ({', '.join(ENGINE_ENVS)})"
        )
    hf = engine == "transformers"
    if hf and settings["scheduling_policy"] != FIFO_SCHEDULING:
        raise InputError(
            "the transformers engine's FIFO scheduler is FCFS (scheduling_policy fcfs)"
        )
    unmodelled = {
        "enable_prefix_caching": (settings["enable_prefix_caching"], False),
        "preemption_mode": (settings["preemption_mode"], "recompute"),
        "reserve_full_prompt_on_admission": (settings["reserve_full_prompt_on_admission"], True),
        "watermark": (float(settings.get("watermark", 0.0)), 0.0),
        "long_prefill_token_threshold": (int(settings.get("long_prefill_token_threshold", 0)), 0),
        "async_scheduling": (bool(settings.get("async_scheduling", False)), False),
    }
    if hf:  # KV per chunk: admission per_chunk
        del unmodelled["reserve_full_prompt_on_admission"]
    for key, (got, modelled) in unmodelled.items():
        if got != modelled:
            raise InputError(
                f"engine setting {key} = {got!r} is not in the serving model (it models "
                f"{key} = {modelled!r})"
            )
    block = int(settings["block_size"])
    kv = int(settings["usable_kv_tokens"] if kv_budget == "usable" else settings["kv_tokens"])
    if kv % block:
        raise InputError(f"engine KV budget {kv} tokens is not a whole number of {block}-blocks")
    return Policy(
        "continuous",
        bmax=int(settings["max_num_seqs"]),
        order=order,
        kv_tokens=kv,
        admission="per_chunk" if hf else "on_demand",
        max_batched_tokens=int(settings["max_num_batched_tokens"]),
        block_size=block if kv_model == "paged" else 1,
        chunked_prefill=bool(settings["enable_chunked_prefill"]),
        batch_queue=rule == "batch_queue",
        kv_margin=float(settings.get("safety_margin", 0.0)) if hf else 0.0,
    )


def unmodelled_rules(steps: pd.DataFrame, settings: Mapping[str, Any]) -> str:
    """Whether the transformers scheduler's rule the serving model lacks acted in a run
    (:func:`engine_policy`), from its step log: ``cap`` when more requests ran than its request
    cap (the cap counts the requests a step schedules; a starved one leaves room for another);
    empty when not (then the run's schedule is the model's) or for a vLLM run."""
    if str(settings.get("engine", "vllm")) != "transformers" or steps.empty:
        return ""
    return "cap" if int(steps["running"].max()) > int(settings["max_num_seqs"]) else ""


def _law(fit: Mapping[str, Any], name: str, where: str) -> StepLaw:
    missing = [k for k in FIT_KEYS if k not in fit]
    if missing:
        raise InputError(f"calibration_fit.json: {where!r} lacks {missing}")
    return StepLaw(
        float(fit["c0_s"]), float(fit["c_tok_s"]), float(fit["c_ctx_s"]), name, where, "measured"
    )


def calibration_law(fits: Mapping[str, Any]) -> StepLaw:
    """The step law fitted on the calibration iterations (``calibration_fit.json``, entry
    ``calibration``): the only law a prediction uses."""
    if "calibration" not in fits:
        raise InputError("calibration_fit.json has no 'calibration' entry")
    return _law(fits["calibration"], "vllm-calibration", "calibration")


def in_situ_law(fits: Mapping[str, Any], table: str) -> StepLaw | None:
    """The same law fitted on one run's own iterations (entry ``in_situ_<table>``; None if the
    folder has none): for diagnosis only, it has seen the run it would predict."""
    key = f"in_situ_{table}"
    return _law(fits[key], f"vllm-{key}", key) if key in fits else None


# ---- prediction -------------------------------------------------------------------------------
def replay(requests: pd.DataFrame, predicted: np.ndarray | None = None) -> Any:
    """The request table as a ReplayWorkload: the same arrivals (from the first one) and the same
    prompt and output tokens, row for row; `predicted`: each request's predicted output length
    (tokens; the queue order ``spjf`` reads it), else the true length."""
    from llmqueue.sim.workload import ReplayWorkload

    return ReplayWorkload(
        requests["arrival_s"].to_numpy(dtype=float),
        requests["prompt_tokens"].to_numpy(dtype=float),
        requests["output_tokens"].to_numpy(dtype=float),
        source="vllm request table",
        row_pred=None if predicted is None else np.asarray(predicted, dtype=float),
    )


def fit_form(form: str, cal: pd.DataFrame, name: str = "", source: str | None = None) -> StepLaw:
    """Step-law form `form` (:data:`STEP_LAW_FORMS`) fitted on calibration rows `cal`
    (decode_seqs, prefill_tokens, context_tokens, time_s in s): ``linear``
    (:func:`llmqueue.latency_fits.fit_step_law`), ``shaped`` (:func:`~llmqueue.latency_fits.fit_shaped_step_law`),
    ``split`` and ``split_attention`` (:func:`~llmqueue.latency_fits.fit_split_step_law` without and
    with the prefill-attention term), ``packed`` (:func:`~llmqueue.latency_fits.fit_packed_step_law`).
    `name` defaults to the form, `source` to the fitter's."""
    if form not in STEP_LAW_FORMS:
        raise InputError(f"step-law form {form!r}: one of {', '.join(STEP_LAW_FORMS)}")
    d, p, c, y = (
        cal[k].to_numpy(dtype=float)
        for k in ("decode_seqs", "prefill_tokens", "context_tokens", "time_s")
    )
    kw: dict[str, Any] = {"name": name or form, **({"source": source} if source else {})}
    if form == "linear":
        return fit_step_law(d, p, c, y).law(**kw)
    if form == "shaped":
        return fit_shaped_step_law(d, p, c, y, **kw)
    if form == "packed":
        return fit_packed_step_law(d, p, c, y, name=kw["name"])
    return fit_split_step_law(d, p, c, y, attention=form == "split_attention", **kw)


def simulate_table(
    requests: pd.DataFrame,
    policy: Policy,
    law: Any,
    *,
    seed: int | np.random.SeedSequence = 0,
    predicted: np.ndarray | None = None,
) -> pd.DataFrame:
    """The serving engine on the whole request table (warm-up rows too: they fill the system the
    measured rows meet): every request's start (first admission), first token and finish, s on
    the table's clock (``start_s``, ``first_token_s``, ``finish_s``). A request the model never
    finishes (prompt + output above the KV budget) is an InputError."""
    from llmqueue.sim.engine import run

    n = len(requests)
    res = run(
        replay(requests, predicted), policy, law, requests=n, warmup=0, batches=2, seed=seed,
        per_request=True,
    )  # fmt: skip
    tab = res.per_request
    t0 = float(requests["arrival_s"].iloc[0])
    finish = tab[:, 7] + t0
    if tab.shape[0] != n or np.isnan(finish).any():
        raise InputError(
            f"the serving model did not finish {int(np.isnan(finish).sum())} of {n} requests "
            f"(a prompt + output above the KV budget of {policy.kv_tokens} tokens?)"
        )
    return pd.DataFrame(
        {"start_s": tab[:, 5] + t0, "first_token_s": tab[:, 6] + t0, "finish_s": finish}
    )


def predict(
    requests: pd.DataFrame,
    policy: Policy,
    law: StepLaw,
    *,
    seed: int | np.random.SeedSequence = 0,
) -> pd.DataFrame:
    """Every request's predicted TTFT and JCT (s) beside the measured ones
    (:data:`PREDICTION_COLUMNS` without run and variant), by :func:`simulate_table`."""
    sim = simulate_table(requests, policy, law, seed=seed)
    arrival = requests["arrival_s"].to_numpy(dtype=float)
    return pd.DataFrame(
        {
            "request_id": requests["request_id"].to_numpy(),
            "warmup": requests["warmup"].to_numpy(dtype=bool),
            "arrival_s": arrival,
            "prompt_tokens": requests["prompt_tokens"].to_numpy(),
            "output_tokens": requests["output_tokens"].to_numpy(),
            "measured_ttft_s": requests["first_token_s"].to_numpy(dtype=float) - arrival,
            "measured_jct_s": requests["finish_s"].to_numpy(dtype=float) - arrival,
            "predicted_ttft_s": sim["first_token_s"].to_numpy() - arrival,
            "predicted_jct_s": sim["finish_s"].to_numpy() - arrival,
        }
    )


# ---- comparison -------------------------------------------------------------------------------
def _stats(x: np.ndarray) -> dict[str, float]:
    return {"mean": float(x.mean()), "p50": float(np.median(x)), "p90": float(np.percentile(x, 90))}


def error_rows(pred: pd.DataFrame) -> list[dict[str, Any]]:
    """Per metric (jct, ttft), over the measured requests (``warmup`` False): measured and
    predicted mean / p50 / p90 (s), relative errors predicted / measured - 1, Pearson and
    Spearman correlations of the per-request values, the median per-request |relative error|."""
    x = pred[~pred["warmup"].to_numpy(dtype=bool)]
    if len(x) < 3:
        raise InputError(f"at least 3 measured (non-warm-up) requests are needed, got {len(x)}")
    rows = []
    for metric in ("jct", "ttft"):
        m = x[f"measured_{metric}_s"].to_numpy(dtype=float)
        p = x[f"predicted_{metric}_s"].to_numpy(dtype=float)
        sm, sp = _stats(m), _stats(p)
        row: dict[str, Any] = {"metric": metric, "requests": int(m.size)}
        for s in STATS:
            row[f"measured_{s}_s"] = sm[s]
            row[f"predicted_{s}_s"] = sp[s]
            row[f"{s}_rel_error"] = sp[s] / sm[s] - 1.0
        row["pearson"] = float(np.corrcoef(m, p)[0, 1])
        row["spearman"] = float(pd.Series(m).corr(pd.Series(p), method="spearman"))
        row["median_abs_rel_error"] = float(np.median(np.abs(p / m - 1.0)))
        rows.append(row)
    return rows


def steplaw_check(steps: pd.DataFrame, law: StepLaw, max_gap_s: float) -> dict[str, float]:
    """The law's total time over a run's own iterations against their measured total (relative
    error law / measured - 1): all iterations, those with prefill tokens, decode-only ones, and
    the first iteration after each idle period (the engine waited for work more than
    `max_gap_s`). Iteration times as the calibration counts them
    (:func:`llmqueue.engines.calibration.iteration_times`)."""
    from llmqueue.engines.calibration import measured_and_law

    t, f = measured_and_law(steps, law, max_gap_s)
    pre = steps["prefill_tokens"].to_numpy() > 0
    gap = (
        steps["t_sched_s"].to_numpy(dtype=float)[1:] - steps["t_done_s"].to_numpy(dtype=float)[:-1]
    )
    after_idle = np.concatenate([[False], gap > max_gap_s])

    def rel(mask: np.ndarray) -> float:
        return float(f[mask].sum() / t[mask].sum() - 1.0) if mask.any() else math.nan

    return {
        "law_total_rel_error": rel(np.ones_like(pre)),
        "law_prefill_rel_error": rel(pre),
        "law_decode_rel_error": rel(~pre),
        "law_after_idle_rel_error": rel(after_idle),
        "iterations": int(t.size),
    }


def _own_law(form: str, steps: pd.DataFrame, max_gap_s: float, table: str) -> StepLaw | None:
    """The `form` law fitted on a run's own iterations (diagnosis only; None when the run has
    too few iterations to fit it)."""
    from llmqueue.engines.calibration import iteration_times

    rows = steps.assign(time_s=iteration_times(steps, max_gap_s).to_numpy(dtype=float))
    rows = rows[np.isfinite(rows["time_s"]) & (rows["time_s"] > 0)]
    try:
        return fit_form(form, rows, f"in situ ({table})", f"{table} iterations (diagnostic only)")
    except InputError:
        return None


def compare_run(data: RunData, cfg: CompareSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The comparison (:data:`COMPARISON_COLUMNS`, one row per table x variant x metric) and the
    per-request predictions (:data:`PREDICTION_COLUMNS`) of one run folder."""
    engine = str(data.settings.get("engine", "vllm"))
    form = cfg.law_form(engine)
    max_gap = float(data.meta.get("calibration", {}).get("max_gap_s", 0.002))
    if form == "linear":
        cal = calibration_law(data.fits)
    elif data.calibration is None:
        raise InputError(
            f"run folder {data.run_id!r} has no calibration_steps.csv to fit a {form} law on"
        )
    else:
        cal = fit_form(
            form, data.calibration, "calibration", "calibration batches (used for prediction)"
        )
    runs_meta = data.meta.get("runs", {})
    rows, preds = [], []
    for table in cfg.tables:
        req = data.requests[table]
        info = runs_meta.get(table, {})
        variants: list[tuple[str, Policy, StepLaw]] = [
            ("prediction", engine_policy(data.settings, cfg.kv_model, cfg.kv_budget), cal)
        ]
        if "token_kv" in cfg.diagnostics:
            variants.append(
                ("token_kv", engine_policy(data.settings, "tokens", cfg.kv_budget), cal)
            )
        if "in_situ_law" in cfg.diagnostics:
            own = (
                in_situ_law(data.fits, table)
                if form == "linear"
                else _own_law(form, data.steps[table], max_gap, table)
            )
            if own is not None:
                pol = engine_policy(data.settings, cfg.kv_model, cfg.kv_budget)
                variants.append(("in_situ_law", pol, own))
        rate = float(info.get("rate_per_s", math.nan))  # NaN: a burst (all sent at once)
        for variant, pol, law in variants:
            seed = seed_sequence(cfg.seed, "validation", data.run_id, table)
            p = predict(req, pol, law, seed=seed)
            check = steplaw_check(data.steps[table], law, max_gap)
            for er in error_rows(p):
                jct = er["metric"] == "jct" and variant == "prediction"
                within = (
                    abs(er["mean_rel_error"]) <= cfg.target_mean
                    and abs(er["p90_rel_error"]) <= cfg.target_p90
                )
                rows.append(
                    {
                        "run_id": data.run_id,
                        "run": table,
                        "load": float(info.get("load", math.nan)),
                        "rate_per_s": rate,
                        "variant": variant,
                        **er,
                        "target_mean": cfg.target_mean if jct else math.nan,
                        "target_p90": cfg.target_p90 if jct else math.nan,
                        "within_target": within if jct else None,
                        **check,
                        "c0_s": law.c0_s,
                        "c_tok_s": law.c_tok_s,
                        "c_ctx_s": law.c_ctx_s,
                        "c_qk_s": float(getattr(law, "c_qk_s", 0.0)),
                        "engine": engine,
                        "unmodelled_rules": unmodelled_rules(data.steps[table], data.settings),
                    }
                )
            p.insert(0, "variant", variant)
            p.insert(0, "run", table)
            preds.append(p)
    comp = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    return comp, pd.concat(preds, ignore_index=True)[list(PREDICTION_COLUMNS)]


# ---- the table --------------------------------------------------------------------------------
_ENGINE_NAMES = {
    "vllm": "vLLM",
    "transformers": "transformers (request cap and token budget as vLLM's)",
}


def settings_note(
    run_id: str, settings: Mapping[str, Any], kv_model: str = "paged", kv_budget: str = "usable"
) -> str:
    """One line: the engine settings of a run and the policy they map to (:func:`engine_policy`)."""
    pol = engine_policy(settings, kv_model, kv_budget)
    return (
        f"- `{run_id}`: {_ENGINE_NAMES.get(str(settings.get('engine', 'vllm')), 'vLLM')} "
        f"max_num_seqs {settings['max_num_seqs']}, max_num_batched_tokens "
        f"{settings['max_num_batched_tokens']}, {settings['usable_kv_tokens']} usable KV tokens in "
        f"blocks of {settings['block_size']}, chunked prefill, {settings['preemption_mode']} "
        f"preemption, {settings['scheduling_policy']}; simulated as `{pol.label()}`."
    )


def _pct(x: float) -> str:
    return "n/a" if not math.isfinite(x) else f"{100 * x:+.1f}%"


def _run_label(row: pd.Series) -> str:
    return f"{100 * row['load']:.0f}%" if math.isfinite(row["load"]) else f"burst ({row['run']})"


def _rate(x: float) -> str:
    return f"{x:.3f}" if math.isfinite(x) else "all at t = 0"


def markdown_table(comp: pd.DataFrame, settings_note: str = "") -> str:
    """The comparison as Markdown: per run folder, the prediction (measured / predicted mean,
    p50, p90 of JCT and TTFT with relative errors, correlations, target), then the diagnostic
    variants and the calibration law on each run's own iterations."""
    out = ["# The serving model against vLLM: measured vs predicted latency per request", ""]
    for run_id, c in comp.groupby("run_id", sort=False):
        out += [f"## {run_id}", ""]
        head = ["load", "rate (req/s)", "n", "metric", "mean: measured / predicted (s)", "p50",
                "p90", "Pearson / Spearman", "median abs. error", "target met"]  # fmt: skip
        rows = []
        main = c[c["variant"] == "prediction"]
        for _, r in main.iterrows():
            cells = [_run_label(r), _rate(r["rate_per_s"]), str(r["requests"]), r["metric"].upper()]
            for s in STATS:
                cells.append(
                    f"{r[f'measured_{s}_s']:.3f} / {r[f'predicted_{s}_s']:.3f} "
                    f"({_pct(r[f'{s}_rel_error'])})"
                )
            cells.append(f"{r['pearson']:.3f} / {r['spearman']:.3f}")
            cells.append(f"{100 * r['median_abs_rel_error']:.1f}%")
            w = r["within_target"]
            cells.append("-" if w is None or (isinstance(w, float) and math.isnan(w)) else
                         ("yes" if bool(w) else "no"))  # fmt: skip
            rows.append(cells)
        out += [md_table(head, rows), ""]
        diag = c[c["variant"] != "prediction"]
        out += [
            "Diagnosis (never the result): relative errors of the mean and p90 under each "
            "variant, and the calibration law's total time on each run's own iterations "
            "(law / measured - 1; prefill: iterations with prefill tokens).",
            "",
        ]
        rows = []
        order = {v: i for i, v in enumerate(VARIANTS)}
        both = pd.concat([main, diag])
        both = both.assign(_v=both["variant"].map(order), _r=both["run"].map(
            {r: i for i, r in enumerate(dict.fromkeys(c["run"]))}
        )).sort_values(["_r", "_v"], kind="stable")  # fmt: skip
        for (_, variant), g in both.groupby(["run", "variant"], sort=False):
            j = g[g["metric"] == "jct"].iloc[0]
            t = g[g["metric"] == "ttft"].iloc[0]
            law = (
                f"{_pct(j['law_total_rel_error'])} / {_pct(j['law_prefill_rel_error'])} / "
                f"{_pct(j['law_decode_rel_error'])} / {_pct(j['law_after_idle_rel_error'])}"
            )
            rows.append([_run_label(j), str(variant), _pct(j["mean_rel_error"]),
                         _pct(j["p90_rel_error"]), _pct(t["mean_rel_error"]),
                         _pct(t["p90_rel_error"]), law])  # fmt: skip
        head = ["load", "variant", "JCT mean", "JCT p90", "TTFT mean", "TTFT p90",
                "law on the run's iterations: all / prefill / decode-only / after idle"]  # fmt: skip
        out += [md_table(head, rows), ""]
    if settings_note:
        out += [settings_note, ""]
    return "\n".join(out)
