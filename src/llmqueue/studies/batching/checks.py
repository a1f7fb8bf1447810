"""Checks of the ``batching``-study sections of the config (batch_profiles, batching).

What the schema cannot see: token-law specs that do not parse, profile names that do not exist,
fixed profiles with k3 = k4 = 0, fit ranges outside the b range, K or b_max grids that are
empty. Every error names the key and the allowed values (InputError), before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def _law(spec: Any, key: str, base_dir: Path) -> None:
    from llmqueue.tokens import parse_law

    try:
        parse_law(spec, base_dir)
    except InputError as err:
        raise InputError(f"{key}: {err}") from None


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    from llmqueue.claims import check_solved_from, check_tolerance_classes, reference_claims
    from llmqueue.schema import section

    profiles = section(config, "batch_profiles") or {}
    ids = reference_claims(base_dir, "batching")
    check_solved_from("batch_profiles", profiles, ids)
    if config.get("batching"):
        # same_delay: claim 9a's "a finite b_max equals b_max = inf" (llmqueue.studies.batching.claims)
        check_tolerance_classes(config, ids, ("same_delay",))
    for name, prof in profiles.items():
        if prof["kind"] == "fixed":
            from llmqueue.profiles import resolve_batch_profile

            try:
                resolve_batch_profile(name, prof)
            except InputError as err:
                raise InputError(f"batch_profiles.{name}: {err}") from None
    bat = section(config, "batching") or {}
    if not bat:
        return

    def need_profile(name: str, key: str) -> None:
        if name not in profiles:
            raise InputError(f"{key}: unknown batch profile {name!r}; defined: {sorted(profiles)}")

    f3 = bat["fig3"]
    _law(f3["fig3a_tokens"], "batching.fig3.fig3a_tokens", base_dir)
    for i, spec in enumerate(f3["fig3b_tokens"]):
        _law(spec, f"batching.fig3.fig3b_tokens[{i}]", base_dir)
    for name in f3["profiles"]:
        need_profile(name, "batching.fig3.profiles")
    f5 = bat["fig5"]
    _law(f5["tokens"], "batching.fig5.tokens", base_dir)
    for panel, name in f5["panels"].items():
        need_profile(name, f"batching.fig5.panels.{panel}")
    for sect, key in ((f5, "batching.fig5"), (bat["fig6"], "batching.fig6")):
        r = sect["rates"]
        if not (r["start"] <= r["stop"]):
            raise InputError(
                f"{key}.rates: need start <= stop (fractions of the best mu_b in (0, 1]), got {r}"
            )
    rng = f5.get("bound_fit_range", [1, f5["b_range"]])
    if not (1 <= rng[0] < rng[1] <= f5["b_range"]):
        raise InputError(
            f"batching.fig5.bound_fit_range: need 1 <= lo < hi <= b_range ({f5['b_range']}), got {rng}"
        )
    f6 = bat["fig6"]
    _law(f6["tokens"], "batching.fig6.tokens", base_dir)
    for name in f6["profiles"]:
        need_profile(name, "batching.fig6.profiles")
    lo, hi = f6["claim_K"]
    if not (1 <= lo < hi <= 64):
        raise InputError(f"batching.fig6.claim_K: need 1 <= lo < hi <= 64, got {f6['claim_K']}")
    for r in f6["inoue_fit_ranges"]:
        if not (1 <= r[0] < r[1] <= 4096):
            raise InputError(f"batching.fig6.inoue_fit_ranges: need 1 <= lo < hi, got {r}")
    cap = bat.get("tail_cap_tokens")
    if cap is not None and cap <= 0:
        raise InputError(f"batching.tail_cap_tokens must be > 0 tokens or null, got {cap}")
