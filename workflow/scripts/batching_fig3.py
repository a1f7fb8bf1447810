"""Fig. 3a (E[L_b], E[T_b]) and Fig. 3b (mu_b) tables (llmqueue.studies.batching)."""

from llmqueue.io import write_csv
from llmqueue.profiles import resolve_batch_profile
from llmqueue.studies.batching.tables import fig3a_table, fig3b_table
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
P = sm.params
profiles = [resolve_batch_profile(n, P.profiles[n]) for n in P.profile_names]
write_csv(
    fig3a_table(parse_law(P.fig3a_tokens), profiles, P.b_max, P.mc_samples, P.seed),
    sm.output.fig3a,
)
write_csv(fig3b_table(profiles, P.fig3b_tokens, P.b_max), sm.output.fig3b)
