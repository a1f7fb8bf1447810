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
    "calibration_steps.csv",
    *(f"{kind}_{t}.csv" for t in VAL["tables"] for kind in ("requests", "steps")),
]


wildcard_constraints:
    vrun="|".join(VAL_RUNS),


rule validation_compare:
    """One run folder: every table replayed (prediction + diagnostic variants), errors per load."""
    input:
        data=lambda w: [f"{VAL['dir']}/{w.vrun}/{n}" for n in VAL_FILES],
        code=step_code("llmqueue.studies.validation.steps:compare"),
    output:
        comparison="results/validation/{vrun}/comparison.csv",
        predictions="results/validation/{vrun}/predictions.csv",
    log:
        "logs/validation/compare_{vrun}.log",
    benchmark:
        "logs/benchmarks/validation_compare_{vrun}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.validation.steps:compare",
        folder=lambda w: f"{VAL['dir']}/{w.vrun}",
        compare={k: VAL[k] for k in VAL if k not in ("runs", "figure_run", "dir")},
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


rule validation_table:
    """The error table of every compared run (figures/table_vllm_validation.{csv,md})."""
    input:
        comparisons=expand("results/validation/{vrun}/comparison.csv", vrun=VAL_RUNS),
        settings=[f"{VAL['dir']}/{r}/settings.json" for r in VAL_RUNS],
        code=step_code("llmqueue.studies.validation.steps:table"),
    output:
        csv=report(
            "figures/table_vllm_validation.csv",
            caption="table_vllm_validation.rst",
            category=VAL_CATEGORY,
        ),
        md="figures/table_vllm_validation.md",
    log:
        "logs/validation/table.log",
    benchmark:
        "logs/benchmarks/validation_table.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.validation.steps:table",
        kv_model=VAL["kv_model"],
        kv_budget=VAL["kv_budget"],
    script:
        "../../../../workflow/scripts/step.py"


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


# The held-out validation matrices, one per engine (validation.matrix_compare.matrices: vLLM's made
# by `make validate-vllm`, transformers' by `make validate-transformers-matrix`): one committed
# folder per group (<dir>/<group>/), each replayed through the serving simulator with the group's
# own calibration law; per engine the error table over its judged runs and its targets; one table
# of every engine's runs with their medians per engine and machine.
VMX = config["validation"]["matrix_compare"]
VMX_MATRICES = {e: dict(m) for e, m in VMX["matrices"].items()}
VMX_ENGINES = list(VMX_MATRICES)
VMX_DIR = VMX_MATRICES["vllm"]["dir"]
VMX_GROUPS = list(
    VMX_MATRICES["vllm"]["groups"]
)  # vLLM's: its figures and the law-form table
VMX_TOKEN_LIMIT = VMX["token_limit_figure"]


wildcard_constraints:
    vengine="|".join(VMX_ENGINES),
    vgroup="|".join(sorted({g for m in VMX_MATRICES.values() for g in m["groups"]})),


rule validation_matrix_group:
    """One group: every judged run replayed (prediction, the other law, the paper's model, the
    law at the warm-up's speed, at the probe's before the run and at the run's speed, the law of
    the run's own session, the in situ law), errors per run and metric, the paper's closed forms
    where they apply, the engine's speed through its sessions; the protocol's calibration rounds,
    knots and probes (empty for a group measured without the protocol)."""
    input:
        data=lambda w: matrix_group_files(VMX_MATRICES[w.vengine]["dir"], w.vgroup),
        code=step_code("llmqueue.studies.validation.steps:matrix"),
    output:
        comparison="results/validation/matrix/{vengine}/{vgroup}/comparison.csv",
        predictions="results/validation/matrix/{vengine}/{vgroup}/predictions.csv",
        closed="results/validation/matrix/{vengine}/{vgroup}/closed_forms.csv",
        speed="results/validation/matrix/{vengine}/{vgroup}/speed_timeline.csv",
        rounds="results/validation/matrix/{vengine}/{vgroup}/calibration_rounds.csv",
        knots="results/validation/matrix/{vengine}/{vgroup}/calibration_knots.csv",
        probes="results/validation/matrix/{vengine}/{vgroup}/probes.csv",
    log:
        "logs/validation/matrix_{vengine}_{vgroup}.log",
    benchmark:
        "logs/benchmarks/validation_matrix_{vengine}_{vgroup}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.validation.steps:matrix",
        folder=lambda w: f"{VMX_MATRICES[w.vengine]['dir']}/{w.vgroup}",
        compare=lambda w: matrix_compare_params(VMX, w.vengine),
        seed=config["seed"],
    script:
        "../../../../workflow/scripts/step.py"


for _engine in VMX_ENGINES:

    rule:
        """One engine's error table and summaries (figures/table_<engine>_matrix.{csv,md}); the
        queue orders' gains in alternating blocks, the repeats' noise floor and every run's error
        in units of it; every target met or missed (targets.csv)."""
        name:
            f"validation_matrix_table_{_engine}"
        input:
            comparisons=matrix_results(VMX_MATRICES, _engine, "comparison.csv"),
            closed=matrix_results(VMX_MATRICES, _engine, "closed_forms.csv"),
            rounds=matrix_results(VMX_MATRICES, _engine, "calibration_rounds.csv"),
            code=step_code("llmqueue.studies.validation.steps:matrix_table"),
        output:
            csv=report(
                f"figures/table_{_engine}_matrix.csv",
                caption=f"table_{_engine}_matrix.rst",
                category=VAL_CATEGORY,
            ),
            md=f"figures/table_{_engine}_matrix.md",
            summary=f"results/validation/matrix/{_engine}/summary.csv",
            reductions=f"results/validation/matrix/{_engine}/reductions.csv",
            spread=f"results/validation/matrix/{_engine}/spread.csv",
            closed=f"results/validation/matrix/{_engine}/closed_forms.csv",
            blocks=f"results/validation/matrix/{_engine}/blocks.csv",
            block_summary=f"results/validation/matrix/{_engine}/block_summary.csv",
            noise=f"results/validation/matrix/{_engine}/noise_floor.csv",
            sigma=f"results/validation/matrix/{_engine}/errors_in_sigma.csv",
            targets=f"results/validation/matrix/{_engine}/targets.csv",
        log:
            f"logs/validation/matrix_table_{_engine}.log",
        benchmark:
            f"logs/benchmarks/validation_matrix_table_{_engine}.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.validation.steps:matrix_table",
            compare=matrix_compare_params(VMX, _engine),
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    declare_figure(
        f"table_{_engine}_matrix",
        study="validation",
        outputs=[
            f"figures/table_{_engine}_matrix.csv",
            f"figures/table_{_engine}_matrix.md",
        ],
        category=VAL_CATEGORY,
    )


rule validation_matrix_engines:
    """Every engine's matrix in one error table (figures/table_engine_matrix.csv, an engine and
    a machine column) and its medians per engine and machine beside each engine's targets
    (figures/table_engine_matrix.md)."""
    input:
        tables=[f"figures/table_{e}_matrix.csv" for e in VMX_ENGINES],
        targets=[f"results/validation/matrix/{e}/targets.csv" for e in VMX_ENGINES],
        code=step_code("llmqueue.studies.validation.steps:matrix_engines"),
    output:
        csv=report(
            "figures/table_engine_matrix.csv",
            caption="table_engine_matrix.rst",
            category=VAL_CATEGORY,
        ),
        medians="results/validation/matrix/engine_medians.csv",
        md="figures/table_engine_matrix.md",
    log:
        "logs/validation/matrix_engines.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.validation.steps:matrix_engines",
    script:
        "../../../../workflow/scripts/step.py"


rule validation_matrix_curve:
    """Fig. 4a's closed form for vLLM's no-batching group at its runs' rate."""
    input:
        data=lambda w: matrix_group_files(VMX_DIR, VMX_TOKEN_LIMIT),
        code=step_code("llmqueue.studies.validation.steps:matrix_curve"),
    output:
        "results/validation/matrix/vllm/token_limit_curve.csv",
    log:
        "logs/validation/matrix_curve.log",
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.validation.steps:matrix_curve",
        folder=f"{VMX_DIR}/{VMX_TOKEN_LIMIT}",
        points=200,
    script:
        "../../../../workflow/scripts/step.py"


declare_figure(
    "table_engine_matrix",
    study="validation",
    outputs=[
        "figures/table_engine_matrix.csv",
        "figures/table_engine_matrix.md",
    ],
    category=VAL_CATEGORY,
)
declare_figure(
    "fig_vllm_matrix_errors",
    study="validation",
    plot="fig_vllm_matrix_errors",
    data={
        "table": "figures/table_vllm_matrix.csv",
        "summary": "results/validation/matrix/vllm/summary.csv",
        "reductions": "results/validation/matrix/vllm/reductions.csv",
        "blocks": "results/validation/matrix/vllm/block_summary.csv",
    },
    params=dict(targets=dict(VMX["targets"]), law=VMX["law"]),
    category=VAL_CATEGORY,
)
declare_figure(
    "fig_vllm_matrix_cdfs",
    study="validation",
    plot="fig_vllm_matrix_cdfs",
    data={
        "predictions": expand(
            "results/validation/matrix/vllm/{vgroup}/predictions.csv", vgroup=VMX_GROUPS
        ),
        "table": "figures/table_vllm_matrix.csv",
    },
    category=VAL_CATEGORY,
)
declare_figure(
    "fig_vllm_matrix_speed",
    study="validation",
    plot="fig_vllm_matrix_speed",
    data={
        "timelines": expand(
            "results/validation/matrix/vllm/{vgroup}/speed_timeline.csv",
            vgroup=VMX_GROUPS,
        ),
        "table": "figures/table_vllm_matrix.csv",
    },
    params=dict(window_s=VMX["speed_window_s"]),
    category=VAL_CATEGORY,
)
declare_figure(
    "fig_vllm_token_limit",
    study="validation",
    plot="fig_vllm_token_limit",
    data={
        "curve": "results/validation/matrix/vllm/token_limit_curve.csv",
        "closed": "results/validation/matrix/vllm/closed_forms.csv",
        "table": "figures/table_vllm_matrix.csv",
    },
    params=dict(group=VMX_TOKEN_LIMIT),
    category=VAL_CATEGORY,
)


# Does the engine's speed follow the machine's? The committed machine-speed run
# (validation.machine_speed_compare.dir, made by `make validate-vllm-speed`): decode batches and
# two fixed kernels in turn on one engine start.
VMS = config["validation"].get("machine_speed_compare")
if VMS:

    rule validation_machine_speed:
        """Per cycle: the engine's decode iteration, the model's forward pass and the probes."""
        input:
            data=[
                f"{VMS['dir']}/{n}"
                for n in (
                    "cycles.csv",
                    "steps.csv",
                    "model_steps.csv",
                    "settings.json",
                )
            ],
            meta=f"{VMS['dir']}/meta.json",
            code=step_code("llmqueue.studies.validation.steps:machine_speed"),
        output:
            cycles="results/validation/machine_speed/cycles.csv",
            summary="results/validation/machine_speed/summary.csv",
        log:
            "logs/validation/machine_speed.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.validation.steps:machine_speed",
        script:
            "../../../../workflow/scripts/step.py"

    declare_figure(
        "fig_vllm_machine_speed",
        study="validation",
        plot="fig_vllm_machine_speed",
        data={
            "cycles": "results/validation/machine_speed/cycles.csv",
            "summary": "results/validation/machine_speed/summary.csv",
        },
        category=VAL_CATEGORY,
    )
