"""Static checks of the workflow and the library: `snakemake --lint`, `snakefmt --check`,
`ruff check` and `mypy` (issue 6). Each failure message lists what to fix."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".venv" / "bin"
SNAKEFILES = [
    "Snakefile",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "workflow" / "rules").glob("*.smk")),
]
# Files of the reviewer-experience layer (issue 6), held to ruff as well.
OWN_PYTHON = [
    "workflow/scripts/notebook_run.py",
    "workflow/scripts/report_claims.py",
    "workflow/scripts/report_provenance.py",
    "workflow/scripts/verify_checksums.py",
    "workflow/scripts/unlock_if_stale.py",
    "notebooks/make_notebooks.py",
    "benchmarks/bench_rebuild.py",
    "tests/test_envs.py",
    "tests/test_lint.py",
    "tests/test_workflow_config.py",
    "tests/test_workflow_slurm.py",
    "tests/test_workflow_reliability.py",
    "tests/test_workflow_report.py",
]


def run(*cmd: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_snakemake_lint_is_clean() -> None:
    done = run(str(BIN / "snakemake"), "--lint")
    out = done.stdout + done.stderr
    findings = []
    for block in re.split(r"\n(?=Lints for )", out):
        head = re.match(r"Lints for (.+?):\n", block)
        if head:
            titles = re.findall(r"^\s+\* (.+?):?$", block, re.M)
            findings.append(f"{head.group(1)}: {'; '.join(titles)}")
    assert done.returncode == 0 and not findings, "snakemake --lint:\n" + "\n".join(
        findings or [out[-3000:]]
    )


def test_snakefmt_check() -> None:
    done = run(str(BIN / "snakefmt"), "--check", *SNAKEFILES)
    out = done.stdout + done.stderr
    assert done.returncode == 0, (
        f"snakefmt --check failed (run `snakefmt {' '.join(SNAKEFILES)}`):\n{out[-3000:]}"
    )


def test_ruff_src() -> None:
    done = run(str(BIN / "ruff"), "check", "src/")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]


def test_ruff_format_src() -> None:
    done = run(str(BIN / "ruff"), "format", "--check", "src/")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]


def test_mypy_src() -> None:
    done = run(str(BIN / "mypy"), "src/")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-1000:]


@pytest.mark.parametrize("path", OWN_PYTHON)
def test_ruff_reviewer_layer(path: str) -> None:
    if not (ROOT / path).exists():
        pytest.fail(f"{path} is missing")
    done = run(str(BIN / "ruff"), "check", path)
    assert done.returncode == 0, done.stdout[-3000:]
    done = run(str(BIN / "ruff"), "format", "--check", path)
    assert done.returncode == 0, done.stdout[-3000:]
