"""The literature study's exact curves (llmqueue.studies.literature.tables.literature_curves)."""

from llmqueue.io import write_csv
from llmqueue.studies.literature.tables import literature_curves

sm = snakemake  # noqa: F821
write_csv(literature_curves(sm.input.reference, sm.params.spec), sm.output[0])
