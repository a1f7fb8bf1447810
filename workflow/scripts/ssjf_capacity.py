"""FCFS capacity of every (setting, batching mode) (llmqueue.studies.ssjf.tables.capacity_table)."""

from llmqueue.io import read_json, write_csv
from llmqueue.studies.ssjf.spec import settings_from_config
from llmqueue.studies.ssjf.tables import capacity_table, load_trace

sm = snakemake  # noqa: F821
P = sm.params
fits = {path: read_json(path) for path in sm.input.fits}
settings = settings_from_config(P.settings, P.batch_profiles, P.step_profiles, fits)
trace = load_trace(sm.input.trace, P.columns, P.train_fraction)
write_csv(capacity_table(trace, settings, P.requests, P.seed), sm.output[0])
