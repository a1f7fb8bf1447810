"""The shape of the code: the layers of docs/architecture.md over the whole package (imports point
down, no cycles, no study imports another, no private names across modules: import-linter
contracts in .importlinter where it can say the rule, hand-written checks where it cannot),
workflow scripts are glue, and every reference the code cites is in the repository."""

from __future__ import annotations

import ast
import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import importlinter.api
import importlinter.configuration
import pytest
from importlinter.application import use_cases

from llmqueue.importgraph import ImportGraph

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "llmqueue"
SCRIPTS = sorted((ROOT / "workflow" / "scripts").glob("*.py"))
# The steps a rule runs (docs/architecture.md, "The pipeline"): every top-level function of a
# study's steps module and of llmqueue/steps.py, as (file, function name)
STEP_FILES = sorted([*SRC.glob("studies/*/steps.py"), SRC / "steps.py"])
STEPS = [
    (f, n.name)
    for f in STEP_FILES
    for n in ast.parse(f.read_text()).body
    if isinstance(n, ast.FunctionDef)
]
# The steps of the studies whose jobs do no numerical work of their own (the paper's profiling,
# token-limit and batching studies); the others render tables or read measurements.
NUMERIC_FREE = ("batching", "token_limit", "profiling")


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    return imported_modules_of(ast.parse(path.read_text()))


def imported_modules_of(tree: ast.AST) -> set[str]:
    """Every module a syntax tree (a file, a function) imports, at any depth."""
    found = set()
    for node in ast.walk(tree):
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

# The layers, the independence of the studies and the acyclic packages are import-linter
# contracts (.importlinter) checked on grimp's import graph; the table above declares the layers
# and the contracts file must say the same. What import-linter cannot say stays below, on the
# project's own graph (llmqueue.importgraph, which the workflow's code inputs also read).
CONTRACTS = ROOT / ".importlinter"
importlinter.configuration.configure()


def lint(*contracts: str) -> bool:
    """Whether import-linter keeps the `contracts` (their ids in .importlinter; all when none is
    named) on the llmqueue package Python finds; its report goes to stdout, which pytest shows
    when a test fails. A configuration error raises instead of counting as a broken contract."""
    return use_cases.lint_imports(
        config_filename=str(CONTRACTS),
        limit_to_contracts=contracts,
        cache_dir=None,
        no_logo=True,
        is_debug_mode=True,
    )


def test_the_import_contracts_declare_the_layer_table() -> None:
    """.importlinter's layers are the table's rows, highest first, each a group of modules that
    may import each other (``:``); the contracts cover the whole package with no exception."""
    assert len(set(LAYERS.values())) >= 8
    by_layer: dict[int, list[str]] = {}
    for name, i in LAYERS.items():
        by_layer.setdefault(i, []).append(name)
    want = [by_layer[i] for i in sorted(by_layer, reverse=True)]
    config = importlinter.api.read_configuration(str(CONTRACTS))
    assert config["session_options"]["root_packages"] == ["llmqueue"]
    contracts = {c["id"]: c for c in config["contracts_options"]}
    assert {"layers", "studies", "acyclic"} <= set(contracts)
    assert not [c for c in contracts.values() if "ignore_imports" in c], "no exceptions"
    layered = contracts["layers"]
    assert layered["type"] == "layers" and layered["containers"] == ["llmqueue"]
    assert layered["exhaustive"] == "true", "every module of llmqueue must have a layer"
    assert not [row for row in layered["layers"] if "|" in row or "(" in row]
    got = [[n.strip() for n in row.split(":")] for row in layered["layers"]]
    block = "\n    ".join(" : ".join(row) for row in want)
    assert got == want, f"the table changed: in .importlinter write\nlayers =\n    {block}"
    studies = contracts["studies"]
    assert studies["type"] == "independence" and studies["modules"] == ["llmqueue.studies.*"]
    acyclic = contracts["acyclic"]
    assert acyclic["type"] == "acyclic_siblings" and acyclic["ancestors"] == ["llmqueue"]
    assert "depth" not in acyclic and "skip_descendants" not in acyclic


def linted_here() -> None:
    """import-linter and grimp read the llmqueue that Python finds: this checkout's."""
    found = importlib.util.find_spec("llmqueue")
    assert found and found.origin == str(SRC / "__init__.py"), found


def test_the_import_contracts_hold() -> None:
    linted_here()
    assert lint(), "broken import contracts: see the report above"


# Each probe writes imports into a copy of the package and names the contracts they must break.
PROBES = {
    "function-level import up the layers": (
        {"tokens.py": "def probe():\n    from llmqueue.sim import engine\n"},
        {"layers"},
    ),
    "import of a package above": ({"errors.py": "from llmqueue import cli\n"}, {"layers"}),
    "relative import up the layers": ({"hardware/__init__.py": "from .. import cli\n"}, {"layers"}),
    "a study imports another": (
        {"studies/token_limit/__init__.py": "def probe():\n    import llmqueue.studies.ssjf\n"},
        {"studies"},
    ),
    "a cycle inside one layer": (
        {"seeds.py": "import llmqueue.grids\n", "grids.py": "import llmqueue.seeds\n"},
        {"acyclic"},
    ),
}


@pytest.mark.parametrize("probe", PROBES)
def test_the_import_contracts_catch(
    probe: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upward import (inside a function, of a package, relative), a study importing another
    and a cycle each break their contract; same-layer probes leave the layers kept."""
    edits, broken = PROBES[probe]
    shutil.copytree(SRC, tmp_path / "llmqueue", ignore=shutil.ignore_patterns("__pycache__"))
    for name, code in edits.items():
        path = tmp_path / "llmqueue" / name
        path.write_text(path.read_text() + "\n" + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "llmqueue")
    found = importlib.util.find_spec("llmqueue")
    assert found and found.origin == str(tmp_path / "llmqueue" / "__init__.py")
    for contract in sorted(broken):
        assert not lint(contract), f"{probe}: the {contract} contract is kept"
    if "layers" not in broken:
        assert lint("layers"), f"{probe}: the layers contract is broken"


def test_our_graph_sees_every_import_grimp_sees() -> None:
    """The workflow's code inputs and the hand-written checks below read llmqueue.importgraph,
    the contracts grimp: every module and import grimp finds must be in ours too, or a job would
    miss a code input (a relative import, which ours does not follow, fails here). Ours also
    counts ``from pkg import module`` as importing ``pkg``, which grimp does not."""
    linted_here()
    g = grimp.build_graph("llmqueue", cache_dir=None)
    assert set(g.modules) == set(GRAPH.files)
    ours = {(m, i.module) for m, imports in GRAPH.edges.items() for i in imports}
    theirs = {(m, n) for m in g.modules for n in g.find_modules_directly_imported_by(m)}
    missing = sorted(f"{m} -> {n}" for m, n in theirs - ours)
    assert not missing, f"imports llmqueue.importgraph does not see: {missing}"


def test_no_import_cycles() -> None:
    """Every cycle between modules. The acyclic contract compares the children of each package
    only, so a package whose ``__init__`` imports a module of its own that imports the package
    back, or a module importing itself, is a cycle it cannot see."""
    assert GRAPH.cycles() == []


def test_no_module_imports_another_modules_private_names() -> None:
    """``from a import _x`` only for a module _x of package a imported from a module of a itself
    (a package-private helper such as studies.token_limit._impatient); never a private function or constant.
    Hand-written: grimp's graph holds modules, not the names taken from them, and import-linter's
    private_modules contract also lets the subpackages of a import a._x."""
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
    for f in ("sim/queue.py", "sim/__init__.py", "sim/heap.py", "policy.py", "traces/formats.py"):
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


def _no_broad_except(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler):
            caught = ast.unparse(node.type) if node.type else "everything"
            assert caught not in ("Exception", "BaseException", "everything"), (
                f"line {node.lineno}: catches {caught}; let errors surface"
            )


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_workflow_scripts_are_glue(path: Path) -> None:
    text = path.read_text()
    assert "sys.path" not in text, "scripts import the library, never edit sys.path"
    _no_broad_except(ast.parse(text))


@pytest.mark.parametrize(("path", "name"), STEPS, ids=[f"{f.parent.name}.{n}" for f, n in STEPS])
def test_study_steps_are_glue(path: Path, name: str) -> None:
    """A step reads its job's inputs, calls the library and writes its outputs: it edits no
    sys.path, lets errors surface, and (the paper's studies) leaves numerical work to the
    library; it imports what it needs in its own body (its code inputs: function_code)."""
    text = path.read_text()
    assert "sys.path" not in text, "steps import the library, never edit sys.path"
    func = next(
        n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == name
    )
    _no_broad_except(func)
    mods = imported_modules_of(func)
    assert any(m.startswith("llmqueue.") for m in mods), "a step calls the library"
    if path.parent.name in NUMERIC_FREE:
        assert not {m for m in mods if m.split(".")[0] in {"numpy", "scipy", "math"}}, (
            "numerical work belongs in the library"
        )
    top = {
        n.module
        for n in ast.parse(text).body
        if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("llmqueue")
    }
    assert not top, f"{path.name} imports {top} at its top: each step imports in its own body"


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
        and f != "tests/workflow/test_layout.py"
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
