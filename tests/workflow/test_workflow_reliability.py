"""A run killed mid-sweep (SIGINT or SIGKILL) resumes with the Makefile and never takes a partial
output as done.

Each test copies the working tree (as git sees it) into a temp dir sharing .venv, shrinks the
token-limit sweep in the copy's config so a build takes seconds, starts `make fig4a` in its own
process group, kills the group while a sweep job runs, then runs `make fig4a` again (the
Makefile's flags: --rerun-incomplete, stale-lock clearing). The resumed CSVs must be
byte-identical to an uninterrupted build's.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from worktree import copy_worktree

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.llmqueue-installed"
TARGET = "fig4a"
SWEEP_OUT = "results/token_limit/table1_fit/patient.csv"  # the simulated (slowest) sweep
pytestmark = pytest.mark.slow


def copy_tree(dest: Path) -> None:
    copy_worktree(dest)
    cfg = yaml.safe_load((dest / "config/config.yaml").read_text())
    tl = cfg["token_limit"]
    tl["limits"] = {"start": 400, "stop": 3000, "step": 400}
    tl["simulation"].update(requests=200_000, warmup=10_000, batches=10)
    tl["tradeoff"]["gamma_sweep"] = {"start": 0.5, "stop": 2.0, "step": 0.5}
    (dest / "config/config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False))


def make(workdir: Path, **kw: object) -> subprocess.Popen[str]:
    # -o: never rebuild the shared install stamp from a test (it would pip-install into .venv).
    return subprocess.Popen(
        ["make", "-o", STAMP, TARGET, "CORES=1"],
        cwd=workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        # Ctrl-C's default action, even when the suite itself runs in the background (a shell
        # starts background jobs with SIGINT ignored, and children inherit that)
        preexec_fn=_default_sigint,
        **kw,  # type: ignore[arg-type]
    )


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(proc: subprocess.Popen[str], timeout: float = 900) -> str:
    out, _ = proc.communicate(timeout=timeout)
    return out


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


SWEEP_STEP = "llmqueue.studies.token_limit.steps:sweep"


def sweep_running(proc: subprocess.Popen[str]) -> bool:
    """Whether a descendant runs the sweep's step: the runner (workflow/scripts/step.py, which
    Snakemake copies to a script of its own under .snakemake/scripts) with the sweep's step."""
    for pid in descendants(proc.pid):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            cwd = Path(f"/proc/{pid}/cwd").resolve()
            scripts = [cwd / a for a in args if a.endswith("step.py")]
            if any(SWEEP_STEP in s.read_text() for s in scripts):
                return True
        except OSError:
            continue
    return False


def incomplete_marks(workdir: Path) -> list[str]:
    """Outputs Snakemake has marked incomplete (jobs running now): base64 file names."""
    folder = workdir / ".snakemake" / "incomplete"
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return []
    out = []
    for name in names:
        try:
            out.append(base64.b64decode(name).decode())
        except ValueError:
            continue
    return out


def wait_for_sweep(proc: subprocess.Popen[str], workdir: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the build ended before a sweep started:\n" + finish(proc)
        # the slow (simulated) sweep itself, not a faster one of another profile that may end
        # within the next second and hand its core to an unrelated job
        if sweep_running(proc) and SWEEP_OUT in incomplete_marks(workdir):
            time.sleep(1.0)  # well inside the sweep (Numba compile alone takes longer)
            assert proc.poll() is None
            assert not (workdir / SWEEP_OUT).exists(), "sweep finished too fast to interrupt"
            return
        time.sleep(0.2)
    raise AssertionError("no sweep job started in time")


def csvs(workdir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(workdir)): p.read_bytes()
        for p in sorted((workdir / "results").rglob("*.csv"))
    }


@pytest.fixture(scope="module")
def clean_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, bytes]]:
    work = tmp_path_factory.mktemp("clean")
    copy_tree(work)
    proc = make(work)
    out = finish(proc)
    assert proc.returncode == 0, out[-4000:]
    yield csvs(work)
    shutil.rmtree(work, ignore_errors=True)


def test_sigint_mid_sweep_then_resume(tmp_path: Path, clean_build: dict[str, bytes]) -> None:
    copy_tree(tmp_path)
    proc = make(tmp_path)
    wait_for_sweep(proc, tmp_path)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C sends to the terminal's process group
    out = finish(proc, timeout=120)
    assert proc.returncode != 0, out[-3000:]
    left = csvs(tmp_path)
    partial = [f for f, data in left.items() if clean_build.get(f) != data]
    assert not partial, f"the interrupted run left partial outputs: {partial}"

    proc = make(tmp_path)
    out = finish(proc)
    assert proc.returncode == 0, out[-4000:]
    assert csvs(tmp_path) == clean_build


def test_sigkill_mid_sweep_then_resume(tmp_path: Path, clean_build: dict[str, bytes]) -> None:
    copy_tree(tmp_path)
    proc = make(tmp_path)
    wait_for_sweep(proc, tmp_path)
    os.killpg(proc.pid, signal.SIGKILL)  # no clean-up at all: lock and incomplete marker stay
    finish(proc, timeout=60)
    assert any((tmp_path / ".snakemake" / "locks").iterdir()), "expected a stale lock"
    marks = incomplete_marks(tmp_path)
    running = [m for m in marks if m.startswith("results/token_limit/")]
    assert running, f"expected an incomplete mark on the killed sweep's output, got {marks}"

    # A writer that is not atomic would leave a partial file under the final name: plant one.
    partial = tmp_path / running[0]
    partial.parent.mkdir(parents=True, exist_ok=True)
    partial.write_text("limit_tokens,wq_s\n400,1.0\n")

    # Without --rerun-incomplete Snakemake refuses to take it as done (lock set aside first,
    # then put back, so the resume below still meets a stale lock).
    locks = tmp_path / ".snakemake" / "locks"
    saved = {p.name: p.read_bytes() for p in locks.iterdir()}
    snakemake = str(tmp_path / ".venv/bin/snakemake")
    subprocess.run([snakemake, "--unlock"], cwd=tmp_path, capture_output=True, timeout=300)
    plain = subprocess.run(
        [snakemake, "--cores", "1", running[0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert plain.returncode != 0, plain.stdout[-2000:]
    assert "incomplete" in (plain.stdout + plain.stderr).lower()
    assert partial.read_text().startswith("limit_tokens,wq_s\n400,1.0")
    for name, data in saved.items():
        (locks / name).write_bytes(data)

    # ... and `make` clears the stale lock and redoes the partial output.
    proc = make(tmp_path)
    out = finish(proc)
    assert proc.returncode == 0, out[-4000:]
    assert "stale Snakemake lock" in out
    assert csvs(tmp_path) == clean_build
