"""JCT gain over FCFS against predictor quality (llmqueue.studies.ssjf.tables.quality_table)."""

import logging

import pandas as pd

from llmqueue.io import read_json, write_csv
from llmqueue.predictor.model import load_model
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.ssjf.spec import settings_from_config
from llmqueue.studies.ssjf.tables import load_trace, quality_table

sm = snakemake  # noqa: F821
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
