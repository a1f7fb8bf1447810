"""The import graph's code of one function (llmqueue.importgraph.ImportGraph.function_code): a
study step's job depends on its own function's imports and its module's top level, at any depth,
and not on what the module's other functions import."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmqueue.importgraph import ImportGraph

FILES = {
    "llmqueue/__init__.py": "",
    "llmqueue/base.py": "X = 1\n",
    "llmqueue/laws.py": "from llmqueue.base import X\n",
    "llmqueue/sim.py": "import llmqueue.laws\n",
    "llmqueue/plots.py": "",
    "llmqueue/studies/__init__.py": "",
    "llmqueue/studies/toy/__init__.py": "from llmqueue.base import X\n",
    "llmqueue/studies/toy/steps.py": (
        "from typing import Any\n"
        "from llmqueue.laws import X\n\n\n"
        "def table(sm: Any) -> None:\n"
        "    from llmqueue import sim\n\n"
        "    def inner() -> None:\n"
        "        import llmqueue.plots\n\n"
        "    inner()\n\n\n"
        "def claims(sm: Any) -> None:\n"
        "    from llmqueue.base import X\n"
    ),
}


@pytest.fixture
def graph(tmp_path: Path) -> ImportGraph:
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return ImportGraph.read(tmp_path)


def test_a_function_runs_its_own_imports_and_its_modules_top_level(
    graph: ImportGraph, tmp_path: Path
) -> None:
    def names(files: list[str]) -> set[str]:
        return {f.removeprefix("llmqueue/").removesuffix(".py") for f in files}

    pkg = {"__init__", "studies/__init__", "studies/toy/__init__", "studies/toy/steps"}
    table = names(graph.function_code("llmqueue.studies.toy.steps:table", root=tmp_path))
    # its body imports sim (and, nested, plots); sim imports laws; the module's top level laws
    assert table == pkg | {"sim", "laws", "base", "plots"}
    claims = names(graph.function_code("llmqueue.studies.toy.steps:claims", root=tmp_path))
    assert claims == pkg | {"laws", "base"}  # not its sibling's sim or plots
    # the whole module, as module_code reads it, runs both functions' imports
    assert names(graph.module_code("llmqueue.studies.toy.steps", root=tmp_path)) >= table


def test_an_unknown_module_or_function_is_named(graph: ImportGraph, tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="no top-level function 'chart'"):
        graph.function_code("llmqueue.studies.toy.steps:chart", root=tmp_path)
    with pytest.raises(KeyError, match="no module 'llmqueue.studies.other.steps'"):
        graph.function_code("llmqueue.studies.other.steps:table", root=tmp_path)
