"""The SSJF study's blocks in docs/studies/ssjf.md: the predictors' scores, the mean-JCT gains
over FCFS and the starvation guard's effect (each ``render_<kind>`` renders blocks of that kind)."""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.errors import InputError
from llmqueue.markdown import as_float, fmt, fmt_int, fmt_pct, is_true, md_cell, md_table, num


def render_ssjf_predictors(predictors: pd.DataFrame) -> str:
    """Each predictor's score on the held-out rows: accuracy over SSJF's five classes, Kendall's
    tau between predicted and true lengths, mean absolute error (tokens)."""
    rows = [
        [
            f"`{r['predictor']}`",
            md_cell(r["kind"]),
            fmt_int(r["n"]),
            fmt(r["accuracy"], 2),
            fmt(r["kendall_tau"], 2),
            fmt(r["mae_tokens"]),
        ]
        for _, r in predictors.iterrows()
    ]
    return md_table(
        ["predictor", "kind", "rows scored", "class accuracy", "Kendall tau", "MAE (tokens)"], rows
    )


def render_ssjf_gains(jct: pd.DataFrame, load: float) -> str:
    """Mean JCT of FCFS and each order's reduction of it at `load` (Poisson arrivals), per cost
    model and batching mode; the largest wait of FCFS and of the unguarded orders."""
    at = jct[(num(jct["load"]) - load).abs() < 1e-9]
    if at.empty:
        raise InputError(f"ssjf jct table: no rows at load {load}")
    orders = [p for p in dict.fromkeys(at["policy"]) if p != "FCFS"]
    header = ["setting", "mode", "FCFS mean JCT (s)"]
    header += [f"{p}: JCT reduction" for p in orders]
    header += [
        "largest wait (s): " + " / ".join(["FCFS", *[p for p in orders if "guard" not in p]])
    ]
    rows = []
    for (setting, mode), grp in at.groupby(["setting", "mode"], sort=False):
        by = {str(r["policy"]): r for _, r in grp.iterrows()}
        fcfs = by["FCFS"]
        base = as_float(fcfs["jct_mean_s"])
        cells = [md_cell(setting), md_cell(mode), fmt(base)]
        for p in orders:
            r = by.get(p)
            if r is None or is_true(r["unstable"]):
                cells.append("unstable")
            else:
                cells.append(fmt_pct(1 - as_float(r["jct_mean_s"]) / base, sign=False))
        waits = [
            fmt(by[p]["wait_max_s"]) for p in ["FCFS", *orders] if "guard" not in p and p in by
        ]
        cells.append(" / ".join(waits))
        rows.append(cells)
    return md_table(header, rows)


def render_ssjf_starvation(starvation: pd.DataFrame) -> str:
    """Mean JCT against the largest wait of each order under each starvation guard."""
    rows = [
        [
            md_cell(r["policy"]),
            fmt_int(r["guard_s"]) if math.isfinite(as_float(r["guard_s"])) else "none",
            fmt(r["jct_mean_s"]),
            fmt(r["wait_p99_s"]),
            fmt(r["wait_max_s"]),
        ]
        for _, r in starvation.iterrows()
    ]
    return md_table(
        ["order", "guard (s)", "mean JCT (s)", "p99 wait (s)", "largest wait (s)"], rows
    )
