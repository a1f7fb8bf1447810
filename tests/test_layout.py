"""The shape of the code (issue 12): analytic/ never imports sim/, workflow scripts are glue,
and every reference the code cites is in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "llmqueue"
SCRIPTS = sorted((ROOT / "workflow" / "scripts").glob("*.py"))
# The scripts that run a study's jobs; the others render the report or manage the build.
STUDY_SCRIPTS = [
    p for p in SCRIPTS if p.name.startswith(("batching_", "token_limit_", "profiling_", "fit_"))
]


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("path", sorted((SRC / "analytic").glob("*.py")), ids=lambda p: p.name)
def test_analytic_never_imports_sim_or_studies(path: Path) -> None:
    bad = {
        m
        for m in imported_modules(path)
        if m.startswith(("llmqueue.sim", "llmqueue.studies", "llmqueue.cli"))
    }
    assert not bad, f"{path.name} imports {sorted(bad)}"


def test_studies_call_each_simulator_in_one_place() -> None:
    """One small function per module calls a simulator, so a new simulator API changes one place."""
    for name in ("token_limit.py", "batching.py"):
        text = (SRC / "studies" / name).read_text()
        calls = re.findall(r"from llmqueue\.sim\.(\w+) import", text)
        assert len([m for m in calls if m != "result"]) == 1, name
    for name in ("token_limit.py", "batching.py"):
        assert "llmqueue.sim" not in (SRC / "cli" / name).read_text(), name


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_workflow_scripts_are_glue(path: Path) -> None:
    text = path.read_text()
    tree = ast.parse(text)
    assert "sys.path" not in text, "scripts import the library, never edit sys.path"
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            caught = ast.unparse(node.type) if node.type else "everything"
            assert caught not in ("Exception", "BaseException", "everything"), (
                f"line {node.lineno}: catches {caught}; let errors surface"
            )
    if path in STUDY_SCRIPTS:
        mods = imported_modules(path)
        assert not {m for m in mods if m.split(".")[0] in {"numpy", "scipy", "math"}}, (
            "numerical work belongs in the library"
        )
        assert any(m.startswith("llmqueue.") for m in mods)


def test_every_cited_reference_note_is_in_the_repository() -> None:
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    texts = [
        ROOT / f
        for f in files
        if f.endswith((".py", ".md", ".smk", ".yaml", ".rst", ".txt", ".cff"))
        and not f.startswith("docs/")
        and f != "tests/test_layout.py"
        and (ROOT / f).is_file()
    ]
    cited = set()
    for path in texts:
        for m in re.finditer(r"([\w./-]*)(equations|figures)\.md", path.read_text()):
            cited.add(m.group(0))
            assert m.group(1).endswith("docs/"), f"{path.relative_to(ROOT)}: cites {m.group(0)}"
    assert cited, "no citation found: the pattern is wrong"
    for name in ("equations.md", "figures.md", "README.md"):
        assert (ROOT / "docs" / name).is_file()
    for name in ("equations.md", "figures.md"):
        assert "Vendored copy" in (ROOT / "docs" / name).read_text().splitlines()[0]
