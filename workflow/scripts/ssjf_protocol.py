"""SSJF's own protocol: short runs of jobs in whole-second slots (llmqueue.studies.ssjf.tables.protocol_table)."""

import pandas as pd

from llmqueue.io import read_json, write_csv
from llmqueue.predictor.model import load_model
from llmqueue.studies.ssjf.spec import settings_from_config
from llmqueue.studies.ssjf.tables import load_trace, protocol_table

sm = snakemake  # noqa: F821
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
