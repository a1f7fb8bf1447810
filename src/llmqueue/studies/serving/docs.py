"""The serving study's block in docs/studies/serving.md: each policy's highest sustainable rate
beside its latency near capacity (kind ``serving_policies``)."""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.errors import InputError
from llmqueue.markdown import as_float, fmt, fmt_pct, is_true, md_cell, md_table, num


def render_serving_policies(
    capacity: pd.DataFrame, sweep: pd.DataFrame, near_load: float = 0.85
) -> str:
    """Every serving policy on one hardware law: its highest sustainable rate, its JCT at the
    lowest simulated rate and near `near_load` of its highest rate, and the KV utilisation there;
    then how far continuous batching's highest rate exceeds the best static former's."""
    header = [
        "policy",
        "spec",
        "time law",
        "highest sustainable rate (req/s)",
        "lowest rate (req/s): mean / p99 JCT (s)",
        f"near {fmt_pct(near_load, 0, sign=False)} of its highest rate (req/s): mean / p99 JCT (s)",
        "mean KV utilisation there",
    ]
    rows = []
    for _, cap in capacity.iterrows():
        runs = sweep[(sweep["policy"] == cap["policy"]) & ~sweep["unstable"].map(is_true)]
        runs = runs.iloc[num(runs["rate_per_s"]).to_numpy().argsort(kind="stable")]
        if runs.empty:
            raise InputError(f"serving sweep: no stable run of policy {cap['policy']!r}")
        low = runs.iloc[0]
        near = runs.iloc[int((num(runs["load"]) - near_load).abs().to_numpy().argmin())]
        kv = as_float(near.get("kv_utilisation"))
        rows.append(
            [
                md_cell(cap["policy"]),
                f"`{cap['spec']}`",
                md_cell(cap["latency"]),
                fmt(cap["max_rate_per_s"]),
                f"{fmt(low['rate_per_s'])}: {fmt(low['jct_mean_s'])} / {fmt(low['jct_p99_s'])}",
                f"{fmt(near['rate_per_s'])}: {fmt(near['jct_mean_s'])} / {fmt(near['jct_p99_s'])}",
                fmt_pct(kv, 0, sign=False) if math.isfinite(kv) else "-",
            ]
        )
    table = md_table(header, rows)
    cont = capacity[capacity["spec"].astype(str).str.startswith("continuous")]
    static = capacity[~capacity["spec"].astype(str).str.startswith("continuous")]
    if cont.empty or static.empty:
        return table
    best_c = cont.iloc[int(num(cont["max_rate_per_s"]).to_numpy().argmax())]
    best_s = static.iloc[int(num(static["max_rate_per_s"]).to_numpy().argmax())]
    ratio = float(best_c["max_rate_per_s"]) / float(best_s["max_rate_per_s"])
    return (
        f"{table}\n\nThe best continuous policy ({best_c['policy']}) sustains {fmt(ratio)} times "
        f"the highest rate of the best static former ({best_s['policy']})."
    )
