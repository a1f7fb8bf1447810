"""Mean vs max wait with and without the starvation guard (llmqueue.studies.ssjf.tables.starvation_table)."""

import pandas as pd

from llmqueue.io import read_json, write_csv
from llmqueue.predictor.model import load_model
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.ssjf.spec import settings_from_config
from llmqueue.studies.ssjf.tables import load_trace, starvation_table

sm = snakemake  # noqa: F821
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
