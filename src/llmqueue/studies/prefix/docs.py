"""The prefix study's blocks in docs/studies/prefix.md (each ``render_<kind>`` renders blocks of
that kind, dispatched by :mod:`llmqueue.docgen`): the cache against the KV budget, and the
routers at the most replicas."""

from __future__ import annotations

import math

import pandas as pd

from llmqueue.markdown import as_float, fmt, fmt_pct, is_true, md_table, num

NUMERIC = ("budget", "replicas", "load", "max_rate_per_s", "prefix_hit_share", "ttft_mean_s", "jct_mean_s")  # fmt: skip


def _typed(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs table with its numbers and switches typed (the docs job reads CSV as text)."""
    out = runs.copy()
    for col in NUMERIC:
        out[col] = num(out[col])
    out["prefix_caching"] = out["prefix_caching"].map(is_true)
    return out


def _budget(b: object) -> str:
    v = as_float(b)
    return "never evicts" if math.isinf(v) else f"{v:g}x"


def render_prefix_budgets(runs: pd.DataFrame) -> str:
    """Per trace and step profile and KV budget: the share of prompt tokens served from cache,
    the highest sustainable rate with the cache off and on, and the mean TTFT and JCT off and
    on at the budget runs' load."""
    runs = _typed(runs)
    rows = []
    on_col = runs["prefix_caching"]
    for (trace, profile), mine in runs.groupby(["trace", "profile"], sort=False):
        cap = mine[mine["table"] == "capacity"]
        bud = mine[mine["table"] == "budget"]
        for b in sorted(bud["budget"].unique()):

            def pick(frame: pd.DataFrame, caching: bool, b: float = b) -> dict:
                sel = frame[(frame["budget"] == b) & (on_col[frame.index] == caching)]
                return sel.iloc[0].to_dict()

            c_off, c_on = pick(cap, False), pick(cap, True)
            r_off, r_on = pick(bud, False), pick(bud, True)
            rows.append(
                [
                    str(trace),
                    str(profile),
                    _budget(b),
                    fmt_pct(r_on["prefix_hit_share"], 1, sign=False),
                    f"{fmt(c_off['max_rate_per_s'])} / {fmt(c_on['max_rate_per_s'])}",
                    fmt_pct(
                        as_float(c_on["max_rate_per_s"]) / as_float(c_off["max_rate_per_s"]) - 1
                    ),
                    f"{fmt(r_off['ttft_mean_s'])} / {fmt(r_on['ttft_mean_s'])}",
                    f"{fmt(r_off['jct_mean_s'])} / {fmt(r_on['jct_mean_s'])}",
                ]
            )
    load = as_float(runs.loc[runs["table"] == "budget", "load"].iloc[0])
    header = [
        "trace",
        "step profile",
        "KV budget (x one GPU)",
        "from cache",
        "highest rate off / on (req/s)",
        "capacity gained",
        f"mean TTFT off / on at load {load:g} (s)",
        f"mean JCT off / on at load {load:g} (s)",
    ]
    return md_table(header, rows)


def render_prefix_routers(runs: pd.DataFrame) -> str:
    """Per trace and step profile, at the most replicas: each router's share of prompt tokens
    served from cache and its mean TTFT and JCT, beside one replica's."""
    runs = _typed(runs)
    rt = runs[runs["table"] == "routers"]
    most = int(rt["replicas"].max())
    rows = []
    for (trace, profile), mine in rt.groupby(["trace", "profile"], sort=False):
        one = mine[mine["replicas"] == 1]
        if len(one):
            r = one.iloc[0]
            rows.append([str(trace), str(profile), "1 replica", fmt_pct(r["prefix_hit_share"], 1, sign=False), fmt(r["ttft_mean_s"]), fmt(r["jct_mean_s"])])  # fmt: skip
        for _, r in mine[mine["replicas"] == most].iterrows():
            rows.append([str(trace), str(profile), f"{most} replicas, {r['router']}", fmt_pct(r["prefix_hit_share"], 1, sign=False), fmt(r["ttft_mean_s"]), fmt(r["jct_mean_s"])])  # fmt: skip
    header = [
        "trace",
        "step profile",
        "replicas, router",
        "from cache",
        "mean TTFT (s)",
        "mean JCT (s)",
    ]
    return md_table(header, rows)
