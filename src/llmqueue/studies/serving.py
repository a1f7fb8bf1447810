"""The serving study (issue 13): batch formers side by side on one GPU profile, and the pieces the
operator CLI ``llmqueue simulate`` shares with it.

- Profiles: a config ``step_profiles`` / ``batch_profiles`` / ``latency_profiles`` entry by name
  (:func:`named_latency`), with its fit.json from ``results/profiling/``; the KV-cache budget of
  the profile's model and GPU (:func:`kv_tokens_of_fit`, :func:`llmqueue.hardware.kvcache.kv_tokens`:
  memory left after the fp16 weights over the KV bytes per token).
- One footing: static batches (Eq. 18, T_b = t1(b) + t2(b) L_b) and continuous batching (the step
  law step = c0 + c_tok (decode + prefill tokens) + c_ctx context tokens) priced by the *same*
  hardware law: :func:`batch_law_from_step` writes Eq. (18) for a step law at the workload's
  mean prompt P and mean decode context C: t1(b) = c0 + (c_tok + c_ctx) P b (one prefill
  iteration of b prompts), t2(b) = c0 + (c_tok + c_ctx C) b (one decode step of b sequences);
  C from :func:`decode_context` (a padded batch decodes to its longest reply, so it reads longer
  contexts than one whose replies leave when done).
  Eq. (18) has no prompt term, so a batch law fitted at 64 input tokens would price a 1,155-token
  prompt as a 64-token one; this one does not.
- Exact mean waits where a formula applies (:func:`llmqueue.sim.exact.exact_wait`: one server, no batching, no guard,
  Poisson arrivals): Pollaczek-Khinchine for FCFS, Cobham's non-preemptive priority formula for
  SJF / SPJF (classes by true / predicted size, loads by true service times; Mitzenmacher 2020).
- The study's tables: :func:`policy_sweep` (mean and p99 JCT against the arrival rate per policy),
  :func:`capacity_table` (the highest sustainable rate per policy,
  :func:`llmqueue.sim.capacity.max_rate`), :func:`replay_table` (a trace replayed at its own
  timestamps, time-scaled to given rates).

Units: seconds, requests/s, tokens. Every simulated point draws its own stream
``SeedSequence(seed, spawn_key=(stream, policy, point))`` (:mod:`llmqueue.seeds`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.policy import Policy
from llmqueue.profiles import (
    Latency,
    fit_json_path,
    kv_tokens_of_fit,
    resolve_batch_profile,
    resolve_step_profile,
)
from llmqueue.seeds import seed_sequence
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.sim.workload import ReplayWorkload, TraceWorkload, Workload

__all__ = [
    "batch_law_from_step",
    "geometric_rates",
    "policy_sweep",
    "capacity_table",
    "replay_table",
    "SWEEP_COLUMNS",
    "policy_spec",
    "with_kv",
    "decode_context",
]


# ---- profiles ---------------------------------------------------------------------------------
def batch_law_from_step(
    step: StepLaw, mean_prompt_tokens: float, mean_context_tokens: float, name: str = ""
) -> BatchLatency:
    """Eq. (18) coefficients of a static batch priced by step law `step` (module docstring):
    k1 = (c_tok + c_ctx) P, k2 = c0, k3 = c_tok + c_ctx C, k4 = c0."""
    p, c = float(mean_prompt_tokens), float(mean_context_tokens)
    if not (p >= 0 and c >= 0 and math.isfinite(p) and math.isfinite(c)):
        raise InputError(f"batch_law_from_step: prompt and context must be >= 0, got {p}, {c}")
    return BatchLatency(
        (step.c_tok_s + step.c_ctx_s) * p,
        step.c0_s,
        step.c_tok_s + step.c_ctx_s * c,
        step.c0_s,
        name=name or f"{step.name} as Eq. (18)",
        source=(
            f"step law {step.name} ({step.source}) written as Eq. (18) at prompt {p:.0f} and "
            f"decode context {c:.0f} tokens"
        ),
        verdict=step.verdict
        if step.verdict in ("predicted", "measured", "measured-kernels")
        else "independent",
    )


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
    rates: Sequence[float],
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
    lines = [
        "| policy | spec | time law | highest sustainable rate (requests/s) | method |",
        "|---|---|---|---|---|",
    ]
    for _, r in cap.iterrows():
        lines.append(
            f"| {r['policy']} | `{r['spec']}` | {r['latency']} | {_fmt(r['max_rate_per_s'], 4)} "
            f"| {r['method']}: {r['note']} |"
        )
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
        "| load | rate (req/s) | policy | own load | mean JCT (s) | p99 JCT (s) | mean TTFT (s) "
        "| mean batch |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for _, r in rep.sort_values(["replay_load", "rate_per_s"], kind="stable").iterrows():
        if bool(r["unstable"]):
            mean, p99, ttft, batch = "unstable", "-", "-", "-"
        elif float(r["load"]) >= 1:  # a finite replay over capacity: no steady state to report
            mean, p99, ttft, batch = "over capacity", "-", "-", "-"
        else:
            mean, p99 = _fmt(r["jct_mean_s"]), _fmt(r["jct_p99_s"])
            ttft, batch = _fmt(r["ttft_mean_s"]), _fmt(r["mean_batch"])
        lines.append(
            f"| {r['replay_load']:g} | {_fmt(r['rate_per_s'])} | {r['policy']} | "
            f"{_fmt(r['load'], 2)} | {mean} | {p99} | {ttft} | {batch} |"
        )
    return "\n".join(lines) + "\n"


def policy_spec(p: Policy) -> str:
    """A policy back as a spec string (``continuous:max_batch=256,admission=on_demand``)."""
    parts = []
    if p.kind in ("dynamic", "elastic", "continuous") and p.bmax is not None:
        parts.append(f"{'max_batch' if p.kind == 'continuous' else 'bmax'}={p.bmax}")
    if p.kind in ("fixed", "multibin"):
        parts.append(f"K={p.K}")
    if p.kind == "multibin":
        parts.append(f"bins={p.bins}")
    if p.kind == "continuous":
        if p.kv_tokens is not None:
            parts.append(f"kv_tokens={p.kv_tokens}")
        parts.append(f"admission={p.admission}")
        if p.max_batched_tokens is not None:
            parts.append(f"max_batched_tokens={p.max_batched_tokens}")
        if p.block_size != 1:
            parts.append(f"block_size={p.block_size}")
    if p.order != "fcfs":
        parts.append(f"order={p.order}")
    if p.guard_s is not None:
        parts.append(f"guard_s={p.guard_s:g}")
    if p.servers != 1:
        parts.append(f"servers={p.servers}")
    return p.kind + (":" + ",".join(parts) if parts else "")


def with_kv(policy: Policy, kv_tokens: int | None) -> Policy:
    """A continuous policy with the KV budget filled in when it has none."""
    if policy.kind != "continuous" or policy.kv_tokens is not None or kv_tokens is None:
        return policy
    bs = int(policy.block_size)  # a paged cache holds whole blocks
    return replace(policy, kv_tokens=int(kv_tokens) // bs * bs)


# ---- the study's setup from its config section ---------------------------------------------------
@dataclass(frozen=True)
class ServingSetup:
    """What every serving-study rule needs: the policies (KV budget filled in), the time law of
    each, the Poisson workload of trace rows and the replay of the same trace."""

    policies: dict[str, Policy]
    latencies: dict[str, Latency]
    workload: TraceWorkload
    replay: ReplayWorkload
    step: StepLaw
    kv_tokens: int


def serving_setup(
    section: Mapping[str, Any],
    profiles: Mapping[str, Any],
    fit: Mapping[str, Any] | None,
    static_fit: Mapping[str, Any] | None,
    trace_path: str | Path,
) -> ServingSetup:
    """Build the study's setup from config ``serving`` (`section`), the config profile sections
    (`profiles`: step_profiles, batch_profiles), the step profile's fit.json (`fit`) and, when
    ``static_law`` names a batch profile, its fit.json (`static_fit`)."""
    from llmqueue.policy import parse_policy

    name = str(section["step_profile"])
    step_cfg = (profiles.get("step_profiles") or {}).get(name)
    if step_cfg is None:
        raise InputError(f"serving.step_profile: {name!r} is not a step_profiles entry")
    step = resolve_step_profile(name, step_cfg, fit)
    if section.get("kv_tokens") is not None:
        kv = int(section["kv_tokens"])
    else:
        kv = kv_tokens_of_fit(fit, memory_fraction=float(section.get("kv_memory_fraction", 0.9)))
    cols = section["trace_columns"]
    workload = TraceWorkload.from_csv(trace_path, 1.0, cols["prompt"], cols["output"])
    replay = ReplayWorkload.from_csv(trace_path, cols["timestamp"], cols["prompt"], cols["output"])
    static = str(section.get("static_law", "from_step"))
    static_law: Latency | None = None
    if static != "from_step":
        bcfg = (profiles.get("batch_profiles") or {}).get(static)
        if bcfg is None:
            raise InputError(
                f"serving.static_law: {static!r} is neither from_step nor a batch profile"
            )
        static_law = resolve_batch_profile(
            static, dict(bcfg), dict(static_fit) if static_fit else None
        )
    policies: dict[str, Policy] = {}
    latencies: dict[str, Latency] = {}
    for pname, spec in section["policies"].items():
        pol = with_kv(parse_policy(str(spec)), kv)
        policies[str(pname)] = pol
        if pol.kind == "continuous":
            latencies[str(pname)] = step
        elif static_law is not None:
            latencies[str(pname)] = static_law
        else:
            ctx = decode_context(workload.prompt_tokens, workload.output_tokens, _padded_to(pol))
            latencies[str(pname)] = batch_law_from_step(step, workload.mean_prompt(), ctx)
    return ServingSetup(policies, latencies, workload, replay, step, kv)


def _padded_to(policy: Policy) -> int:
    """The batch size whose longest reply a padded static batch decodes to (1: no padding)."""
    if policy.kind == "fixed":
        return int(policy.k)
    if policy.kind == "dynamic" and policy.bmax is not None:
        return int(policy.bmax)
    return 1  # none, elastic (each reply leaves when done), or an unbounded b_max


def decode_context(prompt_tokens: np.ndarray, output_tokens: np.ndarray, batch: int) -> float:
    """Mean KV context (tokens) a decode step reads per sequence, for `batch` requests of rows
    drawn from (prompt, output): the prompt plus the tokens decoded so far, averaged over the
    decode steps. Without padding (batch 1, or replies that leave when done) a reply of n tokens
    spends n steps at contexts P + 0..n-1: E[P] + E[N^2] / (2 E[N]). A padded batch decodes to its
    longest reply L_b: E[P] + E[L_b^2] / (2 E[L_b]), with P(L_b <= x) = F(x)^b of the rows' law.
    (Full batches of `batch`: at low load a dynamic batch is smaller and decodes less.)"""
    n = np.asarray(output_tokens, dtype=float)
    vals, counts = np.unique(n, return_counts=True)
    cdf = np.cumsum(counts) / n.size
    pmf = cdf ** int(batch) - np.concatenate([[0.0], cdf[:-1]]) ** int(batch)
    m1, m2 = float(pmf @ vals), float(pmf @ (vals * vals))
    return float(np.mean(prompt_tokens)) + m2 / (2.0 * m1)


__all__ += ["ServingSetup", "serving_setup"]


def setup_for_rule(params: Any, inputs: Any, policy: str) -> ServingSetup:
    """The setup of one policy inside a serving-study rule: `params` holds ``setup`` (the
    serving keys), ``profiles`` and ``spec``; `inputs` the fit.json files and the trace."""
    from llmqueue.io import read_json

    fits = [read_json(p) for p in inputs.fits]
    setup = dict(params.setup)
    section = dict(setup, policies={policy: params.spec})
    step_cfg = params.profiles["step_profiles"][setup["step_profile"]]
    # the rule lists the step profile's fit.json first, then the static batch profile's (if any)
    step_fit = fits.pop(0) if fit_json_path(step_cfg) else None
    static_fit = fits.pop(0) if fits else None
    return serving_setup(section, params.profiles, step_fit, static_fit, inputs.trace)


__all__ += ["setup_for_rule", "capacity_markdown", "replay_markdown"]
