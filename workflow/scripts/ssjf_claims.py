"""Claim 10 in three groups from the SSJF tables (llmqueue.studies.ssjf.claims)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.io import write_csv
from llmqueue.studies.ssjf.claims import claims_rows, official_claims_rows
from llmqueue.studies.ssjf.spec import official_from_config

sm = snakemake  # noqa: F821
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
