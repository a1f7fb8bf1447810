"""The step law's form, cross-validated on the calibration's own batches and checked on the judged
runs' iterations (the validation matrix on vLLM's CPU build). Times in s; errors are fractions
(law / measured - 1 of a total time).

Forms (:data:`FORMS`), each fitted on a group's **calibration iterations only**
(``calibration_steps.csv``'s decode_seqs, prefill_tokens, context_tokens, time_s):

- ``shaped``: :func:`llmqueue.latency_fits.fit_shaped_step_law`, g(d) + c_pre p + c_ctx c with one g
  and one c_ctx for every iteration (the matrix's prediction);
- ``split``: :func:`llmqueue.latency_fits.fit_split_step_law` without the attention term: decode-only
  iterations g(d) + c_ctx c, iterations with a prefill g(0) + c_pre (d + p) + c_ctx_pre c;
- ``split_attention``: the same with the prefill's attention c_attn p c.

Batches (:func:`batch_labels`): a calibration sends controlled batches one after the other, each
to the end; an iteration belongs to the batch whose requests the latest admission admitted (the
request ids ``<phase><batch>-<index>-<suffix>`` of :func:`llmqueue.engines.batches.batch_table`
name it; ids of another form count as their own batch). Iterations before the first admission
belong to no batch and are left out.

Cross-validation (:func:`leave_one_batch_out`): each batch in turn is held out whole, the form is
fitted on the other batches' iterations and prices the held-out ones; :func:`heldout_summary`
pools the predictions: the total, decode-only, with-prefill and long-context errors, the median
and largest absolute error of a batch's total time and the root mean square of the
per-iteration errors.

Run check (:func:`group_rows`): each form fitted on all calibration iterations prices every
judged run's iterations (:func:`llmqueue.studies.validation.tables.steplaw_check`: iteration
times as the calibration counts them). ``decode_vs_prefill`` = (1 + decode error) / (1 + prefill
error) - 1 is unchanged by a uniform speed factor: the form's bias between the two kinds of
iteration with the machine's speed level taken out. The same law replays the run's request table
through the serving engine (:func:`llmqueue.studies.validation.tables.simulate_table` under the
engine's settings, :func:`llmqueue.studies.validation.matrix.group_policy`): the mean-JCT error
over the judged (non-warm-up) requests, with the calibrated law and (diagnosis, it reads the run)
with the law times the run's own mean speed factor (measured / law total time of its
iterations), the matrix's ``run_speed`` variant.

Choice (:func:`choose_form`): the one-standard-error rule over the held-out batches (each batch
one fold scored by its per-iteration root mean square error; calibration data only, the judged
runs only judge the choice).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.markdown import md_table
from llmqueue.policy import queue_order
from llmqueue.studies.validation.matrix_spec import GroupData
from llmqueue.studies.validation.tables import fit_form, steplaw_check

__all__ = [
    "FORMS",
    "LONG_CONTEXT_TOKENS",
    "LAW_FORM_COLUMNS",
    "fit_form",
    "batch_labels",
    "leave_one_batch_out",
    "heldout_summary",
    "group_rows",
    "form_scores",
    "choose_form",
    "mark_chosen",
    "markdown_law_forms",
]

# the forms compared, in the order of the table (simplest first: the one-standard-error rule
# takes the first within one standard error of the best), each fitted by fit_form
FORMS = ("shaped", "split", "split_attention")

# an iteration whose context per running sequence (context_tokens / (decode_seqs +
# prefill_reqs)) reaches this many tokens counts as long-context (the code trace's prompts)
LONG_CONTEXT_TOKENS = 256

LAW_FORM_COLUMNS = (
    "group",
    "form",
    "scope",
    "iterations",
    "batches",
    "total_rel_error",
    "decode_rel_error",
    "prefill_rel_error",
    "long_rel_error",
    "decode_vs_prefill",
    "run_speed_factor",
    "jct_mean_rel_error",
    "jct_mean_rel_error_run_speed",
    "median_abs_batch_error",
    "max_abs_batch_error",
    "rms_iteration_error",
    "batch_rms_mean",
    "batch_rms_sd",
    "chosen",
)

_ID = re.compile(r"^(?P<batch>.+?)-(?:\d+|gate)(?:-[^-\s]+)?$")
_COLS = ("decode_seqs", "prefill_tokens", "context_tokens")


def _arrays(rows: pd.DataFrame) -> tuple[np.ndarray, ...]:
    return tuple(rows[k].to_numpy(dtype=float) for k in (*_COLS, "time_s"))


def batch_labels(cal: pd.DataFrame) -> np.ndarray:
    """The controlled batch of every calibration iteration (module docstring): the batch named
    by the first id the latest admission admitted (ids joined by "|", as the step log writes
    them); "" before the first admission."""
    if "admitted_ids" not in cal.columns:
        raise InputError("calibration steps lack the admitted_ids column (the batches' starts)")
    out, cur = [], ""
    for ids in cal["admitted_ids"].tolist():
        first = ids.split("|")[0].strip() if isinstance(ids, str) else ""
        if first:
            m = _ID.match(first)
            cur = m.group("batch") if m else first
        out.append(cur)
    return np.asarray(out, dtype=object)


def _per_seq_context(rows: pd.DataFrame) -> np.ndarray:
    """Context tokens per running sequence of each iteration (tokens)."""
    seqs = rows["decode_seqs"].to_numpy(dtype=float)
    if "prefill_reqs" in rows.columns:
        seqs = seqs + rows["prefill_reqs"].to_numpy(dtype=float)
    return rows["context_tokens"].to_numpy(dtype=float) / np.maximum(seqs, 1.0)


def leave_one_batch_out(cal: pd.DataFrame, form: str, where: str = "") -> pd.DataFrame:
    """Every batch of calibration rows `cal` held out in turn: form `form` fitted on the other
    batches' iterations prices the held-out batch's. One row per iteration that belongs to a
    batch: ``batch``, ``prefill`` (the iteration prefills), ``long`` (long-context,
    :data:`LONG_CONTEXT_TOKENS`), ``time_s`` (measured) and ``law_s`` (s). Needs two batches or
    more; a fit the remaining batches cannot support raises InputError naming `where` and the
    held-out batch."""
    labels = batch_labels(cal)
    names = [b for b in pd.unique(labels) if b != ""]
    if len(names) < 2:
        raise InputError(f"{where or 'calibration'}: leave-one-batch-out needs >= 2 batches")
    d, p, c, y = _arrays(cal)
    long = _per_seq_context(cal) >= LONG_CONTEXT_TOKENS
    parts = []
    for b in names:
        out = labels == b
        train = cal.loc[(labels != b) & (labels != "")]
        try:
            law = fit_form(form, train, f"{form} without {b}")
        except InputError as err:
            raise InputError(f"{where or 'calibration'}, {form} without batch {b}: {err}") from None
        f = np.asarray(law.step(d[out], p[out], c[out]), dtype=float)
        parts.append(
            pd.DataFrame(
                {"batch": b, "prefill": p[out] > 0, "long": long[out], "time_s": y[out], "law_s": f}
            )
        )
    return pd.concat(parts, ignore_index=True)


def _rel(t: np.ndarray, f: np.ndarray) -> float:
    return float(f.sum() / t.sum() - 1.0) if t.size else math.nan


def heldout_summary(pred: pd.DataFrame) -> dict[str, Any]:
    """The held-out errors of :func:`leave_one_batch_out`'s rows (fractions; module docstring)."""
    t, f = pred["time_s"].to_numpy(dtype=float), pred["law_s"].to_numpy(dtype=float)
    pre, long = pred["prefill"].to_numpy(dtype=bool), pred["long"].to_numpy(dtype=bool)
    by = pred.groupby("batch", sort=False)[["time_s", "law_s"]].sum()
    batch_err = np.abs(by["law_s"] / by["time_s"] - 1.0).to_numpy()
    sq = pred.assign(sq=(f / t - 1.0) ** 2).groupby("batch", sort=False)["sq"].mean()
    batch_rms = np.sqrt(sq.to_numpy())
    dec, mix = _rel(t[~pre], f[~pre]), _rel(t[pre], f[pre])
    return {
        "iterations": int(t.size),
        "batches": int(len(by)),
        "total_rel_error": _rel(t, f),
        "decode_rel_error": dec,
        "prefill_rel_error": mix,
        "long_rel_error": _rel(t[long], f[long]),
        "decode_vs_prefill": (1 + dec) / (1 + mix) - 1,
        "median_abs_batch_error": float(np.median(batch_err)),
        "max_abs_batch_error": float(batch_err.max()),
        "rms_iteration_error": float(np.sqrt(np.mean((f / t - 1.0) ** 2))),
        "batch_rms_mean": float(batch_rms.mean()),
        "batch_rms_sd": float(batch_rms.std(ddof=1)) if batch_rms.size > 1 else math.nan,
    }


def _run_row(
    data: GroupData, table: str, law: StepLaw, form: str, settings: Mapping[str, Any]
) -> dict[str, Any]:
    """A judged run's iterations priced by `law` (steplaw_check and the long-context ones) and its
    requests replayed with `law` and with `law` at the run's speed (module docstring).
    `settings`: ``kv_model``, ``kv_budget`` (as config validation.matrix_compare) and ``seed``."""
    from llmqueue.engines.calibration import measured_and_law
    from llmqueue.seeds import seed_sequence
    from llmqueue.studies.validation.matrix import group_policy, request_metrics
    from llmqueue.studies.validation.protocol import speed_factor
    from llmqueue.studies.validation.tables import simulate_table

    steps = data.steps[table]
    check = steplaw_check(steps, law, data.max_gap_s)
    t, f = measured_and_law(steps, law, data.max_gap_s)
    long = _per_seq_context(steps) >= LONG_CONTEXT_TOKENS
    dec, mix = check["law_decode_rel_error"], check["law_prefill_rel_error"]
    factor = speed_factor(steps, law, data.max_gap_s)[0]
    req = data.requests[table]
    keep = ~req["warmup"].to_numpy(dtype=bool)
    measured = request_metrics(req)["jct"][keep].mean()
    pol = group_policy(
        data,
        table,
        str(settings.get("kv_model", "paged")),
        str(settings.get("kv_budget", "usable")),
    )
    predicted_len = (
        req["priority"].to_numpy(dtype=float) if queue_order(pol.order).needs_prediction else None
    )
    jct = {}
    for variant, lw in (("calibration", law), ("run_speed", law.scaled(factor))):
        seed = seed_sequence(int(settings.get("seed", 0)), "validation", "law_form", data.name,
                             table, form, variant)  # fmt: skip
        sim = simulate_table(req, pol, lw, seed=seed, predicted=predicted_len)
        pred = request_metrics(req, sim)["jct"][keep].mean()
        jct[variant] = float(pred / measured - 1.0)
    return {
        "iterations": int(check["iterations"]),
        "total_rel_error": check["law_total_rel_error"],
        "decode_rel_error": dec,
        "prefill_rel_error": mix,
        "long_rel_error": _rel(t[long], f[long]),
        "decode_vs_prefill": (1 + dec) / (1 + mix) - 1,
        "run_speed_factor": factor,
        "jct_mean_rel_error": jct["calibration"],
        "jct_mean_rel_error_run_speed": jct["run_speed"],
    }


def group_rows(
    data: GroupData,
    settings: Mapping[str, Any] | None = None,
    forms: Sequence[str] = tuple(FORMS),
) -> pd.DataFrame:
    """Rows of :data:`LAW_FORM_COLUMNS` for one group: per form, the held-out calibration batches
    (scope ``heldout``) and each judged run (scope = the run's table name) priced and replayed by
    the form fitted on all calibration iterations (`settings` as :func:`_run_row`'s)."""
    rows = []
    for form in forms:
        pred = leave_one_batch_out(data.calibration, form, data.folder)
        rows.append({"group": data.name, "form": form, "scope": "heldout", **heldout_summary(pred)})
        law = fit_form(form, data.calibration.loc[batch_labels(data.calibration) != ""])
        for table in data.judged:
            rows.append(
                {
                    "group": data.name,
                    "form": form,
                    "scope": table,
                    **_run_row(data, table, law, form, settings or {}),
                }
            )
    return pd.DataFrame(rows, columns=list(LAW_FORM_COLUMNS))


def form_scores(rows: pd.DataFrame) -> pd.DataFrame:
    """Per form, the cross-validation score over every held-out batch of every group: ``folds``
    (batches), ``score`` (the mean of the batches' per-iteration RMS relative errors) and ``se``
    (its standard error, sd / sqrt(folds)), pooled from the groups' ``heldout`` rows (their
    batch_rms_mean, batch_rms_sd and batches). Forms in :data:`FORMS` order."""
    held = rows[rows["scope"] == "heldout"]
    if held.empty:
        raise InputError("law forms: no held-out rows to score the forms by")
    out = []
    for form in [f for f in FORMS if f in set(held["form"])]:
        h = held[held["form"] == form]
        n = h["batches"].to_numpy(dtype=float)
        m = h["batch_rms_mean"].to_numpy(dtype=float)
        sd = np.nan_to_num(h["batch_rms_sd"].to_numpy(dtype=float))
        big_n = float(n.sum())
        mean = float((n * m).sum() / big_n)
        var = (((n - 1) * sd**2).sum() + (n * (m - mean) ** 2).sum()) / max(big_n - 1, 1.0)
        out.append({"form": form, "folds": int(big_n), "score": mean,
                    "se": float(math.sqrt(var / big_n))})  # fmt: skip
    return pd.DataFrame(out)


def choose_form(rows: pd.DataFrame) -> str:
    """The chosen form by the one-standard-error rule of cross-validation (Hastie, Tibshirani,
    Friedman, The Elements of Statistical Learning, Sec. 7.10): the first form of :data:`FORMS`
    (they are in order of complexity) whose score (:func:`form_scores`) is at most the best
    score plus that score's standard error. Calibration data only."""
    sc = form_scores(rows)
    score = sc["score"].to_numpy(dtype=float)
    se = sc["se"].to_numpy(dtype=float)
    k = int(np.argmin(score))
    return str(sc["form"].to_numpy()[int(np.flatnonzero(score <= score[k] + se[k])[0])])


def mark_chosen(rows: pd.DataFrame) -> pd.DataFrame:
    """`rows` with ``chosen`` True on the rows of :func:`choose_form`'s form."""
    return rows.assign(chosen=rows["form"] == choose_form(rows))


def _pct(x: Any) -> str:
    return "" if x is None or not math.isfinite(float(x)) else f"{100 * float(x):+.1f}%"


def markdown_law_forms(rows: pd.DataFrame) -> str:
    """Two Markdown tables: per group and form the held-out calibration batches' errors, and per
    judged run each form's decode-only / with-prefill errors and their speed-free ratio."""
    chosen = choose_form(rows)
    forms = [f for f in FORMS if f in set(rows["form"])]
    held = rows[rows["scope"] == "heldout"]
    sc = form_scores(rows)
    lines = [
        f"Step-law forms, fitted on calibration iterations only. Cross-validation score (mean "
        f"per-iteration RMS error of a held-out batch, {int(sc['folds'].iloc[0])} batches, "
        f"+- its standard error): "
        + ", ".join(
            f"{f} {100 * m:.1f}% +- {100 * e:.1f}%"
            for f, m, e in zip(sc["form"], sc["score"], sc["se"], strict=True)
        )
        + f". Chosen by the one-standard-error rule (the simplest form within one standard "
        f"error of the best): **{chosen}**.",
        "",
        "Leave-one-batch-out on the calibration batches (law / measured - 1):",
        "",
    ]
    held_rows = [
        [f"{r['group']}", f"{r['form']}", f"{int(r['batches'])}",
         f"{100 * r['median_abs_batch_error']:.1f}%", f"{100 * r['max_abs_batch_error']:.1f}%",
         f"{100 * r['rms_iteration_error']:.1f}%", _pct(r["decode_rel_error"]),
         _pct(r["prefill_rel_error"]), _pct(r["long_rel_error"])]
        for _, r in held.iterrows()
    ]  # fmt: skip
    head = ["group", "form", "batches", "median \\|batch\\|", "max \\|batch\\|",
            "RMS per iteration", "decode-only", "with prefill", "long context"]  # fmt: skip
    lines.append(md_table(head, held_rows, align="llrrrrrrr"))
    lines += [
        "",
        "Judged runs' iterations, each form fitted on all calibration iterations: decode-only / "
        "with prefill (decode vs prefill, a ratio no uniform speed factor changes); then the "
        "mean-JCT error of the run replayed with the form, and with the form at the run's own "
        "mean speed (diagnosis):",
        "",
    ]
    run_rows = []
    runs = rows[rows["scope"] != "heldout"]
    keys = list(dict.fromkeys(zip(runs["group"], runs["scope"], strict=True)))
    for group, scope in keys:
        part = runs[(runs["group"] == group) & (runs["scope"] == scope)]
        by = {str(f): r for f, r in zip(part["form"], part.to_dict("records"), strict=True)}
        steps = [
            f"{_pct(by[f]['decode_rel_error'])} / {_pct(by[f]['prefill_rel_error'])} "
            f"({_pct(by[f]['decode_vs_prefill'])})"
            if f in by
            else ""
            for f in forms
        ]
        jct = [
            f"{_pct(by[f]['jct_mean_rel_error'])} ({_pct(by[f]['jct_mean_rel_error_run_speed'])})"
            if f in by
            else ""
            for f in forms
        ]
        run_rows.append([f"{group}", f"{scope}", *steps, *jct])
    head = ["group", "run", *forms, f"mean JCT: {forms[0]}", *forms[1:]]
    lines.append(md_table(head, run_rows, align="ll" + "r" * (2 * len(forms))))
    return "\n".join(lines) + "\n"
