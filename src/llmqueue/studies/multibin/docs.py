"""The Multi-Bin study's blocks in docs/studies/multibin.md: the synthetic and LLM capacity
tables, the learned predictor's bins, latency by bin count, and Multi-Bin against continuous
batching (each ``render_<kind>`` renders blocks of that kind, dispatched by :mod:`llmqueue.docgen`)."""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.markdown import as_float, fmt, fmt_int, fmt_pct, is_true, md_cell, md_table, num


def render_multibin_synthetic(synthetic: pd.DataFrame) -> str:
    """Theorem 4.2 against the simulated highest throughput at their synthetic setting."""
    rows = []
    for _, r in synthetic.iterrows():
        theorem, sim = as_float(r["theorem_rate"]), as_float(r["sim_rate"])
        rows.append(
            [
                fmt_int(r["bins"]),
                fmt(theorem, 6),
                f"{fmt(sim, 6)} ± {fmt(r['sim_rate_ci95'], 2)}",
                fmt_pct(sim / theorem - 1, 2),
            ]
        )
    return md_table(
        ["bins k", "Theorem 4.2", "simulated (95% CI)", "simulated / theorem - 1"], rows
    )


def render_multibin_llm(capacity: pd.DataFrame) -> str:
    """The simulated LLM: highest rate per number of bins (exact and simulated, bins by the true
    length), and the gain over the first k under each prediction-error probability p_e."""
    cap = capacity.copy()
    cap["pe"] = num(cap["pe"])
    cap["bins"] = num(cap["bins"])
    true = cap[cap["pe"] == 0].sort_values("bins")
    errors = sorted(p for p in cap["pe"].unique() if p > 0)
    header = ["bins k", "exact (req/s)", "simulated (req/s, 95% CI)", "gain, true bins"]
    header += [f"gain, p_e = {p:g}" for p in errors]
    rows = []
    for _, r in true.iterrows():
        cells = [
            fmt_int(r["bins"]),
            fmt(r["exact_rate_per_s"]),
            f"{fmt(r['sim_rate_per_s'])} ± {fmt(r['sim_rate_ci95_per_s'], 2)}",
            fmt_pct(r["sim_gain"], 0),
        ]
        for p in errors:
            m = cap[(cap["pe"] == p) & (cap["bins"] == r["bins"])]
            cells.append(fmt_pct(m["sim_gain"].iloc[0], 0) if not m.empty else "-")
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_learned(learned: pd.DataFrame) -> str:
    """Bins from the learned length predictor beside bins by the true length (same rows)."""
    kinds = list(dict.fromkeys(learned["bins_by"]))
    header = ["bins k"]
    for k in kinds:
        header += [f"{k}: bin accuracy", f"{k}: gain over one bin"]
    rows = []
    for bins in sorted(int(b) for b in num(learned["bins"]).unique()):
        cells = [str(bins)]
        for k in kinds:
            m = learned[(learned["bins_by"] == k) & (num(learned["bins"]) == bins)]
            if m.empty:
                cells += ["-", "-"]
            else:
                cells += [
                    fmt_pct(m["bin_accuracy"].iloc[0], 0, False),
                    fmt_pct(m["sim_gain"].iloc[0], 0),
                ]
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_latency(latency: pd.DataFrame) -> str:
    """Simulated mean latency per number of bins and load (with and without a flush timeout),
    and the largest gap to Lemma 5.1's lower bound."""
    lat = latency.copy()
    lat["flush"] = lat["flush_s"].map(
        lambda x: fmt_int(x) if math.isfinite(as_float(x)) else "none"
    )
    loads = sorted(num(lat["load"]).unique())
    header = ["flush timeout (s)", "bins k"]
    header += [f"load {x:g}: mean latency (s)" for x in loads]
    header += ["simulated / Lemma 5.1 - 1, largest"]
    rows = []
    for (flush, bins), grp in lat.groupby(["flush", "bins"], sort=False):
        cells = [flush, fmt_int(bins)]
        for x in loads:
            m = grp[(num(grp["load"]) - x).abs() < 1e-9]
            ok = not m.empty and not is_true(m["unstable"].iloc[0])
            cells.append(fmt(m["sim_jct_mean_s"].iloc[0]) if ok else "unstable")
        gaps = num(grp["sim_jct_mean_s"]) / num(grp["bound_jct_mean_s"]) - 1
        cells.append(fmt_pct(gaps.max(), 1))
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_vs_continuous(vs: pd.DataFrame) -> str:
    """Multi-Bin Batching against continuous batching on the same kernels: highest simulated
    rate and mean latency at each load (a fraction of the highest Multi-Bin rate)."""
    loads = sorted(num(vs["load"]).unique())
    header = ["policy", "time law", "highest rate (req/s)"]
    header += [f"load {x:g}: mean latency (s)" for x in loads]
    rows = []
    for (policy, law), grp in vs.groupby(["policy", "time_law_kind"], sort=False):
        rate = as_float(grp["sim_rate_per_s"].iloc[0])
        cells = [md_cell(policy), md_cell(law), fmt(rate) if math.isfinite(rate) else "no limit"]
        for x in loads:
            m = grp[(num(grp["load"]) - x).abs() < 1e-9]
            ok = not m.empty and not is_true(m["unstable"].iloc[0])
            cells.append(fmt(m["sim_jct_mean_s"].iloc[0]) if ok else "unstable")
        rows.append(cells)
    return md_table(header, rows)
