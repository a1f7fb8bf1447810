# Serving study (issue 13): every batch former on one GPU profile (llmqueue.studies.serving).
# Per policy: its highest sustainable rate (a saturated queue, llmqueue.sim.capacity), then its
# mean and p99 JCT over a geometric grid of arrival rates; the Azure conv trace replayed at its
# own timestamps (time-scaled); two tables and fig_serving_policies.
SERV = config.get("serving") or {}
if SERV:
    SERV_POLICIES = list(SERV["policies"])
    SERV_STATIC = SERV["static_law"]
    SERV_FITS = fit_inputs(config["step_profiles"][SERV["step_profile"]])
    SERV_STATIC_FITS = (
        []
        if SERV_STATIC == "from_step"
        else fit_inputs(config["batch_profiles"][SERV_STATIC])
    )
    # one small dict per job: what serving_setup reads of the config for one policy
    SERV_SETUP = dict(
        step_profile=SERV["step_profile"],
        static_law=SERV_STATIC,
        kv_memory_fraction=SERV["kv_memory_fraction"],
        kv_tokens=SERV["kv_tokens"],
        trace_columns=SERV["trace_columns"],
    )
    SERV_PROFILES = dict(
        step_profiles={
            SERV["step_profile"]: config["step_profiles"][SERV["step_profile"]]
        },
        batch_profiles=(
            {} if SERV_STATIC == "from_step" else {SERV_STATIC: BPROF[SERV_STATIC]}
        ),
    )

    wildcard_constraints:
        spolicy="|".join(SERV_POLICIES),

    rule serving_max_rate:
        """The highest sustainable rate of one policy (a saturated FCFS queue of trace rows)."""
        input:
            fits=SERV_FITS + SERV_STATIC_FITS,
            trace=config["data"]["azure_trace"],
            code=step_code("llmqueue.studies.serving.steps:capacity"),
        output:
            "results/serving/capacity_{spolicy}.csv",
        log:
            "logs/serving/capacity_{spolicy}.log",
        benchmark:
            "logs/benchmarks/serving_capacity_{spolicy}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.serving.steps:capacity",
            setup=SERV_SETUP,
            profiles=SERV_PROFILES,
            spec=lambda w: SERV["policies"][w.spolicy],
            requests=SERV["capacity_requests"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule serving_sweep:
        """Mean and p99 JCT of one policy over the arrival-rate grid."""
        input:
            capacity="results/serving/capacity_{spolicy}.csv",
            fits=SERV_FITS + SERV_STATIC_FITS,
            trace=config["data"]["azure_trace"],
            code=step_code("llmqueue.studies.serving.steps:sweep"),
        output:
            "results/serving/sweep_{spolicy}.csv",
        log:
            "logs/serving/sweep_{spolicy}.log",
        benchmark:
            "logs/benchmarks/serving_sweep_{spolicy}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.serving.steps:sweep",
            setup=SERV_SETUP,
            profiles=SERV_PROFILES,
            spec=lambda w: SERV["policies"][w.spolicy],
            rates=SERV["rates"],
            max_load=SERV["max_load"],
            sim=SERV["simulation"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule serving_replay:
        """The trace at its own timestamps, time-scaled to each replay load, through one policy."""
        input:
            capacity="results/serving/capacity_{spolicy}.csv",
            reference=f"results/serving/capacity_{SERV['replay']['reference']}.csv",
            fits=SERV_FITS + SERV_STATIC_FITS,
            trace=config["data"]["azure_trace"],
            code=step_code("llmqueue.studies.serving.steps:replay"),
        output:
            "results/serving/replay_{spolicy}.csv",
        log:
            "logs/serving/replay_{spolicy}.log",
        benchmark:
            "logs/benchmarks/serving_replay_{spolicy}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.serving.steps:replay",
            setup=SERV_SETUP,
            profiles=SERV_PROFILES,
            spec=lambda w: SERV["policies"][w.spolicy],
            loads=SERV["replay"]["loads"],
            warmup=SERV["replay"]["warmup"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule serving_tables:
        """figures/serving_capacity.{csv,md} and figures/serving_replay.{csv,md}."""
        input:
            capacity=expand("results/serving/capacity_{p}.csv", p=SERV_POLICIES),
            replay=expand("results/serving/replay_{p}.csv", p=SERV_POLICIES),
            code=step_code("llmqueue.studies.serving.steps:tables"),
        output:
            capacity_csv="figures/serving_capacity.csv",
            capacity_md="figures/serving_capacity.md",
            replay_csv="figures/serving_replay.csv",
            replay_md="figures/serving_replay.md",
        log:
            "logs/serving/tables.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.serving.steps:tables",
            reference=SERV["replay"]["reference"],
        script:
            "../../../../workflow/scripts/step.py"

    SERV_CATEGORY = "Serving (continuous batching)"
    declare_figure(
        "table_serving_capacity",
        study="serving",
        outputs=["figures/serving_capacity.csv", "figures/serving_capacity.md"],
        category=SERV_CATEGORY,
    )
    declare_figure(
        "table_serving_replay",
        study="serving",
        outputs=["figures/serving_replay.csv", "figures/serving_replay.md"],
        category=SERV_CATEGORY,
    )
    declare_figure(
        "fig_serving_policies",
        study="serving",
        plot="fig_serving_policies",
        data={p: f"results/serving/sweep_{p}.csv" for p in SERV_POLICIES},
        params=dict(
            policies=SERV_POLICIES,
            step_profile=SERV["step_profile"],
            static_law=SERV_STATIC,
        ),
        category=SERV_CATEGORY,
    )
