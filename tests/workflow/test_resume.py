"""A pipeline run killed with SIGKILL after an earlier complete build comes back whole with `make`.

Snakemake deletes a job's old outputs when it starts the job; killed then, the outputs stay
missing while the files made from them (an earlier build's) are still there, and a plain resume
would report "Nothing to be done" and leave them so. `make <target>` asks for them again
(workflow/scripts/resume_targets.py). The test copies the working tree (as git sees it, sharing
.venv), shrinks the plan search and the Fig. 6b sweeps so a build takes seconds, builds
``fig_plan_pareto`` and ``fig6b``, reruns their slice and sweep jobs in a Snakemake process of
its own session, kills the session with SIGKILL while one of those jobs runs, and checks that
`make` then brings back every result file byte-identical to the first build's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from test_workflow_reliability import incomplete_marks
from worktree import copy_worktree

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.llmqueue-installed"
TARGETS = ["fig_plan_pareto", "fig6b"]
RERUN = ["plan_slice", "batching_sweep"]  # the jobs the killed run redoes
pytestmark = pytest.mark.slow

sys.path.insert(0, str(ROOT / "workflow" / "scripts"))
from resume_targets import removed, run, unfinished  # noqa: E402


def copy_tree(dest: Path) -> None:
    copy_worktree(dest)
    # the engine's compiled kernels, so that the copy's jobs need not compile them again
    for cache in (ROOT / "src").rglob("__pycache__/*.nb[ic]"):
        target = dest / cache.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cache, target)
    cfg = yaml.safe_load((dest / "config/config.yaml").read_text())
    plan = cfg["plan"]
    plan["space"].update(replicas="1:2", router="round_robin", order="fcfs", max_batch="64")
    plan["run"].update(requests=2000, warmup=200, tolerance=0.2)
    plan["slices"] = 2
    bat = cfg["batching"]
    bat["fig6"].update(rates={"start": 0.3, "stop": 0.9, "step": 0.3}, bmax=[8, None])
    bat["simulation"].update(requests=20_000, warmup=2_000, batches=10)
    (dest / "config/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def make(workdir: Path) -> str:
    # -o: never rebuild the shared install stamp from a test (it would pip-install into .venv).
    done = subprocess.run(
        ["make", "-o", STAMP, *TARGETS, "CORES=2"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    return done.stdout + done.stderr


def results(workdir: Path) -> dict[str, bytes]:
    """Every result table of a build (a writer's temp file, a dotfile, left out)."""
    return {
        str(p.relative_to(workdir)): p.read_bytes()
        for p in sorted((workdir / "results").rglob("*"))
        if p.is_file() and p.suffix in (".csv", ".json") and not p.name.startswith(".")
    }


def test_summary_rows_missing_with_no_update_are_the_removed_files() -> None:
    table = "\n".join(
        [
            "Building DAG of jobs...",
            "output_file\tdate\trule\tlog-file(s)\tstatus\tplan",
            "c.txt\tFri Nov 27 15:13:40 2026\tc\t\tok\tno update",
            "b.txt\t-\tb\t\tmissing\tno update",
            "d.txt\t-\td\t\tmissing\tupdate pending",
        ]
    )
    assert removed(table) == ["b.txt"]
    with pytest.raises(ValueError):
        removed("Building DAG of jobs...\n")


def test_the_dag_is_listed_only_after_a_run_that_did_not_finish(tmp_path: Path) -> None:
    """A finished run leaves no mark: nothing is listed and Snakemake is not even asked (a
    no-op `make reproduce` stays fast); make's mark or Snakemake's incomplete marks ask it."""
    exe = tmp_path / "snakemake"
    exe.write_text(
        f"#!{sys.executable}\nimport sys; print('asked', file=sys.stderr); sys.exit(3)\n"
    )
    exe.chmod(0o755)
    script = ROOT / "workflow" / "scripts" / "resume_targets.py"

    def listed() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, str(script), "--snakemake", str(exe), "--dir", str(tmp_path), "all"]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    done = listed()
    assert done.returncode == 0 and done.stdout == "" and "asked" not in done.stderr
    (tmp_path / ".snakemake" / "incomplete").mkdir(parents=True)
    assert listed().returncode == 0
    (tmp_path / ".snakemake" / "incomplete" / "cmVzdWx0cy94LmNzdg==").touch()
    done = listed()
    assert done.returncode == 3 and "asked" in done.stderr
    shutil.rmtree(tmp_path / ".snakemake" / "incomplete")
    (tmp_path / ".snakemake" / "llmqueue-unfinished").touch()
    assert listed().returncode == 3
    # make's mark lists the targets a run has since checked: those skip the listing, others not
    (tmp_path / ".snakemake" / "llmqueue-unfinished").write_text("fig6b\nfig4a\n")
    assert not unfinished(tmp_path, ["fig6b"]) and not unfinished(tmp_path, ["fig4a", "fig6b"])
    assert unfinished(tmp_path, ["fig_plan_pareto"]) and unfinished(tmp_path, ["all"])
    assert unfinished(tmp_path, [])


def test_a_run_clears_the_mark_only_for_the_whole_workflow(tmp_path: Path) -> None:
    """make's mark belongs to the directory: a run that succeeds on some targets leaves it, naming
    them (another target is still listed after a kill); one on `all` removes it; one that fails
    leaves it naming none."""
    mark = tmp_path / ".snakemake" / "llmqueue-unfinished"
    assert run(["true"], tmp_path, ["fig_plan_pareto", "fig6b"]) == 0
    assert mark.read_text().split() == ["fig_plan_pareto", "fig6b"]
    assert run(["false"], tmp_path, ["fig6b"]) != 0
    assert mark.exists() and mark.read_text() == ""
    assert unfinished(tmp_path, ["fig6b"])
    assert run(["true"], tmp_path, ["all"]) == 0 and not mark.exists()
    assert not unfinished(tmp_path, ["fig6b"])


def test_sigkill_after_a_build_then_make_restores_every_output(tmp_path: Path) -> None:
    copy_tree(tmp_path)
    make(tmp_path)
    built = results(tmp_path)
    assert any(f.startswith("results/plan/slice_") for f in built), sorted(built)
    assert any(f.startswith("results/batching/fig6b_") for f in built), sorted(built)

    snakemake = str(tmp_path / ".venv/bin/snakemake")
    proc = subprocess.Popen(
        [snakemake, "--cores", "2", "--forcerun", *RERUN, "--", *TARGETS],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    try:
        while True:
            assert proc.poll() is None, "the rerun ended before a slice or sweep job was killed"
            assert time.monotonic() < deadline, "no slice or sweep job started in time"
            running = [f for f in incomplete_marks(tmp_path) if f in built]
            if running and not all((tmp_path / f).exists() for f in running):
                break
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # no clean-up at all: lock and marks stay
        proc.wait(timeout=60)
    gone = sorted(f for f in built if not (tmp_path / f).exists())
    assert gone, "the killed run removed no result file"
    # the bug this guards against: the files made from the removed ones are still there
    assert (tmp_path / "results/plan/plan.csv").exists()

    out = make(tmp_path)
    assert "stale Snakemake lock" in out
    assert results(tmp_path) == built, (
        f"not restored byte-identical (removed: {gone}); make said:\n{out[-3000:]}"
    )
    for fig in ("fig_plan_pareto", "fig6b_dy_bmax"):
        assert (tmp_path / "figures" / f"{fig}.pdf").is_file()

    # The kill can land after Snakemake removed a job's outputs and before it wrote the job's
    # incomplete mark: that file has no mark, only make's (written empty by a run that never
    # finished). `make fig_plan_pareto fig6b` runs one Snakemake command per target; the first
    # (the plan's) succeeds, and the Fig. 6b sweep file must come back all the same.
    sweep = sorted(f for f in built if f.startswith("results/batching/fig6b_"))[0]
    (tmp_path / sweep).unlink()
    (tmp_path / ".snakemake" / "llmqueue-unfinished").write_text("")
    out = make(tmp_path)
    assert results(tmp_path) == built, f"{sweep} not restored; make said:\n{out[-3000:]}"
