"""The serving study's rule steps (capacity, the rate sweep and the trace replay per serving
policy, and their tables): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def capacity(sm: Any) -> None:
    """The highest sustainable rate of one serving policy (llmqueue.studies.serving.tables.capacity_table)."""
    from llmqueue.io import write_csv
    from llmqueue.studies.serving.spec import setup_for_rule
    from llmqueue.studies.serving.tables import capacity_table

    st = setup_for_rule(sm.params, sm.input, sm.wildcards.spolicy)
    df = capacity_table(
        st.policies, st.latencies, st.workload, requests=sm.params.requests, seed=sm.params.seed
    )
    df["kv_tokens"] = st.kv_tokens
    write_csv(df, sm.output[0])


def replay(sm: Any) -> None:
    """The trace replayed at its own timestamps through one serving policy
    (llmqueue.studies.serving.tables.replay_table)."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.studies.serving.spec import setup_for_rule
    from llmqueue.studies.serving.tables import replay_table

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


def sweep(sm: Any) -> None:
    """Mean and p99 JCT of one serving policy over the rate grid (llmqueue.studies.serving.tables.policy_sweep)."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.serving.spec import setup_for_rule
    from llmqueue.studies.serving.tables import geometric_rates, policy_sweep

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


def tables(sm: Any) -> None:
    """The serving study's two tables (llmqueue.studies.serving.tables.capacity_markdown, replay_markdown)."""
    import pandas as pd

    from llmqueue.io import write_csv, write_text
    from llmqueue.studies.serving.tables import capacity_markdown, replay_markdown

    cap = pd.concat([pd.read_csv(p) for p in sm.input.capacity], ignore_index=True)
    rep = pd.concat([pd.read_csv(p) for p in sm.input.replay], ignore_index=True)
    write_csv(cap, sm.output.capacity_csv)
    write_text(capacity_markdown(cap), sm.output.capacity_md)
    write_csv(rep, sm.output.replay_csv)
    write_text(replay_markdown(rep, sm.params.reference), sm.output.replay_md)
