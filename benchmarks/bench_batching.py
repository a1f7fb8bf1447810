"""Speed of the batching simulation (requests/s per policy, after compilation) and of the exact chain.

Run: ``.venv/bin/python benchmarks/bench_batching.py [--requests N]``. Targets (issue 4):
>= 5 million requests/s on one core for b <= 64; the whole Fig. 5-6 sweep <= 60 s on 2 cores (that
one is timed by Snakemake: logs/benchmarks/batching_*.tsv, summed here when present).
"""

from __future__ import annotations

import argparse
import csv
import glob
import time

from llmqueue.analytic import batch_chain as bc
from llmqueue.latency import BatchLatency
from llmqueue.policy import Policy
from llmqueue.sim.batching import simulate
from llmqueue.tokens import parse_law


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=5_000_000)
    args = ap.parse_args()
    law = parse_law("lognormal:mu=7,sigma=0.7")
    prof = BatchLatency(0.0, 0.0, 3.1e-4, 2.48e-3)  # paper_k8
    cases = [
        ("dynamic b_max=inf", Policy("dynamic"), 0.3, False),
        ("dynamic b_max=16", Policy("dynamic", bmax=16), 0.43, False),
        ("dynamic b_max=64", Policy("dynamic", bmax=64), 0.45, False),
        ("fixed K=8", Policy("fixed", K=8), 0.43, False),
        ("fixed K=8, fixed-T", Policy("fixed", K=8), 0.43, True),
        ("fixed K=64", Policy("fixed", K=64), 0.45, False),
        ("elastic b_max=inf", Policy("elastic"), 0.43, False),
        ("elastic b_max=64", Policy("elastic", bmax=64), 0.43, False),
    ]
    print(
        f"batching simulation, LogNormal(7, 0.7), profile paper_k8, {args.requests:,} requests per run, one core"
    )
    print(f"{'policy':22s} {'lambda':>7s} {'mean batch':>10s} {'req/s (M)':>10s} {'wait (s)':>16s}")
    for name, pol, lam, fixed_t in cases:
        simulate(
            pol, law, prof, rate_per_s=lam, requests=10_000, warmup=100, seed=1, fixed_time=fixed_t
        )  # compile / warm
        t0 = time.perf_counter()
        r = simulate(
            pol,
            law,
            prof,
            rate_per_s=lam,
            requests=args.requests,
            warmup=0,
            seed=2,
            fixed_time=fixed_t,
        )
        dt = time.perf_counter() - t0
        print(
            f"{name:22s} {lam:7.3g} {r.mean_batch:10.2f} {args.requests / dt / 1e6:10.2f} "
            f"{r.wait.mean:9.3f} +- {r.wait.ci95:.2g}"
        )
    print("\nexact chain (one point each, seconds):")
    for name, pol, lam, _ in cases[:4] + cases[6:7]:
        t0 = time.perf_counter()
        res = bc.solve(bc.model_for(pol, prof, law), lam, pol)
        print(
            f"  {name:22s} lambda={lam:<5g} {time.perf_counter() - t0:6.2f} s  (states {res.states}, wait {res.wait:.4g} s)"
        )
    rows = []
    for f in sorted(glob.glob("logs/benchmarks/batching_*.tsv")):
        with open(f) as fh:
            rec = list(csv.DictReader(fh, delimiter="\t"))
        if rec:
            rows.append((f.split("/")[-1][:-4], float(rec[-1]["s"])))
    if rows:
        print("\nSnakemake rule wall times of the last pipeline run (logs/benchmarks):")
        for n, s in rows:
            print(f"  {n:40s} {s:7.1f} s")
        sweep = sum(s for n, s in rows if "sweep" in n)
        print(
            f"  sum of the Fig. 5-6 sweep rules: {sweep:.1f} s (CPU-time-ish; wall on 2 cores is about half)"
        )


if __name__ == "__main__":
    main()
