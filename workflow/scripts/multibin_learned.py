"""Multi-Bin Batching with bins from the SSJF study's learned length model on its held-out rows
(llmqueue.studies.multibin.tables.learned_capacity_table)."""

import logging

from llmqueue.io import write_csv
from llmqueue.predictor.model import load_model
from llmqueue.sim.predictors import Learned
from llmqueue.studies.multibin.spec import LLMSpec
from llmqueue.studies.multibin.tables import learned_capacity_table
from llmqueue.studies.ssjf.tables import load_trace, row_predictions

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
P = sm.params
trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
predictor = Learned(sm.input.model, load_model(sm.input.model))
predictions = row_predictions(predictor, trace, P.seed)
df = learned_capacity_table(
    LLMSpec.from_config(P.spec),
    trace.test.prompt_tokens,
    trace.test.output_tokens,
    predictions,
    predictor,
    f"learned {P.kind}",
    P.seed,
    logging.info,
)
write_csv(df, sm.output[0])
