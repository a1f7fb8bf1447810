"""F1, F2 over the l grid (Fig. 4d) and the gamma sweep of g(r) = r^gamma."""

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.studies.token_limit import gamma_sweep_table, grid, tradeoff_table
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
tl = sm.params.section
law = parse_law(tl["tokens"])
patient = pd.read_csv(sm.input.patient)
impatient = pd.read_csv(sm.input.impatient)
write_csv(tradeoff_table(law, patient, impatient, tl["tradeoff"]), sm.output.tradeoff)
sweep = tl["tradeoff"].get(
    "gamma_sweep", {"start": tl["tradeoff"]["gamma"], "stop": tl["tradeoff"]["gamma"], "step": 1}
)
write_csv(
    gamma_sweep_table(law, patient, impatient, tl["tradeoff"], grid(sweep)), sm.output.gamma_sweep
)
