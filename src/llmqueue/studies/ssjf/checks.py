"""Checks of the ``ssjf`` section of the config (what the schema cannot see).

The trace file and its columns, profile names that do not exist, fixed cost models that time
nothing, settings named by the figures and claims that are not defined, a claim load off the load
grid, predictor specs that do not parse (or name a learned model: those come from ``learned``),
a replay too short for its warm-up, SSJF's published prediction files (``official``: missing,
unreadable, classes beyond their edges, edges not increasing, an unknown ``ssjf_predictor``), and
claim-10 reference rows that do not match the groups and claim settings. Every error names the
key and the allowed values (InputError), before any job starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.studies.ssjf.spec import MODES, OFFICIAL_GROUPS, OFFICIAL_QUANTITIES, QUANTITIES


def _setting(name: str, cfg: Mapping[str, Any], config: Mapping[str, Any]) -> None:
    from llmqueue.profiles import check_setting

    where = f"ssjf.settings.{name}"
    check_setting(cfg["batch"], "batch", config, where=f"{where}.batch")
    check_setting(cfg["step"], "step", config, where=f"{where}.step")


def _official(sec: Mapping[str, Any], base_dir: Path) -> None:
    """SSJF's published prediction files: present, readable, classes within their edges."""
    from llmqueue.studies.ssjf.official import load_predictions
    from llmqueue.studies.ssjf.spec import official_from_config

    where = "ssjf.official"
    official = official_from_config(sec["official"])
    if official.ssjf_predictor not in official.files:
        raise InputError(
            f"{where}.ssjf_predictor: {official.ssjf_predictor!r} is not one of "
            f"{where}.predictions {sorted(official.files)}"
        )
    if official.setting not in sec["settings"]:
        raise InputError(
            f"{where}.setting: unknown setting {official.setting!r}; defined in ssjf.settings: "
            f"{sorted(sec['settings'])}"
        )
    for name, f in official.files.items():
        e = list(f.edges)
        if e != sorted(set(e)):
            raise InputError(f"{where}.predictions ({name}): edges must increase, got {e}")
        if not (Path(base_dir) / f.path).is_file():
            raise InputError(f"{where}.predictions ({name}): file {f.path!r} does not exist")
        load_predictions(f, str(base_dir))


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    sec = config.get("ssjf")
    if not sec:
        return
    from llmqueue.claims import check_tolerance_classes, reference_claims
    from llmqueue.sim.predictors import parse_predictor
    from llmqueue.traces import read_columns, read_timestamps

    trace = Path(base_dir) / sec["trace"]
    cols = sec["columns"]
    if not trace.is_file():
        raise InputError(f"ssjf.trace: file {str(trace)!r} does not exist")
    n = len(read_columns(trace, [cols["prompt"], cols["output"]], "ssjf.trace")[cols["output"]])
    read_timestamps(trace, cols["timestamp"], "ssjf.trace (columns.timestamp)")
    held_out = n - int(round(n * float(sec["train_fraction"])))
    rep = sec["replay"]
    if held_out - int(rep["warmup"]) < 10 * int(rep["batches"]):
        raise InputError(
            f"ssjf.replay: the {held_out} held-out rows leave fewer than 10 x batches after "
            f"warmup {rep['warmup']}: lower replay.warmup or replay.batches, or train_fraction"
        )
    sim = sec["poisson"]
    if int(sim["requests"]) < 10 * int(sim["batches"]):
        raise InputError("ssjf.poisson.requests must be >= 10 x batches")
    learned = sec["learned"]
    if learned["ssjf_model"] not in learned["kinds"]:
        raise InputError(
            f"ssjf.learned.ssjf_model {learned['ssjf_model']!r} must be one of learned.kinds "
            f"{learned['kinds']}"
        )
    settings = sec["settings"]
    for name, cfg in settings.items():
        _setting(name, cfg, config)
    named = {
        "ssjf.quality.setting": [sec["quality"]["setting"]],
        "ssjf.starvation.setting": [sec["starvation"]["setting"]],
        "ssjf.protocol.reference": [sec["protocol"]["reference"]],
        "ssjf.claim_settings": list(sec["claim_settings"]),
    }
    for key, names in named.items():
        for name in names:
            if name not in settings:
                raise InputError(
                    f"{key}: unknown setting {name!r}; defined in ssjf.settings: {sorted(settings)}"
                )
    if not any(math.isclose(float(sec["claim_load"]), float(x)) for x in sec["loads"]):
        raise InputError(
            f"ssjf.claim_load {sec['claim_load']} must be one of ssjf.loads {sec['loads']}"
        )
    for i, spec in enumerate(sec["quality"]["predictors"]):
        if str(spec).strip().startswith("learned"):
            raise InputError(
                f"ssjf.quality.predictors[{i}]: {spec!r}: the learned models come from ssjf.learned"
            )
        try:
            parse_predictor(str(spec))
        except InputError as err:
            raise InputError(f"ssjf.quality.predictors[{i}]: {err}") from None
    _official(sec, base_dir)
    ids = reference_claims(base_dir, "ssjf")
    check_tolerance_classes(config, ids)
    for group in OFFICIAL_GROUPS:
        rows = [c for c in ids if c.startswith(f"10{group}")]
        want = len(MODES) * len(OFFICIAL_QUANTITIES)
        if ids and len(rows) != want:
            raise InputError(
                f"ssjf.official: group {group} needs {want} claim-10{group} rows ({len(MODES)} "
                f"modes x {len(OFFICIAL_QUANTITIES)} quantities) in "
                f"src/llmqueue/studies/ssjf/reference_claims.csv, which has {len(rows)}"
            )
    tens = [c for c in ids if c.startswith("10c")]
    want = len(sec["claim_settings"]) * len(MODES) * len(QUANTITIES)
    if ids and len(tens) != want:
        raise InputError(
            f"ssjf.claim_settings: {len(sec['claim_settings'])} settings x {len(MODES)} modes x "
            f"{len(QUANTITIES)} quantities need {want} claim-10c rows in "
            f"src/llmqueue/studies/ssjf/reference_claims.csv, which has {len(tens)}"
        )
