"""Checks of the ``multibin`` section of the config (the Multi-Bin Batching study, issue 15).

What the schema cannot see: token-law specs that do not parse (or a trace that is missing), a
synthetic law that is not uniform (Theorem 4.2 and claims 11h-11l need one), profile names that
do not exist, a KV budget "batch_memory" under a law without a largest value, the claims'
tolerance classes. Every error names the key and the allowed values, before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    raw = config.get("multibin")
    if raw is None:
        return
    import math

    from llmqueue.claims import check_tolerance_classes, reference_claims
    from llmqueue.studies.multibin.spec import LLMSpec, SyntheticSpec, VsContinuousSpec
    from llmqueue.tokens import UniformLaw, parse_law

    check_tolerance_classes(config, reference_claims(base_dir, "multibin"))
    try:
        syn = SyntheticSpec.from_config(raw.get("synthetic"))
        llm = LLMSpec.from_config(raw.get("llm"))
        vs = VsContinuousSpec.from_config(raw.get("vs_continuous"))
    except InputError as err:
        raise InputError(f"multibin: {err}") from None

    parsed: dict[str, Any] = {}

    def law(spec: str, key: str) -> Any:
        if spec not in parsed:
            try:
                parsed[spec] = parse_law(spec, base_dir)
            except InputError as err:
                raise InputError(f"multibin.{key}: {err}") from None
        return parsed[spec]

    if not isinstance(law(syn.tokens, "synthetic.tokens"), UniformLaw):
        raise InputError(
            f"multibin.synthetic.tokens: Theorem 4.2 needs a uniform law "
            f"(uniform:low=A,high=B), got {syn.tokens!r}"
        )
    law(llm.tokens, "llm.tokens")
    vs_law = law(vs.tokens, "vs_continuous.tokens")
    batches = config.get("batch_profiles") or {}
    if vs.batch_profile not in batches:
        raise InputError(
            f"multibin.vs_continuous.batch_profile: unknown batch profile {vs.batch_profile!r}; "
            f"defined: {sorted(batches)}"
        )
    steps = config.get("step_profiles") or {}
    if vs.step_profile not in steps:
        raise InputError(
            f"multibin.vs_continuous.step_profile: unknown step profile {vs.step_profile!r}; "
            f"defined: {sorted(steps)}"
        )
    names = [v.name for v in vs.variants]
    if len(set(names)) != len(names):
        raise InputError(f"multibin.vs_continuous.continuous: names must differ, got {names}")
    for v in vs.variants:
        if v.kv_tokens == "batch_memory" and not math.isfinite(vs_law.support[1]):
            raise InputError(
                f"multibin.vs_continuous.continuous ({v.name}): kv_tokens batch_memory needs a "
                f"length law with a largest value; {vs.tokens!r} has none (add cap=L)"
            )
        if v.admission not in ("reserve", "on_demand"):
            raise InputError(
                f"multibin.vs_continuous.continuous ({v.name}): admission must be reserve or "
                f"on_demand, got {v.admission!r}"
            )
