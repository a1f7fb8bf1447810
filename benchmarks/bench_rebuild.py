"""Rebuild times of the whole pipeline (issue 6), measured in a fresh copy of the working tree.

1. cold: `snakemake --cores N` from nothing (no results, no Numba cache), after install;
   target <= 180 s on 2 cores;
2. no-op: the same command again with everything up to date; target <= 3 s (median of 3);
3. `make reproduce` with nothing to do (install stamp, stale-lock check, Snakemake, report
   check); target <= 5 s (median of 3, after one run that writes the report);
4. edit one figure's plot module (append a comment): which jobs rerun (only that figure, plus the notebook and the
   provenance page that show it) and how long it takes.

Usage: .venv/bin/python benchmarks/bench_rebuild.py [--cores 2] [--keep] [--json out.json]
The copy shares this checkout's .venv; nothing in this checkout is touched.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
from verify_checksums import copy_tree  # noqa: E402

PLOT_CANDIDATES = ["fig4a_mg1_EW", "fig3b_miub", "fig6a_fix_bsz", "fig2b_throughput"]
TARGETS = {"cold": 180.0, "noop": 3.0, "make_noop": 5.0}


def timed(cmd: list[str], cwd: Path, check: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    out = done.stdout + done.stderr
    if check and done.returncode != 0:
        raise SystemExit(f"bench: {' '.join(cmd)} failed in {cwd}:\n{out[-3000:]}")
    return seconds, out


def planned_rules(workdir: Path, cores: str) -> dict[str, int]:
    _, out = timed([".venv/bin/snakemake", "-n", "--cores", cores, "--quiet", "rules"], workdir)
    counts: dict[str, int] = {}
    table = out.split("Job stats:", 1)[-1]
    for m in re.finditer(r"^(\S+)\s+(\d+)$", table, re.M):
        if m.group(1) != "total":
            counts[m.group(1)] = int(m.group(2))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", default="2")
    parser.add_argument("--keep", action="store_true", help="keep the copy")
    parser.add_argument("--json", help="also write the numbers here")
    opts = parser.parse_args(argv)

    probe = subprocess.run(["make", "-q", "install"], cwd=ROOT)
    if probe.returncode != 0:
        raise SystemExit("bench: run `make install` first (the install stamp is out of date)")

    work = Path(tempfile.mkdtemp(prefix="llmqueue-bench-"))
    numbers: dict[str, object] = {"cores": opts.cores, "workdir": str(work)}
    try:
        copy_tree(ROOT, work)
        snakemake = [".venv/bin/snakemake", "--cores", opts.cores]
        env_cmd = snakemake + ["--rerun-incomplete", "--quiet", "progress"]

        print(f"cold full rebuild on {opts.cores} cores in {work} ...", flush=True)
        jobs = planned_rules(work, opts.cores)
        cold, _ = timed(env_cmd, work)
        numbers["cold_s"] = round(cold, 1)
        numbers["cold_jobs"] = sum(jobs.values())

        noop = [timed(snakemake, work)[0] for _ in range(3)]
        numbers["noop_s"] = round(statistics.median(noop), 2)

        make = ["make", "reproduce", f"CORES={opts.cores}"]
        timed(make, work)  # first run writes the report
        make_noop = [timed(make, work)[0] for _ in range(3)]
        numbers["make_noop_s"] = round(statistics.median(make_noop), 2)

        found = {p.stem: p for p in (work / "src/llmqueue").glob("**/fig*.py")}
        stem = next((s for s in PLOT_CANDIDATES if s in found), None)
        if stem:
            # Snakemake 9 ignores a new mtime when the content is unchanged: make a real edit.
            module = found[stem]
            module.write_text(module.read_text() + "\n# bench_rebuild.py: an edit\n")
            rerun = planned_rules(work, opts.cores)
            seconds, _ = timed(env_cmd, work)
            numbers["touched"] = str(module.relative_to(work))
            numbers["touch_rerun_rules"] = rerun
            numbers["touch_rebuild_s"] = round(seconds, 1)
            others = [r for r in rerun if r.startswith(("plot", "profiling_fig", "batching_fig"))]
            numbers["touch_only_that_figure"] = all(stem in r for r in others) and bool(others)
            numbers["touch_no_simulation"] = not any(
                k in r for r in rerun for k in ("sweep", "tradeoff", "claims", "fit", "kv_limit")
            )
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)

    print()
    print(f"{'measure':38s} {'value':>10s} {'target':>8s}")
    rows = [
        ("cold full rebuild (s)", numbers.get("cold_s"), TARGETS["cold"]),
        ("no-op snakemake (s, median of 3)", numbers.get("noop_s"), TARGETS["noop"]),
        ("no-op make reproduce (s, median of 3)", numbers.get("make_noop_s"), TARGETS["make_noop"]),
    ]
    for name, value, target in rows:
        ok = isinstance(value, float) and value <= target
        print(f"{name:38s} {value!s:>10s} {target:>8.0f}  {'ok' if ok else 'OVER'}")
    print(f"jobs in a cold build: {numbers.get('cold_jobs')}")
    if "touched" in numbers:
        print(f"edit {numbers['touched']}: reran {numbers['touch_rerun_rules']}")
        print(
            f"  in {numbers['touch_rebuild_s']} s; only that figure: "
            f"{numbers['touch_only_that_figure']}; no simulation: {numbers['touch_no_simulation']}"
        )
    if opts.json:
        Path(opts.json).write_text(json.dumps(numbers, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
