"""Why t2(b) is not linear in b on the CPU: one decode-step matrix product against the batch size.

Run: ``.venv/bin/python benchmarks/bench_cpu_decode_batch.py [--repeats N] [--batches 1,2,4,8,16]``.

A decode step multiplies a (b x hidden) activation by every weight matrix of the model. On a GPU
that is memory-bound up to large b, so t2(b) = k3 b + k4 (Eq. 18) holds. On the CPU, torch's
fp32 ``linear`` picks a different kernel by the row count b: this script times the LLaMA-2-7B
MLP projection (11008 x 4096) and the LM head (32000 x 4096) for each b and prints the time and
the weight bytes streamed per second, so the shape of the committed CPU t2(b)
(``data/profiling/<cpu-id>/timing.csv``) can be traced to the kernel, not to noise. No targets:
it explains a measurement. Prints the machine's load average (other jobs perturb timings).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time


def main() -> None:
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--batches", default="1,2,4,8,12,16,32")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    try:
        batches = [int(b) for b in args.batches.split(",")]
    except ValueError:
        ap.error(f"--batches {args.batches!r}: expected comma-separated integers")
    if min(batches) < 1:
        ap.error("--batches: every batch size must be >= 1")
    gen = torch.Generator().manual_seed(0)
    shapes = {"MLP up/gate 11008x4096": (11008, 4096), "LM head 32000x4096": (32000, 4096)}
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, fp32; "
        f"load average {os.getloadavg()[0]:.2f}; median of {args.repeats} runs"
    )
    print(f"{'matrix':24s} {'b':>3s} {'ms':>8s} {'GB/s of weights':>16s} {'ms / b=1':>9s}")
    for name, (rows, cols) in shapes.items():
        w = torch.empty(rows, cols).uniform_(-0.03, 0.03, generator=gen)
        base = None
        for b in batches:
            x = torch.empty(b, cols).uniform_(-1, 1, generator=gen)
            with torch.inference_mode():
                for _ in range(3):
                    torch.nn.functional.linear(x, w)
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    torch.nn.functional.linear(x, w)
                    times.append(time.perf_counter() - t0)
            t = statistics.median(times)
            base = base or t
            gbs = rows * cols * 4 / t / 1e9
            print(f"{name:24s} {b:3d} {1e3 * t:8.2f} {gbs:16.1f} {t / base:9.2f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
