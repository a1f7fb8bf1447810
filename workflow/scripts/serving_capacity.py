"""The highest sustainable rate of one serving policy (llmqueue.studies.serving.tables.capacity_table)."""

from llmqueue.io import write_csv
from llmqueue.studies.serving.spec import setup_for_rule
from llmqueue.studies.serving.tables import capacity_table

sm = snakemake  # noqa: F821
st = setup_for_rule(sm.params, sm.input, sm.wildcards.spolicy)
df = capacity_table(
    st.policies, st.latencies, st.workload, requests=sm.params.requests, seed=sm.params.seed
)
df["kv_tokens"] = st.kv_tokens
write_csv(df, sm.output[0])
