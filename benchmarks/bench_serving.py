"""Speed and memory of the serving engine (llmqueue.sim.engine), against its plain-Python reference.

Run: ``.venv/bin/python benchmarks/bench_serving.py [--requests N] [--memory] [--quick]``.

Targets:
1. continuous batching >= 2 M requests/s on one core, random numbers included: rho = 0.8 of the
   policy's highest sustainable rate, outputs LogNormal(5, 1) capped at 2048, prompts from the
   Azure conv trace's ContextTokens, max_batch 64, the H100's CUDA-graph step law of LLaMA-2-7B;
2. every other batch former (none, dynamic, fixed, elastic; Eq. 18 law) >= 5 M requests/s;
3. memory flat from 10^6 to 10^8 requests (``--memory``: a fresh subprocess per size);
4. the plain-Python reference engine (tests/reference_engine.py) on the same request table in
   the same run: the compiled engine >= 100x faster;
5. prefix caching (``--prefix``): Mooncake's conversation trace replayed through continuous
   batching with on-demand KV in 16-token blocks, the cache off and on, alternated in the same
   run: the cache on costs at most 2x the same run with it off.
Rates are simulated requests (warm-up included) per CPU-second of this process after
compilation; each run prints the load average, since other jobs share the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.policy import Policy
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
MOONCAKE = ROOT / "data/traces/mooncake-fast25/conversation_trace.jsonl"
A100 = StepLaw(0.00767, 6.31e-5, 2.58e-7, name="vidur a100")  # results/prefix/runs.csv's law
OUTPUT = "lognormal:mu=5,sigma=1,cap=2048"
STEP = StepLaw(0.00844, 6.5e-6, 1.80e-7, name="h100 graph")  # results/profiling/step_laws.csv
EQ18 = BatchLatency(0.0, 0.0, 3.1e-4, 2.48e-3, name="paper_k8")


def load() -> str:
    a, b, c = os.getloadavg()
    return f"load avg {a:.2f} {b:.2f} {c:.2f}"


def cpu_rate(w, pol, law, n, warmup=100_000):  # type: ignore[no-untyped-def]
    run(w, pol, law, requests=2_000, warmup=0, seed=1)  # compile / load cache
    t0 = time.process_time()
    r = run(w, pol, law, requests=n, warmup=warmup, seed=2)
    return (n + warmup) / (time.process_time() - t0), r


def continuous_workload() -> PoissonWorkload:
    prompt = parse_law(f"trace:{TRACE}:ContextTokens")
    return PoissonWorkload(parse_law(OUTPUT), 1.0, prompt=prompt)


def part_speed(n: int) -> None:
    print(f"[1-2] one core, {n:,} requests after 100,000 warm-up per run ({load()})")
    w = continuous_workload()
    cont = Policy("continuous", bmax=64)
    cap = max_rate(w, cont, STEP, requests=200_000, seed=3).rate_per_s
    rate, r = cpu_rate(w.at_rate(0.8 * cap), cont, STEP, n)
    print(
        f"    continuous max_batch=64 (capacity {cap:.2f}/s, rho 0.8): {rate / 1e6:6.2f} M req/s, "
        f"mean batch {r.mean_batch:.1f}, {r.events / (n + 100_000):.2f} iteration events/request; "
        f"target >= 2 M/s: {'met' if rate >= 2e6 else 'MISSED'}"
    )
    for label, extra in [
        ("continuous kv=100000 on_demand", dict(kv_tokens=100_000, admission="on_demand")),
        ("continuous chunked 512", dict(max_batched_tokens=512)),
        ("continuous spjf", dict(order="spjf")),
    ]:
        pol = Policy("continuous", bmax=64, **extra)
        rate, r = cpu_rate(w.at_rate(0.8 * cap), pol, STEP, n // 2)
        print(f"    {label:32s} {rate / 1e6:6.2f} M req/s (preemptions {r.preemptions})")
    # preemptive orders under continuous batching (evictions at boundaries) against FCFS, same run
    fcfs, _ = cpu_rate(w.at_rate(0.8 * cap), cont, STEP, n // 2)
    for order in ("psjf", "srpt"):
        pol = Policy("continuous", bmax=64, order=order)
        rate, r = cpu_rate(w.at_rate(0.8 * cap), pol, STEP, n // 2)
        print(
            f"    continuous {order:21s} {rate / 1e6:6.2f} M req/s (evictions {r.preemptions}; "
            f"continuous fcfs {fcfs / 1e6:.2f} in this run: {rate / fcfs - 1:+.0%}; target at "
            f"most 30% slower: {'met' if rate >= 0.7 * fcfs else 'MISSED'})"
        )
    law = parse_law("lognormal:mu=7,sigma=0.7")
    static = [
        Policy("none"),
        Policy("dynamic", bmax=64),
        Policy("fixed", K=8),
        Policy("elastic", bmax=64),
        Policy("dynamic", bmax=64, order="sjf"),
    ]
    worst = np.inf
    for pol in static:
        lat = EQ18 if pol.kind != "none" else BatchLatency(0.0, 0.186, 0.0, 0.023)
        wl = PoissonWorkload(law, 1.0)
        cap = max_rate(wl, Policy(pol.kind, bmax=pol.bmax, K=pol.K), lat).rate_per_s
        rate, r = cpu_rate(wl.at_rate(0.8 * cap), pol, lat, n)
        worst = min(worst, rate)
        print(f"    {pol.label():32s} {rate / 1e6:6.2f} M req/s (mean batch {r.mean_batch:.2f})")
    print(
        f"    target >= 5 M/s for every static former: {'met' if worst >= 5e6 else 'MISSED'} ({load()})"
    )
    # the preemptive orders' own loop (none, one server) against FCFS in the same run
    lat = BatchLatency(0.0, 0.186, 0.0, 0.023)
    wl = PoissonWorkload(law, 1.0)
    wl = wl.at_rate(0.8 * max_rate(wl, Policy("none"), lat).rate_per_s)
    base, _ = cpu_rate(wl, Policy("none"), lat, n)
    for order in ("psjf", "srpt"):
        rate, _ = cpu_rate(wl, Policy("none", order=order), lat, n)
        print(
            f"    none {order:27s} {rate / 1e6:6.2f} M req/s (none fcfs {base / 1e6:.2f} in this "
            f"run: {rate / base - 1:+.0%})"
        )


def part_reference(n: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from reference_engine import RefPolicy, Req, run_continuous, run_static

    rng = np.random.default_rng(7)
    out = np.maximum(1.0, np.round(rng.lognormal(5, 1, n)))
    out = np.minimum(out, 2048)
    prompt = np.round(rng.uniform(10, 1000, n))
    gaps = rng.exponential(1.0 / 6.0, n - 1)
    arr = np.concatenate([[0.0], np.cumsum(gaps)])
    w = ReplayWorkload(arr, prompt, out)
    print(f"[4] plain-Python reference vs compiled engine, the same {n:,}-request table ({load()})")
    for label, pol, rp, law in [
        (
            "continuous max_batch=64",
            Policy("continuous", bmax=64),
            RefPolicy("continuous", bmax=64),
            STEP,
        ),
        ("dynamic b_max=64", Policy("dynamic", bmax=64), RefPolicy("dynamic", bmax=64), EQ18),
    ]:
        run(w, pol, law, requests=n, warmup=0, batches=10, seed=1)
        t0 = time.process_time()
        res = run(w, pol, law, requests=n, warmup=0, batches=10, seed=1, per_request=True)
        fast = time.process_time() - t0
        reqs = [Req(i, arr[i], prompt[i], out[i], out[i]) for i in range(n)]
        t0 = time.process_time()
        if pol.kind == "continuous":
            run_continuous(reqs, rp, (STEP.c0_s, STEP.c_tok_s, STEP.c_ctx_s))
        else:
            run_static(reqs, rp, (EQ18.k1, EQ18.k2, EQ18.k3, EQ18.k4))
        slow = time.process_time() - t0
        same = np.allclose(res.per_request[:, 7], [r.finish for r in reqs], rtol=1e-9)
        print(
            f"    {label:26s} compiled {n / fast / 1e6:7.3f} M req/s, reference {n / slow / 1e3:8.2f} k req/s: "
            f"{slow / fast:,.0f}x faster (target >= 100x: {'met' if slow / fast >= 100 else 'MISSED'}); "
            f"same finish times: {same}"
        )


_CHILD = """
import resource, sys, time, tracemalloc
from benchmarks.bench_serving import continuous_workload, STEP, run, max_rate, Policy
n = int(sys.argv[1])
w = continuous_workload()
pol = Policy("continuous", bmax=64)
cap = max_rate(w, pol, STEP, requests=100_000, seed=3).rate_per_s
run(w.at_rate(0.8 * cap), pol, STEP, requests=2000, warmup=0, seed=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
t0 = time.process_time()
r = run(w.at_rate(0.8 * cap), pol, STEP, requests=n, warmup=0, seed=5)
dt = time.process_time() - t0
peak = tracemalloc.get_traced_memory()[1] / 2**20
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, before, peak, dt, r.response.mean)
"""


def part_memory(sizes: list[int]) -> None:
    print(f"[3] peak memory of continuous batching, fresh subprocess per run ({load()})")
    rss = []
    for n in sizes:
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, str(n)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
            check=True,
        ).stdout.split()
        maxrss, before, peak, dt = int(out[0]), int(out[1]), float(out[2]), float(out[3])
        rss.append(maxrss)
        print(
            f"    {n:9.0e} requests: maxrss {maxrss} KiB (+{(maxrss - before) / 1024:.1f} MiB during the run), "
            f"tracemalloc peak {peak:.2f} MiB, {dt:.1f} s CPU ({n / dt / 1e6:.2f} M req/s), mean JCT {float(out[4]):.3f} s"
        )
    growth = (rss[-1] - rss[0]) / 1024
    print(
        f"    maxrss growth {sizes[0]:.0e} -> {sizes[-1]:.0e}: {growth:+.1f} MiB; target flat: "
        f"{'met' if growth < 32 else 'MISSED'} ({load()})"
    )


def part_prefix(rounds: int) -> None:
    """Target 5: the same replay with the cache off and on, alternated `rounds` times; the
    median CPU time of each, and their ratio."""
    from dataclasses import replace

    from llmqueue.traces import read_trace
    from llmqueue.traces.base import TraceColumns

    rows = read_trace(MOONCAKE, TraceColumns(), format="mooncake")
    w = ReplayWorkload(
        rows.arrival_s, rows.prompt_tokens, rows.output_tokens, 1.0, blocks=rows.blocks
    )
    n = int(w.total)
    print(f"[5] prefix caching: Mooncake conversation, {n:,} requests per run ({load()})")
    for kv in (1_948_000, 31_168_000):  # 16 x and 256 x an A100-80GB's KV of LLaMA-2-7B, in blocks
        off = Policy("continuous", bmax=256, kv_tokens=kv, admission="on_demand", block_size=16,
                     max_batched_tokens=8192)  # fmt: skip
        on = replace(off, prefix_caching=True)
        wl = w.at_rate(0.5 * max_rate(w, off, A100, requests=n, seed=1).rate_per_s)
        times: dict[bool, list[float]] = {False: [], True: []}
        share = float("nan")
        for pol in (off, on):
            run(wl, pol, A100, requests=n, warmup=0, seed=1)  # compile / load the cache
        for _ in range(rounds):
            for caching, pol in ((False, off), (True, on)):
                t0 = time.process_time()
                r = run(wl, pol, A100, requests=n, warmup=0, seed=2)
                times[caching].append(time.process_time() - t0)
                if caching:
                    share = r.prefix_hit_share
        t_off, t_on = float(np.median(times[False])), float(np.median(times[True]))
        print(
            f"    kv {kv:>10,} tokens: off {t_off * 1e3:7.1f} ms ({n / t_off / 1e3:7.1f} k req/s), "
            f"on {t_on * 1e3:7.1f} ms ({n / t_on / 1e3:7.1f} k req/s, {share:.1%} from cache): "
            f"on / off {t_on / t_off:.2f}; target <= 2: {'met' if t_on <= 2 * t_off else 'MISSED'}"
        )
    print(f"    ({load()})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5_000_000)
    ap.add_argument("--reference-requests", type=int, default=20_000)
    ap.add_argument("--memory", action="store_true", help="also part 3 (10^6 .. 10^8 requests)")
    ap.add_argument("--prefix", action="store_true", help="also part 5 (prefix caching)")
    ap.add_argument("--quick", action="store_true", help="short runs (a smoke test of the script)")
    args = ap.parse_args()
    n = 200_000 if args.quick else args.requests
    print(
        f"llmqueue serving engine benchmark: Python {platform.python_version()}, numpy {np.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs"
    )
    part_speed(n)
    part_reference(2_000 if args.quick else args.reference_requests)
    if args.prefix:
        part_prefix(2 if args.quick else 7)
    if args.memory:
        part_memory([10**5, 10**6] if args.quick else [10**6, 10**7, 10**8])


if __name__ == "__main__":
    main()
