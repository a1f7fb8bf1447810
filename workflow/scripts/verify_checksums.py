"""`make verify`: rebuild the study in a second directory and compare every computed CSV.

1. Bring this checkout's results up to date (`snakemake --cores N --rerun-incomplete`), unless
   --no-build-here.
2. Copy the working tree as git sees it (tracked files plus untracked files git does not ignore;
   never results/, logs/, .snakemake/) into a fresh directory that shares this .venv, and rebuild
   the whole study there from nothing. The copy imports its own src/ (PYTHONPATH).
3. Compare the sha256 of every CSV under results/ (and figures/*.csv) in both trees: byte-identical is expected (the
   same config gives the same bytes: seeded sweeps, fixed float format). Files present on one
   side only count as differences too.

Not compared, because they hold measured timings or build metadata and never repeat exactly:
logs/profiling-smoke/ (the CPU smoke profile), logs/benchmarks/ (per-rule runtimes), figures
(PDF/PNG carry renderer metadata), notebooks and report HTML, results/report/provenance.json.

Exit status 0 when every CSV matches, 1 otherwise. A summary goes to stdout and to
logs/verify/checksums.tsv.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXCLUDED = {
    "logs/profiling-smoke/": "measured CPU timings of the smoke profile (never repeat exactly)",
    "logs/benchmarks/": "per-rule wall time and memory (Snakemake benchmark files)",
    "figures/*.pdf, figures/*.png": "renderer metadata; drawn from the compared CSVs",
    "results/notebooks/, results/report/": "HTML and provenance carry build time and paths",
}
NEVER_COPY = {".venv", "results", "logs", ".snakemake", ".git"}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def csv_checksums(root: Path) -> dict[str, str]:
    """Every computed CSV: results/**/*.csv and the tables under figures/ (Table I)."""
    found = sorted((root / "results").rglob("*.csv")) + sorted((root / "figures").glob("*.csv"))
    return {
        str(p.relative_to(root)): sha256(p)
        for p in found
        if p.is_file() and not p.name.startswith(".")
    }


def tree_files(root: Path) -> list[str]:
    """The working tree as git sees it; without git, everything but the build folders."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = [
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not set(p.relative_to(root).parts) & NEVER_COPY
        ]
    return [f for f in files if f.split("/", 1)[0] not in NEVER_COPY and (root / f).is_file()]


def copy_tree(src: Path, dest: Path) -> int:
    files = tree_files(src)
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / rel, target)
    (dest / ".venv").symlink_to((src / ".venv").resolve())
    return len(files)


def snakemake(root: Path, cores: str, extra_env: dict[str, str] | None = None) -> float:
    env = dict(os.environ, **(extra_env or {}))
    cmd = [str(root / ".venv" / "bin" / "snakemake"), "--cores", cores, "--rerun-incomplete"]
    cmd += ["--quiet", "rules"]  # progress lines only
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env)
    if done.returncode != 0:
        raise SystemExit(f"verify: snakemake failed in {root} (exit {done.returncode})")
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rebuild in a second directory, compare CSVs.")
    parser.add_argument("--cores", default="all")
    parser.add_argument("--root", default=".", help="the checkout to verify")
    parser.add_argument("--workdir", help="second build directory (default: a new temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the second build directory")
    parser.add_argument(
        "--no-build-here", action="store_true", help="compare with the results already here"
    )
    opts = parser.parse_args(argv)
    root = Path(opts.root).resolve()

    if not opts.no_build_here:
        print(f"verify: bringing {root}/results up to date ...", flush=True)
        snakemake(root, opts.cores)
    ours = csv_checksums(root)
    if not ours:
        print("verify: no CSV under results/ to compare: run `make reproduce` first")
        return 1

    second = Path(opts.workdir or tempfile.mkdtemp(prefix="llmqueue-verify-"))
    second.mkdir(parents=True, exist_ok=True)
    if any(second.iterdir()):
        raise SystemExit(f"verify: {second} is not empty")
    try:
        n = copy_tree(root, second)
        print(f"verify: rebuilding from nothing in {second} ({n} files) ...", flush=True)
        seconds = snakemake(second, opts.cores, {"PYTHONPATH": str(second / "src")})
        theirs = csv_checksums(second)
    finally:
        if not opts.keep:
            shutil.rmtree(second, ignore_errors=True)

    rows = []
    for rel in sorted(set(ours) | set(theirs)):
        a, b = ours.get(rel), theirs.get(rel)
        status = (
            "identical"
            if a == b
            else ("missing_second" if b is None else "missing_here" if a is None else "differs")
        )
        rows.append((rel, status, a or "-", b or "-"))
    bad = [r for r in rows if r[1] != "identical"]

    log = root / "logs" / "verify" / "checksums.tsv"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(
        "file\tstatus\tsha256_here\tsha256_second\n" + "".join("\t".join(r) + "\n" for r in rows)
    )
    print(f"verify: second build took {seconds:.1f} s")
    print(f"verify: {len(rows) - len(bad)} of {len(rows)} CSV files under results/ byte-identical")
    for rel, status, a, b in bad:
        print(f"  {status:15s} {rel}  here {a[:12]}  second {b[:12]}")
    print("verify: not compared (timings or build metadata):")
    for path, why in EXCLUDED.items():
        print(f"  {path}: {why}")
    print(f"verify: details in {log.relative_to(root)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
