"""Multi-Bin Batching, simulated LLM: the highest sustainable rate per (p_e, k), exact and
simulated (llmqueue.studies.multibin.tables.llm_capacity_table)."""

import logging

from llmqueue.io import write_csv
from llmqueue.studies.multibin.spec import LLMSpec
from llmqueue.studies.multibin.tables import llm_capacity_table

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
P = sm.params
df = llm_capacity_table(LLMSpec.from_config(P.spec), P.seed, logging.info)
write_csv(df, sm.output[0])
