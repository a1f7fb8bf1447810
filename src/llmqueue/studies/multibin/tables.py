"""The Multi-Bin Batching study's tables (:mod:`llmqueue.studies.multibin`): highest sustainable
rates exact and simulated, latency against the number of bins, Multi-Bin against continuous
batching. Units: s, requests/s, tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.analytic import multibin as mb
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw, batch_law_from_step
from llmqueue.policy import Policy
from llmqueue.seeds import seed_sequence
from llmqueue.sim.predictors import Buckets, Oracle, Predictor
from llmqueue.sim.result import SimResult
from llmqueue.sim.settings import SimSettings
from llmqueue.sim.stats import Estimate, batch_means
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.studies.multibin.spec import (
    CapacitySettings,
    ContinuousVariant,
    LLMSpec,
    SyntheticSpec,
    VsContinuousSpec,
)
from llmqueue.tokens import DeterministicLaw, TokenLaw, UniformLaw, parse_law

__all__ = [
    "bin_accuracy",
    "learned_capacity_table",
    "load_law",
    "synthetic_table",
    "llm_capacity_table",
    "llm_latency_table",
    "vs_continuous_table",
    "vs_continuous_tables",
    "mid_reply_context",
    "time_law_table",
    "batch_memory_tokens",
]


Progress = Callable[[str], None]


NAN = math.nan


STUDY = "multibin"


def _quiet(_: str) -> None:
    return None


# ---- settings (llmqueue.studies.multibin.spec) -----------------------------------------------
def load_law(spec: str, base_dir: str = ".") -> TokenLaw:
    """The token law of a config spec (a trace path resolves from `base_dir`)."""
    return parse_law(spec, base_dir)


# ---- the two calls of the simulator -------------------------------------------------------------
def _simulate(
    workload: PoissonWorkload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    sim: SimSettings,
    seed: np.random.SeedSequence,
) -> SimResult:
    """The one call of the serving engine in this module (Poisson arrivals)."""
    from llmqueue.sim.engine import run

    return run(
        workload,
        policy,
        latency,
        requests=sim.measured(workload.total),
        warmup=sim.warmup,
        batches=sim.batches,
        seed=seed,
    )


def _saturated(
    workload: PoissonWorkload,
    policy: Policy,
    latency: BatchLatency | LinearLatency | StepLaw,
    cap: CapacitySettings,
    seed: int,
    *keys: str | int | float,
) -> Estimate:
    """The simulated highest rate: mean of `cap.replications` saturated queues (one call of
    :func:`llmqueue.sim.capacity.saturated_rate` each) with its 95% half-width."""
    from llmqueue.sim.capacity import saturated_rate

    rates = [
        saturated_rate(
            workload,
            policy,
            latency,
            requests=cap.requests,
            seed=seed_sequence(seed, STUDY, *keys, r),
        ).rate_per_s
        for r in range(cap.replications)
    ]
    return batch_means(np.asarray(rates), np.ones(len(rates)))


def _binning(law: TokenLaw, k: int, pe: float) -> tuple[int, tuple[float, ...] | None, Predictor]:
    """(bins, edges for the policy or None = the engine's equal-probability edges, predictor):
    bins by the true length (pe = 0), or the neighbour-bin classifier over the same edges."""
    if k == 1 or pe == 0:
        return k, None, Oracle()
    edges = np.unique(mb.equal_probability_edges(law, k))
    edges = edges[edges > 0]
    e = tuple(float(x) for x in edges)
    return len(e) + 1, e, Buckets(e, pe)


# ---- Sec. 6.1: the synthetic setting -------------------------------------------------------------
def synthetic_table(spec: SyntheticSpec, seed: int, progress: Progress = _quiet) -> pd.DataFrame:
    """One row per k: Theorem 4.2 (uniform laws only), the exact capacity, the simulation."""
    law = load_law(spec.tokens)
    lat = spec.latency
    rows = []
    for k in spec.bins:
        exact = mb.capacity(law, lat, spec.batch, bins=k)
        theorem = NAN
        if isinstance(law, UniformLaw):
            theorem = spec.batch / (
                spec.constant
                + spec.time_per_token
                * mb.uniform_mean_batch_length(spec.batch, k, law.low, law.high)
            )
        pol = Policy("multibin", K=spec.batch, bins=k)
        est = _saturated(PoissonWorkload(law, 1.0), pol, lat, spec.capacity, seed, "synthetic", k)
        progress(f"synthetic k={k}: theorem {theorem:.6g}, sim {est.mean:.6g} +- {est.ci95:.2g}")
        rows.append(
            {
                "bins": k,
                "batch": spec.batch,
                "tokens": spec.tokens,
                "theorem_rate": theorem,
                "exact_rate": exact.rate_per_s,
                "sim_rate": est.mean,
                "sim_rate_ci95": est.ci95,
                "limit_rate": spec.batch / (spec.constant + spec.time_per_token * law.mean()),
                "sim_requests": spec.capacity.requests,
                "replications": spec.capacity.replications,
            }
        )
    return pd.DataFrame(rows)


# ---- Sec. 6.2: the simulated LLM -----------------------------------------------------------------
def llm_capacity_table(
    spec: LLMSpec, seed: int, progress: Progress = _quiet, *, law: TokenLaw | None = None
) -> pd.DataFrame:
    """One row per (p_e, k), p_e = 0 first (bins by the true length): the exact highest rate
    (:func:`llmqueue.analytic.multibin.capacity`) and the simulated one, with the gain over k = 1.
    `law`: the length law (default: parsed from ``spec.tokens``)."""
    law = law if law is not None else load_law(spec.tokens)
    lat = spec.latency
    rows = []
    for pi, pe in enumerate((0.0, *spec.error_probs)):
        for k in spec.bins:
            k_eff, edges, pred = _binning(law, k, pe)
            exact = mb.capacity(
                law,
                lat,
                spec.batch,
                bins=k if edges is None else None,
                edges=edges,
                servers=spec.servers,
                pe=pe if edges is not None else 0.0,
            )
            pol = Policy(
                "multibin", K=spec.batch, bins=k_eff, bin_edges=edges, servers=spec.servers
            )
            est = _saturated(
                PoissonWorkload(law, 1.0, predictor=pred),
                pol,
                lat,
                spec.capacity,
                seed,
                "llm",
                pi,
                k,
            )
            progress(f"llm p_e={pe:g} k={k}: exact {exact.rate_per_s:.5g}, sim {est.mean:.5g}")
            rows.append(
                {
                    "pe": pe,
                    "bins": k,
                    "bins_nonempty": exact.bins,
                    "batch": spec.batch,
                    "servers": spec.servers,
                    "exact_rate_per_s": exact.rate_per_s,
                    "exact_mean_batch_s": exact.mean_batch_s,
                    "sim_rate_per_s": est.mean,
                    "sim_rate_ci95_per_s": est.ci95,
                    "tokens": spec.tokens,
                    "mean_tokens": law.mean(),
                    "sim_requests": spec.capacity.requests,
                    "replications": spec.capacity.replications,
                }
            )
    df = pd.DataFrame(rows)
    for col in ("exact_rate_per_s", "sim_rate_per_s"):
        base = df[(df["pe"] == 0) & (df["bins"] == spec.bins[0])][col].iloc[0]
        df[col.replace("rate_per_s", "gain")] = df[col] / base - 1.0
    return df


def bin_accuracy(true_tokens: np.ndarray, predicted_tokens: np.ndarray, k: int) -> float:
    """The share of requests whose predicted bin is their true bin: true bins at the
    equal-probability quantiles of the true lengths, predicted bins at those of the predictions
    (the edges the engine uses, Lemma 4.1), as the Multi-Bin paper scores its predictor."""
    if k == 1:
        return 1.0
    q = np.arange(1, k) / k
    t = np.searchsorted(np.quantile(true_tokens, q), true_tokens, side="left")
    pr = np.searchsorted(np.quantile(predicted_tokens, q), predicted_tokens, side="left")
    return float(np.mean(t == pr))


def learned_capacity_table(
    spec: LLMSpec,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    predictions: np.ndarray,
    predictor: Predictor,
    label: str,
    seed: int,
    progress: Progress = _quiet,
) -> pd.DataFrame:
    """Bins from a real predictor instead of an assumed p_e: the simulated highest rate per k
    of the simulated-LLM setting (``spec``: time per token, B, servers, bins) with requests drawn
    from trace rows (`prompt_tokens`, `output_tokens`; the held-out rows the predictor was not
    trained on), binned by the true length and by `predictions` (one per row, from `predictor`,
    e.g. the SSJF study's learned regressor; `label` names it in the table), with each k's bin
    accuracy and the gain over k = 1.
    Simulation only: the exact form covers neighbour-bin errors, not a real predictor's."""
    from llmqueue.sim.workload import TraceWorkload

    lat = spec.latency
    rows = []
    for name, pred, row_pred in (
        ("true length", Oracle(), None),
        (label, predictor, predictions),
    ):
        w = TraceWorkload(prompt_tokens, output_tokens, 1.0, pred, "held-out rows", row_pred)
        for k in spec.bins:
            pol = Policy("multibin", K=spec.batch, bins=k, servers=spec.servers)
            est = _saturated(w, pol, lat, spec.capacity, seed, "learned", name, k)  # type: ignore[arg-type]
            acc = 1.0 if row_pred is None else bin_accuracy(output_tokens, row_pred, k)
            progress(f"learned bins {name} k={k}: sim {est.mean:.5g}, bin accuracy {acc:.3f}")
            rows.append(
                {
                    "bins_by": name,
                    "bins": k,
                    "bin_accuracy": acc,
                    "sim_rate_per_s": est.mean,
                    "sim_rate_ci95_per_s": est.ci95,
                    "batch": spec.batch,
                    "servers": spec.servers,
                    "rows": int(output_tokens.size),
                    "mean_tokens": float(np.mean(output_tokens)),
                    "sim_requests": spec.capacity.requests,
                    "replications": spec.capacity.replications,
                }
            )
    df = pd.DataFrame(rows)
    base = df.groupby("bins_by")["sim_rate_per_s"].transform("first")
    df["sim_gain"] = df["sim_rate_per_s"] / base - 1.0
    return df


def llm_latency_table(
    spec: LLMSpec, seed: int, progress: Progress = _quiet, *, law: TokenLaw | None = None
) -> pd.DataFrame:
    """Mean latency (arrival to reply) against k at each load (a fraction of the k = 1 highest
    rate), bins by the true length, Poisson arrivals; Lemma 5.1's bound beside it; each flush
    timeout of the spec as a further curve. `law` as in :func:`llm_capacity_table`."""
    law = law if law is not None else load_law(spec.tokens)
    lat = spec.latency
    base = mb.capacity(law, lat, spec.batch, bins=spec.bins[0], servers=spec.servers).rate_per_s
    rows = []
    for li, load in enumerate(spec.loads):
        rate = load * base
        for fi, flush in enumerate((None, *spec.flush_s)):
            for k in spec.bins:
                exact = mb.capacity(law, lat, spec.batch, bins=k, servers=spec.servers)
                pol = Policy("multibin", K=spec.batch, bins=k, servers=spec.servers, flush_s=flush)
                res = _simulate(
                    PoissonWorkload(law, rate),
                    pol,
                    lat,
                    spec.sim,
                    seed_sequence(seed, STUDY, "latency", li, fi, k),
                )
                resp = res.response
                assert resp is not None
                progress(f"latency load={load:g} flush={flush} k={k}: {resp.mean:.4g} s")
                rows.append(
                    {
                        "load": load,
                        "rate_per_s": rate,
                        "flush_s": NAN if flush is None else flush,
                        "bins": k,
                        "batch": spec.batch,
                        "servers": spec.servers,
                        "capacity_per_s": exact.rate_per_s,
                        "bound_jct_mean_s": mb.latency_lower_bound(
                            exact.mean_batch_s, spec.batch, exact.bins, rate
                        ),
                        "sim_jct_mean_s": resp.mean,
                        "sim_jct_ci95_s": resp.ci95,
                        "sim_jct_p95_s": resp.p95,
                        "sim_wait_mean_s": res.wait.mean,
                        "sim_mean_batch": res.mean_batch,
                        "unstable": res.unstable,
                        "note": res.note,
                        "sim_requests": spec.sim.requests,
                    }
                )
    return pd.DataFrame(rows)


# ---- beyond the paper: Multi-Bin against continuous batching --------------------------------------
def batch_memory_tokens(law: TokenLaw, prompt_tokens: int, batch: int) -> int:
    """B x (prompt + longest possible output): the KV tokens one Multi-Bin batch may hold."""
    hi = law.support[1]
    if not math.isfinite(hi):
        raise InputError(
            "kv_tokens: batch_memory needs a length law with a finite largest value (add cap=L)"
        )
    return int(batch * (prompt_tokens + math.ceil(hi)))


def _continuous_policy(
    v: ContinuousVariant, law: TokenLaw, spec: VsContinuousSpec
) -> tuple[Policy, int | None]:
    kv = v.kv_tokens
    if kv == "batch_memory":
        kv = batch_memory_tokens(law, spec.prompt_tokens, spec.batch)
    if isinstance(kv, str):
        raise InputError(
            f"multibin.vs_continuous: kv_tokens {kv!r}: an integer, null or batch_memory"
        )
    pol = Policy(
        "continuous",
        bmax=v.max_batch,
        servers=spec.servers,
        kv_tokens=kv,
        admission=v.admission,
    )
    return pol, kv


_SIM_COLUMNS = (
    "sim_jct_mean_s",
    "sim_jct_ci95_s",
    "sim_jct_p95_s",
    "sim_ttft_mean_s",
    "sim_mean_batch",
    "preemptions",
)


def mid_reply_context(law: TokenLaw, prompt_tokens: int) -> float:
    """prompt + E[N]/2 (tokens): the context of a sequence halfway through a mean reply, the
    decode context at which :func:`llmqueue.latency.batch_law_from_step` writes the step
    law as Eq. (18) (k1 = (c_tok + c_ctx) p, k2 = c0, k3 = c_tok + c_ctx c, k4 = c0)."""
    return prompt_tokens + law.mean() / 2


def vs_continuous_table(
    spec: VsContinuousSpec,
    law: TokenLaw,
    batch_law: BatchLatency,
    step_law: StepLaw,
    seed: int,
    progress: Progress = _quiet,
) -> pd.DataFrame:
    """One row per (policy, load): Multi-Bin for each k under the named batch law `batch_law`
    (Eq. 18) and under Eq. (18) read off the step law (:func:`mid_reply_context`), and each
    continuous-batching variant under the step law `step_law`. Per policy: the highest rate
    (Multi-Bin: exact and simulated; continuous: simulated where a batch cap or a KV limit bounds
    the batch, else nan, its rate growing with the load) and the simulated latency at each load, a
    fraction of the highest Multi-Bin rate (named batch law, largest k). A load at or above a
    policy's highest rate is not simulated and marked unstable."""
    prompt = DeterministicLaw(float(spec.prompt_tokens))
    derived = batch_law_from_step(
        step_law,
        spec.prompt_tokens,
        mid_reply_context(law, spec.prompt_tokens),
        f"{step_law.name} as Eq. (18)",
    )
    top = mb.capacity(law, batch_law, spec.batch, bins=max(spec.bins), servers=spec.servers)
    work = PoissonWorkload(law, 1.0, prompt=prompt)
    entries: list[tuple[str, Policy, BatchLatency | StepLaw, dict[str, Any]]] = []
    for blaw, kind in ((batch_law, "fitted batch law"), (derived, "step law as Eq. (18)")):
        for k in spec.bins:
            pol = Policy("multibin", K=spec.batch, bins=k, servers=spec.servers)
            ex = mb.capacity(law, blaw, spec.batch, bins=k, servers=spec.servers)
            info: dict[str, Any] = {
                "bins": k,
                "max_batch": spec.batch,
                "kv_tokens": NAN,
                "exact_rate_per_s": ex.rate_per_s,
                "time_law_kind": kind,
            }
            entries.append((f"multibin k={k}", pol, blaw, info))
    for v in spec.variants:
        pol, kv = _continuous_policy(v, law, spec)
        info = {
            "bins": NAN,
            "max_batch": NAN if v.max_batch is None else v.max_batch,
            "kv_tokens": NAN if kv is None else kv,
            "exact_rate_per_s": NAN,
            "time_law_kind": "step law",
        }
        entries.append((v.name, pol, step_law, info))
    rows = []
    for ei, (name, pol, tlaw, info) in enumerate(entries):
        bounded = pol.kind == "multibin" or pol.bmax is not None or pol.kv_tokens is not None
        cap = (
            _saturated(work, pol, tlaw, spec.capacity, seed, "vs_cont_cap", ei)
            if bounded
            else Estimate(NAN, NAN)
        )
        limit = float(info["exact_rate_per_s"]) if pol.kind == "multibin" else cap.mean
        for li, load in enumerate(spec.loads):
            rate = load * top.rate_per_s
            row = {
                "policy": name,
                "kind": pol.kind,
                **info,
                "admission": pol.admission if pol.kind == "continuous" else "",
                "time_law": tlaw.name,
                "sim_rate_per_s": cap.mean,
                "sim_rate_ci95_per_s": cap.ci95,
                "load": load,
                "rate_per_s": rate,
                "servers": spec.servers,
                "prompt_tokens": spec.prompt_tokens,
                "tokens": spec.tokens,
            }
            if math.isfinite(limit) and rate >= limit:
                skipped = dict.fromkeys(_SIM_COLUMNS, NAN)
                note = "above the highest sustainable rate: not simulated"
                rows.append({**row, **skipped, "unstable": True, "note": note})
                continue
            res = _simulate(
                work.at_rate(rate),
                pol,
                tlaw,
                spec.sim,
                seed_sequence(seed, STUDY, "vs_cont", ei, li),
            )
            resp = res.response
            assert resp is not None
            progress(
                f"{name} [{tlaw.name}] load={load:g}: capacity {cap.mean:.4g}, {resp.mean:.4g} s"
            )
            rows.append(
                {
                    **row,
                    "sim_jct_mean_s": resp.mean,
                    "sim_jct_ci95_s": resp.ci95,
                    "sim_jct_p95_s": resp.p95,
                    "sim_ttft_mean_s": res.ttft.mean if res.ttft is not None else NAN,
                    "sim_mean_batch": res.mean_batch,
                    "preemptions": res.preemptions,
                    "unstable": res.unstable,
                    "note": res.note,
                }
            )
    return pd.DataFrame(rows)


def time_law_table(
    batch_law: BatchLatency,
    step_law: StepLaw,
    prompt_tokens: int,
    context_tokens: float,
    batch_sizes: Sequence[int],
) -> pd.DataFrame:
    """How the two time laws relate, per batch size b: the batch law's t1(b) (first token) and
    t2(b) (each later token, Eq. 18) beside the step law's prefill of b prompts,
    step(0, b p, b p), and its decode step for b sequences of `context_tokens` context each,
    step(b, 0, b c) (s)."""
    rows = []
    for b in batch_sizes:
        t1, t2 = float(batch_law.t1(b)), float(batch_law.t2(b))
        pre = float(step_law.step(0, b * prompt_tokens, b * prompt_tokens))
        dec = float(step_law.step(b, 0, b * context_tokens))
        rows.append(
            {
                "batch": int(b),
                "batch_law_t1_s": t1,
                "step_prefill_s": pre,
                "batch_law_t2_s": t2,
                "step_decode_s": dec,
                "decode_ratio": dec / t2,
                "context_tokens": context_tokens,
                "prompt_tokens": prompt_tokens,
                "batch_law": batch_law.name,
                "step_law": step_law.name,
            }
        )
    return pd.DataFrame(rows)


def vs_continuous_tables(
    spec: VsContinuousSpec,
    batch_law: BatchLatency,
    step_law: StepLaw,
    seed: int,
    progress: Progress = _quiet,
    base_dir: str = ".",
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(:func:`vs_continuous_table`, :func:`time_law_table` at b = 1, B, 4B and the mid-reply
    context) for the spec's length law."""
    law = load_law(spec.tokens, base_dir)
    table = vs_continuous_table(spec, law, batch_law, step_law, seed, progress)
    laws = time_law_table(
        batch_law,
        step_law,
        spec.prompt_tokens,
        mid_reply_context(law, spec.prompt_tokens),
        sorted({1, spec.batch, 4 * spec.batch}),
    )
    return table, laws


# Lemma 5.1 is judged with about 4 standard errors of each simulated mean (2 x the 95% half-width):
# at low load the bound is tight (no wait for a server), so a 95% interval alone would miss it
# by chance at some of the points.
BOUND_SIGMAS_CI95 = 2.0
