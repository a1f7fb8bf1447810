# The step law's form (issue 32, item 3): forms of the step law compared on the validation
# matrix's committed groups, leave-one-batch-out on each group's calibration batches (the only
# data a law is fitted on) and on the judged runs' iterations and mean JCT.
# VMX, VMX_GROUPS and VAL_CATEGORY come from validation.smk (included before this file).


rule validation_law_forms:
    """Each form of llmqueue.studies.validation.law_form fitted on every group's calibration
    batches but one and priced on the held-out batch; fitted on all of them and priced on the
    judged runs' iterations and replayed on their requests; the chosen form (the simplest within
    one standard error of the best over the held-out batches)."""
    input:
        data=[f for g in VMX_GROUPS for f in matrix_group_files(VMX["dir"], g)],
        code=script_code("validation_law_forms.py"),
    output:
        csv="results/validation/matrix/law_forms.csv",
        md=report(
            "figures/table_vllm_law_forms.md",
            caption="../report/table_vllm_law_forms.rst",
            category=VAL_CATEGORY,
        ),
    log:
        "logs/validation/law_forms.log",
    benchmark:
        "logs/benchmarks/validation_law_forms.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        folders=lambda w: [f"{VMX['dir']}/{g}" for g in VMX_GROUPS],
        settings={k: VMX[k] for k in ("kv_model", "kv_budget") if k in VMX},
        seed=config["seed"],
    script:
        "../scripts/validation_law_forms.py"


declare_figure(
    "table_vllm_law_forms",
    study="validation",
    outputs=["figures/table_vllm_law_forms.md"],
    category=VAL_CATEGORY,
)
