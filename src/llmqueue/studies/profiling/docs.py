"""The profiling study's blocks in docs/studies/profiling.md: the batch-law fits per source
and model, the step laws, the decode slopes, the kernel composition check and the measured runs
(each ``render_<kind>`` renders blocks of that kind)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue.markdown import as_float, fmt, fmt_pct, md_cell, md_table, num


def _source_model(path: str) -> tuple[str, str]:
    parts = Path(path).parts
    return (parts[-3], parts[-2]) if len(parts) >= 3 else (path, "")


def _line(batch: Mapping[str, Any], slope: str, intercept: str, fit: str) -> str:
    """One line of Eq. (18)'s batch law in ms, ``slope·b + intercept (R^2 r)``; ``-`` if absent."""
    if slope not in batch:
        return "-"
    r2 = batch.get(fit, {}).get("r2")
    tail = f" (R^2 {fmt(r2, 2)})" if r2 is not None else ""
    return f"{fmt(1e3 * as_float(batch[slope]))}·b + {fmt(1e3 * as_float(batch[intercept]))}{tail}"


def render_profiling_fits(fits: Mapping[str, Mapping[str, Any]]) -> str:
    """Every source's fits (``results/profiling/<source>/<model>/fit.json``): the single-request
    law S = a N + b0, Eq. (18)'s lines t1(b) = k1 b + k2 and t2(b) = k3 b + k4 with their R^2
    (where fitted), and for a fewer-layer CPU sweep its per-token time extrapolated to full depth."""
    header = [
        "source",
        "model",
        "verdict",
        "a (ms/token)",
        "b0 (s)",
        "R^2",
        "from",
        "t1(b) = k1·b + k2 (ms), R^2",
        "t2(b) = k3·b + k4 (ms), R^2",
        "full depth (s/token)",
    ]
    rows = []
    for path in sorted(fits):
        f = fits[path]
        source, model = _source_model(path)
        lin = f.get("linear", {})
        batch = f.get("batch", {})
        full = f.get("full_depth", {})
        rows.append(
            [
                md_cell(source),
                md_cell(model),
                md_cell(f.get("verdict", "")),
                fmt(1e3 * as_float(lin.get("slope"))),
                fmt(lin.get("intercept")),
                fmt(lin.get("r2")),
                md_cell(lin.get("method", "Table I rows")),
                _line(batch, "k1", "k2", "t1_fit"),
                _line(batch, "k3", "k4", "t2_fit"),
                fmt(full.get("linear", {}).get("slope")) if full.get("valid") else "-",
            ]
        )
    return md_table(header, rows)


def render_profiling_step_laws(step_laws: pd.DataFrame) -> str:
    """The serving step laws step = c0 + c_tok (decodes + prefill tokens) + c_ctx context."""
    rows = [
        [
            f"`{r['name']}`",
            md_cell(r["verdict"]),
            fmt(1e3 * as_float(r["c0_s"])),
            fmt(1e6 * as_float(r["c_tok_s"])),
            fmt(1e9 * as_float(r["c_ctx_s"])),
            fmt(r["r2"], 4),
            fmt_pct(r["max_abs_rel_residual"], 0, False),
            fmt_pct(r["median_abs_rel_residual"], 0, False),
        ]
        for _, r in step_laws.iterrows()
    ]
    header = [
        "step profile",
        "verdict",
        "c0 (ms)",
        "c_tok (us/token)",
        "c_ctx (ns/token)",
        "R^2",
        "worst point",
        "median point",
    ]
    return md_table(header, rows)


def render_profiling_decode(points: pd.DataFrame, quantity: str = "t2") -> str:
    """The measured decode step t2(b) (ms) of each measured source and model, by batch size."""
    q = points[(points["quantity"] == quantity) & (points["kind"] == "measured")]
    batches = sorted(int(b) for b in num(q["batch"]).unique())
    rows = []
    for (source, model), grp in q.groupby(["source", "model"], sort=False):
        by = {
            int(as_float(b)): as_float(v) for b, v in zip(grp["batch"], grp["value"], strict=True)
        }
        rows.append(
            [md_cell(source), md_cell(model)]
            + [fmt(1e3 * by[b]) if b in by else "" for b in batches]
        )
    return md_table(["source", "model", *[f"b = {b}" for b in batches]], rows)


def render_profiling_composition(check: pd.DataFrame) -> str:
    """The composition check T = t1 + (n - 1) t2 against full-length runs: median and worst
    relative error per source, model and kind of run."""
    rows = []
    for (source, model, kind), grp in check.groupby(["source", "model", "kind"], sort=False):
        err = num(grp["rel_error"])
        rows.append(
            [
                md_cell(source),
                md_cell(model),
                md_cell(kind),
                str(len(grp)),
                fmt_pct(err.median()),
                fmt_pct(err.abs().max(), sign=False),
            ]
        )
    header = ["source", "model", "full runs", "runs", "median error", "worst |error|"]
    return md_table(header, rows)


def render_profiling_runs(metas: Mapping[str, Mapping[str, Any]]) -> str:
    """The committed measurement runs (``data/profiling/<id>/meta.json``): device, software,
    and each run's model, parts, start, duration and load average before and after."""
    rows = []
    for path in sorted(metas):
        meta = metas[path]
        env = meta.get("environment", {})
        device = env.get("gpu") or f"{env.get('cpu', '')} ({env.get('cpu_count', '')} cores)"
        software = f"torch {env.get('torch', '')}, transformers {env.get('transformers', '')}"
        for run in meta.get("runs", []):
            before, after = run.get("load_before", []), run.get("load_after", [])
            rows.append(
                [
                    md_cell(meta.get("hardware_id", Path(path).parent.name)),
                    md_cell(device),
                    md_cell(software),
                    md_cell(run.get("model", "")),
                    md_cell(", ".join(run.get("parts", []))),
                    md_cell(str(run.get("started", ""))[:16].replace("T", " ")),
                    fmt(run.get("wall_s"), 3),
                    f"{fmt(before[0], 2) if before else '-'} / {fmt(after[0], 2) if after else '-'}",
                ]
            )
    header = [
        "folder",
        "device",
        "software",
        "model",
        "parts",
        "started (UTC)",
        "wall time (s)",
        "1-min load before / after",
    ]
    return md_table(header, rows)
