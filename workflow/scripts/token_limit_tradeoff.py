"""F1, F2 over the l grid (Fig. 4d) and the gamma sweep of g(r) = r^gamma."""

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.studies.token_limit.spec import gamma_grid
from llmqueue.studies.token_limit.tables import gamma_sweep_table, tradeoff_table
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
tradeoff = sm.params.tradeoff
law = parse_law(sm.params.tokens)
patient = pd.read_csv(sm.input.patient)
impatient = pd.read_csv(sm.input.impatient)
write_csv(tradeoff_table(law, patient, impatient, tradeoff), sm.output.tradeoff)
write_csv(
    gamma_sweep_table(law, patient, impatient, tradeoff, gamma_grid(tradeoff)),
    sm.output.gamma_sweep,
)
