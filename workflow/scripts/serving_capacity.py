"""The highest sustainable rate of one serving policy (llmqueue.studies.serving.capacity_table)."""

from llmqueue.io import write_csv
from llmqueue.studies.serving import capacity_table, setup_for_rule

sm = snakemake  # noqa: F821
st = setup_for_rule(sm.params, sm.input, sm.wildcards.spolicy)
df = capacity_table(
    st.policies, st.latencies, st.workload, requests=sm.params.requests, seed=sm.params.seed
)
df["kv_tokens"] = st.kv_tokens
write_csv(df, sm.output[0])
