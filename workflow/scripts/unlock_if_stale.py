"""Clear a stale Snakemake lock, left by a killed run, only when no Snakemake runs here.

`make` calls this before every run (`make unlock`). A lock is stale when .snakemake/locks/ is not
empty and no live Snakemake process has this directory as its working directory; then it runs
`snakemake --unlock`. A live run's lock is never touched. (A `pgrep -f snakemake` test would
match the shell `make` starts for the recipe itself, whose command line names snakemake, and so
would never clear anything.)

Usage: python workflow/scripts/unlock_if_stale.py [--snakemake .venv/bin/snakemake] [--dir .]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def is_snakemake(argv: list[str]) -> bool:
    """True for `snakemake ...`, `python .../snakemake ...` and `python -m snakemake ...`."""
    if not argv:
        return False
    names = [os.path.basename(a) for a in argv[:2]]
    if "snakemake" in names:
        return True
    return len(argv) >= 3 and argv[1] == "-m" and argv[2] == "snakemake"


def live_snakemake_pids(workdir: Path) -> list[int]:
    """Pids of Snakemake processes whose working directory is `workdir` (Linux /proc)."""
    me = {os.getpid(), os.getppid()}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in me:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = Path(os.readlink(entry / "cwd")).resolve()
        except OSError:
            continue
        if is_snakemake([a for a in argv if a]) and cwd == workdir:
            found.append(int(entry.name))
    return sorted(found)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snakemake", default=".venv/bin/snakemake")
    parser.add_argument("--dir", default=".")
    opts = parser.parse_args(args)
    workdir = Path(opts.dir).resolve()
    locks = workdir / ".snakemake" / "locks"
    if not locks.is_dir() or not any(locks.iterdir()):
        return 0
    pids = live_snakemake_pids(workdir)
    if pids:
        print(f"Snakemake is running here (pid {', '.join(map(str, pids))}): lock kept")
        return 0
    print("clearing a stale Snakemake lock (left by a killed run)")
    done = subprocess.run(
        [opts.snakemake, "--unlock", "--quiet"],
        cwd=workdir,
        stdout=subprocess.DEVNULL,
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
