"""One lambda sweep of the batching study (a Fig. 5 panel, or Fig. 6a / 6b for one profile):
llmqueue.studies.batching.tables.sweep_table with the rule's per-job spec."""

import logging

from llmqueue.io import read_json, write_csv
from llmqueue.profiles import resolve_batch_profile
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.batching.spec import ChainSettings, SweepSpec, sweep_law
from llmqueue.studies.batching.tables import sweep_table

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
P = sm.params
fit = read_json(sm.input.fit[0]) if sm.input.fit else None
profile = resolve_batch_profile(P.profile, P.profile_cfg, fit)
spec = SweepSpec.from_dict(P.spec)
df = sweep_table(
    spec,
    profile,
    sweep_law(spec.tokens, spec.tail_cap_tokens),
    SimSettings.from_config(P.sim),
    ChainSettings.from_config(P.chain),
    P.seed,
    logging.info,
)
write_csv(df, sm.output[0])
