"""The literature study's table (llmqueue.studies.literature.tables.literature_table)."""

from llmqueue.io import write_csv
from llmqueue.studies.literature.tables import literature_table

sm = snakemake  # noqa: F821
write_csv(literature_table(sm.input.reference, sm.params.spec, sm.params.seed), sm.output[0])
