# Profiling study (issue 5; paper Sec. II): Table I, Fig. 2a, Fig. 2b, the KV-cache limit, claims 1-2,
# and the per-model latency profiles (results/profiling/<source>/<model>/fit.json) the other studies read.
#
# Sources: paper (Table I, calibration.smk), roofline-<gpu> (predicted, never measured), and every
# committed measurement folder data/profiling/<hardware-id>/ listed in profiling.measured.
# Measuring is never part of `make reproduce` (timings never repeat exactly): on CPU only the tiny
# smoke profile runs (logs/profiling-smoke/); `profile_cpu` / `profile_cuda` re-measure on demand.

import sys

PROF = config["profiling"]
PROF_MODELS = PROF["models"]
ROOF_GPUS = PROF["roofline"]["gpus"]
MEASURED = PROF.get("measured", [])
PROF_CODE = lib(
    "profiling/__init__.py",
    "profiling/models.py",
    "profiling/devices.py",
    "profiling/kvcache.py",
    "profiling/roofline.py",
    "profiling/fits.py",
    "latency.py",
)


wildcard_constraints:
    pmodel="|".join(PROF_MODELS),
    gpu="|".join(ROOF_GPUS),
    hw="|".join(MEASURED) if MEASURED else "NO_MEASURED_SOURCE",


rule profiling_roofline_fit:
    """Roofline-predicted latency profile of one model on one GPU spec (verdict 'predicted')."""
    input:
        code=PROF_CODE,
    output:
        "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
    log:
        "logs/profiling/roofline_fit_{gpu}_{pmodel}.log",
    benchmark:
        "logs/benchmarks/profiling_roofline_fit_{gpu}_{pmodel}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        # only what the roofline fit reads: other profiling keys changing must not rerun it
        profiling={k: PROF[k] for k in ("table1_pairs", "fig2b", "roofline")},
    script:
        "../scripts/profiling_roofline_fit.py"


rule profiling_measured_fit:
    """Fits of a committed measurement (Fig. 2a linear law, Eq. 18 batch law, depth check)."""
    input:
        timing="data/profiling/{hw}/timing.csv",
        e2e="data/profiling/{hw}/e2e.csv",
        meta="data/profiling/{hw}/meta.json",
        code=PROF_CODE,
    output:
        "results/profiling/{hw}/{pmodel}/fit.json",
    log:
        "logs/profiling/measured_fit_{hw}_{pmodel}.log",
    benchmark:
        "logs/benchmarks/profiling_measured_fit_{hw}_{pmodel}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        profiling={
            k: PROF[k]
            for k in ("table1_pairs", "fig2b", "hardware", "depth_tolerance")
        },
    script:
        "../scripts/profiling_measured_fit.py"


rule profiling_kv_limit:
    """Claim 2: the KV-cache batch limit under each stated reading."""
    input:
        code=PROF_CODE,
    output:
        "results/profiling/kv_limit.csv",
    log:
        "logs/profiling/kv_limit.log",
    benchmark:
        "logs/benchmarks/profiling_kv_limit.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        profiling={"kv_limit": PROF["kv_limit"]},
    script:
        "../scripts/profiling_kv_limit.py"


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
        code=PROF_CODE + lib("profiling/tables.py"),
    output:
        fig2a_points="results/profiling/fig2a_points.csv",
        fig2a_lines="results/profiling/fig2a_lines.csv",
        fig2b_points="results/profiling/fig2b_points.csv",
        fig2b_lines="results/profiling/fig2b_lines.csv",
        composition="results/profiling/composition_check.csv",
        table1_csv=report(
            "figures/table1.csv", caption="../report/table1.rst", category="Profiling"
        ),
        table1_md="figures/table1.md",
    log:
        "logs/profiling/figure_data.log",
    benchmark:
        "logs/benchmarks/profiling_figure_data.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        profiling=PROF,
        measured=MEASURED,
    script:
        "../scripts/profiling_figure_data.py"


rule profiling_fig2a:
    input:
        points="results/profiling/fig2a_points.csv",
        lines="results/profiling/fig2a_lines.csv",
        code=lib("plots/fig2a_time_token_line.py", "plots/style.py"),
    output:
        pdf=report(
            "figures/fig2a_time_token_line.pdf",
            caption="../report/fig2a_time_token_line.rst",
            category="Profiling",
        ),
        png="figures/fig2a_time_token_line.png",
    log:
        "logs/profiling/fig2a.log",
    benchmark:
        "logs/benchmarks/profiling_fig2a.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig2a_time_token_line",
    script:
        "../scripts/plot_figure.py"


rule profiling_fig2b:
    input:
        points="results/profiling/fig2b_points.csv",
        lines="results/profiling/fig2b_lines.csv",
        code=lib("plots/fig2b_throughput.py", "plots/style.py"),
    output:
        pdf=report(
            "figures/fig2b_throughput.pdf",
            caption="../report/fig2b_throughput.rst",
            category="Profiling",
        ),
        png="figures/fig2b_throughput.png",
    log:
        "logs/profiling/fig2b.log",
    benchmark:
        "logs/benchmarks/profiling_fig2b.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        module="fig2b_throughput",
        throughput_input=PROF["fig2b"]["throughput_input_tokens"],
        throughput_output=PROF["fig2b"]["throughput_output_tokens"],
        timing_input=PROF["fig2b"]["timing_input_tokens"],
    script:
        "../scripts/plot_figure.py"


rule profiling_claims:
    """Claims 1a-1h (Table I) and 2a-2c (KV-cache limit) against data/reference/claims_profiling.csv."""
    input:
        reference="data/reference/claims_profiling.csv",
        kv="results/profiling/kv_limit.csv",
        roofline=expand(
            "results/profiling/roofline-{gpu}/llama2-7b-chat/fit.json", gpu=ROOF_GPUS
        ),
        table1_ours="figures/table1.csv",
        meta=expand("data/profiling/{hw}/meta.json", hw=MEASURED),
        code=PROF_CODE + lib("claims.py", "profiling/claim_rows.py"),
    output:
        "results/claims/profiling.csv",
    log:
        "logs/profiling/claims.log",
    benchmark:
        "logs/benchmarks/profiling_claims.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        profiling=PROF,
        measured=MEASURED,
        tolerances=config["claims"]["tolerances"],
        table1=config["data"]["table1"],
    script:
        "../scripts/profiling_claims.py"


rule profiling_smoke:
    """Tiny-config smoke profile (CPU, <= 60 s): the harness runs here; its timings feed nothing."""
    input:
        trace=config["data"]["azure_trace"],
        code=lib(
            "profiling/harness.py",
            "profiling/models.py",
            "profiling/smoke.py",
            "profiling/__main__.py",
        ),
    output:
        "logs/profiling-smoke/meta.json",
    log:
        "logs/profiling/smoke.log",
    benchmark:
        "logs/benchmarks/profiling_smoke.tsv"
    conda:
        "../../envs/profiling.yaml"
    shell:
        "python -m llmqueue.profiling smoke --out logs/profiling-smoke > {log} 2>&1"


# On-demand measurement (never in `rule all`): copy the result to data/profiling/<id>/ to commit it.
rule profile_cpu:
    output:
        directory("results/profiling-runs/cpu-{hwid}"),
    log:
        "logs/profiling/profile_cpu_{hwid}.log",
    benchmark:
        "logs/benchmarks/profile_cpu_{hwid}.tsv"
    conda:
        "../../envs/profiling.yaml"
    shell:
        "python -m llmqueue.profiling measure --device cpu --hardware-id {wildcards.hwid} --out {output} > {log} 2>&1"


rule profile_cuda:
    output:
        directory("results/profiling-runs/cuda-{hwid}"),
    log:
        "logs/profiling/profile_cuda_{hwid}.log",
    benchmark:
        "logs/benchmarks/profile_cuda_{hwid}.tsv"
    conda:
        "../../envs/profiling.yaml"
    resources:
        gpu=1,
    shell:
        "python -m llmqueue.profiling measure --device cuda --hardware-id {wildcards.hwid} --out {output} > {log} 2>&1"


STUDY_TARGETS["profiling"] = [
    *expand(
        "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
        gpu=ROOF_GPUS,
        pmodel=PROF_MODELS,
    ),
    *expand(
        "results/profiling/{hw}/{pmodel}/fit.json", hw=MEASURED, pmodel=PROF_MODELS
    ),
    "results/profiling/kv_limit.csv",
    *figure("fig2a_time_token_line"),
    *figure("fig2b_throughput"),
    "figures/table1.csv",
    "figures/table1.md",
    "logs/profiling-smoke/meta.json",
]
CLAIM_TABLES.append("results/claims/profiling.csv")
