# Profiling study (issue 5; paper Sec. II): Table I, Fig. 2a, Fig. 2b, the KV-cache limit, claims 1-2,
# and the per-model latency profiles (results/profiling/<source>/<model>/fit.json) the other studies read.
#
# Sources: paper (Table I, calibration.smk), roofline-<gpu> (predicted, never measured), kernel
# profiles measured by others (profiling.kernel_profiles: vidur's per-operator CSVs + roofline
# attention, verdict measured-kernels), and every committed measurement folder
# data/profiling/<hardware-id>/ listed in profiling.measured. Each writes
# results/profiling/<source>/<model>/fit.json with linear, batch and step laws.
# Measuring is never part of `make reproduce` (timings never repeat exactly): on CPU only the tiny
# smoke profile runs (logs/profiling-smoke/); `profile_cpu` / `profile_cuda` re-measure on demand.

PROF = config["profiling"]
PROF_MODELS = PROF["models"]
ROOF_GPUS = PROF["roofline"]["gpus"]
MEASURED = PROF["measured"]
KERNELS = PROF["kernel_profiles"]
KERNEL_FITS = [
    f"results/profiling/{k}/{v['model']}/fit.json" for k, v in KERNELS.items()
]
STEP_PROFILES = config["step_profiles"]


wildcard_constraints:
    pmodel="|".join(PROF_MODELS),
    gpu="|".join(ROOF_GPUS),
    hw="|".join(MEASURED) if MEASURED else "NO_MEASURED_SOURCE",
    ksrc="|".join(KERNELS) if KERNELS else "NO_KERNEL_SOURCE",


rule profiling_roofline_fit:
    """Roofline-predicted latency profile of one model on one GPU spec (verdict 'predicted')."""
    input:
        code=step_code("llmqueue.studies.profiling.steps:roofline_fit"),
    output:
        "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
    log:
        "logs/profiling/roofline_fit_{gpu}_{pmodel}.log",
    benchmark:
        "logs/benchmarks/profiling_roofline_fit_{gpu}_{pmodel}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:roofline_fit",
        # only what the roofline fit reads: other profiling keys changing must not rerun it
        profiling={
            k: PROF[k]
            for k in ("table1_pairs", "fig2b", "roofline", "step_law")
            if k in PROF
        },
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_kernel_fit:
    """Kernel-profile source (verdict 'measured-kernels'): linear layers from kernels measured by
    others, attention and LM head by the roofline; linear, batch and step laws."""
    input:
        csv=lambda w: KERNELS[w.ksrc]["csv"],
        meta=lambda w: str(Path(KERNELS[w.ksrc]["csv"]).parent / "meta.json"),
        code=step_code("llmqueue.studies.profiling.steps:kernel_fit"),
    output:
        "results/profiling/{ksrc}/{pmodel}/fit.json",
    log:
        "logs/profiling/kernel_fit_{ksrc}_{pmodel}.log",
    benchmark:
        "logs/benchmarks/profiling_kernel_fit_{ksrc}_{pmodel}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:kernel_fit",
        kernel=lambda w: KERNELS[w.ksrc],
        profiling={
            k: PROF[k]
            for k in ("table1_pairs", "fig2b", "roofline", "step_law")
            if k in PROF
        },
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_measured_fit:
    """Fits of a committed measurement (Fig. 2a linear law, Eq. 18 batch law, depth check)."""
    input:
        timing="data/profiling/{hw}/timing.csv",
        e2e="data/profiling/{hw}/e2e.csv",
        meta="data/profiling/{hw}/meta.json",
        # step_law.csv when the folder has one (a GPU that ran the step law)
        step=lambda w: [
            p for p in [f"data/profiling/{w.hw}/step_law.csv"] if Path(p).is_file()
        ],
        code=step_code("llmqueue.studies.profiling.steps:measured_fit"),
    output:
        "results/profiling/{hw}/{pmodel}/fit.json",
    log:
        "logs/profiling/measured_fit_{hw}_{pmodel}.log",
    benchmark:
        "logs/benchmarks/profiling_measured_fit_{hw}_{pmodel}.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:measured_fit",
        profiling={
            k: PROF[k]
            for k in ("table1_pairs", "fig2b", "hardware", "depth_tolerance")
        },
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_kv_limit:
    """Claim 2: the KV-cache batch limit under each stated reading."""
    input:
        code=step_code("llmqueue.studies.profiling.steps:kv_limit"),
    output:
        "results/profiling/kv_limit.csv",
    log:
        "logs/profiling/kv_limit.log",
    benchmark:
        "logs/benchmarks/profiling_kv_limit.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:kv_limit",
        profiling={"kv_limit": PROF["kv_limit"]},
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_figure_data:
    """Points and fitted lines of Fig. 2a / 2b and Table I, each row naming its source."""
    input:
        table1=config["data"]["table1"],
        paper_fit="results/profiling/paper/llama2-7b-chat/fit.json",
        roofline=expand(
            "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
            gpu=ROOF_GPUS,
            pmodel=PROF_MODELS,
        ),
        measured=expand(
            "results/profiling/{hw}/{pmodel}/fit.json", hw=MEASURED, pmodel=PROF_MODELS
        ),
        timing=expand("data/profiling/{hw}/timing.csv", hw=MEASURED),
        e2e=expand("data/profiling/{hw}/e2e.csv", hw=MEASURED),
        meta=expand("data/profiling/{hw}/meta.json", hw=MEASURED),
        kernel_fits=KERNEL_FITS,
        kernel_csvs=[v["csv"] for v in KERNELS.values()],
        code=step_code("llmqueue.studies.profiling.steps:figure_data"),
    output:
        fig2a_points="results/profiling/fig2a_points.csv",
        fig2a_lines="results/profiling/fig2a_lines.csv",
        fig2b_points="results/profiling/fig2b_points.csv",
        fig2b_lines="results/profiling/fig2b_lines.csv",
        composition="results/profiling/composition_check.csv",
        table1_csv=report(
            "figures/table1.csv",
            caption="table1.rst",
            category="Profiling",
        ),
        table1_md="figures/table1.md",
    log:
        "logs/profiling/figure_data.log",
    benchmark:
        "logs/benchmarks/profiling_figure_data.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:figure_data",
        # only what the figure data read: other profiling keys changing must not rerun it
        profiling={
            k: PROF[k]
            for k in ("models", "fig2a", "fig2b", "roofline", "kernel_profiles")
        },
        measured=MEASURED,
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_claims:
    """Claim 1 (Table I: a row per distinct cell, the roofline bounds, the linear law's slope and
    intercept) and claim 2 (the KV-cache limit and its bound) against
    src/llmqueue/studies/profiling/reference_claims.csv."""
    input:
        reference="src/llmqueue/studies/profiling/reference_claims.csv",
        table1=config["data"]["table1"],
        kv="results/profiling/kv_limit.csv",
        roofline=expand(
            "results/profiling/roofline-{gpu}/llama2-7b-chat/fit.json", gpu=ROOF_GPUS
        ),
        table1_ours="figures/table1.csv",
        meta=expand("data/profiling/{hw}/meta.json", hw=MEASURED),
        measured_fits=expand(
            "results/profiling/{hw}/llama2-7b-chat/fit.json", hw=MEASURED
        ),
        kernel_fits=KERNEL_FITS,
        code=step_code("llmqueue.studies.profiling.steps:claims"),
    output:
        "results/claims/profiling.csv",
    log:
        "logs/profiling/claims.log",
    benchmark:
        "logs/benchmarks/profiling_claims.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:claims",
        roofline=PROF["roofline"],
        measured=MEASURED,
        kernels=list(KERNELS),
        tolerances=config["claims"]["tolerances"],
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_step_laws:
    """Every named serving step law (config step_profiles) resolved from its fit.json, one row each."""
    input:
        fits=[
            f"results/profiling/{p['source']}/{p['model']}/fit.json"
            for p in STEP_PROFILES.values()
            if p["kind"] == "fit"
        ],
        code=step_code("llmqueue.studies.profiling.steps:step_laws"),
    output:
        "results/profiling/step_laws.csv",
    log:
        "logs/profiling/step_laws.log",
    benchmark:
        "logs/benchmarks/profiling_step_laws.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:step_laws",
        step_profiles=STEP_PROFILES,
    script:
        "../../../../workflow/scripts/step.py"


rule profiling_smoke:
    """Tiny-config smoke profile (CPU, <= 60 s): the harness runs here; its timings feed nothing."""
    input:
        trace=config["data"]["azure_trace"],
        code=module_code("llmqueue.cli.profile"),
    output:
        "logs/profiling-smoke/meta.json",
    log:
        "logs/profiling/smoke.log",
    benchmark:
        "logs/benchmarks/profiling_smoke.tsv"
    conda:
        "../../../../envs/profiling.yaml"
    shell:
        "python -m llmqueue profile smoke --out logs/profiling-smoke > {log} 2>&1"


# On-demand measurement (never in `rule all`): copy the result to data/profiling/<id>/ to commit it.
# On CUDA, `measure` runs every part: timing, composition, Fig. 2a, and the serving step law.
rule profile_cpu:
    input:
        code=module_code("llmqueue.cli.profile"),
    output:
        directory("results/profiling-runs/cpu-{hwid}"),
    log:
        "logs/profiling/profile_cpu_{hwid}.log",
    benchmark:
        "logs/benchmarks/profile_cpu_{hwid}.tsv"
    conda:
        "../../../../envs/profiling.yaml"
    shell:
        "python -m llmqueue profile measure --device cpu --hardware-id {wildcards.hwid} --out {output} > {log} 2>&1"


rule profile_cuda:
    input:
        code=module_code("llmqueue.cli.profile"),
    output:
        directory("results/profiling-runs/cuda-{hwid}"),
    log:
        "logs/profiling/profile_cuda_{hwid}.log",
    benchmark:
        "logs/benchmarks/profile_cuda_{hwid}.tsv"
    conda:
        "../../../../envs/profiling.yaml"
    resources:
        gpu=1,
    shell:
        "python -m llmqueue profile measure --device cuda --hardware-id {wildcards.hwid} --out {output} > {log} 2>&1"


STUDY_TARGETS.setdefault("profiling", []).extend(
    [
        *expand(
            "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
            gpu=ROOF_GPUS,
            pmodel=PROF_MODELS,
        ),
        *expand(
            "results/profiling/{hw}/{pmodel}/fit.json", hw=MEASURED, pmodel=PROF_MODELS
        ),
        *KERNEL_FITS,
        "results/profiling/step_laws.csv",
        "results/profiling/kv_limit.csv",
        "logs/profiling-smoke/meta.json",
    ]
)
CLAIM_TABLES.append("results/claims/profiling.csv")

# ---- figures and Table I
declare_figure(
    "table1",
    study="profiling",
    claims=[1],
    outputs=["figures/table1.csv", "figures/table1.md"],
)
declare_figure(
    "fig2a",
    study="profiling",
    plot="fig2a_time_token_line",
    data={
        "points": "results/profiling/fig2a_points.csv",
        "lines": "results/profiling/fig2a_lines.csv",
    },
    category="Profiling",
)
declare_figure(
    "fig2b",
    study="profiling",
    claims=[2],
    plot="fig2b_throughput",
    data={
        "points": "results/profiling/fig2b_points.csv",
        "lines": "results/profiling/fig2b_lines.csv",
    },
    params=dict(
        throughput_input=PROF["fig2b"]["throughput_input_tokens"],
        throughput_output=PROF["fig2b"]["throughput_output_tokens"],
        timing_input=PROF["fig2b"]["timing_input_tokens"],
    ),
    category="Profiling",
)
