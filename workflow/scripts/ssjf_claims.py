"""Claim 10 from the SSJF tables (llmqueue.studies.ssjf.claims.claims_rows)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.io import write_csv
from llmqueue.studies.ssjf.claims import claims_rows

sm = snakemake  # noqa: F821
P = sm.params
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), P.tolerances)
rows = claims_rows(
    book,
    pd.read_csv(sm.input.protocol),
    pd.read_csv(sm.input.poisson),
    pd.read_csv(sm.input.predictors),
    P.claim_settings,
    P.ssjf_model,
    P.claim_load,
)
write_csv(claims_frame(rows), sm.output[0])
