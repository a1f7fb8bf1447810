"""The block of ``llmqueue plan``'s answer in docs/cli.md and docs/studies/plan.md: the
chosen configuration, its SLO verdicts and the runners-up (kind ``plan_summary``)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from llmqueue.markdown import as_float, fmt, fmt_int, fmt_pct, is_true, md_cell, md_table, num

PLAN_SLO_COLUMN = re.compile(r"(?P<metric>wait|ttft|tpot|jct)_(?P<stat>mean|p50|p90|p95|p99)_s")


def _plan_slo_columns(columns: Iterable[str]) -> list[str]:
    """The SLO value columns of a plan's table (``<metric>_<stat>_s``, ``attainment``), in order."""
    return [c for c in columns if PLAN_SLO_COLUMN.fullmatch(str(c)) or c == "attainment"]


def _plan_slo_label(column: str) -> str:
    m = PLAN_SLO_COLUMN.fullmatch(column)
    return f"{m['stat']} {m['metric'].upper()} (s)" if m else column


def _plan_value(column: str, value: object) -> str:
    return fmt_pct(value, 1, sign=False) if column == "attainment" else fmt(value)


PlanRow = Mapping[str, Any] | pd.Series  # a row of summary.json (parsed) or of plan.csv (text)


def _plan_carries(row: PlanRow) -> bool:
    """A configuration that meets the SLOs at some rate (as llmqueue.plan.summary counts them)."""
    return (
        str(row.get("goodput_bound")) != "<"
        and as_float(row.get("goodput_rate_per_s")) > 0
        and is_true(row.get("met"))
    )


def _plan_goodput(row: PlanRow) -> str:
    bound = str(row.get("goodput_bound", "="))
    value = fmt(row.get("goodput_rate_per_s"))
    return md_cell(value if bound in ("=", "", "None") else f"{bound} {value}")


def _plan_batched_tokens(value: object) -> str:
    """The token budget per iteration (chunked prefill); none: no chunking."""
    v = as_float(value)
    return fmt_int(v) if math.isfinite(v) else "no chunking"


def _plan_config(row: PlanRow, with_kv: bool) -> str:
    """``12 x least_work, fcfs, max_batch 128, 2,048 batched tokens`` (and the KV budget)."""
    tokens = _plan_batched_tokens(row.get("max_batched_tokens"))
    text = (
        f"{fmt_int(row['replicas'])} x {row['router']}, {row['order']}, "
        f"max_batch {fmt_int(row['max_batch'])}, "
        + (f"{tokens} batched tokens" if tokens != "no chunking" else "no chunked prefill")
    )
    if with_kv:
        text += f", KV {fmt_int(row.get('kv_tokens'))} tokens"
    return md_cell(text)


def render_plan_summary(
    summary: Mapping[str, Any], plan: pd.DataFrame, top: int = 10, headroom: float = 0.8
) -> str:
    """``llmqueue plan``'s answer (``results/plan/summary.json``): the best configuration (highest
    goodput per replica) and the fewest replicas whose goodput reaches the target rate, each with
    its goodput (requests/s), the SLO values there (s) and the SLO that stops a higher rate; then,
    with ``top`` > 0, the `top` configurations of the whole table (``results/plan/plan.csv``) by
    goodput per replica (ties: the lower Pareto latency, then fewer replicas), with their SLO
    values and the p99 of the first SLO's metric at `headroom` x goodput."""
    slo = str(summary.get("slo", ""))
    slo_cols = _plan_slo_columns(plan.columns)
    with_kv = "kv_tokens" in plan.columns and plan["kv_tokens"].nunique() > 1
    target = summary.get("target_rate_per_s")
    head = f"{fmt_int(summary.get('configurations', len(plan)))} configurations; SLOs `{slo}`"
    if target is not None:
        head += f"; target {as_float(target):g} requests/s"
    parts = [head + "."]

    answers: list[tuple[str, Mapping[str, Any] | None]] = [
        ("best: highest goodput per replica", summary.get("best"))
    ]
    if target is not None:
        question = f"fewest replicas for {as_float(target):g} req/s"
        answers.append((question, summary.get("fewest_replicas")))
    header = [
        "question",
        "configuration",
        "goodput (req/s)",
        "per replica (req/s)",
        *[_plan_slo_label(c) for c in slo_cols],
        "what stops a higher rate",
    ]
    rows: list[list[str]] = []
    for question, row in answers:
        if row is None:
            rows.append([question, "none", "-", "-", *["-" for _ in slo_cols], "-"])
            continue
        rows.append(
            [
                question,
                _plan_config(row, with_kv),
                _plan_goodput(row),
                fmt(row.get("goodput_per_replica_per_s")),
                *[_plan_value(c, row.get(c)) for c in slo_cols],
                md_cell(row.get("why_not_higher") or "-"),
            ]
        )
    parts.append(md_table(header, rows))
    if summary.get("note"):
        parts.append(md_cell(summary["note"]) + ".")

    ok = plan[[_plan_carries(r) for _, r in plan.iterrows()]].copy()
    if top > 0 and not ok.empty:
        ok["_gpr"] = num(ok["goodput_per_replica_per_s"])
        lat = num(ok["pareto_latency_s"])
        ok["_lat"] = lat.where(lat.map(math.isfinite), math.inf)
        ok["_rep"] = num(ok["replicas"])
        ok = ok.sort_values(["_gpr", "_lat", "_rep"], ascending=[False, True, True], kind="stable")
        metric = slo.split(",")[0].split("=")[0].split("_")[0].strip().upper() or "latency"
        header = [
            "rank",
            "replicas",
            "router",
            "order",
            "max_batch",
            "batched tokens",
            *(["KV tokens"] if with_kv else []),
            "goodput (req/s)",
            "per replica (req/s)",
            *[_plan_slo_label(c) for c in slo_cols],
            f"p99 {metric} at {headroom:g} x goodput (s)",
            "Pareto front",
        ]
        rows = []
        for rank, (_, r) in enumerate(ok.head(top).iterrows(), start=1):
            rows.append(
                [
                    str(rank),
                    fmt_int(r["replicas"]),
                    md_cell(r["router"]),
                    md_cell(r["order"]),
                    fmt_int(r["max_batch"]),
                    _plan_batched_tokens(r.get("max_batched_tokens")),
                    *([fmt_int(r["kv_tokens"])] if with_kv else []),
                    _plan_goodput(r),
                    fmt(r["goodput_per_replica_per_s"]),
                    *[_plan_value(c, r[c]) for c in slo_cols],
                    fmt(r["pareto_latency_s"]),
                    "yes" if is_true(r.get("pareto")) else "no",
                ]
            )
        shown = min(top, len(ok))
        parts.append(
            f"The {shown} configurations of highest goodput per replica, of {fmt_int(len(ok))} "
            "that meet the SLOs at some rate:"
        )
        parts.append(md_table(header, rows))
    return "\n\n".join(parts)
