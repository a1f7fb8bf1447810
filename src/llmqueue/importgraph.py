"""The import graph of the llmqueue package, read from the source (nothing is imported).

Two users:

- the workflow derives each job's code inputs from it (``workflow/rules/common.smk``): a job
  depends on every library file its script imports, directly or not (function-level imports
  included), with the package ``__init__`` files on the way, so editing any of them reruns
  exactly the jobs that import it;
- ``tests/workflow/test_layout.py`` checks on it what import-linter's contracts (``.importlinter``, on
  grimp's graph) cannot say: no module imports another's ``_private`` names, and no cycle
  through a package's own ``__init__``; a test there checks that it holds every import grimp
  finds.

Modules are named as Python names them (``llmqueue.sim.engine``); ``from llmqueue.sim import
queue`` counts as importing ``llmqueue.sim.queue``. Parsing the whole package takes a fraction of
a second and is done once per process (:func:`graph`).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

__all__ = ["ImportGraph", "graph", "imports_in", "PACKAGE"]

PACKAGE = "llmqueue"


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass(frozen=True)
class Import:
    """One imported llmqueue module and the names taken from it (empty for ``import m``)."""

    module: str
    names: tuple[str, ...] = ()
    line: int = 0


def _source(path: Path) -> str:
    """A Python file's text, or the code cells of a Jupyter notebook joined."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text()).get("cells", [])
        return "\n".join(
            "".join(c.get("source", [])) for c in cells if c.get("cell_type") == "code"
        )
    return path.read_text()


def imports_in(path: Path, known: Iterable[str]) -> list[Import]:
    """Every llmqueue module that file `path` (Python, or a notebook's code cells) imports, at
    any depth (function-level imports included); ``from a import b`` where ``a.b`` is a module of
    `known` imports ``a.b``."""
    return _imports(ast.walk(ast.parse(_source(path), filename=str(path))), known)


def _imports(nodes: Iterable[ast.AST], known: Iterable[str]) -> list[Import]:
    """The llmqueue modules the import statements among `nodes` import (:func:`imports_in`)."""
    mods = set(known)
    found: list[Import] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PACKAGE:
                    found.append(Import(a.name, (), node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != PACKAGE:
                continue
            plain = []
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                if sub in mods:
                    found.append(Import(sub, (), node.lineno))
                else:
                    plain.append(a.name)
            if plain or node.module in mods:
                found.append(Import(node.module, tuple(plain), node.lineno))
    return found


@dataclass
class ImportGraph:
    """The modules of the package under `src` (``src/llmqueue``) and what each imports."""

    src: Path
    files: dict[str, Path] = field(default_factory=dict)
    edges: dict[str, list[Import]] = field(default_factory=dict)

    @classmethod
    def read(cls, src: str | Path) -> ImportGraph:
        root = Path(src)
        g = cls(root)
        for p in sorted((root / PACKAGE).rglob("*.py")):
            g.files[_module_name(p, root)] = p
        for name, p in g.files.items():
            g.edges[name] = [i for i in imports_in(p, g.files) if i.module in g.files]
        return g

    def parents(self, module: str) -> list[str]:
        """The packages Python runs on the way to `module` (their ``__init__``)."""
        parts = module.split(".")
        return [".".join(parts[:k]) for k in range(1, len(parts))]

    def closure(self, modules: Iterable[str]) -> set[str]:
        """Every module that importing `modules` runs: themselves, what they import at any depth
        and the packages on the way."""
        todo = [m for m in modules if m in self.files]
        seen: set[str] = set()
        while todo:
            m = todo.pop()
            if m in seen:
                continue
            seen.add(m)
            todo.extend(p for p in self.parents(m) if p in self.files)
            todo.extend(i.module for i in self.edges.get(m, []))
        return seen

    def code_of(self, *scripts: str | Path, root: str | Path = ".") -> list[str]:
        """The library files (paths relative to `root`, sorted) that scripts (or notebooks)
        outside the package run when they import what they import."""
        direct = [i.module for s in scripts for i in imports_in(Path(s), self.files)]
        rootp = Path(root).resolve()
        return sorted(str(self.files[m].resolve().relative_to(rootp)) for m in self.closure(direct))

    def function_code(self, target: str, root: str | Path = ".") -> list[str]:
        """The library files (relative to `root`, sorted) that calling the top-level function
        ``"package.module:function"`` runs: the module itself with the packages on the way, what
        the module imports at its top level, and what the function imports in its body, each at
        any depth. A module whose functions import what they need in their bodies (a study's
        ``steps``) so gives each function only its own code, not its siblings'."""
        module, _, name = target.partition(":")
        if module not in self.files:
            raise KeyError(f"{target}: no module {module!r} in the package")
        tree = ast.parse(_source(self.files[module]))
        top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        if not funcs:
            raise KeyError(f"{target}: no top-level function {name!r} in {module}")
        direct = [module] + [i.module for i in _imports([*top, *ast.walk(funcs[0])], self.files)]
        # the module runs its own top level (not its other functions' imports), the packages on
        # the way to it run theirs in full
        seen = {module} | self.closure([*self.parents(module), *direct[1:]])
        rootp = Path(root).resolve()
        return sorted(
            str(self.files[m].resolve().relative_to(rootp)) for m in seen if m in self.files
        )

    def module_code(self, module: str, root: str | Path = ".") -> list[str]:
        """The library files (relative to `root`, sorted) that importing `module` runs."""
        rootp = Path(root).resolve()
        return sorted(
            str(self.files[m].resolve().relative_to(rootp)) for m in self.closure([module])
        )

    def cycles(self) -> list[list[str]]:
        """Every import cycle between modules (strongly connected components of two or more
        modules, or a module importing itself), each sorted."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        stack: list[str] = []
        on: set[str] = set()
        out: list[list[str]] = []
        counter = [0]

        def visit(v: str) -> None:
            index[v] = low[v] = counter[0]
            counter[0] += 1
            stack.append(v)
            on.add(v)
            for w in {i.module for i in self.edges.get(v, [])}:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                self_loop = any(i.module == v for i in self.edges.get(v, []))
                if len(comp) > 1 or self_loop:
                    out.append(sorted(comp))

        for v in sorted(self.files):
            if v not in index:
                visit(v)
        return out


@cache
def graph(src: str) -> ImportGraph:
    """The import graph of the package under `src`, read once per process."""
    return ImportGraph.read(src)
