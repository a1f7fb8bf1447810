"""Every engine's held-out validation matrix in one error table (figures/table_engine_matrix.csv:
each engine's error table with its engine and machine columns) and the medians per engine and
machine beside the targets each engine met (results/validation/matrix/engine_medians.csv,
figures/table_engine_matrix.md; llmqueue.studies.validation.matrix_summary.engine_medians)."""

import pandas as pd

from llmqueue.io import write_csv, write_text
from llmqueue.studies.validation.matrix_summary import engine_medians, markdown_engines

sm = snakemake  # noqa: F821
table = pd.concat([pd.read_csv(p) for p in sm.input.tables], ignore_index=True)
targets = pd.concat([pd.read_csv(p) for p in sm.input.targets], ignore_index=True)
medians = engine_medians(table, targets)
write_csv(table, sm.output.csv)
write_csv(medians, sm.output.medians)
write_text(
    "# The serving model against every engine's validation matrix\n\n"
    "Median absolute relative error (predicted / measured - 1) over each engine's judged runs; "
    "the prediction's step law is fitted on each group's calibration only; probe-scaled: that "
    "law scaled by the speed probe served right before each run; the next two are diagnoses "
    "that read the run (its mean speed, the law fitted on its own iterations).\n\n"
    + markdown_engines(medians),
    sm.output.md,
)
