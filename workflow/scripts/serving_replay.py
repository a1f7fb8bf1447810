"""The trace replayed at its own timestamps through one serving policy
(llmqueue.studies.serving.tables.replay_table)."""

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.studies.serving.spec import setup_for_rule
from llmqueue.studies.serving.tables import replay_table

sm = snakemake  # noqa: F821
P = sm.params
name = sm.wildcards.spolicy
st = setup_for_rule(P, sm.input, name)
ref = pd.read_csv(sm.input.reference)
df = replay_table(
    st.policies,
    st.latencies,
    st.replay,
    P.loads,
    {name: float(pd.read_csv(sm.input.capacity)["max_rate_per_s"].iloc[0])},
    reference_rate_per_s=float(ref["max_rate_per_s"].iloc[0]),
    reference_name=str(ref["policy"].iloc[0]),
    warmup=P.warmup,
    seed=P.seed,
)
write_csv(df, sm.output[0])
