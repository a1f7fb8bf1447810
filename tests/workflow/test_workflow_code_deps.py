"""Editing a library module reruns exactly the jobs that import it.

The rules get their code inputs from the import graph (workflow/rules/common.smk,
llmqueue.importgraph). In a copy of the tree whose every output exists and is newer than every
input, touching three modules that studies import only indirectly (``sim/multibin.py``,
``sim/jit.py``, ``analytic/multibin.py``) must plan, by a dry run, the jobs whose script imports
one of them (directly or not), and otherwise only the jobs downstream of them; nothing else (e.g.
the profiling fits, which import none of them).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from worktree import copy_worktree

from llmqueue.importgraph import ImportGraph
from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]
# a rule's script: ../scripts/<x>.py from workflow/rules, or the path up to workflow/scripts from
# a study's package
SCRIPT = r'script:\s*"(?:\.\./scripts|(?:\.\./)+workflow/scripts)/(\w+\.py)"'
TOUCHED = (
    "src/llmqueue/sim/multibin.py",
    "src/llmqueue/sim/jit.py",
    "src/llmqueue/analytic/multibin.py",
)
pytestmark = pytest.mark.slow


def snakemake(workdir: Path, *args: str) -> str:
    done = subprocess.run(
        [str(ROOT / ".venv/bin/snakemake"), "--cores", "1", "--rerun-triggers", "mtime", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def planned(text: str) -> list[tuple[str, str]]:
    """(rule, reason) of every job a dry run plans."""
    jobs = []
    for block in re.split(r"\n(?=\[[^\]]+\]\n(?:local)?rule )", text):
        m = re.search(r"^(?:local)?rule (\w+):", block, re.M)
        r = re.search(r"^\s+reason: (.*)$", block, re.M)
        if m and r:
            jobs.append((m.group(1), r.group(1)))
    return jobs


def script_of(graph: ImportGraph, body: str) -> set[str] | None:
    """The library files a rule body's script runs: a study step (``step.py``) its function's
    code (``ImportGraph.function_code``) and the runner's, any other script its imports."""
    s = re.search(SCRIPT, body)
    if not s:
        return None
    code = set(graph.code_of(ROOT / "workflow/scripts" / s.group(1), root=ROOT))
    if s.group(1) == "step.py":
        target = re.search(r'step="([\w.]+:\w+)"', body)
        assert target, body[:200]
        code |= set(graph.function_code(target.group(1), root=ROOT))
    return code


def rule_code(graph: ImportGraph) -> dict[str, set[str]]:
    """{rule: library files it runs}, from the rule files' script names and study steps (plot
    rules: their plot module and the plotting script), computed here from the graph, not read
    from the DAG."""
    out: dict[str, set[str]] = {}
    for smk in (ROOT / f for f in rule_files()):
        text = smk.read_text()
        for m in re.finditer(r"(?ms)^\s*rule (\w+):(.*?)(?=^\s*rule |\Z)", text):
            code = script_of(graph, m.group(2))
            if code is not None:
                out[m.group(1)] = code
        # rules made in a loop (rule: with name: f"<prefix>{...}"): one entry per name prefix
        loop = r'(?ms)^\s*rule:\s*\n\s*""".*?"""\s*name:\s*f"(\w+)\{.*?(?=^\s*rule|\Z)'
        for m in re.finditer(loop, text):
            code = script_of(graph, m.group(0))
            if code is not None:
                out[f"prefix:{m.group(1)}"] = code
    plot = set(graph.code_of(ROOT / "workflow/scripts/plot_figure.py", root=ROOT))
    for p in [
        *(ROOT / "src/llmqueue/studies").glob("*/fig*.py"),
        *(ROOT / "src/llmqueue/plan").glob("fig*.py"),
    ]:
        dotted = ".".join(p.relative_to(ROOT / "src").with_suffix("").parts)
        out[f"plot:{p.stem}"] = plot | set(graph.module_code(dotted, root=ROOT))
    return out


def code_of_rule(rule: str, code: dict[str, set[str]]) -> set[str]:
    if rule.startswith("plot_"):
        stem = rule[len("plot_") :]
        module = max(
            (k[5:] for k in code if k.startswith("plot:") and stem.startswith(k[5:])), key=len
        )
        return code[f"plot:{module}"]
    if rule in code:
        return code[rule]
    prefixes = [k[7:] for k in code if k.startswith("prefix:") and rule.startswith(k[7:])]
    return code[f"prefix:{max(prefixes, key=len)}"] if prefixes else set()


def test_touching_three_modules_reruns_exactly_their_importers(tmp_path: Path) -> None:
    work = copy_worktree(tmp_path / "tree")
    summary = snakemake(work, "--summary").splitlines()
    outputs = [line.split("\t")[0] for line in summary if "\t" in line][1:]
    assert len(outputs) > 100
    t0 = 1_600_000_000
    for p in work.rglob("*"):
        if ".venv" not in p.parts and p.is_file():
            os.utime(p, (t0, t0))
    for rel in outputs:  # every output present and newer than every input
        f = work / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.touch()
        os.utime(f, (t0 + 1000, t0 + 1000))
    assert "Nothing to be done" in snakemake(work, "-n")

    for rel in TOUCHED:
        os.utime(work / rel, (t0 + 2000, t0 + 2000))
    jobs = planned(snakemake(work, "-n"))
    rules = {line.split("\t")[2] for line in summary[1:] if "\t" in line}
    code = rule_code(ImportGraph.read(ROOT / "src"))
    importers = {r for r in rules if code_of_rule(r, code) & set(TOUCHED)}
    assert {
        "serving_sweep",
        "batching_sweep",
        "token_limit_sweep",
        "multibin_synthetic",
    } <= importers
    assert not {r for r in importers if r.startswith("profiling_")}

    plan = {rule for rule, _ in jobs}
    assert importers <= plan, importers - plan
    direct = {rule for rule, why in jobs if why.startswith("Updated input files")}
    # a job both importing a touched module and downstream of a rerun job is listed for the
    # first reason Snakemake finds; the sweeps read no other job's output, so theirs is the code
    assert {"batching_sweep", "token_limit_sweep", "multibin_synthetic"} <= direct <= importers
    for rule, why in jobs:
        if why.startswith("Updated input files"):
            named = set(why.split(": ", 1)[1].split(", "))
            assert named == code_of_rule(rule, code) & set(TOUCHED), (rule, why)
        elif rule not in importers:
            assert why.startswith("Input files updated by another job"), (rule, why)
    assert not plan & {r for r in rules if r.startswith("profiling_")}


def test_every_rule_takes_its_code_inputs_from_the_import_graph() -> None:
    """No hand-kept code lists: a rule that runs a study step names that step function's code
    (``step_code`` of the ``step`` it names), one that runs another script that script's import
    closure (``script_code``), one that runs ``python -m llmqueue`` the command module's
    closure."""
    found = 0
    for smk in (ROOT / f for f in rule_files()):
        text = smk.read_text()
        assert "lib(" not in text, smk.name
        for m in re.finditer(r"(?ms)^\s*rule (\w+):(.*?)(?=^\s*rule |\Z)", text):
            body = m.group(2)
            s = re.search(SCRIPT, body)
            if s and s.group(1) == "step.py":  # a study step: its function's own code
                found += 1
                target = re.search(r'step="([\w.]+:\w+)"', body)
                assert target, (smk.name, m.group(1))
                assert f'step_code("{target.group(1)}")' in body, (smk.name, m.group(1))
            elif s:
                found += 1
                assert f'script_code("{s.group(1)}")' in body, (smk.name, m.group(1))
            elif "python -m llmqueue" in body:
                assert 'module_code("llmqueue.cli.' in body, (smk.name, m.group(1))
    assert found > 30
