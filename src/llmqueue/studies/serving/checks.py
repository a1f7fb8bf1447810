"""Checks of the ``serving`` section of the config (the serving study, issue 13).

What the schema cannot see: policy specs that do not parse, profile names that do not exist,
a rate grid that runs backwards, a replay reference that is not one of the policies, trace
columns missing from the trace. Every error names the key and the allowed values.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    from llmqueue.schema import section

    sec = section(config, "serving")
    if not sec:
        return
    from llmqueue.policy import PREDICTING_FORMERS, predictions_needed
    from llmqueue.policy_text import parse_policy

    steps = config.get("step_profiles") or {}
    if sec["step_profile"] not in steps:
        raise InputError(
            f"serving.step_profile: unknown step profile {sec['step_profile']!r}; "
            f"defined: {sorted(steps)}"
        )
    static = sec["static_law"]
    batches = config.get("batch_profiles") or {}
    if static != "from_step" and static not in batches:
        raise InputError(
            f"serving.static_law: {static!r} must be from_step or a batch profile; "
            f"defined: {sorted(batches)}"
        )
    for name, spec in sec["policies"].items():
        try:
            pol = parse_policy(str(spec))
        except InputError as err:
            raise InputError(f"serving.policies.{name}: {err}") from None
        if predictions_needed(orders=[pol.order], formers=[pol.kind]):
            raise InputError(
                f"serving.policies.{name}: the serving study runs without a predictor; "
                f"{pol.order if pol.kind not in PREDICTING_FORMERS else pol.kind} belongs to the "
                "ssjf and multibin studies"
            )
    r = sec["rates"]
    if not r["stop"] > r["start"]:
        raise InputError(f"serving.rates: stop ({r['stop']}) must be > start ({r['start']})")
    ref = sec["replay"]["reference"]
    if ref not in sec["policies"]:
        raise InputError(
            f"serving.replay.reference: {ref!r} is not one of serving.policies {list(sec['policies'])}"
        )
    import pandas as pd  # the header only: no simulator import before any job

    cols = sec["trace_columns"]
    trace = Path(base_dir) / config["data"]["azure_trace"]
    names = [cols["prompt"], cols["output"], cols["timestamp"]]
    if not trace.is_file():
        raise InputError(f"data.azure_trace: {trace} does not exist (the serving study reads it)")
    have = list(pd.read_csv(trace, nrows=0).columns)
    missing = [c for c in names if c not in have]
    if missing:
        raise InputError(
            f"serving.trace_columns: {trace} has no column(s) {missing}; columns: {have}"
        )
