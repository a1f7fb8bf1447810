"""The conda environments (envs/*.yaml) pin exactly what the pip requirements pin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]


def norm(name: str) -> str:
    """PEP 503 normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: list[str], where: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert m, f"{where}: {line!r} is not an exact pin (name==version)"
        name = norm(m.group(1))
        assert name not in pins, f"{where}: {m.group(1)} pinned twice"
        pins[name] = m.group(2)
    return pins


def requirements(name: str) -> dict[str, str]:
    path = ROOT / "envs" / name
    return parse_pins(path.read_text().splitlines(), str(path))


def conda_env(name: str) -> tuple[list[str], dict[str, str]]:
    path = ROOT / "envs" / name
    env = yaml.safe_load(path.read_text())
    conda, pip = [], []
    for dep in env["dependencies"]:
        if isinstance(dep, dict):
            pip += dep.get("pip", [])
        else:
            conda.append(str(dep))
    return conda, parse_pins(pip, str(path))


def test_analysis_env_pins_equal_pip_requirements() -> None:
    conda, pins = conda_env("analysis.yaml")
    req = requirements("requirements.txt")
    missing = sorted(set(req) - set(pins))
    extra = sorted(set(pins) - set(req))
    differ = sorted(
        f"{n}: conda {pins[n]} vs pip {req[n]}" for n in set(req) & set(pins) if pins[n] != req[n]
    )
    assert not missing, f"envs/analysis.yaml lacks pins of envs/requirements.txt: {missing}"
    assert not extra, f"envs/analysis.yaml pins what envs/requirements.txt does not: {extra}"
    assert not differ, f"versions disagree: {differ}"
    assert any(d.startswith("python=3.11") for d in conda), "analysis env must pin python=3.11"


def test_profiling_env_pins_agree_with_pip_requirements() -> None:
    conda, pins = conda_env("profiling.yaml")
    req = requirements("requirements.txt") | requirements("requirements-profiling.txt")
    for name in ("torch", "transformers", "numpy", "scipy", "pandas", "pyyaml"):
        assert name in pins, f"envs/profiling.yaml must pin {name}"
    unknown = sorted(set(pins) - set(req))
    differ = sorted(
        f"{n}: conda {pins[n]} vs pip {req[n]}" for n in set(req) & set(pins) if pins[n] != req[n]
    )
    assert not unknown, f"envs/profiling.yaml pins packages the pip requirements do not: {unknown}"
    assert not differ, f"versions disagree: {differ}"
    assert any(d.startswith("python=3.11") for d in conda)


def test_python_version_matches_pyproject() -> None:
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(r'requires-python\s*=\s*">=\s*3\.(\d+)"', text)
    assert m and int(m.group(1)) <= 11, "the conda envs pin python 3.11: pyproject must allow it"


def test_slurm_plugin_pinned() -> None:
    assert "snakemake-executor-plugin-slurm" in requirements("requirements.txt")


@pytest.mark.parametrize("env", ["analysis.yaml", "profiling.yaml"])
def test_rules_reference_existing_envs(env: str) -> None:
    """Every `conda:` line in the rule files names a file under envs/."""
    for smk in (ROOT / f for f in rule_files()):
        for m in re.finditer(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            target = (smk.parent / m.group(1)).resolve()
            assert target.is_file(), f"{smk.name}: conda env {m.group(1)} does not exist"
    assert (ROOT / "envs" / env).is_file()
