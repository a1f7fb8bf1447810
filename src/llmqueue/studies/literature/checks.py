"""Checks of the ``literature`` section of the config (the literature study, claim 12).

What the schema cannot see: token-law and predictor specs that do not parse, the one-bit setting
over sizes other than exponential of mean 1 (its threshold equation needs them), reference rows
that name an unknown setting, order or load, and the claims' tolerance classes. Every error names
the key and the allowed values, before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    raw = config.get("literature")
    if raw is None:
        return
    import csv

    from llmqueue.claims import check_tolerance_classes, reference_claims
    from llmqueue.sim.predictors import parse_predictor
    from llmqueue.studies.literature.spec import ONE_BIT, LiteratureSpec, reference_points
    from llmqueue.tokens import ExponentialLaw, parse_law

    check_tolerance_classes(config, reference_claims(base_dir, "literature"))
    try:
        spec = LiteratureSpec.from_config(raw)
    except InputError as err:
        raise InputError(f"literature: {err}") from None
    for name, s in spec.settings.items():
        where = f"literature.settings.{name}"
        try:
            law = parse_law(s.tokens, base_dir)
        except InputError as err:
            raise InputError(f"{where}.tokens: {err}") from None
        if s.predictor == ONE_BIT:
            if not (isinstance(law, ExponentialLaw) and law.mean() == 1.0):
                raise InputError(
                    f"{where}.predictor: {ONE_BIT} needs tokens exponential:mean=1 (its threshold "
                    f"equation is for those sizes), got {s.tokens!r}"
                )
            continue
        try:
            parse_predictor(s.predictor)
        except InputError as err:
            raise InputError(f"{where}.predictor: {err}") from None
    path = Path(base_dir) / "src/llmqueue/studies/literature/reference_claims.csv"
    if path.is_file():
        with path.open(newline="") as fh:
            reference_points(list(csv.DictReader(fh)), spec.settings)
