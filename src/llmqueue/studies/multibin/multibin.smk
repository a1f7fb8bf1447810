# Multi-Bin Batching study (issue 15; Guldogan et al., arXiv 2412.04504; claim 11):
# llmqueue.studies.multibin. Highest sustainable rates exact (llmqueue.analytic.multibin:
# Theorem 4.2 and its exact form for any length law and prediction errors) and simulated
# (replicated saturated queues); latency against the number of bins with Lemma 5.1's bound;
# Multi-Bin against continuous batching on the same measured kernels.
from llmqueue.studies.multibin.spec import trace_files as mb_trace

# every part filled with the schema's defaults (Snakefile: fill_defaults)
MB = config.get("multibin") or {}
if MB:
    MB_VS = MB["vs_continuous"]
    MB_BATCH_CFG = config["batch_profiles"][MB_VS["batch_profile"]]
    MB_STEP_CFG = config["step_profiles"][MB_VS["step_profile"]]

    rule multibin_synthetic:
        """Their synthetic setting: Theorem 4.2 against the simulated highest throughput."""
        input:
            code=step_code("llmqueue.studies.multibin.steps:synthetic"),
        output:
            "results/multibin/synthetic.csv",
        log:
            "logs/multibin/synthetic.log",
        benchmark:
            "logs/benchmarks/multibin_synthetic.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.multibin.steps:synthetic",
            spec=MB["synthetic"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule multibin_llm_capacity:
        """Their simulated LLM: highest sustainable rate per k and prediction error p_e."""
        input:
            trace=mb_trace(MB["llm"]["tokens"]),
            code=step_code("llmqueue.studies.multibin.steps:llm_table"),
        output:
            "results/multibin/llm_capacity.csv",
        log:
            "logs/multibin/llm_capacity.log",
        benchmark:
            "logs/benchmarks/multibin_llm_capacity.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.multibin.steps:llm_table",
            table="capacity",
            spec=MB["llm"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    MB_LEARNED = MB["llm"]["learned_model"]  # the schema's default: regressor
    if MB_LEARNED != "none" and config.get("ssjf"):

        rule multibin_learned:
            """Their simulated LLM with bins from the SSJF study's learned model (held-out rows)."""
            input:
                model=f"results/ssjf/models/{MB_LEARNED}.model",
                trace=config["ssjf"]["trace"],
                code=step_code("llmqueue.studies.multibin.steps:learned"),
            output:
                "results/multibin/llm_learned.csv",
            log:
                "logs/multibin/llm_learned.log",
            benchmark:
                "logs/benchmarks/multibin_llm_learned.tsv"
            conda:
                "../../../../envs/analysis.yaml"
            params:
                step="llmqueue.studies.multibin.steps:learned",
                spec=MB["llm"],
                kind=MB_LEARNED,
                columns=config["ssjf"]["columns"],
                train_fraction=config["ssjf"]["train_fraction"],
                seed=config["seed"],
            script:
                "../../../../workflow/scripts/step.py"

    rule multibin_llm_latency:
        """Their simulated LLM: mean latency against k at several loads, Lemma 5.1 beside it."""
        input:
            trace=mb_trace(MB["llm"]["tokens"]),
            code=step_code("llmqueue.studies.multibin.steps:llm_table"),
        output:
            "results/multibin/llm_latency.csv",
        log:
            "logs/multibin/llm_latency.log",
        benchmark:
            "logs/benchmarks/multibin_llm_latency.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.multibin.steps:llm_table",
            table="latency",
            spec=MB["llm"],
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule multibin_vs_continuous:
        """Multi-Bin (Eq. 18) against continuous batching (step law) on the same kernels."""
        input:
            fits=sorted({*fit_inputs(MB_BATCH_CFG), *fit_inputs(MB_STEP_CFG)}),
            trace=mb_trace(MB_VS["tokens"]),
            code=step_code("llmqueue.studies.multibin.steps:vs_continuous"),
        output:
            table="results/multibin/vs_continuous.csv",
            laws="results/multibin/time_laws.csv",
        log:
            "logs/multibin/vs_continuous.log",
        benchmark:
            "logs/benchmarks/multibin_vs_continuous.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.multibin.steps:vs_continuous",
            spec=MB_VS,
            batch_cfg=MB_BATCH_CFG,
            step_cfg=MB_STEP_CFG,
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule multibin_claims:
        input:
            reference="src/llmqueue/studies/multibin/reference_claims.csv",
            synthetic="results/multibin/synthetic.csv",
            capacity="results/multibin/llm_capacity.csv",
            latency="results/multibin/llm_latency.csv",
            code=step_code("llmqueue.studies.multibin.steps:claims"),
        output:
            "results/claims/multibin.csv",
        log:
            "logs/multibin/claims.log",
        benchmark:
            "logs/benchmarks/multibin_claims.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.multibin.steps:claims",
            tolerances=config["claims"]["tolerances"],
        script:
            "../../../../workflow/scripts/step.py"

    CLAIM_TABLES.append("results/claims/multibin.csv")
    # ---- figures
    MB_CATEGORY = "Multi-Bin Batching (arXiv 2412.04504)"
    declare_figure(
        "fig_multibin_throughput",
        study="multibin",
        claims=[11],
        plot="fig_multibin_throughput",
        data={
            "synthetic": "results/multibin/synthetic.csv",
            "llm": "results/multibin/llm_capacity.csv",
            "reference": "src/llmqueue/studies/multibin/reference_claims.csv",
            **(
                {"learned": "results/multibin/llm_learned.csv"}
                if MB_LEARNED != "none" and config.get("ssjf")
                else {}
            ),
        },
        category=MB_CATEGORY,
    )
    declare_figure(
        "fig_multibin_latency",
        study="multibin",
        claims=[11],
        plot="fig_multibin_latency",
        data={"latency": "results/multibin/llm_latency.csv"},
        category=MB_CATEGORY,
    )
    declare_figure(
        "fig_multibin_vs_continuous",
        study="multibin",
        plot="fig_multibin_vs_continuous",
        data={
            "table": "results/multibin/vs_continuous.csv",
            "laws": "results/multibin/time_laws.csv",
        },
        category=MB_CATEGORY,
    )
