"""The shape of the code: the layers of docs/architecture.md over the whole package (imports point
down, no cycles, no study imports another, no private names across modules), workflow scripts
are glue, and every reference the code cites is in the repository."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from llmqueue.importgraph import ImportGraph

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


# ---- the layers of docs/architecture.md ---------------------------------------------------------
def layers() -> dict[str, int]:
    """{top-level module or package of llmqueue: its layer index (0 = foundation)}, read from the
    table between the ``<!-- layers -->`` markers of docs/architecture.md (the one place)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("<!-- layers -->", 1)[1].split("<!-- end layers -->", 1)[0]
    rows = [r for r in block.strip().splitlines()[2:] if r.startswith("|")]
    out: dict[str, int] = {}
    for i, row in enumerate(rows):
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`([\w.]+)`", cells[1]):
            assert name not in out, f"{name} is in two layers"
            out[name] = i
    return out


LAYERS = layers()
GRAPH = ImportGraph.read(ROOT / "src")


def top(module: str) -> str:
    """The entry of the layer table a module belongs to (its first name below llmqueue)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_module_has_a_layer() -> None:
    missing = sorted({top(m) for m in GRAPH.files if m != "llmqueue"} - set(LAYERS))
    assert not missing, f"add {missing} to the layer table of docs/architecture.md"
    assert len(set(LAYERS.values())) >= 8


@pytest.mark.parametrize("module", sorted(GRAPH.files), ids=str)
def test_imports_point_down_the_layers(module: str) -> None:
    if module == "llmqueue":
        return
    here = LAYERS[top(module)]
    up = sorted(
        {
            f"{i.module} (line {i.line})"
            for i in GRAPH.edges[module]
            if i.module != "llmqueue" and LAYERS[top(i.module)] > here
        }
    )
    assert not up, f"{module} (layer {here}) imports a layer above it: {up}"


def test_no_import_cycles() -> None:
    assert GRAPH.cycles() == []


def test_no_study_imports_another_study() -> None:
    bad = []
    for m, imports in GRAPH.edges.items():
        parts = m.split(".")
        if parts[1:2] != ["studies"] or len(parts) < 3:
            continue
        for i in imports:
            other = i.module.split(".")
            if other[1:2] == ["studies"] and len(other) > 2 and other[2] != parts[2]:
                bad.append(f"{m} -> {i.module}")
    assert not bad


def test_no_module_imports_another_modules_private_names() -> None:
    """``from a import _x`` only for a module _x of package a imported from inside a (a
    package-private helper such as plots._token_limit); never a private function or constant."""
    bad = []
    for m, imports in GRAPH.edges.items():
        package = m if GRAPH.files[m].name == "__init__.py" else m.rsplit(".", 1)[0]
        for i in imports:
            for name in i.names:
                if name.startswith("_") and not name.startswith("__"):
                    bad.append(f"{m} imports {name} from {i.module} (line {i.line})")
            leaf = i.module.rsplit(".", 1)[-1]
            if leaf.startswith("_") and not leaf.startswith("__"):
                if i.module.rsplit(".", 1)[0] != package:
                    bad.append(f"{m} imports the private module {i.module} (line {i.line})")
    assert not bad, bad


def test_the_import_graph_sees_function_level_and_package_imports(tmp_path: Path) -> None:
    """What the layering and the rules' code inputs rest on: an import inside a function counts,
    ``from pkg import module`` imports the module, and importing a module runs its packages."""
    script = tmp_path / "s.py"
    script.write_text(
        "def f():\n    from llmqueue.sim import queue as Q\n"
        "from llmqueue.traces import read_trace\n"
    )
    code = GRAPH.code_of(script, root=ROOT)
    for f in ("sim/queue.py", "sim/__init__.py", "sim/heap.py", "policy.py", "traces.py"):
        assert f"src/llmqueue/{f}" in code, f
    assert "src/llmqueue/sim/engine.py" not in code


def test_studies_call_each_simulator_in_one_place() -> None:
    """One small function per module calls a simulator, so a new simulator API changes one place."""
    for name in ("token_limit", "batching"):
        text = (SRC / "studies" / name / "tables.py").read_text()
        calls = re.findall(r"from llmqueue\.sim\.(\w+) import", text)
        assert len([m for m in calls if m not in ("result", "settings")]) == 1, name
    for name in ("token_limit.py", "batching.py"):
        sims = re.findall(r"llmqueue\.sim\.(\w+)", (SRC / "cli" / name).read_text())
        assert set(sims) <= {"settings"}, name


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


MAX_KERNEL_PARAMETERS = 15  # docs/architecture.md: a loop takes its arrays in named groups


def test_no_compiled_function_takes_more_than_a_few_parameters() -> None:
    compiled = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and any(
                re.search(r"\b(njit|kernel)\b", ast.unparse(d)) for d in node.decorator_list
            ):
                compiled.append((path.relative_to(SRC).as_posix(), node.name, len(node.args.args)))
    assert len(compiled) > 20, "no compiled function found: the pattern is wrong"
    wide = [f"{p}:{name} ({n})" for p, name, n in compiled if n > MAX_KERNEL_PARAMETERS]
    assert not wide, f"compiled functions over {MAX_KERNEL_PARAMETERS} parameters: {wide}"
