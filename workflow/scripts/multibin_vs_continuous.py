"""Multi-Bin Batching against continuous batching, and how their two time laws relate
(llmqueue.studies.multibin.tables.vs_continuous_tables)."""

import logging

from llmqueue.io import read_json, write_csv
from llmqueue.profiles import fit_json_path, resolve_batch_profile, resolve_step_profile
from llmqueue.studies.multibin.spec import VsContinuousSpec
from llmqueue.studies.multibin.tables import vs_continuous_tables

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
P = sm.params
spec = VsContinuousSpec.from_config(P.spec)


def fit(cfg):
    path = fit_json_path(cfg)
    return read_json(path) if path else None


batch_law = resolve_batch_profile(spec.batch_profile, P.batch_cfg, fit(P.batch_cfg))
step_law = resolve_step_profile(spec.step_profile, P.step_cfg, fit(P.step_cfg))
table, laws = vs_continuous_tables(spec, batch_law, step_law, P.seed, logging.info)
write_csv(table, sm.output.table)
write_csv(laws, sm.output.laws)
