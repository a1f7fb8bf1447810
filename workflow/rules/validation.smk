# Validation of the serving model against vLLM (issue 17). `make validate-vllm` measures (its own
# environment, never a rule here); these rules only read the committed run folders
# (validation.compare.dir/<run>/): the serving simulator replays every request table with the
# engine's settings and the calibration step law, and its per-request TTFT and JCT are compared
# with vLLM's (llmqueue.studies.validation).
VAL = config["validation"]["compare"]
VAL_RUNS = list(VAL["runs"])
VAL_CATEGORY = "Validation against vLLM"


# The committed files of a run folder the comparison reads.
VAL_FILES = [
    "settings.json",
    "calibration_fit.json",
    "meta.json",
    *(f"{kind}_{t}.csv" for t in VAL["tables"] for kind in ("requests", "steps")),
]


wildcard_constraints:
    vrun="|".join(VAL_RUNS),


rule validation_compare:
    """One run folder: every table replayed (prediction + diagnostic variants), errors per load."""
    input:
        data=lambda w: [f"{VAL['dir']}/{w.vrun}/{n}" for n in VAL_FILES],
        code=script_code("validation_compare.py"),
    output:
        comparison="results/validation/{vrun}/comparison.csv",
        predictions="results/validation/{vrun}/predictions.csv",
    log:
        "logs/validation/compare_{vrun}.log",
    benchmark:
        "logs/benchmarks/validation_compare_{vrun}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        folder=lambda w: f"{VAL['dir']}/{w.vrun}",
        compare={k: VAL[k] for k in VAL if k not in ("runs", "figure_run", "dir")},
        seed=config["seed"],
    script:
        "../scripts/validation_compare.py"


rule validation_table:
    """The error table of every compared run (figures/table_vllm_validation.{csv,md})."""
    input:
        comparisons=expand("results/validation/{vrun}/comparison.csv", vrun=VAL_RUNS),
        settings=[f"{VAL['dir']}/{r}/settings.json" for r in VAL_RUNS],
        code=script_code("validation_table.py"),
    output:
        csv=report(
            "figures/table_vllm_validation.csv",
            caption="../report/table_vllm_validation.rst",
            category=VAL_CATEGORY,
        ),
        md="figures/table_vllm_validation.md",
    log:
        "logs/validation/table.log",
    benchmark:
        "logs/benchmarks/validation_table.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        kv_model=VAL["kv_model"],
        kv_budget=VAL["kv_budget"],
    script:
        "../scripts/validation_table.py"


declare_figure(
    "table_vllm_validation",
    study="validation",
    outputs=["figures/table_vllm_validation.csv", "figures/table_vllm_validation.md"],
    category=VAL_CATEGORY,
)
declare_figure(
    "fig_vllm_validation",
    study="validation",
    plot="fig_vllm_validation",
    data={
        "predictions": f"results/validation/{VAL['figure_run']}/predictions.csv",
        "comparison": f"results/validation/{VAL['figure_run']}/comparison.csv",
        "settings": f"{VAL['dir']}/{VAL['figure_run']}/settings.json",
    },
    params=dict(run=VAL["figure_run"]),
    category=VAL_CATEGORY,
)
