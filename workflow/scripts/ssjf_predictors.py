"""Every predictor scored on the held-out rows (llmqueue.studies.ssjf.tables.predictor_table)."""

from llmqueue.io import write_csv
from llmqueue.predictor.model import load_model
from llmqueue.studies.ssjf.tables import load_trace, predictor_table

sm = snakemake  # noqa: F821
P = sm.params
trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
models = {k: load_model(path) for k, path in zip(P.kinds, sm.input.models, strict=True)}
write_csv(predictor_table(trace, P.predictors, models, P.seed), sm.output[0])
