"""SSJF's protocol on SSJF's inputs, served as their simulator and as this engine serves
(llmqueue.studies.ssjf.official.official_table); with params.sweep, group a's continuous batching
at each batch size SSJF's run script sweeps (official_sweep_table)."""

from llmqueue.io import read_json, write_csv
from llmqueue.studies.ssjf.official import load_predictions, official_sweep_table, official_table
from llmqueue.studies.ssjf.spec import official_from_config, settings_from_config

sm = snakemake  # noqa: F821
P = sm.params
R = P.protocol
official = official_from_config(P.official)
fits = {path: read_json(path) for path in sm.input.fits}
(setting,) = settings_from_config(
    P.settings, P.batch_profiles, P.step_profiles, fits, [official.setting]
)
args = (
    load_predictions(official.ssjf_file),
    official,
    setting,
    R["jobs"],
    R["runs"],
    R["rates_per_s"],
    R["throughput_percentile"],
    P.guard_s,
    P.seed,
)
if P.sweep:
    df = official_sweep_table(*args, official.sweep_batch_sizes or (official.batch_size,))
else:
    df = official_table(*args)
write_csv(df, sm.output[0])
