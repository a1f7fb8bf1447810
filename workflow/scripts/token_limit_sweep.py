"""One token-limit sweep: closed form, exact and simulated delay for every limit of the grid."""

import logging

from llmqueue.io import read_json, write_csv
from llmqueue.latency import resolve_linear_profile
from llmqueue.studies.token_limit import SimSettings, grid, impatient_table, patient_table
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
logging.basicConfig(
    filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s", force=True
)
tl = sm.params.section
fit = read_json(sm.input.fit[0]) if sm.input.fit else None
latency = resolve_linear_profile(sm.wildcards.profile, sm.params.profile_cfg, fit)
law = parse_law(tl["tokens"])
limits = grid(tl["limits"])
sim = SimSettings.from_config(tl["simulation"]) if sm.params.simulate else None
logging.info(
    "profile %s: a = %.6g s/token, b0 = %.6g s; %d limits; simulate=%s",
    latency.name,
    latency.a_s_per_token,
    latency.b0_s,
    limits.size,
    sim is not None,
)
if sm.wildcards.scenario == "patient":
    df = patient_table(
        law, latency, tl["patient"]["rate_per_s"], limits, sim, sm.params.seed, logging.info
    )
else:
    df = impatient_table(
        law,
        latency,
        tl["impatient"]["rate_per_s"],
        tl["impatient"]["patience_s"],
        limits,
        sim,
        sm.params.seed,
        tl.get("impatience_exp_reading", "same_mean_service"),
        tl["exact"]["step_s"],
        tl["exact"]["max_rel_error"],
        logging.info,
    )
df.insert(1, "a_s_per_token", latency.a_s_per_token)
df.insert(2, "b0_s", latency.b0_s)
write_csv(df, sm.output[0])
logging.info("wrote %s", sm.output[0])
