"""JCT and wait of every policy against load, Poisson or replay (llmqueue.studies.ssjf.tables.jct_table)."""

import logging

import pandas as pd

from llmqueue.io import read_json, write_csv
from llmqueue.predictor.model import load_model
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.ssjf.spec import settings_from_config
from llmqueue.studies.ssjf.tables import jct_table, load_trace

sm = snakemake  # noqa: F821
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
