# The prefix study (claim 13; llmqueue.studies.prefix): vLLM's automatic prefix caching on
# Mooncake's FAST'25 traces, on vidur's A100 and H100 kernels. Per (trace, step profile) one job
# of every run; then the table, claim 13 and three figures. `make prefix` builds them.
PFX = config.get("prefix") or {}
PFX_REFERENCE = "src/llmqueue/studies/prefix/reference_claims.csv"
if PFX:
    PFX_TRACES = list(PFX["traces"])
    PFX_PROFILES = list(PFX["step_profiles"])
    PFX_RUNS = expand(
        "results/prefix/runs_{ptrace}_{pprofile}.csv",
        ptrace=PFX_TRACES,
        pprofile=PFX_PROFILES,
    )

    wildcard_constraints:
        ptrace="|".join(PFX_TRACES),
        pprofile="|".join(PFX_PROFILES),

    rule prefix_runs:
        """Every run of one trace on one step profile, the cache off and on."""
        input:
            fit=lambda w: fit_inputs(config["step_profiles"][w.pprofile]),
            trace=lambda w: PFX["traces"][w.ptrace],
            code=step_code("llmqueue.studies.prefix.steps:runs"),
        output:
            "results/prefix/runs_{ptrace}_{pprofile}.csv",
        log:
            "logs/prefix/runs_{ptrace}_{pprofile}.log",
        benchmark:
            "logs/benchmarks/prefix_runs_{ptrace}_{pprofile}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.prefix.steps:runs",
            section=PFX,
            profiles=lambda w: {w.pprofile: config["step_profiles"][w.pprofile]},
            profile=lambda w: w.pprofile,
            trace=lambda w: w.ptrace,
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule prefix_table:
        """Every (trace, profile)'s runs in one table."""
        input:
            runs=PFX_RUNS,
            code=step_code("llmqueue.studies.prefix.steps:table"),
        output:
            "results/prefix/runs.csv",
        log:
            "logs/prefix/table.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.prefix.steps:table",
        script:
            "../../../../workflow/scripts/step.py"

    rule prefix_claims:
        input:
            reference=PFX_REFERENCE,
            table="results/prefix/runs.csv",
            code=step_code("llmqueue.studies.prefix.steps:claims"),
        output:
            "results/claims/prefix.csv",
        log:
            "logs/prefix/claims.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.prefix.steps:claims",
            tolerances=config["claims"]["tolerances"],
        script:
            "../../../../workflow/scripts/step.py"

    CLAIM_TABLES.append("results/claims/prefix.csv")
    PFX_CATEGORY = "Prefix caching (Mooncake's traces)"
    declare_figure(
        "fig_prefix_budget",
        study="prefix",
        claims=[13],
        plot="fig_prefix_budget",
        data={"runs": "results/prefix/runs.csv"},
        params=dict(budget_load=PFX["budget_load"]),
        category=PFX_CATEGORY,
    )
    declare_figure(
        "fig_prefix_latency",
        study="prefix",
        plot="fig_prefix_latency",
        data={"runs": "results/prefix/runs.csv"},
        category=PFX_CATEGORY,
    )
    declare_figure(
        "fig_prefix_routers",
        study="prefix",
        plot="fig_prefix_routers",
        data={"runs": "results/prefix/runs.csv"},
        category=PFX_CATEGORY,
    )
    DOC_BLOCKS["prefix-budgets"] = doc_block(
        "prefix_budgets", {"runs": "results/prefix/runs.csv"}
    )
    DOC_BLOCKS["prefix-routers"] = doc_block(
        "prefix_routers", {"runs": "results/prefix/runs.csv"}
    )

    rule prefix:
        """`make prefix`: the study's table, claim rows and figures."""
        input:
            "results/prefix/runs.csv",
            "results/claims/prefix.csv",
            "figures/fig_prefix_budget.png",
            "figures/fig_prefix_latency.png",
            "figures/fig_prefix_routers.png",

else:
    DOC_SKIPPED += ["prefix-budgets", "prefix-routers"]
