"""Checks of the ``token_limit`` and ``latency_profiles`` sections."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.tokens import parse_law


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    for key in ("table1", "azure_trace"):
        path = base_dir / config["data"][key]
        if not path.is_file():
            raise InputError(f"data.{key}: file {str(path)!r} does not exist")
    from llmqueue.schema import section

    tl = section(config, "token_limit") or {}
    try:
        parse_law(tl["tokens"], base_dir=base_dir)
    except InputError as err:
        raise InputError(f"token_limit.tokens: {err}") from None
    profiles = config["latency_profiles"]
    for key in [tl["profile"], *tl["extra_profiles"]]:
        if key not in profiles:
            raise InputError(
                f"token_limit.profile / extra_profiles: unknown latency profile {key!r}; "
                f"defined in latency_profiles: {sorted(profiles)}"
            )
    grid = tl["limits"]
    if grid["stop"] <= grid["start"]:
        raise InputError(
            f"token_limit.limits: stop ({grid['stop']}) must be > start ({grid['start']}), both in tokens > 0"
        )
    for name, value in tl["claim_limits"].items():
        if not grid["start"] <= value <= grid["stop"]:
            raise InputError(
                f"token_limit.claim_limits.{name} = {value} lies outside the l grid "
                f"[{grid['start']}, {grid['stop']}]"
            )
    sim = tl["simulation"]
    if sim["requests"] < 10 * sim["batches"]:
        raise InputError("token_limit.simulation.requests must be >= 10 x batches")
    sweep = tl["tradeoff"].get("gamma_sweep")
    if sweep and sweep["stop"] <= sweep["start"]:
        raise InputError("token_limit.tradeoff.gamma_sweep: stop must be > start")
    from llmqueue.claims import check_solved_from, check_tolerance_classes, reference_claims

    ids = reference_claims(base_dir, "token_limit")
    check_tolerance_classes(config, ids, ("time", "fraction", "optimum"))
    check_solved_from("latency_profiles", profiles, ids)
