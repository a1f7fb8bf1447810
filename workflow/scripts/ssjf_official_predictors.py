"""SSJF's published proxy-model classes scored against the true lengths
(llmqueue.studies.ssjf.official.official_predictor_table)."""

from llmqueue.io import write_csv
from llmqueue.studies.ssjf.official import load_predictions, official_predictor_table
from llmqueue.studies.ssjf.spec import official_from_config

sm = snakemake  # noqa: F821
official = official_from_config(sm.params.official)
files = {name: load_predictions(f) for name, f in official.files.items()}
write_csv(official_predictor_table(files), sm.output[0])
