"""The cluster profile plans the whole study: GPU partition and a GPU for the profiling rules,
the CPU partition for everything else. Dry runs only (no Slurm needed). Then what `make
test-slurm` (profiles/slurm/local_slurm.py; the real run needs root and Debian) does without
root: its slurm.conf, its refusals, its bookkeeping."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
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
    text = (ROOT / "src/llmqueue/studies/profiling/profiling.smk").read_text()
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
        pytest.skip("the profiling study's profiling.smk defines no rules yet")
    missing = gpu_rules() - workflow_rules()
    assert not missing, f"profiles/slurm names rules the workflow lacks: {sorted(missing)}"


def test_profiling_jobs_show_the_gpu_partition() -> None:
    if not profiling_rules_defined():
        pytest.skip("the profiling study's profiling.smk defines no rules yet")
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


# ---- `make test-slurm` (profiles/slurm/local_slurm.py): what can be checked without root ----------
SCRIPT = ROOT / "profiles" / "slurm" / "local_slurm.py"
# The plugin (2.8.0) waits at most this long between two status checks.
PLUGIN_MAX_CHECK_INTERVAL_S = 180


@cache
def local_slurm() -> ModuleType:
    spec = importlib.util.spec_from_file_location("local_slurm", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def conf_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_profile_checks_job_states_with_squeue() -> None:
    """squeue works with and without accounting while finished jobs stay listed: the plugin uses
    it only while MinJobAge >= 3 x the first check interval, which must cover its longest wait."""
    prof = yaml.safe_load(PROFILE.read_text())
    assert prof["slurm-status-command"] == "squeue"
    first = int(prof["slurm-init-seconds-before-status-checks"])
    assert 3 * first >= PLUGIN_MAX_CHECK_INTERVAL_S
    assert local_slurm().MIN_JOB_AGE_S >= 3 * first, "the test cluster would fall back to sacct"


def test_slurm_conf_is_one_node_with_both_partitions(tmp_path: Path) -> None:
    lines = conf_lines(local_slurm().slurm_conf("node7", 4, 8000, tmp_path))
    keys = dict(line.split("=", 1) for line in lines if " " not in line)
    assert keys["SlurmctldHost"] == "node7(127.0.0.1)"
    assert keys["AuthType"] == "auth/munge"
    assert keys["AccountingStorageType"] == "accounting_storage/none"
    assert int(keys["MinJobAge"]) == local_slurm().MIN_JOB_AGE_S
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile"):
        assert Path(keys[key]).parent == tmp_path, key  # nothing under /etc or /var
    nodes = [line for line in lines if line.startswith("NodeName=")]
    assert nodes == ["NodeName=node7 NodeAddr=127.0.0.1 CPUs=4 RealMemory=8000 State=UNKNOWN"]
    parts = {
        f["PartitionName"]: f
        for f in (dict(kv.split("=", 1) for kv in line.split()) for line in lines)
        if "PartitionName" in f
    }
    assert set(parts) == {"cpu", "gpu"}
    assert all(p["Nodes"] == "node7" and p["State"] == "UP" for p in parts.values())
    assert parts["cpu"].get("Default") == "YES" and "Default" not in parts["gpu"]
    prof = yaml.safe_load(PROFILE.read_text())
    assert set(parts) >= {
        res["slurm_partition"] for res in prof["set-resources"].values() if "slurm_partition" in res
    } | {prof["default-resources"]["slurm_partition"]}


@pytest.mark.parametrize("cpus, mem", [(0, 1000), (2, 0)])
def test_slurm_conf_refuses_an_empty_node(cpus: int, mem: int, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        local_slurm().slurm_conf("n", cpus, mem, tmp_path)


def test_node_memory_is_below_memtotal() -> None:
    assert local_slurm().node_memory_mb("MemTotal:       24683880 kB\nMemFree: 1 kB\n") == 21694
    with pytest.raises(local_slurm().Failed, match="MemTotal"):
        local_slurm().node_memory_mb("MemFree: 1 kB\n")


@pytest.mark.parametrize(
    "os_release, debian",
    [
        ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n', True),
        ("ID=ubuntu\nID_LIKE=debian\n", True),
        ('ID="rocky"\nID_LIKE="rhel centos fedora"\n', False),
        ("", False),
    ],
)
def test_is_debian(os_release: str, debian: bool) -> None:
    assert local_slurm().is_debian(os_release) is debian


@pytest.fixture
def able_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> ModuleType:
    """The script's view of a machine that can run the test (root, Debian, apt-get, no Slurm)."""
    mod = local_slurm()
    (tmp_path / "os-release").write_text("ID=debian\n")
    monkeypatch.setattr(mod.os, "geteuid", lambda: 0)
    monkeypatch.setattr(mod, "OS_RELEASE", tmp_path / "os-release")
    monkeypatch.setattr(mod.shutil, "which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(mod, "running_daemons", lambda: [])
    monkeypatch.setattr(mod, "SYSTEM_CONF", tmp_path / "no-slurm.conf")

    def no_run(*args: object) -> int:
        raise AssertionError("the run started although the machine was refused")

    monkeypatch.setattr(mod, "run_test", no_run)
    return mod


def test_an_able_machine_passes_the_preflight(able_machine: ModuleType) -> None:
    assert able_machine.main(["--preflight"]) == 0


@pytest.mark.parametrize("args", [["--preflight"], []])
@pytest.mark.parametrize(
    "breakage, message",
    [
        ("not-root", "needs root"),
        ("not-debian", "needs Debian"),
        ("no-apt", "not found: apt-get, dpkg-query"),
        ("slurm-running", r"already runs here \(slurmctld \(4242\)\)"),
        ("slurm-configured", "has a Slurm of its own"),
    ],
)
def test_refusals_are_one_line_and_exit_2(
    able_machine: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    breakage: str,
    message: str,
    args: list[str],
) -> None:
    mod = able_machine
    if breakage == "not-root":
        monkeypatch.setattr(mod.os, "geteuid", lambda: 1000)
    elif breakage == "not-debian":
        mod.OS_RELEASE.write_text("ID=fedora\n")
    elif breakage == "no-apt":
        monkeypatch.setattr(mod.shutil, "which", lambda tool: None)
    elif breakage == "slurm-running":
        monkeypatch.setattr(mod, "running_daemons", lambda: ["slurmctld (4242)"])
    else:
        mod.SYSTEM_CONF.write_text("ClusterName=theirs\n")
    assert mod.main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert len(err.splitlines()) == 1 and err.startswith("make test-slurm: refused: "), err
    assert re.search(message, err), err


def test_the_package_state_left_behind_is_computed_exactly() -> None:
    before = {"ucf:all": "installed", "munge:amd64": "config-files", "bash:amd64": "installed"}
    after = {**before, "munge:amd64": "installed", "slurmd:amd64": "installed"}
    assert local_slurm().newly_installed(before, after) == ["munge:amd64", "slurmd:amd64"]
    assert local_slurm().newly_installed(before, before) == []


def test_submissions_and_plans_are_read_from_snakemake_output() -> None:
    mod = local_slurm()
    out = (
        "Job 3 has been submitted with SLURM jobid 17 (log: /x/17.log).\n"
        "Job 0 has been submitted with SLURM jobid 18 (log: /x/18.log).\n"
    )
    assert mod.submitted_jobs(out) == {"17": "3", "18": "0"}
    run = "rule fit_table1:\n    output: a\nlocalrule fig3a:\n    input: b\nrule plot:\n"
    assert mod.job_headers(run) == [
        ("rule", "fit_table1"),
        ("localrule", "fig3a"),
        ("rule", "plot"),
    ]


def test_builds_are_compared_byte_for_byte(tmp_path: Path) -> None:
    mod = local_slurm()
    a, b = tmp_path / "a", tmp_path / "b"
    for root, extra in ((a, "only_local"), (b, "only_slurm")):
        (root / "results" / "x").mkdir(parents=True)
        (root / "figures").mkdir()
        (root / "results" / "x" / "same.csv").write_text("1,2\n")
        (root / "figures" / "table.csv").write_text(f"{root.name}\n")
        (root / "figures" / "committed.csv").write_text(f"{root.name}\n")
        os.utime(root / "figures" / "committed.csv", (1.0, 1.0))  # a copied file: not compared
        (root / "figures" / "fig.pdf").write_text(f"{root.name}\n")  # not compared
        (root / "results" / f"{extra}.json").write_text("{}")
    assert mod.compare_builds(a, b, since=10.0) == {
        "identical": ["results/x/same.csv"],
        "different": ["figures/table.csv"],
        "only_local": ["results/only_local.json"],
        "only_slurm": ["results/only_slurm.json"],
    }


def test_make_test_slurm_refuses_first_and_is_not_part_of_make_test() -> None:
    text = (ROOT / "Makefile").read_text()
    m = re.search(r"^test-slurm:(.*)\n((?:\t.*\n)+)", text, re.M)
    assert m, "Makefile has no test-slurm target"
    assert m.group(1).strip() == "", "test-slurm must refuse before any prerequisite runs"
    recipe = m.group(2).splitlines()
    assert "local_slurm.py --preflight" in recipe[0]
    assert "test-slurm" not in re.search(r"^test:(.*)$", text, re.M).group(1)
    assert re.search(r"^\.PHONY:.*\btest-slurm\b", text, re.M)


def test_a_slurm_log_is_read_for_its_rule_finishing(tmp_path: Path) -> None:
    mod = local_slurm()
    log = tmp_path / "rule_token_limit_sweep" / "back_solved_patient" / "4.log"
    assert mod.slurm_log_rule(log, tmp_path) == "token_limit_sweep"
    text = "rule token_limit_sweep:\n...\nFinished jobid: 0 (Rule: token_limit_sweep)\n"
    assert mod.log_shows_finished(text, "token_limit_sweep")
    assert not mod.log_shows_finished(text, "token_limit")
    assert not mod.log_shows_finished(
        "rule token_limit_sweep:\nError in rule\n", "token_limit_sweep"
    )
