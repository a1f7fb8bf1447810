"""Speed of ``llmqueue plan``: 1,000 serving configurations of a 20,000-request trace.

Run: ``.venv/bin/python benchmarks/bench_plan.py [--configs 1000] [--workers N]``.

Target (issue 26): the goodput search over 1,000 configurations of the Azure conversation trace
(19,366 requests, replayed at its own timestamps time-scaled to each rate tried) in <= 60 s on
2 cores, with the machine's load printed. The space: replicas 1-10 x routers (round_robin,
random, jsq, least_work, power_of_d) x orders (fcfs, spjf with a noisy predictor and a 100 s
guard) x max_batch 32-512 x max_batched_tokens 512, 2048 = 1,000; continuous batching, on-demand
paged KV (16-token blocks, 0.9 of an A100-80GB after LLaMA-2-7B's weights), vidur's A100 step law
of LLaMA-2-7B (the fitted coefficients of results/profiling/step_laws.csv, written here so the
benchmark needs no pipeline run); SLOs p99 TTFT <= 0.5 s and p99 TPOT <= 50 ms, bisection to 2%.
In the same run: one configuration through ``llmqueue simulate`` (a fresh process, as an operator
would run it: start-up, trace read and one simulation), and one simulation in this process.

Peers (published, not run here; sources in docs/studies/plan.md): BLIS, about 13 minutes for
1,000 configurations (one simulation each, no search over the rate); vidur's configuration search
(Vidur-Search), the best configuration of one model in about an hour on a CPU machine.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from llmqueue.latency import StepLaw
from llmqueue.plan.search import PlanRun, parse_rate, search
from llmqueue.plan.slo import parse_slo
from llmqueue.plan.space import SearchSpace
from llmqueue.plan.summary import best
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.workload import ReplayWorkload

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
STEP = StepLaw(0.007671602655, 6.314061352e-05, 2.57501091e-07, name="vidur a100 llama2-7b")
KV_TOKENS = 121_744  # kv_tokens_of_fit of that source at 0.9 (121,750), in whole 16-token blocks
SLO = "ttft_p99=0.5,tpot_p99=0.05"
ROUTERS = ("round_robin", "random", "jsq", "least_work", "power_of_d")


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load avg {a:.2f} {b:.2f} {c:.2f}"


def space(n: int) -> SearchSpace:
    full = SearchSpace(
        replicas=tuple(range(1, 11)),
        routers=ROUTERS,
        orders=("fcfs", "spjf"),
        max_batch=(32, 64, 128, 256, 512),
        max_batched_tokens=(512, 2048),
        kv=((0.9, KV_TOKENS),),
        block_size=16,
    )
    if n > full.size:
        raise SystemExit(f"--configs at most {full.size}")
    return full


def one_simulate_process(rate: float) -> float:
    """Wall time of one configuration through `llmqueue simulate` in a fresh process."""
    cmd = [sys.executable, "-m", "llmqueue", "simulate", "--trace", str(TRACE), "--replay",
           "--rate", f"{rate:g}", "--batching", "continuous", "--max-batch", "128",
           "--max-batched-tokens", "2048", "--kv-tokens", str(KV_TOKENS), "--block-size", "16",
           "--admission", "on_demand", "--replicas", "4", "--router", "jsq",
           "--step", f"c0={STEP.c0_s},c_tok={STEP.c_tok_s},c_ctx={STEP.c_ctx_s}",
           "--requests", "20000", "--warmup", "2000", "--json"]  # fmt: skip
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=os.cpu_count())
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {load()}")  # fmt: skip
    w = ReplayWorkload.from_csv(TRACE, predictor=Noisy(0.5))
    sp = space(args.configs)
    configs = list(sp.configs())[: args.configs]
    slo, rates = parse_slo(SLO), parse_rate("max")
    plan_run = PlanRun(requests=20_000, warmup=2_000, seed=0, guard_s=100.0)
    req, warm = plan_run.sizes(w)
    # compile / load the kernels' caches outside the timing
    search(w, configs[:2], STEP, slo, rates, plan_run, workers=1)
    t0 = time.perf_counter()
    c0 = time.process_time()
    rows = search(w, configs, STEP, slo, rates, plan_run, workers=args.workers)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    sims = sum(r["runs"] for r in rows)
    print(f"plan search: {len(rows)} configurations of the {w.total}-request trace "
          f"({req} measured + {warm} warm-up per run) on {args.workers} workers: {wall:.1f} s "
          f"wall, {cpu:.1f} s CPU, {len(rows) / wall:.1f} configurations/s, {sims} simulations "
          f"({sims / len(rows):.2f} per configuration, {sims * (req + warm) / wall / 1e6:.2f} M "
          f"requests/s); target <= 60 s for 1,000; {load()}")  # fmt: skip
    b = best(rows)
    if b is not None:
        print(f"  best: {b['replicas']} x {b['router']} {b['order']} max_batch {b['max_batch']} "
              f"chunk {b['max_batched_tokens']}: goodput {b['goodput_rate_per_s']:.2f}/s "
              f"({b['goodput_per_replica_per_s']:.3f}/s per replica)")  # fmt: skip
    # the probe configuration of the whole space (searched here when --configs left it out)
    one = next(c for c in sp.configs() if c.replicas == 4 and c.router == "jsq"
               and c.order == "fcfs" and c.max_batch == 128 and c.max_batched_tokens == 2048)  # fmt: skip
    found = [r for r, c in zip(rows, configs, strict=True) if c == one]
    row = found[0] if found else search(w, [one], STEP, slo, rates, plan_run, workers=1)[0]
    rate = 0.8 * row["goodput_rate_per_s"]
    pol = one.policy()
    run(w.at_rate(rate), pol, STEP, requests=2000, warmup=200, seed=0)
    t0 = time.perf_counter()
    run(w.at_rate(rate), pol, STEP, requests=req, warmup=warm, seed=0)
    in_proc = time.perf_counter() - t0
    fresh = one_simulate_process(rate)
    print(f"one configuration (4 x jsq, max_batch 128) at {rate:.1f}/s: one simulation "
          f"{in_proc * 1e3:.1f} ms in this process; `llmqueue simulate` in a fresh process "
          f"{fresh:.2f} s (start-up, trace read, one simulation); {load()}")  # fmt: skip
    blis = 13 * 60
    print(f"peers (published): BLIS 1,000 configurations in about {blis} s "
          f"({1000 / blis:.2f} configurations/s, one simulation each); Vidur-Search about an hour "
          f"for one model; this run {wall:.0f} s ({blis / wall if wall > 0 else math.nan:.0f}x BLIS)")  # fmt: skip


if __name__ == "__main__":
    main()
