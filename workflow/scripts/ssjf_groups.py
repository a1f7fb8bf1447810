"""Claim 10's three groups read as SSJF's evaluation reads them
(llmqueue.studies.ssjf.groups.groups_table)."""

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.studies.ssjf.groups import groups_table

sm = snakemake  # noqa: F821
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
