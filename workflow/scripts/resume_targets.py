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
that may have been cut off: `make` writes :data:`UNFINISHED` before it starts Snakemake (a run
killed by any signal, or failed, leaves it), and Snakemake itself leaves marks in
.snakemake/incomplete/ when it is killed outright (a run started by hand). With neither, nothing
is listed. The mark belongs to the directory while a listing covers only the targets asked for,
so a run that succeeds removes the mark only when its targets are the whole workflow (rule
``all``); otherwise it writes its targets into the mark, and a later run of those same targets
skips the listing, while any other target is still listed once. Without this,
``make fig_plan_pareto fig6b`` after a kill (one Snakemake run per target) would let the plan's
run clear the mark while a Fig. 6b sweep file is still gone: a kill between Snakemake's removing
a job's outputs and its writing the job's incomplete mark leaves no other trace.

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


WHOLE = "all"  # the Snakefile's rule of every result (`make reproduce`'s target)


def unfinished(workdir: Path, targets: list[str]) -> bool:
    """Whether a run here may have been cut off with files of `targets`' DAG removed: Snakemake's
    incomplete marks, or make's mark unless it lists every one of `targets` (module docstring)."""
    marks = workdir / ".snakemake" / "incomplete"
    if marks.is_dir() and any(marks.iterdir()):
        return True
    mark = workdir / UNFINISHED
    if not mark.exists():
        return False
    checked = set(mark.read_text().split())
    return not targets or not set(targets) <= checked


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
    if unfinished(workdir, opts.targets):
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
    return run(command + files, workdir, opts.targets)


def run(command: list[str], workdir: Path, targets: list[str]) -> int:
    """`command` in `workdir` under make's mark (module docstring): written empty before; when it
    succeeds, removed if `targets` hold the whole workflow, else holding `targets` (checked since
    the last run that may have been cut off). Its exit status (a Ctrl-C reaches it too: its own
    status, at least 130)."""
    mark = workdir / UNFINISHED
    mark.parent.mkdir(parents=True, exist_ok=True)
    mark.write_text("")
    print(" ".join(command), flush=True)
    proc = subprocess.Popen(command, cwd=workdir)
    try:
        code = proc.wait()
    except KeyboardInterrupt:
        code = proc.wait() or 130
    if code == 0:
        if WHOLE in targets or not targets:  # no target: Snakemake's first rule, `all`
            mark.unlink(missing_ok=True)
        else:
            mark.write_text("".join(f"{t}\n" for t in targets))
    return code


if __name__ == "__main__":
    sys.exit(main())
