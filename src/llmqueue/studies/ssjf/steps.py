"""The ssjf study's rule steps (SSJF's predictors, capacity, JCT, quality, starvation, protocol and
claim 10): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def capacity(sm: Any) -> None:
    """FCFS capacity of every (setting, batching mode) (llmqueue.studies.ssjf.tables.capacity_table)."""
    from llmqueue.io import read_json, write_csv
    from llmqueue.studies.ssjf.spec import settings_from_config
    from llmqueue.studies.ssjf.tables import capacity_table, load_trace

    P = sm.params
    fits = {path: read_json(path) for path in sm.input.fits}
    settings = settings_from_config(P.settings, P.batch_profiles, P.step_profiles, fits)
    trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
    write_csv(capacity_table(trace, settings, P.requests, P.seed), sm.output[0])


def claims(sm: Any) -> None:
    """Claim 10 in three groups from the SSJF tables (llmqueue.studies.ssjf.claims)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.io import write_csv
    from llmqueue.studies.ssjf.claims import claims_rows, official_claims_rows
    from llmqueue.studies.ssjf.spec import official_from_config

    P = sm.params
    R = P.protocol
    book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), P.tolerances)
    rows = official_claims_rows(
        book,
        pd.read_csv(sm.input.groups),
        official_from_config(P.official),
        R["jobs"],
        R["runs"],
        P.guard_s,
        pd.read_csv(sm.input.sweep),
    )
    rows += claims_rows(
        book,
        pd.read_csv(sm.input.protocol),
        pd.read_csv(sm.input.poisson),
        pd.read_csv(sm.input.predictors),
        P.claim_settings,
        P.ssjf_model,
        P.claim_load,
        R["rate_per_s"],
    )
    write_csv(claims_frame(rows), sm.output[0])


def groups(sm: Any) -> None:
    """Claim 10's three groups read as SSJF's evaluation reads them
    (llmqueue.studies.ssjf.groups.groups_table)."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.studies.ssjf.groups import groups_table

    P = sm.params
    df = groups_table(
        pd.read_csv(sm.input.official),
        pd.read_csv(sm.input.protocol),
        pd.read_csv(sm.input.predictors),
        pd.read_csv(sm.input.official_predictors),
        P.ssjf_model,
        P.ssjf_predictor,
        P.claim_settings,
    )
    write_csv(df, sm.output[0])


def jct(sm: Any) -> None:
    """JCT and wait of every policy against load, Poisson or replay (llmqueue.studies.ssjf.tables.jct_table)."""
    import logging

    import pandas as pd

    from llmqueue.io import read_json, write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.ssjf.spec import settings_from_config
    from llmqueue.studies.ssjf.tables import jct_table, load_trace

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    fits = {path: read_json(path) for path in sm.input.fits}
    settings = settings_from_config(P.settings, P.batch_profiles, P.step_profiles, fits)
    trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
    df = jct_table(
        trace,
        settings,
        pd.read_csv(sm.input.capacity),
        load_model(sm.input.model),
        sm.wildcards.ssjf_arrivals,
        P.loads,
        SimSettings.from_config(P.sim),
        P.guard_s,
        P.seed,
        logging.info,
    )
    write_csv(df, sm.output[0])


def official(sm: Any) -> None:
    """SSJF's protocol on SSJF's inputs, served as their simulator and as this engine serves
    (llmqueue.studies.ssjf.official.official_table); with params.sweep, group a's continuous batching
    at each batch size SSJF's run script sweeps (official_sweep_table)."""
    from llmqueue.io import read_json, write_csv
    from llmqueue.studies.ssjf.official import (
        load_predictions,
        official_sweep_table,
        official_table,
    )
    from llmqueue.studies.ssjf.spec import official_from_config, settings_from_config

    P = sm.params
    R = P.protocol
    official = official_from_config(P.official)
    fits = {path: read_json(path) for path in sm.input.fits}
    (setting,) = settings_from_config(
        P.settings, P.batch_profiles, P.step_profiles, fits, [official.setting]
    )
    args = (
        load_predictions(official.ssjf_file),
        official,
        setting,
        R["jobs"],
        R["runs"],
        R["rates_per_s"],
        R["throughput_percentile"],
        P.guard_s,
        P.seed,
    )
    if P.sweep:
        df = official_sweep_table(*args, official.sweep_batch_sizes or (official.batch_size,))
    else:
        df = official_table(*args)
    write_csv(df, sm.output[0])


def official_predictors(sm: Any) -> None:
    """SSJF's published proxy-model classes scored against the true lengths
    (llmqueue.studies.ssjf.official.official_predictor_table)."""
    from llmqueue.io import write_csv
    from llmqueue.studies.ssjf.official import load_predictions, official_predictor_table
    from llmqueue.studies.ssjf.spec import official_from_config

    official = official_from_config(sm.params.official)
    files = {name: load_predictions(f) for name, f in official.files.items()}
    write_csv(official_predictor_table(files), sm.output[0])


def predictors(sm: Any) -> None:
    """Every predictor scored on the held-out rows (llmqueue.studies.ssjf.tables.predictor_table)."""
    from llmqueue.io import write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.studies.ssjf.tables import load_trace, predictor_table

    P = sm.params
    trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
    models = {k: load_model(path) for k, path in zip(P.kinds, sm.input.models, strict=True)}
    write_csv(predictor_table(trace, P.predictors, models, P.seed), sm.output[0])


def protocol(sm: Any) -> None:
    """SSJF's own protocol: short runs of jobs in whole-second slots (llmqueue.studies.ssjf.tables.protocol_table)."""
    import pandas as pd

    from llmqueue.io import read_json, write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.studies.ssjf.spec import settings_from_config
    from llmqueue.studies.ssjf.tables import load_trace, protocol_table

    P = sm.params
    R = P.protocol
    fits = {path: read_json(path) for path in sm.input.fits}
    settings = settings_from_config(P.settings, P.batch_profiles, P.step_profiles, fits)
    df = protocol_table(
        load_trace(sm.input.trace, P.columns, P.train_fraction),
        settings,
        pd.read_csv(sm.input.capacity),
        load_model(sm.input.model),
        R["jobs"],
        R["runs"],
        R["rate_per_s"],
        R["reference"],
        R["throughput_percentile"],
        P.guard_s,
        P.seed,
        R["rates_per_s"],
    )
    write_csv(df, sm.output[0])


def quality(sm: Any) -> None:
    """JCT gain over FCFS against predictor quality (llmqueue.studies.ssjf.tables.quality_table)."""
    import logging

    import pandas as pd

    from llmqueue.io import read_json, write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.ssjf.spec import settings_from_config
    from llmqueue.studies.ssjf.tables import load_trace, quality_table

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    Q = P.quality
    fits = {path: read_json(path) for path in sm.input.fits}
    (setting,) = settings_from_config(
        P.settings, P.batch_profiles, P.step_profiles, fits, [Q["setting"]]
    )
    models = {k: load_model(path) for k, path in zip(P.kinds, sm.input.models, strict=True)}
    df = quality_table(
        load_trace(sm.input.trace, P.columns, P.train_fraction),
        setting,
        pd.read_csv(sm.input.capacity),
        Q["predictors"],
        models,
        Q["load"],
        SimSettings.from_config(P.sim),
        P.seed,
        logging.info,
    )
    write_csv(df, sm.output[0])


def starvation(sm: Any) -> None:
    """Mean vs max wait with and without the starvation guard (llmqueue.studies.ssjf.tables.starvation_table)."""
    import pandas as pd

    from llmqueue.io import read_json, write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.ssjf.spec import settings_from_config
    from llmqueue.studies.ssjf.tables import load_trace, starvation_table

    P = sm.params
    S = P.starvation
    fits = {path: read_json(path) for path in sm.input.fits}
    (setting,) = settings_from_config(
        P.settings, P.batch_profiles, P.step_profiles, fits, [S["setting"]]
    )
    df = starvation_table(
        load_trace(sm.input.trace, P.columns, P.train_fraction),
        setting,
        pd.read_csv(sm.input.capacity),
        load_model(sm.input.model),
        S["mode"],
        S["load"],
        S["guards_s"],
        SimSettings.from_config(P.sim),
        P.seed,
    )
    write_csv(df, sm.output[0])


def train(sm: Any) -> None:
    """One learned output-length predictor (llmqueue.studies.ssjf.tables.train_model), saved with its
    held-out score."""
    from llmqueue.io import write_json
    from llmqueue.predictor.model import save_model
    from llmqueue.studies.ssjf.tables import load_trace, train_model

    P = sm.params
    trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
    model = train_model(trace, sm.wildcards.ssjf_kind, P.learned, P.seed)
    save_model(model, sm.output.model)
    write_json({"meta": model.meta, "held_out": model.score(trace.test).to_dict()}, sm.output.score)
