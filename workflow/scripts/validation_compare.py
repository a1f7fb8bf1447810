"""One committed vLLM run replayed through the serving simulator: the error table and the
per-request predictions (llmqueue.studies.validation.compare_run)."""

import logging

from llmqueue.io import write_csv
from llmqueue.studies.validation.spec import CompareSettings, read_run
from llmqueue.studies.validation.tables import compare_run

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
cfg = CompareSettings.from_config(sm.params.compare, sm.params.seed)
data = read_run(sm.params.folder, cfg.tables)
comparison, predictions = compare_run(data, cfg)
logging.info(
    "%s: %d comparison rows, %d predicted requests", data.run_id, len(comparison), len(predictions)
)
write_csv(comparison, sm.output.comparison)
write_csv(predictions, sm.output.predictions)
