"""One learned output-length predictor (llmqueue.studies.ssjf.tables.train_model), saved with its
held-out score."""

from llmqueue.io import write_json
from llmqueue.predictor.model import save_model
from llmqueue.studies.ssjf.tables import load_trace, train_model

sm = snakemake  # noqa: F821
P = sm.params
trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
model = train_model(trace, sm.wildcards.ssjf_kind, P.learned, P.seed)
save_model(model, sm.output.model)
write_json({"meta": model.meta, "held_out": model.score(trace.test).to_dict()}, sm.output.score)
