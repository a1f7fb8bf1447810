"""The studies' catalogue: every study found in its own package, read without importing it.

A study is one folder, ``src/llmqueue/studies/<name>/`` (and ``src/llmqueue/plan/`` for the
operators' worked example). Its package's ``__init__.py`` declares its record as a literal::

    STUDY = {
        "follows": "batching",          # the study it comes after (include and report order)
        "rules": ["serving"],           # its rule files <folder>/<file>.smk (default [<name>])
        "claims": {10: "SSJF: ..."},    # claim number -> the title the documentation gives it
        "docs": "llmqueue.studies.x",   # the module of its render_<kind> functions
    }

Every key may be left out. The catalogue reads these literals with :mod:`ast` (no study is
imported: the Snakefile and the schema read the catalogue before any rule), and orders the
studies so that each comes after the one it ``follows`` (ties by name): the Snakefile includes
their rule files in that order (a study's rules may use what an earlier one defines) and the
figure list and the report show them in it.

Beside the record, a study's folder may hold its config section's schema (``schema.yaml``:
the root schema names no study, :mod:`llmqueue.schema` adds every catalogued section),
its reference claims (``reference_claims.csv``) and its config checks (``checks.py``).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError

__all__ = [
    "Study",
    "RECORD",
    "SHARED_RULES",
    "studies",
    "study",
    "claim_titles",
    "docs_modules",
    "rule_files",
    "read_study",
    "ordered",
]

# the package folder (src/llmqueue) and the folders whose sub-packages are studies, plus the
# operators' planner, a study of its own
PACKAGE = Path(__file__).resolve().parent
STUDY_PARENTS = ("studies",)
OTHER_STUDIES = ("plan",)
RECORD = "STUDY"  # the name of the record literal in a study package's __init__.py
RECORD_KEYS = ("follows", "rules", "claims", "docs")

# the rule files of the workflow itself: the shared helpers and what reads every study's
# declarations (plot rules, claims, docs, notebooks), included by the Snakefile by name
SHARED_RULES = ("common", "figures", "claims", "docs", "notebooks")


@dataclass(frozen=True)
class Study:
    """One study. `rules`: its rule files in its package's folder (no ``.smk``), in include
    order; `package`: the library package that computes its tables; `claims`: claim number ->
    the title the documentation's by-claim table gives it (the numbers its reference rows use);
    `docs`: the module of its ``render_<kind>`` functions (None: ``<package>.docs`` where that
    module exists); `follows`: the study it comes after."""

    name: str
    rules: tuple[str, ...]
    package: str
    claims: Mapping[int, str] = field(default_factory=dict)
    docs: str | None = None
    follows: str | None = None

    @property
    def folder(self) -> str:
        """Its package's folder, relative to the project root (``src/llmqueue/studies/<name>``):
        its rule files, schema, reference claims and figure captions sit there."""
        return "src/" + self.package.replace(".", "/")

    @property
    def reference_claims(self) -> str:
        """Its reference claims, relative to the project root
        (``<folder>/reference_claims.csv``: the published numbers its claims rows are judged
        against; absent for a study that judges none)."""
        return f"{self.folder}/reference_claims.csv"

    @property
    def schema(self) -> Path | None:
        """Its config section's schema (``<folder>/schema.yaml``, absolute), or None."""
        path = PACKAGE.parents[1] / self.folder / "schema.yaml"
        return path if path.is_file() else None

    @property
    def rule_files(self) -> tuple[str, ...]:
        """Its rule files, relative to the project root (``<folder>/<file>.smk``), in order."""
        return tuple(f"{self.folder}/{r}.smk" for r in self.rules)

    @property
    def docs_module(self) -> str | None:
        """The module of its renderers, or None when it renders no block."""
        from importlib.util import find_spec

        name = self.docs or f"{self.package}.docs"
        return name if find_spec(name) is not None else None


def _record(init: Path) -> dict[str, Any]:
    """The ``STUDY`` literal of a study package's ``__init__.py`` ({} when it has none)."""
    tree = ast.parse(init.read_text(), filename=str(init))
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if any(isinstance(t, ast.Name) and t.id == RECORD for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                raise InputError(f"{init}: {RECORD} must be a literal dict") from None
            if not isinstance(value, dict) or set(value) - set(RECORD_KEYS):
                raise InputError(f"{init}: {RECORD} must be a dict of the keys {list(RECORD_KEYS)}")
            return value
    return {}


def read_study(name: str, package: str, init: Path) -> Study:
    """The study `name` of package `package` from the record in its `init` file."""
    rec = _record(init)
    rules = tuple(rec.get("rules", [name]))
    claims = {int(k): str(v) for k, v in dict(rec.get("claims", {})).items()}
    return Study(name, rules, package, claims, rec.get("docs"), rec.get("follows"))


def ordered(found: list[Study]) -> tuple[Study, ...]:
    """`found` with each study after the one it follows (ties by name); InputError for a
    study that follows an unknown one or a cycle."""
    names = {s.name for s in found}
    for s in found:
        if s.follows is not None and s.follows not in names:
            raise InputError(f"study {s.name!r} follows {s.follows!r}, which is no study")
    done: list[Study] = []
    placed: set[str] = set()
    left = sorted(found, key=lambda s: s.name)
    while left:
        ready = next((s for s in left if s.follows is None or s.follows in placed), None)
        if ready is None:
            raise InputError(f"the studies {[s.name for s in left]} follow each other in a cycle")
        done.append(ready)
        placed.add(ready.name)
        left.remove(ready)
    return tuple(done)


@functools.cache
def studies() -> tuple[Study, ...]:
    """Every study of the project, in include order (module docstring)."""
    found = []
    for parent in STUDY_PARENTS:
        for init in sorted((PACKAGE / parent).glob("*/__init__.py")):
            name = init.parent.name
            if not name.startswith("_"):
                found.append(read_study(name, f"llmqueue.{parent}.{name}", init))
    for name in OTHER_STUDIES:
        found.append(read_study(name, f"llmqueue.{name}", PACKAGE / name / "__init__.py"))
    return ordered(found)


def study(name: str) -> Study:
    """The study `name` (KeyError naming the catalogued ones otherwise)."""
    for s in studies():
        if s.name == name:
            return s
    raise KeyError(f"no study {name!r}; catalogued: {[s.name for s in studies()]}")


def claim_titles() -> dict[int, str]:
    """{claim number: title} of every study, in claim order (the documentation's tables)."""
    return dict(sorted((n, t) for s in studies() for n, t in s.claims.items()))


def docs_modules() -> tuple[str, ...]:
    """The modules of every study's ``render_<kind>`` functions, in include order (what
    :mod:`llmqueue.docgen` imports; the docs job's code inputs)."""
    return tuple(m for s in studies() if (m := s.docs_module) is not None)


def rule_files() -> list[str]:
    """Every rule file of the workflow, relative to the project root: the shared ones
    (``workflow/rules/<name>.smk``) and every study's (:attr:`Study.rule_files`)."""
    shared = [f"workflow/rules/{r}.smk" for r in SHARED_RULES]
    return shared + [f for s in studies() for f in s.rule_files]
