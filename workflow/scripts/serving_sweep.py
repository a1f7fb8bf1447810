"""Mean and p99 JCT of one serving policy over the rate grid (llmqueue.studies.serving.tables.policy_sweep)."""

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.serving.spec import setup_for_rule
from llmqueue.studies.serving.tables import geometric_rates, policy_sweep

sm = snakemake  # noqa: F821
P = sm.params
name = sm.wildcards.spolicy
st = setup_for_rule(P, sm.input, name)
cap = pd.read_csv(sm.input.capacity)
rates = geometric_rates(P.rates["start"], P.rates["stop"], P.rates["points"])
df = policy_sweep(
    st.policies,
    st.latencies,
    st.workload,
    rates,
    {name: float(cap["max_rate_per_s"].iloc[0])},
    SimSettings.from_config(P.sim),
    seed=P.seed,
    max_load=P.max_load,
)
df["spec"] = P.spec
df["latency"] = st.latencies[name].name
df["verdict"] = st.latencies[name].verdict
df["sim_requests"] = P.sim["requests"]
write_csv(df, sm.output[0])
