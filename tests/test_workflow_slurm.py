"""The cluster profile plans the whole study: GPU partition and a GPU for the profiling rules,
the CPU partition for everything else. Dry runs only (no Slurm needed)."""

from __future__ import annotations

import re
import subprocess
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(ROOT / ".venv" / "bin" / "snakemake")
PROFILE = ROOT / "profiles" / "slurm" / "config.yaml"
# GPU rules that are never part of `rule all` (measuring on demand) and a target for each.
ON_DEMAND_GPU_TARGETS = {"profile_cuda": "results/profiling-runs/cuda-slurm-test"}


def dry_run(*args: str) -> str:
    done = subprocess.run(
        [SNAKEMAKE, "-n", "--forceall", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return out


def jobs(out: str) -> list[tuple[str, dict[str, str]]]:
    """(rule, resources) of every planned job in a dry-run printout."""
    found = []
    for block in re.split(r"\n(?=(?:local)?rule \S+:\n)", out):
        m = re.match(r"(?:local)?rule (\S+):\n", block)
        if not m:
            continue
        res = re.search(r"^\s+resources: (.*)$", block, re.M)
        pairs = dict(
            kv.split("=", 1) for kv in (res.group(1).split(", ") if res else []) if "=" in kv
        )
        found.append((m.group(1), pairs))
    return found


@cache
def slurm_plan() -> list[tuple[str, dict[str, str]]]:
    """The full study plus the on-demand GPU profiling targets, planned for Slurm."""
    extra = [t for r, t in ON_DEMAND_GPU_TARGETS.items() if r in workflow_rules()]
    return jobs(dry_run("--profile", "profiles/slurm", "all", *extra))


@cache
def local_rules() -> set[str]:
    return {rule for rule, _ in jobs(dry_run("--cores", "1"))}


def gpu_rules() -> set[str]:
    prof = yaml.safe_load(PROFILE.read_text())
    return {
        rule
        for rule, res in (prof.get("set-resources") or {}).items()
        if res.get("slurm_partition") == "gpu"
    }


@cache
def workflow_rules() -> set[str]:
    done = subprocess.run(
        [SNAKEMAKE, "--list-rules"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def profiling_rules_defined() -> bool:
    text = (ROOT / "workflow" / "rules" / "profiling.smk").read_text()
    return re.search(r"^rule \w+:", text, re.M) is not None


def test_no_default_profile() -> None:
    """Snakemake 9 loads profiles/default on every run; it would override the slurm resources."""
    assert not (ROOT / "profiles" / "default").exists()


def test_profile_is_for_the_slurm_plugin() -> None:
    prof = yaml.safe_load(PROFILE.read_text())
    assert prof["executor"] == "slurm"
    assert prof["rerun-incomplete"] is True
    assert prof["default-resources"]["slurm_partition"] == "cpu"
    for rule, res in (prof.get("set-resources") or {}).items():
        if res.get("slurm_partition") == "gpu":
            assert int(res.get("gpu", 0)) >= 1, f"{rule}: GPU partition without a gpu resource"


def test_slurm_profile_plans_the_full_study() -> None:
    plan = slurm_plan()
    planned = {rule for rule, _ in plan} - set(ON_DEMAND_GPU_TARGETS)
    assert "all" in planned
    assert planned == local_rules(), "the slurm profile must plan the same jobs as a local run"
    for rule, res in plan:
        if rule == "all":
            continue
        assert res.get("slurm_partition") in {"cpu", "gpu"}, (rule, res)


def test_cpu_rules_go_to_the_cpu_partition() -> None:
    gpu = gpu_rules()
    for rule, res in slurm_plan():
        if rule != "all" and rule not in gpu:
            assert res.get("slurm_partition") == "cpu", (rule, res)
            assert "gpu" not in res, (rule, res)


def test_gpu_rules_in_the_profile_exist() -> None:
    """A renamed profiling rule would silently fall back to the CPU partition."""
    if not profiling_rules_defined():
        pytest.skip("workflow/rules/profiling.smk defines no rules yet")
    missing = gpu_rules() - workflow_rules()
    assert not missing, f"profiles/slurm names rules the workflow lacks: {sorted(missing)}"


def test_profiling_jobs_show_the_gpu_partition() -> None:
    if not profiling_rules_defined():
        pytest.skip("workflow/rules/profiling.smk defines no rules yet")
    gpu = gpu_rules()
    assert gpu, "profiles/slurm sends no rule to the GPU partition"
    assert gpu <= set(ON_DEMAND_GPU_TARGETS) | local_rules(), "a GPU rule this test cannot plan"
    gpu_jobs = [(rule, res) for rule, res in slurm_plan() if rule in gpu]
    assert {rule for rule, _ in gpu_jobs} == gpu, f"not every GPU rule planned: {gpu_jobs}"
    for rule, res in gpu_jobs:
        assert res.get("slurm_partition") == "gpu", (rule, res)
        assert res.get("gpu") == "1", (rule, res)


def test_local_profile_plans() -> None:
    dry_run("--profile", "profiles/local")
