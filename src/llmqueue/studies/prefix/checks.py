"""Checks of the ``prefix`` section of the config (the prefix study, claim 13).

What the schema cannot see: a policy spec that does not parse or is not continuous batching
with on-demand KV and a non-preemptive order, routers outside the registry, step profiles that
are not ``kind: fit`` entries of ``step_profiles`` (the KV budget comes from the fit's GPU),
trace files that are missing, reference rows naming a trace the section lacks, and the claims'
tolerance classes. Every error names the key and the allowed values, before any job starts.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    raw = config.get("prefix")
    if raw is None:
        return
    from llmqueue.claims import check_tolerance_classes, reference_claims
    from llmqueue.studies.prefix.spec import PrefixSpec

    check_tolerance_classes(config, reference_claims(base_dir, "prefix"))
    spec = PrefixSpec.from_config(raw)
    profiles = config.get("step_profiles") or {}
    for name in spec.step_profiles:
        entry = profiles.get(name)
        if not isinstance(entry, Mapping) or entry.get("kind") != "fit":
            fits = ", ".join(k for k, v in profiles.items() if v.get("kind") == "fit")
            raise InputError(
                f"prefix.step_profiles: {name!r}; allowed: a step_profiles entry of kind fit "
                f"(its GPU gives the KV budget): {fits}"
            )
    for name, path in spec.traces.items():
        if not (Path(base_dir) / path).is_file():
            raise InputError(f"prefix.traces.{name}: {path} is not a file")
    ref = Path(base_dir) / "src/llmqueue/studies/prefix/reference_claims.csv"
    if ref.is_file():
        with ref.open(newline="") as fh:
            for row in csv.DictReader(fh):
                trace = row.get("trace") or ""
                if trace and trace not in spec.traces:
                    raise InputError(
                        f"prefix.traces: claim {row['id']} reads trace {trace!r}; allowed: a "
                        f"section that names it ({', '.join(spec.traces)} given)"
                    )
