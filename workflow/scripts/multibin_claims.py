"""Claim 11 (Multi-Bin Batching) from the study's tables (llmqueue.studies.multibin.claims.claims_rows)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.io import write_csv
from llmqueue.studies.multibin.claims import claims_rows

sm = snakemake  # noqa: F821
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), sm.params.tolerances)
rows = claims_rows(
    book,
    pd.read_csv(sm.input.synthetic),
    pd.read_csv(sm.input.capacity),
    pd.read_csv(sm.input.latency),
)
write_csv(claims_frame(rows), sm.output[0])
