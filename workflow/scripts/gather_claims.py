"""Gather results/claims/<study>.csv into results/claims.csv."""

import pandas as pd

from llmqueue.claims import gather_claims
from llmqueue.io import write_csv

sm = snakemake  # noqa: F821
tables = [p for p in sm.input if p.endswith(".csv")]
write_csv(gather_claims(pd.read_csv(p, dtype={"id": str}) for p in tables), sm.output[0])
