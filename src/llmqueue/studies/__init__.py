"""The studies: one package per study (``llmqueue.studies.<name>``, and ``llmqueue.plan`` for
the operators' worked example), each found by the catalogue (:mod:`llmqueue.catalog`) from the
``STUDY`` record in its ``__init__.py``.

A study is one folder: its config section's schema (``schema.yaml``), its spec and config checks
(``checks.py``), tables, claims, docs renderers, steps, figures (``fig*.py`` and their captions),
its reference claims (``reference_claims.csv``) and its rule files (``<file>.smk``). Outside it
stay only its documentation page (``docs/studies/<name>.md``), its notebook's introduction where
it has one (``notebooks/intro/<name>.md``; the package's docstring otherwise) and its settings in
``config/config.yaml``.

:data:`STUDIES` is the catalogue's list, in include order: the Snakefile includes the rule files
from it, the documentation's claim titles come from it, and :func:`check_config` runs each
study's checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.catalog import (
    SHARED_RULES,
    Study,
    claim_titles,
    docs_modules,
    rule_files,
    studies,
    study,
)

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

STUDIES: tuple[Study, ...] = studies()


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
