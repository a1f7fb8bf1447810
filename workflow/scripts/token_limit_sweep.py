"""One token-limit sweep (a profile and a scenario): closed form, exact and simulated delay for
every limit of the grid (llmqueue.studies.token_limit.tables.sweep_table)."""

import logging

from llmqueue.grids import grid_from_config
from llmqueue.io import read_json, write_csv
from llmqueue.profiles import resolve_linear_profile
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.token_limit.tables import sweep_table
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
logging.basicConfig(
    filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s", force=True
)
P = sm.params
fit = read_json(sm.input.fit[0]) if sm.input.fit else None
latency = resolve_linear_profile(sm.wildcards.profile, P.profile_cfg, fit)
limits = grid_from_config(P.limits, "token_limit.limits")
logging.info("profile %s: %s; %d limits", latency.name, latency, limits.size)
df = sweep_table(
    parse_law(P.tokens),
    latency,
    limits,
    P.rate_per_s,
    P.patience_s,
    SimSettings.from_config(P.sim) if P.sim else None,
    P.seed,
    P.impatience,
    logging.info,
)
write_csv(df, sm.output[0])
