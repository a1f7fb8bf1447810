"""Multi-Bin Batching, synthetic setting (Theorem 4.2 against simulation):
llmqueue.studies.multibin.tables.synthetic_table."""

import logging

from llmqueue.io import write_csv
from llmqueue.studies.multibin.spec import SyntheticSpec
from llmqueue.studies.multibin.tables import synthetic_table

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
P = sm.params
df = synthetic_table(SyntheticSpec.from_config(P.spec), P.seed, logging.info)
write_csv(df, sm.output[0])
