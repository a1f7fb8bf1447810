# The step law's form (issue 32, item 3): forms of the step law compared on each engine's
# validation matrix (validation.matrix_compare.matrices), leave-one-batch-out on each group's
# calibration batches (the only data a law is fitted on) and on the judged runs' iterations and
# mean JCT; the engine's prediction law is the form chosen here
# (tests/studies/validation/test_engine_matrices.py).
# VMX, VMX_MATRICES, VMX_ENGINES and VAL_CATEGORY come from validation.smk (included before this
# file).

for _engine in VMX_ENGINES:
    _m = VMX_MATRICES[_engine]

    rule:
        """Each form of llmqueue.studies.validation.law_form fitted on every group's calibration
        batches but one and priced on the held-out batch; fitted on all of them and priced on
        the judged runs' iterations and replayed on their requests; the chosen form (the
        simplest within one standard error of the best over the held-out batches).
        """
        name:
            f"validation_law_forms_{_engine}"
        input:
            data=[f for g in _m["groups"] for f in matrix_group_files(_m["dir"], g)],
            code=step_code("llmqueue.studies.validation.steps:law_forms"),
        output:
            csv=f"results/validation/matrix/{_engine}/law_forms.csv",
            md=report(
                f"figures/table_{_engine}_law_forms.md",
                caption=f"table_{_engine}_law_forms.rst",
                category=VAL_CATEGORY,
            ),
        log:
            f"logs/validation/law_forms_{_engine}.log",
        benchmark:
            f"logs/benchmarks/validation_law_forms_{_engine}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.validation.steps:law_forms",
            folders=[f"{_m['dir']}/{g}" for g in _m["groups"]],
            settings={k: VMX[k] for k in ("kv_model", "kv_budget") if k in VMX},
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    declare_figure(
        f"table_{_engine}_law_forms",
        study="validation",
        outputs=[f"figures/table_{_engine}_law_forms.md"],
        category=VAL_CATEGORY,
    )
