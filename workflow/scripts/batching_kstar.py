"""Claim 8: every fixed batch size K at the claim rate for one profile
(llmqueue.studies.batching.tables.kstar_table)."""

from llmqueue.io import read_json, write_csv
from llmqueue.profiles import resolve_batch_profile
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.batching.spec import ChainSettings, sweep_law
from llmqueue.studies.batching.tables import kstar_table

sm = snakemake  # noqa: F821
P = sm.params
fit = read_json(sm.input.fit[0]) if sm.input.fit else None
profile = resolve_batch_profile(P.profile, P.profile_cfg, fit)
df = kstar_table(
    profile,
    sweep_law(P.tokens, P.tail_cap_tokens),
    P.rate_per_s,
    tuple(P.k_range),
    SimSettings.from_config(P.sim),
    ChainSettings.from_config(P.chain),
    P.seed,
    P.stream,
)
write_csv(df, sm.output[0])
