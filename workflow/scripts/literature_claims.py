"""Claim 12 (the literature) from the study's table (llmqueue.studies.literature.claims.claims_rows)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.io import write_csv
from llmqueue.studies.literature.claims import claims_rows

sm = snakemake  # noqa: F821
reference = pd.read_csv(sm.input.reference, dtype={"id": str}, keep_default_na=False)
book = ClaimBook(reference, sm.params.tolerances)
rows = claims_rows(book, reference, pd.read_csv(sm.input.table))
write_csv(claims_frame(rows), sm.output[0])
