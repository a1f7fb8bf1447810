"""The serving study's tables: capacity per policy, the sweep over arrival rates and the replay;
Markdown renderings of the capacity and replay tables. Units: s, requests/s, tokens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.markdown import md_table
from llmqueue.policy import Policy
from llmqueue.policy_text import policy_spec
from llmqueue.profiles import (
    Latency,
)
from llmqueue.seeds import seed_sequence
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.sim.workload import ReplayWorkload, Workload

__all__ = [
    "geometric_rates",
    "policy_sweep",
    "capacity_table",
    "replay_table",
    "SWEEP_COLUMNS",
    "capacity_markdown",
    "replay_markdown",
]


# ---- the study's tables -----------------------------------------------------------------------
SWEEP_COLUMNS = [
    "policy",
    "rate_per_s",
    "load",
    "unstable",
    "jct_mean_s",
    "jct_ci95_s",
    "jct_p50_s",
    "jct_p90_s",
    "jct_p99_s",
    "wait_mean_s",
    "ttft_mean_s",
    "ttft_p99_s",
    "throughput_per_s",
    "tokens_per_s",
    "mean_batch",
    "kv_utilisation",
    "preemptions",
    "rejected",
    "note",
]


def geometric_rates(start: float, stop: float, points: int) -> np.ndarray:
    """`points` arrival rates (requests/s) from `start` to `stop`, evenly spaced in log."""
    if not (0 < start < stop and math.isfinite(stop)) or int(points) < 2:
        raise InputError(
            f"rates: need 0 < start < stop and points >= 2, got {start}, {stop}, {points}"
        )
    return np.round(np.geomspace(float(start), float(stop), int(points)), 10)


def _row(
    name: str, rate: float, cap: float, res: SimResult | None, note: str = ""
) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(SWEEP_COLUMNS, math.nan)
    row.update(policy=name, rate_per_s=rate, load=rate / cap if cap > 0 else math.nan)
    if res is None or res.unstable:
        row.update(unstable=True, preemptions=0, rejected=0, note=note or (res.note if res else ""))
        return row
    jct, ttft = res.response, res.ttft
    row.update(
        unstable=False,
        jct_mean_s=jct.mean if jct else math.nan,
        jct_ci95_s=jct.ci95 if jct else math.nan,
        jct_p50_s=jct.p50 if jct else math.nan,
        jct_p90_s=jct.p90 if jct else math.nan,
        jct_p99_s=jct.p99 if jct else math.nan,
        wait_mean_s=res.wait.mean,
        ttft_mean_s=ttft.mean if ttft else math.nan,
        ttft_p99_s=ttft.p99 if ttft else math.nan,
        throughput_per_s=res.throughput_per_s,
        tokens_per_s=res.tokens_per_s,
        mean_batch=res.mean_batch,
        kv_utilisation=res.kv_utilisation,
        preemptions=res.preemptions,
        rejected=res.rejected,
        note=res.note,
    )
    return row


def capacity_table(
    policies: Mapping[str, Policy],
    latencies: Mapping[str, Latency],
    workload: Workload,
    *,
    requests: int,
    seed: int,
    stream: int = 0,
) -> pd.DataFrame:
    """The highest sustainable rate of each policy (requests/s; :func:`max_rate`), with how it
    was obtained."""
    rows = []
    for name, pol in policies.items():
        cap = max_rate(
            workload,
            pol,
            latencies[name],
            requests=requests,
            seed=seed_sequence(seed, stream, name),
        )
        rows.append(
            dict(
                policy=name,
                spec=policy_spec(pol),
                latency=latencies[name].name,
                max_rate_per_s=cap.rate_per_s,
                method=cap.method,
                note=cap.note,
            )
        )
    return pd.DataFrame(rows)


def policy_sweep(
    policies: Mapping[str, Policy],
    latencies: Mapping[str, Latency],
    workload: Workload,
    rates: Sequence[float] | np.ndarray,
    capacities: Mapping[str, float],
    sim: SimSettings,
    *,
    seed: int,
    stream: int = 1,
    max_load: float = 0.97,
) -> pd.DataFrame:
    """Mean and p99 JCT (and wait, TTFT, throughput, batch, KV) of every policy at every arrival
    rate (requests/s). A rate above `max_load` x the policy's highest sustainable rate is not
    simulated: it is marked unstable (no steady state; never a mean for it)."""
    rows = []
    for name, pol in policies.items():
        cap = float(capacities[name])
        for i, rate in enumerate(rates):
            if not rate < max_load * cap:
                rows.append(
                    _row(
                        name, float(rate), cap, None, f"rate >= {max_load:g} x max rate {cap:.4g}/s"
                    )
                )
                continue
            res = run(
                workload.at_rate(float(rate)),
                pol,
                latencies[name],
                requests=sim.measured(workload.total),
                warmup=sim.warmup,
                batches=sim.batches,
                seed=seed_sequence(seed, stream, name, i),
            )
            rows.append(_row(name, float(rate), cap, res))
    return pd.DataFrame(rows, columns=SWEEP_COLUMNS)


def replay_table(
    policies: Mapping[str, Policy],
    latencies: Mapping[str, Latency],
    replay: ReplayWorkload,
    loads: Sequence[float],
    capacities: Mapping[str, float],
    *,
    reference_rate_per_s: float,
    reference_name: str,
    warmup: int,
    seed: int,
    stream: int = 2,
) -> pd.DataFrame:
    """The trace replayed at its own timestamps, time-scaled so its mean rate is each `load` x
    `reference_rate_per_s` (the highest sustainable rate of policy `reference_name`), through
    every policy (all its rows; the first `warmup` are left out of the statistics)."""
    if not (reference_rate_per_s > 0 and math.isfinite(reference_rate_per_s)):
        raise InputError(f"replay: the reference max rate must be > 0, got {reference_rate_per_s}")
    total = int(replay.total or 0)
    if not 0 <= warmup < total - 400:
        raise InputError(f"replay warmup must lie in [0, {total - 400}) rows, got {warmup}")
    rows = []
    for j, load in enumerate(loads):
        rate = float(load) * float(reference_rate_per_s)
        w = replay.at_rate(rate)
        for name, pol in policies.items():
            res = run(
                w,
                pol,
                latencies[name],
                requests=total - warmup,
                warmup=warmup,
                batches=20,
                seed=seed_sequence(seed, stream, name, j),
            )
            row = _row(name, rate, float(capacities[name]), res)
            row.update(replay_load=float(load), reference=reference_name)
            rows.append(row)
    return pd.DataFrame(rows, columns=["replay_load", "reference", *SWEEP_COLUMNS])


def _fmt(x: Any, digits: int = 3) -> str:
    if isinstance(x, float | np.floating):
        return "-" if not math.isfinite(float(x)) else f"{float(x):.{digits}g}"
    return str(x)


def capacity_markdown(cap: pd.DataFrame) -> str:
    """The capacity table as Markdown: policy, spec, time law, max rate, how it was obtained."""
    head = ["policy", "spec", "time law", "highest sustainable rate (requests/s)", "method"]
    rows = [
        [f"{r['policy']}", f"`{r['spec']}`", f"{r['latency']}", _fmt(r["max_rate_per_s"], 4),
         f"{r['method']}: {r['note']}"]
        for _, r in cap.iterrows()
    ]  # fmt: skip
    lines = [md_table(head, rows)]
    kv = cap["kv_tokens"].iloc[0] if "kv_tokens" in cap else None
    if kv is not None:
        lines += [
            "",
            f"KV budget of the continuous policies: {int(kv):,} tokens of GPU memory after the "
            "weights, of which each holds the whole blocks of its block size (its spec).",
        ]
    return "\n".join(lines) + "\n"


def replay_markdown(rep: pd.DataFrame, reference: str) -> str:
    """The replay table as Markdown: one row per (load, policy): rate, mean / p99 JCT, TTFT."""
    lines = [
        f"Trace replayed at its own timestamps, time-scaled to a fraction of {reference}'s "
        "highest sustainable rate. Own load: the rate over the policy's own max rate (at 1 or more "
        "the queue grows through the replay and no number is given).",
        "",
    ]
    rows = []
    for _, r in rep.sort_values(["replay_load", "rate_per_s"], kind="stable").iterrows():
        if bool(r["unstable"]):
            mean, p99, ttft, batch = "unstable", "-", "-", "-"
        elif float(r["load"]) >= 1:  # a finite replay over capacity: no steady state to report
            mean, p99, ttft, batch = "over capacity", "-", "-", "-"
        else:
            mean, p99 = _fmt(r["jct_mean_s"]), _fmt(r["jct_p99_s"])
            ttft, batch = _fmt(r["ttft_mean_s"]), _fmt(r["mean_batch"])
        rows.append([f"{r['replay_load']:g}", _fmt(r["rate_per_s"]), f"{r['policy']}",
                     _fmt(r["load"], 2), mean, p99, ttft, batch])  # fmt: skip
    head = ["load", "rate (req/s)", "policy", "own load", "mean JCT (s)", "p99 JCT (s)",
            "mean TTFT (s)", "mean batch"]  # fmt: skip
    lines.append(md_table(head, rows))
    return "\n".join(lines) + "\n"
