# llmqueue plan's worked example as a workflow (llmqueue.plan.spec): the search space split into
# `plan.slices` jobs (llmqueue plan --slice K/N), merged by rule plan into one table, a summary
# (best configuration, fewest replicas for the target rate) and the Pareto figure. A search too
# large for one machine runs the same way on a cluster: --profile profiles/slurm.
PLAN = config.get("plan") or {}
if PLAN:
    from llmqueue.plan.spec import plan_args, run_setting

    PLAN_SLICES = list(range(PLAN["slices"]))
    PLAN_TRACE = PLAN["trace"] or config["data"]["azure_trace"]

    wildcard_constraints:
        pslice=r"\d+",

    rule plan_slice:
        """One slice of the search space: every configuration's goodput and SLO values."""
        input:
            fits=fit_inputs(config["step_profiles"][PLAN["step_profile"]]),
            trace=PLAN_TRACE,
            code=step_code("llmqueue.steps:plan_slice"),
        output:
            "results/plan/slice_{pslice}.csv",
        log:
            "logs/plan/slice_{pslice}.log",
        benchmark:
            "logs/benchmarks/plan_slice_{pslice}.tsv"
        conda:
            "../../../envs/analysis.yaml"
        params:
            step="llmqueue.steps:plan_slice",
            args=plan_args(PLAN, seed=config["seed"]),
            slices=len(PLAN_SLICES),
            profiles={
                "step_profiles": {
                    PLAN["step_profile"]: config["step_profiles"][PLAN["step_profile"]]
                }
            },
        script:
            "../../../workflow/scripts/step.py"

    rule plan:
        """The slices merged: results/plan/plan.csv (every configuration, its Pareto flag) and
        results/plan/summary.json (best, fewest replicas for plan.target_rate)."""
        input:
            slices=expand("results/plan/slice_{k}.csv", k=PLAN_SLICES),
            code=step_code("llmqueue.steps:plan_merge"),
        output:
            csv="results/plan/plan.csv",
            summary="results/plan/summary.json",
        log:
            "logs/plan/merge.log",
        conda:
            "../../../envs/analysis.yaml"
        params:
            step="llmqueue.steps:plan_merge",
            rate=str(PLAN["rate"]),
            target_rate=PLAN["target_rate"],
            slo=PLAN["slo"],
        script:
            "../../../workflow/scripts/step.py"

    declare_figure(
        "fig_plan_pareto",
        study="plan",
        plot="fig_plan_pareto",
        data={"plan": "results/plan/plan.csv"},
        params={
            "metric": PLAN["slo"].split("_")[0].split("=")[0].upper(),
            "headroom": run_setting(PLAN, "headroom"),
            "note": (
                f"llmqueue plan, {PLAN['step_profile']}, SLOs {PLAN['slo']}; "
                f"space {PLAN['space']}"
            ),
        },
        category="Operators (llmqueue plan)",
    )
