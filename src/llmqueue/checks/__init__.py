"""Semantic checks of the whole config, run by the Snakefile right after schema validation.

The JSON schema catches unknown keys, wrong types and ranges; these checks catch what a schema
cannot: malformed token-law specs, missing trace files or columns, profile names that do not
exist. Each study owns one module here. All raise :class:`llmqueue.errors.InputError` naming the
key and the allowed values, before any job starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def reference_claims(base_dir: Path, study: str) -> dict[str, str]:
    """{claim id: tolerance class} of ``data/reference/claims_<study>.csv`` ({} if absent)."""
    import csv

    path = Path(base_dir) / "data" / "reference" / f"claims_{study}.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {row["id"]: row["tolerance"] for row in csv.DictReader(fh)}


def section(config: Mapping[str, Any], name: str) -> dict[str, Any] | None:
    """Config section `name` with every default its schema declares filled in (as the Snakefile
    fills it; a caller may pass a config it did not fill), or None when the config has none."""
    from llmqueue.schema import with_defaults

    value = config.get(name)
    return None if value is None else with_defaults(value, name)


def check_solved_from(
    section: str, profiles: Mapping[str, Any], claim_ids: Mapping[str, str]
) -> None:
    """Each back-solved profile names the claims it was solved from (ids of the reference table),
    and only a back-solved profile does."""
    from llmqueue.errors import InputError

    for name, prof in (profiles or {}).items():
        solved = list(prof.get("solved_from") or [])
        back = prof.get("verdict") == "back_solved"
        if back != bool(solved):
            raise InputError(
                f"{section}.{name}: verdict back_solved needs solved_from (the claim ids its "
                f"parameters were solved from), and solved_from needs verdict back_solved; got "
                f"verdict {prof.get('verdict')!r}, solved_from {solved}"
            )
        unknown = [c for c in solved if c not in claim_ids]
        if unknown:
            raise InputError(
                f"{section}.{name}.solved_from: {unknown} are not claim ids of the reference "
                f"table; known: {sorted(claim_ids)}"
            )


def check_tolerance_classes(
    config: Mapping[str, Any], claim_ids: Mapping[str, str], extra: tuple[str, ...] = ()
) -> None:
    """Every tolerance class the reference claims (and the study code: `extra`) name exists in
    config ``claims.tolerances``; ``bound`` (``llmqueue.claims.BOUND``: a row judged as a bound,
    not by a tolerance) needs none."""
    from llmqueue.errors import InputError

    tol = config["claims"]["tolerances"]
    for name in sorted({*claim_ids.values(), *extra} - {"bound"}):
        if name not in tol:
            raise InputError(
                f"claims.tolerances.{name} is missing (a tolerance class the claims use); "
                f"defined: {sorted(tol)}"
            )


def check_numbers(node: Any, where: str = "") -> None:
    """Every number of the config is finite (YAML reads .inf and .nan), and the run lengths and
    rates lie within :mod:`llmqueue.limits` (:func:`llmqueue.schema.key_bounds`); InputError
    names the dotted key."""
    from llmqueue.errors import InputError
    from llmqueue.schema import key_bounds

    bounds = key_bounds()
    if isinstance(node, Mapping):
        for k, v in node.items():
            check_numbers(v, f"{where}.{k}" if where else str(k))
        return
    if isinstance(node, list | tuple):
        for i, v in enumerate(node):
            check_numbers(v, f"{where}[{i}]")
        return
    if isinstance(node, bool) or not isinstance(node, int | float):
        return
    if isinstance(node, float) and not math.isfinite(node):
        raise InputError(f"{where} must be a finite number, got {node}")
    key = where.rsplit(".", 1)[-1]
    if key in bounds:
        lo, hi = bounds[key]
        if not lo <= node <= hi:
            raise InputError(f"{where} must lie in [{lo:g}, {hi:g}], got {node}")


def check_config(config: Mapping[str, Any], base_dir: str | Path) -> None:
    """Run the checks of every number, then every registered study's ``check(config, base_dir)``
    (its module ``llmqueue.checks.<study>``, where the study has one; the study registry
    :data:`llmqueue.studies.STUDIES`, in its order)."""
    import importlib
    from importlib.util import find_spec

    from llmqueue.studies import STUDIES

    check_numbers(config)
    for study in STUDIES:
        name = f"{__name__}.{study.name}"
        if find_spec(name) is not None:
            importlib.import_module(name).check(config, Path(base_dir))
