"""The studies, registered once: each study's name, rule files, library package and claims.

A study is a config section (``config/config.yaml``, its schema ``schema.yaml`` in its package's
folder, named by ``workflow/schemas/config.schema.yaml``), a library
package (``llmqueue.studies.<name>``, or ``llmqueue.plan`` for the operators' worked example:
pure functions that turn config values into the DataFrames the pipeline caches, and the steps
its rules run), its rule files (``<file>.smk`` in that package's folder, beside its steps), its
figures (``declare_figure`` in those rules), its notebook
(``notebooks/intro/<name>.md``) and documentation page (``docs/studies/<name>.md``), and, for
the paper's and companions' claims, its rows of ``src/llmqueue/studies/<name>/reference_claims.csv``.

:data:`STUDIES` is the one list: the Snakefile includes the rule files from it (in this order:
a study's rules may use what an earlier one defines), the documentation's claim titles come from
it, and a test checks each record against the files it names. Light on purpose (no import of a
study), so the Snakefile reads it before any rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Study",
    "STUDIES",
    "study",
    "claim_titles",
    "docs_modules",
    "rule_files",
    "SHARED_RULES",
    "check_config",
]


@dataclass(frozen=True)
class Study:
    """One study. `rules`: its rule files in its package's folder (no ``.smk``), in include
    order; `package`: the library package that computes its tables; `claims`: claim number ->
    the title the documentation's by-claim table gives it (the numbers its reference rows use);
    `docs`: the module of its ``render_<kind>`` functions (its generated documentation blocks;
    None: ``<package>.docs`` where that module exists)."""

    name: str
    rules: tuple[str, ...]
    package: str
    claims: Mapping[int, str] = field(default_factory=dict)
    docs: str | None = None

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
    def rule_files(self) -> tuple[str, ...]:
        """Its rule files, relative to the project root (``src/llmqueue/studies/<name>/<file>.smk``),
        in include order."""
        return tuple(f"{self.folder}/{r}.smk" for r in self.rules)

    @property
    def docs_module(self) -> str | None:
        """The module of its renderers, or None when it renders no block."""
        from importlib.util import find_spec

        name = self.docs or f"{self.package}.docs"
        return name if find_spec(name) is not None else None


STUDIES: tuple[Study, ...] = (
    Study(
        "profiling",
        ("calibration", "profiling"),
        "llmqueue.studies.profiling",
        {
            1: "Table I latencies and their linear law, LLaMA-2-7B on an A100",
            2: "the KV cache holds 49 sequences of 1280 tokens",
        },
    ),
    Study(
        "token_limit",
        ("token_limit",),
        "llmqueue.studies.token_limit",
        {
            3: "patient users: W_q at the limit 1600 and the optimal limit",
            4: "impatient users: the lost fraction at 1300 and the optimal limit",
            5: "shares of requests below 1600 and 1300 tokens",
        },
    ),
    Study(
        "batching",
        ("batching",),
        "llmqueue.studies.batching",
        {
            6: "mu_b rises with b and peaks for LogNormal lengths (Fig. 3b)",
            7: "bound (16) tracks dynamic batching; elastic beats dynamic (Fig. 5)",
            8: "the optimal fixed batch K* = 8 and Eq. (16)'s 125 s (Fig. 6a); can the A100 run it",
            9: "a finite b_max against b_max = inf; elastic against dynamic (Fig. 6b)",
        },
    ),
    Study("serving", ("serving",), "llmqueue.studies.serving"),
    Study(
        "ssjf",
        ("ssjf",),
        "llmqueue.studies.ssjf",
        {10: "SSJF: mean JCT and throughput against FCFS (companion paper)"},
    ),
    Study(
        "multibin",
        ("multibin",),
        "llmqueue.studies.multibin",
        {11: "Multi-Bin Batching: throughput against the number of bins (companion paper)"},
    ),
    Study(
        "literature",
        ("literature",),
        "llmqueue.studies.literature",
        {12: "the literature: scheduling with predictions (Mitzenmacher and Shahout's Tables 1-3)"},
    ),
    Study("validation", ("validation", "validation_law"), "llmqueue.studies.validation"),
    Study("plan", ("plan",), "llmqueue.plan"),
)


def study(name: str) -> Study:
    """The registered study `name` (KeyError naming the registered ones otherwise)."""
    for s in STUDIES:
        if s.name == name:
            return s
    raise KeyError(f"no study {name!r}; registered: {[s.name for s in STUDIES]}")


def claim_titles() -> dict[int, str]:
    """{claim number: title} of every study, in claim order (the documentation's tables)."""
    return dict(sorted((n, t) for s in STUDIES for n, t in s.claims.items()))


def docs_modules() -> tuple[str, ...]:
    """The modules of every study's ``render_<kind>`` functions, in registry order (what
    :mod:`llmqueue.docgen` imports; the docs job's code inputs)."""
    return tuple(m for s in STUDIES if (m := s.docs_module) is not None)


# the rule files of the workflow itself: the shared helpers and what reads every study's
# declarations (plot rules, claims, docs, notebooks), included by the Snakefile by name
SHARED_RULES = ("common", "figures", "claims", "docs", "notebooks")


def rule_files() -> list[str]:
    """Every rule file of the workflow, relative to the project root: the shared ones
    (``workflow/rules/<name>.smk``) and every study's (:attr:`Study.rule_files`)."""
    shared = [f"workflow/rules/{r}.smk" for r in SHARED_RULES]
    return shared + [f for s in STUDIES for f in s.rule_files]


def check_config(config: Mapping[str, Any], base_dir: str | Path) -> None:
    """Run the checks of every number (:func:`llmqueue.schema.check_numbers`), then every
    registered study's ``check(config, base_dir)`` (its module ``<package>.checks``, where the
    study has one), in registry order: what the schema cannot see, before any job starts."""
    import importlib
    from importlib.util import find_spec

    from llmqueue.schema import check_numbers

    check_numbers(config)
    for s in STUDIES:
        name = f"{s.package}.checks"
        if find_spec(name) is not None:
            importlib.import_module(name).check(config, Path(base_dir))
