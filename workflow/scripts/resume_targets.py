"""The result files a killed run removed that Snakemake would not make again: print them, one per
line, so that `make` asks for them beside its own target and a resumed run restores everything.

Snakemake deletes a job's old outputs when the job starts; a run killed then leaves them missing.
The next run rebuilds a missing file only when something that needs it must run: when the files
made from it are still there and up to date (an earlier complete run's), it reports "Nothing to
be done" and the file stays missing (as a temp() file would). `snakemake --summary TARGETS` lists
every file of the targets' DAG with its status and plan; the ones ``missing`` with plan ``no
update`` are those. Asked for by name they are rebuilt (byte-identical: the runs are seeded), and
the files made from them, now older than their input, are rebuilt after them.

Listing the DAG costs about as much as a run with nothing to do, so it is done only after a run
that may have been cut off: `make` touches :data:`UNFINISHED` before it starts Snakemake and
removes it when Snakemake succeeds (a run killed by any signal, or failed, leaves it), and
Snakemake itself leaves marks in .snakemake/incomplete/ when it is killed outright (a run started
by hand). With neither, nothing is listed.

Usage: python workflow/scripts/resume_targets.py [--snakemake .venv/bin/snakemake] [--dir .]
           TARGET ... [-- COMMAND ...]
Without a COMMAND it prints the files; with one (the Makefile's: `-- .venv/bin/snakemake --cores
all ... TARGET`) it sets the mark, runs COMMAND with the files added to its targets (the line
printed first), and clears the mark when COMMAND succeeds. Exit status: Snakemake's when it
cannot list the DAG (its message on stderr), else COMMAND's (0 without one).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

COLUMNS = ("output_file", "date", "rule", "log-file(s)", "status", "plan")
UNFINISHED = ".snakemake/llmqueue-unfinished"  # make's mark of a run under way (Makefile)


def unfinished(workdir: Path) -> bool:
    """Whether the last run here may have been cut off (module docstring)."""
    if (workdir / UNFINISHED).exists():
        return True
    marks = workdir / ".snakemake" / "incomplete"
    return marks.is_dir() and any(marks.iterdir())


def removed(summary: str) -> list[str]:
    """The files of a `snakemake --summary` table that are missing with no update planned."""
    lines = summary.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.split("\t")[:1] == ["output_file"])
    except StopIteration:
        raise ValueError("no summary table in Snakemake's output") from None
    head = lines[start].split("\t")
    status, plan = head.index("status"), head.index("plan")
    out = []
    for line in lines[start + 1 :]:
        cells = line.split("\t")
        if len(cells) != len(head):
            continue  # a message Snakemake printed after the table
        if cells[status] == "missing" and cells[plan] == "no update":
            out.append(cells[0])
    return out


def main(args: list[str] | None = None) -> int:
    argv = sys.argv[1:] if args is None else list(args)
    command: list[str] = []
    if "--" in argv:
        k = argv.index("--")
        argv, command = argv[:k], argv[k + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snakemake", default=".venv/bin/snakemake")
    parser.add_argument("--dir", default=".")
    parser.add_argument("targets", nargs="*")
    opts = parser.parse_args(argv)
    workdir = Path(opts.dir)
    files: list[str] = []
    if unfinished(workdir):
        done = subprocess.run(
            [opts.snakemake, "--summary", "--rerun-incomplete", *opts.targets],
            cwd=workdir,
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            sys.stderr.write(done.stderr or done.stdout)
            return done.returncode
        try:
            files = removed(done.stdout)
        except ValueError as err:
            sys.stderr.write(f"resume_targets: {err}\n{done.stdout[-2000:]}")
            return 1
        if files:
            print(f"rebuilding {len(files)} result file(s) a killed run removed", file=sys.stderr)
    if not command:
        for f in files:
            print(f)
        return 0
    return run(command + files, workdir)


def run(command: list[str], workdir: Path) -> int:
    """`command` in `workdir` under make's mark (module docstring): set before, cleared when it
    succeeds; its exit status (a Ctrl-C reaches it too: its own status, at least 130)."""
    mark = workdir / UNFINISHED
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.touch()
    print(" ".join(command), flush=True)
    proc = subprocess.Popen(command, cwd=workdir)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        code = proc.wait() or 130
    if code == 0:
        mark.unlink(missing_ok=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
