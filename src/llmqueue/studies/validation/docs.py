"""The validation study's blocks in docs/studies/validation.md and the README: one vLLM run
against the serving model, and every engine's held-out matrix (errors, targets, speed, laws,
closed forms, queue-order gains, repeats, noise, machine speed, groups); each
``render_<kind>`` renders blocks of that kind."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue.markdown import as_float, fmt, fmt_int, fmt_pct, is_true, md_cell, md_table, num


def _load_label(r: pd.Series) -> str:
    x = as_float(r["load"])
    return fmt_pct(x, 0, sign=False) if math.isfinite(x) else f"burst ({r['run']})"


def render_validation_comparison(comparison: pd.DataFrame) -> str:
    """Measured against predicted latency per load and metric (the prediction, not the
    diagnostic variants): mean and p90 with relative errors, correlations, target met."""
    pred = comparison[comparison["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        rate = as_float(r["rate_per_s"])
        target = (
            "-"
            if str(r["within_target"]) in ("", "nan")
            else ("yes" if is_true(r["within_target"]) else "no")
        )
        rows.append(
            [
                _load_label(r),
                fmt(rate) if math.isfinite(rate) else "all at t = 0",
                fmt_int(r["requests"]),
                str(r["metric"]).upper(),
                f"{fmt(r['measured_mean_s'])} / {fmt(r['predicted_mean_s'])} ({fmt_pct(r['mean_rel_error'])})",
                f"{fmt(r['measured_p90_s'])} / {fmt(r['predicted_p90_s'])} ({fmt_pct(r['p90_rel_error'])})",
                f"{fmt(r['pearson'])} / {fmt(r['spearman'])}",
                target,
            ]
        )
    header = [
        "load",
        "rate (req/s)",
        "requests",
        "metric",
        "mean (s): measured / predicted",
        "p90 (s): measured / predicted",
        "Pearson / Spearman",
        "target met",
    ]
    out = md_table(header, rows)
    if "c_qk_s" in pred and len(pred) and as_float(pred["c_qk_s"].iloc[0]) > 0:
        r = pred.iloc[0]
        out += (
            f"\n\nStep law (packed, fitted on the calibration): c0 = {fmt(1e3 * as_float(r['c0_s']))} ms, "
            f"c_tok = {fmt(1e3 * as_float(r['c_tok_s']))} ms/token, c_ctx = {fmt(1e6 * as_float(r['c_ctx_s']))} "
            f"us per context token, c_qk = {fmt(1e9 * as_float(r['c_qk_s']))} ns per token x context token."
        )
    if "unmodelled_rules" in pred:
        bound = sorted({f"{_load_label(r)}: {r['unmodelled_rules']}" for _, r in pred.iterrows()
                        if str(r["unmodelled_rules"]) not in ("", "nan")})  # fmt: skip
        if bound:
            out += "\n\nUnmodelled scheduler rules that could have acted: " + "; ".join(bound) + "."
    return out


def render_validation_run(meta: Mapping[str, Any], fit: Mapping[str, Any]) -> str:
    """The committed vLLM measurement: machine, date, run time, load, engine, model, the
    calibration law and the measured capacity."""
    cal = fit["calibration"]
    versions = meta.get("versions", {})
    load_b, load_a = meta.get("load_before", []), meta.get("load_after", [])
    model = meta.get("model", {})
    rows = [
        ["machine", md_cell(f"{meta['cpu']}, {meta['cores']} cores ({meta['hardware_id']})")],
        ["finished", md_cell(meta["finished"])],
        ["run time (s)", fmt(meta["wall_s"], 4)],
        [
            "1-min load average before / after",
            f"{fmt(load_b[0], 2) if load_b else '-'} / {fmt(load_a[0], 2) if load_a else '-'}",
        ],
        ["engine", md_cell(meta["engine"])],
        ["versions", md_cell(", ".join(f"{k} {v}" for k, v in versions.items() if v))],
        [
            "model",
            md_cell(
                f"{model.get('architecture', '')}, {fmt_int(model.get('parameters'))} parameters"
                + (f", {model['dtype']}" if model.get("dtype") else "")
            ),
        ],
        [
            "linear step law on the calibration",
            md_cell(
                f"c0 = {fmt(1e3 * float(cal['c0_s']))} ms, c_tok = {fmt(1e3 * float(cal['c_tok_s']))} "
                f"ms/token, c_ctx = {fmt(1e6 * float(cal['c_ctx_s']))} us per context token; "
                f"R^2 {fmt(cal['r2'])} on {fmt_int(cal['n'])} iterations"
            ),
        ],
        ["measured capacity (req/s)", fmt(meta["capacity"]["capacity_per_s"])],
        ["requests per load (warm-up included)", fmt_int(meta["requests_per_load"])],
    ]
    return md_table(["", "committed run"], rows)


_MATRIX_LABELS = {
    "jct_mean": "mean JCT",
    "jct_p50": "p50 JCT",
    "jct_p90": "p90 JCT",
    "jct_p99": "p99 JCT",
    "ttft_mean": "mean TTFT",
    "ttft_p90": "p90 TTFT",
    "tpot_mean": "mean TPOT",
}


def _abs_pct(x: object) -> str:
    v = as_float(x)
    return "n/a" if not math.isfinite(v) else f"{100 * abs(v):.1f}%"


def render_validation_matrix(table: pd.DataFrame) -> str:
    """Every judged run of the matrix (the prediction): group, run, load planned / achieved,
    requests, mean JCT measured / predicted and the relative errors of the mean, p90 and p99 JCT,
    mean and p90 TTFT, mean TPOT, the per-request JCT correlation, the share preempted and the
    contention flags."""
    pred = table[table["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                f"{fmt(r['planned_load'], 2)} / {fmt(r['achieved_load'], 2)}",
                fmt_int(r["requests"]),
                f"{fmt(r['measured_jct_mean_s'])} / {fmt(r['predicted_jct_mean_s'])}",
                fmt_pct(r["jct_mean_rel_error"]),
                fmt_pct(r["jct_p90_rel_error"]),
                fmt_pct(r["jct_p99_rel_error"]),
                fmt_pct(r["ttft_mean_rel_error"]),
                fmt_pct(r["ttft_p90_rel_error"]),
                fmt_pct(r["tpot_mean_rel_error"]),
                fmt(r["jct_pearson"]),
                fmt_pct(r["preempted_share"], sign=False),
                md_cell(str(r["flags"]).replace("|", ", ") or "-"),
            ]
        )
    header = [
        "group / run",
        "load planned / achieved",
        "n",
        "mean JCT (s) measured / predicted",
        "mean JCT",
        "p90 JCT",
        "p99 JCT",
        "mean TTFT",
        "p90 TTFT",
        "mean TPOT",
        "JCT Pearson",
        "preempted",
        "flags",
    ]
    return md_table(header, rows)


def render_validation_matrix_summary(
    summary: pd.DataFrame, published: pd.DataFrame, targets: Mapping[str, float]
) -> str:
    """Per metric over all judged runs: the median and largest abs. error of the prediction and of
    the other variants' medians, the target; then the errors other simulators publish."""
    from dataclasses import asdict

    from llmqueue.studies.validation.matrix_spec import MatrixTargets

    targets = {**asdict(MatrixTargets()), **{k: float(v) for k, v in targets.items()}}
    pred = summary[summary["variant"] == "prediction"].set_index("metric")
    others = [v for v in dict.fromkeys(summary["variant"]) if v != "prediction"]
    runs_of = {v: int(num(summary[summary["variant"] == v]["runs"]).max()) for v in others}
    variant_label = {
        "in_situ_law": "in-situ law (diagnosis)",
        "run_speed": "law at the run's speed (diagnosis)",
        "warmup_speed": "law at the warm-up's speed",
        "window_speed": "law at each window's speed (diagnosis)",
        "probe_scaled": "law at the probe's speed before the run",
        "session_law": "law of the run's own session (diagnosis)",
    }
    target = {
        "jct_mean": f"median at most {100 * targets['jct_mean_median']:g}%, each at most "
        f"{100 * targets['jct_mean_max']:g}%",
        "jct_p90": f"median at most {100 * targets['jct_p90_median']:g}%",
        "ttft_mean": f"median at most {100 * targets['ttft_mean_median']:g}%",
    }
    rows = []
    for m, label in _MATRIX_LABELS.items():
        if m not in pred.index:
            continue
        r = pred.loc[m]
        cells = [label, fmt_int(r["runs"]), _abs_pct(r["median_abs_rel_error"]),
                 f"{_abs_pct(r['max_abs_rel_error'])} ({md_cell(r['worst_run'])})"]  # fmt: skip
        for v in others:
            o = summary[(summary["variant"] == v) & (summary["metric"] == m)]
            cells.append(_abs_pct(o.iloc[0]["median_abs_rel_error"]) if len(o) else "-")
        med, mx = as_float(r["median_abs_rel_error"]), as_float(r["max_abs_rel_error"])
        if m == "jct_mean":
            ok = med <= targets["jct_mean_median"] and mx <= targets["jct_mean_max"]
        elif m == "jct_p90":
            ok = med <= targets["jct_p90_median"]
        elif m == "ttft_mean":
            ok = med <= targets["ttft_mean_median"]
        else:
            ok = None
        cells.append("-" if ok is None else f"{target[m]}: {'met' if ok else 'missed'}")
        rows.append(cells)
    header = ["metric", "runs", "median abs. error", "largest abs. error (run)",
              *(f"median, {variant_label.get(v, v.replace('_', ' '))} ({runs_of[v]} runs)" for v in others),
              "target"]  # fmt: skip
    out = md_table(header, rows)
    prow = []
    for _, r in published.iterrows():
        lo, hi = as_float(r["error_low"]), as_float(r["error_high"])
        err = f"{100 * lo:g}%" if lo == hi else f"{100 * lo:g}-{100 * hi:g}%"
        prow.append([md_cell(r["simulator"]), md_cell(r["metric"]), md_cell(r["statistic"]), err,
                     md_cell(r["experiments"] or "-"), md_cell(r["against"]),
                     md_cell(r["source"])])  # fmt: skip
    head2 = ["simulator", "metric", "statistic", "error", "experiments", "against", "source"]
    return (
        out
        + "\n\nPublished by other simulators (their own engines and hardware):\n\n"
        + md_table(head2, prow)
    )


_VERDICT_VARIANTS = {
    "prediction": "prediction (calibration only)",
    "probe_scaled": "probe-scaled prediction",
    "run_speed": "law at the run's speed (diagnosis)",
}


def render_validation_matrix_targets(targets: pd.DataFrame) -> str:
    """Every target of the matrix (llmqueue.studies.validation.verdict): what is judged, on which
    variant, the statistic, its value against the limit, the detail and the verdict."""
    rows = []
    for _, r in targets.iterrows():
        unit = str(r["unit"])
        if unit == "fraction":
            value, limit = _abs_pct(r["value"]), f"{100 * as_float(r['limit']):g}%"
        elif unit == "pp":
            value, limit = f"{as_float(r['value']):.1f} pp", f"{as_float(r['limit']):.1f} pp"
        else:
            value, limit = fmt_int(r["value"]), fmt_int(r["limit"])
        variant = _VERDICT_VARIANTS.get(str(r["variant"]), str(r["variant"]))
        rows.append([md_cell(r["target"]), md_cell(variant), md_cell(r["statistic"]), value,
                     limit, md_cell(r["detail"] if isinstance(r["detail"], str) and r["detail"] else "-"),
                     md_cell(r["verdict"])])  # fmt: skip
    return md_table(["target", "variant", "statistic", "value", "limit", "detail", "verdict"], rows)


def render_validation_matrix_speed(table: pd.DataFrame, window_s: float) -> str:
    """Per judged run: the prediction's step law on the run's own iterations (law / measured - 1
    of their total time: all, with prefill, decode-only), the spread of the engine's speed across
    the run's `window_s` windows, how often per second another thread took the model worker's core
    (its involuntary context switches), the engine's speed (measured / law) in the warm-up and over
    the run, and the mean-JCT error of the prediction, of the law at the warm-up's and at the run's
    speed, at each window's speed (the run replayed in work time) and of the in-situ law."""
    pred = table[table["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        run = table[(table["group"] == r["group"]) & (table["run"] == r["run"])]

        def err(variant: str, run: pd.DataFrame = run) -> str:
            x = run[run["variant"] == variant]
            return fmt_pct(x.iloc[0]["jct_mean_rel_error"]) if len(x) else "-"

        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                fmt(r["planned_load"], 2),
                fmt_pct(r["law_total_rel_error"]),
                fmt_pct(r["law_prefill_rel_error"]),
                fmt_pct(r["law_decode_rel_error"]),
                fmt_pct(r["speed_spread"], sign=False),
                fmt(r.get("model_preemptions_per_s", math.nan), 3),
                f"{fmt(r['warmup_speed_factor'], 3)} / {fmt(r['run_speed_factor'], 3)}",
                fmt_pct(r["jct_mean_rel_error"]),
                err("warmup_speed"),
                err("run_speed"),
                err("window_speed"),
                err("in_situ_law"),
            ]
        )
    header = ["run", "load", "law on the run's iterations: all", "with prefill", "decode-only",
              f"speed spread over {window_s:g}-s windows", "model core taken (/s)",
              "speed: warm-up / run",
              "mean JCT error", "at the warm-up's speed", "at the run's speed",
              "at each window's speed", "in-situ law"]  # fmt: skip
    return md_table(header, rows)


def render_validation_matrix_laws(table: pd.DataFrame) -> str:
    """Per judged run, the mean-JCT and mean-TTFT errors under each variant side by side (the
    prediction's law, the other calibration law, the paper's model, the in-situ law)."""
    variants = list(dict.fromkeys(table["variant"]))
    runs = table[table["variant"] == "prediction"][["group", "run", "planned_load"]]
    rows = []
    for _, r in runs.iterrows():
        cells = [md_cell(f"{r['group']} / {r['run']}"), fmt(r["planned_load"], 2)]
        for metric in ("jct_mean", "ttft_mean"):
            for v in variants:
                x = table[(table["group"] == r["group"]) & (table["run"] == r["run"])
                          & (table["variant"] == v)]  # fmt: skip
                cells.append(fmt_pct(x.iloc[0][f"{metric}_rel_error"]) if len(x) else "-")
        rows.append(cells)
    header = ["run", "load"]
    for metric in ("mean JCT", "mean TTFT"):
        header += [f"{metric}: {v.replace('_', ' ')}" for v in variants]
    return md_table(header, rows)


def render_validation_matrix_closed(closed: pd.DataFrame) -> str:
    """The paper's closed forms beside the measured mean wait and JCT (95% CIs)."""
    rows = []
    for _, r in closed.iterrows():
        bnd = as_float(r.get("bound16_jct_mean_s", "nan"))
        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                fmt(r["rho"]),
                f"{fmt(r['measured_wait_mean_s'])} +- {fmt(r['measured_wait_mean_ci95_s'])}",
                f"{fmt(r['exact_wait_mean_s'])} ({fmt_pct(r['exact_wait_rel_error'])})",
                "yes" if is_true(r["exact_wait_in_ci"]) else "no",
                f"{fmt(r['measured_jct_mean_s'])} +- {fmt(r['measured_jct_mean_ci95_s'])}",
                f"{fmt(r['exact_jct_mean_s'])} ({fmt_pct(r['exact_jct_rel_error'])})",
                "yes" if is_true(r["exact_jct_in_ci"]) else "no",
                fmt(bnd) if math.isfinite(bnd) else "-",
            ]
        )
    header = ["run", "rho", "mean wait (s), measured (95% CI)", "closed form", "in CI",
              "mean JCT (s), measured (95% CI)", "closed form", "in CI", "bound (16)"]  # fmt: skip
    return md_table(header, rows)


_BLOCK_VARIANTS = {
    "prediction": "prediction (calibration only)",
    "probe_scaled": "probe-scaled prediction",
    "run_speed": "law at each run's speed (diagnosis)",
    "window_speed": "law at each window's speed (diagnosis)",
}


def render_validation_matrix_reductions(reductions: pd.DataFrame, blocks: pd.DataFrame) -> str:
    """SJF's and SSJF's mean-JCT reduction against FCFS: measured in alternating blocks
    (:func:`llmqueue.studies.validation.protocol.block_summary`), per order and variant of
    :data:`_BLOCK_VARIANTS`, the rounds, the measured mean reduction with its 95% CI over the
    rounds, the predicted one and the error of the means (points); then any run set against an
    FCFS run served before it (a matrix measured without the protocol)."""
    out = []
    if len(blocks):
        out.append(_blocks_table(blocks))
    if len(reductions):
        rows = [
            [
                md_cell(f"{r['group']} / {r['run']}"),
                md_cell(r["priority"]),
                fmt_pct(r["measured_reduction"], sign=False),
                fmt_pct(r["predicted_reduction"], sign=False),
                f"{as_float(r['error_pp']):+.1f}",
            ]  # fmt: skip
            for _, r in reductions.iterrows()
        ]
        out.append(md_table(["run", "priority", "measured", "predicted", "error (points)"], rows))
    return "\n\n".join(out) or "No queue orders were measured against FCFS."


def _blocks_table(blocks: pd.DataFrame) -> str:
    rows = []
    for variant, label in _BLOCK_VARIANTS.items():
        for _, r in blocks[blocks["variant"] == variant].iterrows():
            ci = as_float(r["measured_reduction_ci95"])
            rows.append([
                md_cell(r["priority"]), md_cell(label), fmt_int(r["rounds"]),
                f"{fmt_pct(r['measured_reduction'], sign=False)} +- "
                f"{fmt_pct(ci, sign=False) if math.isfinite(ci) else '-'}",
                fmt_pct(r["predicted_reduction"], sign=False),
                f"{as_float(r['error_pp']):+.1f}",
            ])  # fmt: skip
    header = ["order", "variant", "rounds", "measured (95% CI over the rounds)", "predicted",
              "error (points)"]  # fmt: skip
    return md_table(header, rows)


def render_validation_matrix_spread(spread: pd.DataFrame) -> str:
    """Repeated runs: the measured values per session, their spread and the model's errors."""
    rows = [
        [
            md_cell(f"{r['group']} / {r['run']}"),
            _MATRIX_LABELS.get(str(r["metric"]), r["metric"]),
            md_cell(str(r["measured_s"]).replace("|", " / ")),
            fmt_pct(r["spread"], sign=False),
            md_cell(" / ".join(fmt_pct(e) for e in str(r["errors"]).split("|"))),
        ]  # fmt: skip
        for _, r in spread.iterrows()
    ]
    header = ["run", "metric", "measured per session (s)", "spread", "prediction error per session"]
    return md_table(header, rows)


def render_validation_matrix_noise(floor: pd.DataFrame, in_sigma: pd.DataFrame) -> str:
    """The repeats' noise floor: per configuration served in several engine sessions the spread
    (SD of the log) of the measured mean JCT, of the prediction's error, and of the error with
    each session predicted by its own session's calibration; then the pooled sigma the runs are
    judged in, the median and largest |error| in its units per group, and the groups whose
    repeats all err beyond 2 sigma on one side."""
    rows = [
        [
            md_cell(f"{r['group']} / {r['config_run']}"),
            fmt_int(r["sessions"]),
            fmt(r["sigma_measured"], 3),
            fmt(r["sigma_prediction"], 3),
            fmt(r["sigma_session_law"], 3),
        ]
        for _, r in floor.iterrows()
    ]
    head = ["configuration", "sessions", "sigma, measured", "sigma, prediction error",
            "sigma, error with its session's calibration"]  # fmt: skip
    sigma = as_float(in_sigma["sigma"].iloc[0]) if len(in_sigma) else math.nan
    z = in_sigma.assign(a=num(in_sigma["error_sigma"]).abs())
    rows2 = [
        [md_cell(str(g)), fmt_int(len(part)), fmt(float(part["a"].median()), 3),
         fmt(float(part["a"].max()), 3),
         "yes" if bool(part["defect_group"].astype(str).str.lower().eq("true").any()) else "no"]
        for g, part in z.groupby("group", sort=False)
    ]  # fmt: skip
    head2 = ["group", "judged runs", "median abs. error (sigma)", "largest (sigma)",
             "repeats beyond 2 sigma on one side"]  # fmt: skip
    return (
        md_table(head, rows)
        + f"\n\nPooled sigma (log scale): {fmt(sigma, 3)}; each run's mean-JCT error in its units:\n\n"
        + md_table(head2, rows2)
    )


def render_validation_machine_speed(
    summary: pd.DataFrame, cycles: pd.DataFrame, meta: Mapping[str, Any]
) -> str:
    """The machine-speed run: per series its median, spread over the cycles and correlations with
    the model's compute and with the cycles' CPU steal; then what was run, for how long, at what
    load, and the steal in the slowest and the fastest third of the cycles."""
    rows = []
    for _, r in summary.iterrows():
        unit = "us" if str(r["series"]).endswith("_us") else "ms"
        rows.append(
            [
                md_cell(r["label"]),
                f"{fmt(r['median'])} {unit}",
                fmt_pct(r["cv"], sign=False),
                f"{as_float(r['max_over_min']):.2f}",
                f"{as_float(r['corr_model']):.2f}",
                f"{as_float(r['corr_steal']):.2f}",
            ]
        )
    header = ["series", "median per cycle", "CV over cycles", "largest / smallest cycle",
              "correlation with the model's compute", "correlation with CPU steal"]  # fmt: skip
    ms = meta.get("machine_speed", {})
    k = meta.get("kernels", {})
    model = num(cycles["model_ms"])
    steal = num(cycles["steal_share"])
    third = max(1, len(cycles) // 3)
    order = model.sort_values().index
    steal_fast = float(steal.loc[order[:third]].mean())
    steal_slow = float(steal.loc[order[-third:]].mean())
    cont = meta.get("contention", {})
    load = meta.get("load_before") or [float("nan")]
    note = (
        f"{fmt_int(ms.get('cycles'))} cycles of {fmt_int(ms.get('batch'))} sequences decoding "
        f"{fmt_int(ms.get('output_tokens'))} tokens each, then the kernels "
        f"({fmt(as_float(k.get('stream_bytes')) / 1e6)} MB streamed for {as_float(ms.get('stream_s')):g} s, "
        f"{fmt_int(ms.get('compute_size'))}-square products for {as_float(ms.get('compute_s')):g} s) "
        f"on CPUs {k.get('probe_cpus', '-')}; {meta.get('cpu', '-')}, {fmt_int(meta.get('cores'))} "
        f"cores; {fmt_int(meta.get('wall_s'))} s, load average {as_float(load[0]):.2f} before; other processes "
        f"{fmt_pct(cont.get('other_cpu_share'), sign=False)} of the CPU, steal "
        f"{fmt_pct(cont.get('steal_share'), sign=False)} over the run (per cycle at most "
        f"{fmt_pct(num(cycles['other_cpu_share']).max(), sign=False)} and "
        f"{fmt_pct(steal.max(), sign=False)}; steal {fmt_pct(steal_slow, sign=False, digits=2)} on "
        f"average over the slowest third of the cycles, {fmt_pct(steal_fast, sign=False, digits=2)} "
        f"over the fastest); measured {str(meta.get('started', '-'))[:10]}."
    )
    return md_table(header, rows) + "\n\n" + note


def render_validation_matrix_engines(medians: pd.DataFrame) -> str:
    """Every engine's matrix side by side: per engine and machine, the median (and largest)
    absolute errors over its judged runs and the targets it met
    (:func:`llmqueue.studies.validation.matrix_summary.markdown_engines`)."""
    from llmqueue.studies.validation.matrix_summary import markdown_engines

    return markdown_engines(medians).rstrip("\n")


def render_validation_matrix_groups(metas: Mapping[str, Mapping[str, Any]]) -> str:
    """The committed matrix groups: engine shape, calibration law, capacity, run time, load."""
    rows = []
    for path, meta in metas.items():
        cal = (meta.get("calibration") or {}).get("batches", [])
        cap = (meta.get("capacity") or {}).get("capacity", {}).get("capacity_per_s")
        judged = [k for k, v in (meta.get("runs") or {}).items() if v.get("kind") == "judged"]
        la, lb = meta.get("load_after") or [], meta.get("load_before") or []
        model = meta.get("model") or {}
        rows.append(
            [
                md_cell(meta.get("group", Path(path).parent.name)),
                md_cell(f"{model.get('name', '')} ({fmt_int(model.get('parameters'))} parameters)"),
                fmt_int(len(cal)),
                fmt(cap) if cap is not None else "-",
                fmt_int(len(judged)),
                fmt(meta.get("wall_s"), 4),
                f"{fmt(lb[0], 2) if lb else '-'} / {fmt(la[0], 2) if la else '-'}",
                md_cell(meta.get("finished", "")),
            ]
        )
    header = ["group", "model", "calibration batches", "capacity (req/s)", "judged runs",
              "run time (s)", "1-min load before / after", "finished"]  # fmt: skip
    return md_table(header, rows)
