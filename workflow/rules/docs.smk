# Generated documentation: the tables of README.md and docs/ are rendered from the results and the
# committed measurements (llmqueue.docgen) and spliced in place between their marker lines
#   <!-- generated: NAME (from PATH, ...) --> ... <!-- end generated: NAME -->
# The pages are never outputs (Snakemake deletes outputs before a job runs): the job's output is
# the set of rendered fragments, results/docs/blocks.json, and it rewrites a page only when one of
# its blocks changed. tests/workflow/test_docs.py checks the committed blocks on a fresh clone.

from llmqueue.docgen import block_sources
from llmqueue.schema import SCHEMA, section_files, section_heading, sections
from llmqueue.studies import STUDIES, claim_titles, docs_modules

# Pages that hold generated blocks.
DOC_PAGES = [
    "README.md",
    "docs/results.md",
    "docs/reproduce.md",
    "docs/cli.md",
    *sorted(str(p) for p in Path("docs/studies").glob("*.md")),
]
# {study: src/llmqueue/studies/<study>/reference_claims.csv}: the studies of the claims table and their order.
DOC_REFERENCE = {
    s.name: s.reference_claims
    for s in sorted(STUDIES, key=lambda s: s.name)
    if Path(s.reference_claims).is_file()
}
DOC_CLAIMS = dict(claims="results/claims.csv", reference=DOC_REFERENCE)
# What each claim number says, for the README's headline table (docs/figures.md has the claims).
CLAIM_TITLES = claim_titles()  # the registry (llmqueue.studies.STUDIES)
DOC_MEASURED = dict(measured="docs/measured.yaml")
DOC_FITS = sorted(
    {
        "results/profiling/paper/llama2-7b-chat/fit.json",
        *expand(
            "results/profiling/roofline-{gpu}/{pmodel}/fit.json",
            gpu=ROOF_GPUS,
            pmodel=PROF_MODELS,
        ),
        *KERNEL_FITS,
        *expand(
            "results/profiling/{hw}/{pmodel}/fit.json", hw=MEASURED, pmodel=PROF_MODELS
        ),
    }
)
DOC_VALIDATION = f"results/validation/{VAL['figure_run']}/comparison.csv"
DOC_VALIDATION_RUN = f"{VAL['dir']}/{VAL['figure_run']}"


# the shared blocks, after those the studies declared in their own rule files (common.smk)
DOC_BLOCKS |= {
    # README.md
    "measured-commands": doc_block("measured", DOC_MEASURED, group="commands"),
    "claims-headline": doc_block(
        "claims_headline",
        DOC_CLAIMS,
        titles=CLAIM_TITLES,
        study_link="docs/studies/{study}.md",
    ),
    "validation-matrix-headline": doc_block(
        "validation_matrix_targets",
        dict(targets="results/validation/matrix/vllm/targets.csv"),
    ),
    # docs/results.md
    "claims-scopes": doc_block(
        "claims_headline", DOC_CLAIMS, results_link="#the-table"
    ),
    "claims-by-claim": doc_block(
        "claims_by_claim",
        DOC_CLAIMS,
        titles=CLAIM_TITLES,
        study_link="studies/{study}.md",
    ),
    "claims-table": doc_block("claims_table", DOC_CLAIMS),
    # docs/reproduce.md
    **{
        f"measured-{group}": doc_block("measured", DOC_MEASURED, group=group)
        for group in ("rebuild", "verify", "benchmarks", "runs")
    },
    # docs/studies/<study>.md
    **{
        f"{study}-claims": doc_block("study_claims", DOC_CLAIMS, study=study)
        for study in DOC_REFERENCE
    },
    "profiling-runs": doc_block(
        "profiling_runs",
        dict(metas=[f"data/profiling/{hw}/meta.json" for hw in MEASURED]),
    ),
    "profiling-fits": doc_block("profiling_fits", dict(fits=DOC_FITS)),
    "profiling-decode": doc_block(
        "profiling_decode", dict(points="results/profiling/fig2b_points.csv")
    ),
    "profiling-composition": doc_block(
        "profiling_composition", dict(check="results/profiling/composition_check.csv")
    ),
    "profiling-step-laws": doc_block(
        "profiling_step_laws", dict(step_laws="results/profiling/step_laws.csv")
    ),
    "ssjf-predictors": doc_block(
        "ssjf_predictors", dict(predictors="results/ssjf/predictors.csv")
    ),
    "ssjf-gains": doc_block(
        "ssjf_gains",
        dict(jct="results/ssjf/jct_poisson.csv"),
        load=SSJF["claim_load"],
    ),
    "ssjf-starvation": doc_block(
        "ssjf_starvation", dict(starvation="results/ssjf/starvation.csv")
    ),
    "validation-comparison": doc_block(
        "validation_comparison", dict(comparison=DOC_VALIDATION)
    ),
    # every other compared run (another engine or machine) beside the figure's
    **{
        f"validation-comparison-{run}": doc_block(
            "validation_comparison",
            dict(comparison=f"results/validation/{run}/comparison.csv"),
        )
        for run in VAL_RUNS
        if run != VAL["figure_run"]
    },
    **{
        f"validation-run-{run}": doc_block(
            "validation_run",
            dict(
                meta=f"{VAL['dir']}/{run}/meta.json",
                fit=f"{VAL['dir']}/{run}/calibration_fit.json",
            ),
        )
        for run in VAL_RUNS
        if run != VAL["figure_run"]
    },
    "validation-run": doc_block(
        "validation_run",
        dict(
            meta=f"{DOC_VALIDATION_RUN}/meta.json",
            fit=f"{DOC_VALIDATION_RUN}/calibration_fit.json",
        ),
    ),
    # the held-out validation matrix (docs/studies/validation.md)
    "validation-matrix": doc_block(
        "validation_matrix", dict(table="figures/table_vllm_matrix.csv")
    ),
    "validation-matrix-summary": doc_block(
        "validation_matrix_summary",
        dict(
            summary="results/validation/matrix/vllm/summary.csv",
            published="data/reference/validation_published.csv",
        ),
        targets=dict(VMX["targets"]),
    ),
    "validation-matrix-speed": doc_block(
        "validation_matrix_speed",
        dict(table="figures/table_vllm_matrix.csv"),
        window_s=VMX["speed_window_s"],
    ),
    "validation-matrix-laws": doc_block(
        "validation_matrix_laws", dict(table="figures/table_vllm_matrix.csv")
    ),
    "validation-matrix-closed": doc_block(
        "validation_matrix_closed",
        dict(closed="results/validation/matrix/vllm/closed_forms.csv"),
    ),
    "validation-matrix-reductions": doc_block(
        "validation_matrix_reductions",
        dict(
            reductions="results/validation/matrix/vllm/reductions.csv",
            blocks="results/validation/matrix/vllm/block_summary.csv",
        ),
    ),
    "validation-matrix-targets": doc_block(
        "validation_matrix_targets",
        dict(targets="results/validation/matrix/vllm/targets.csv"),
    ),
    "validation-matrix-noise": doc_block(
        "validation_matrix_noise",
        dict(
            floor="results/validation/matrix/vllm/noise_floor.csv",
            in_sigma="results/validation/matrix/vllm/errors_in_sigma.csv",
        ),
    ),
    "validation-matrix-spread": doc_block(
        "validation_matrix_spread",
        dict(spread="results/validation/matrix/vllm/spread.csv"),
    ),
    "validation-matrix-groups": doc_block(
        "validation_matrix_groups",
        dict(metas=[f"{VMX_DIR}/{g}/meta.json" for g in VMX_GROUPS]),
    ),
    # every engine's matrix side by side, and each other engine's own tables
    "validation-matrix-engines": doc_block(
        "validation_matrix_engines",
        dict(medians="results/validation/matrix/engine_medians.csv"),
    ),
    **{
        f"validation-matrix-{e}{part}": doc_block(kind, inputs)
        for e in VMX_ENGINES
        if e != "vllm"
        for part, kind, inputs in (
            ("", "validation_matrix", dict(table=f"figures/table_{e}_matrix.csv")),
            (
                "-targets",
                "validation_matrix_targets",
                dict(targets=f"results/validation/matrix/{e}/targets.csv"),
            ),
            (
                "-groups",
                "validation_matrix_groups",
                dict(
                    metas=[
                        f"{VMX_MATRICES[e]['dir']}/{g}/meta.json"
                        for g in VMX_MATRICES[e]["groups"]
                    ]
                ),
            ),
        )
    },
}
# Blocks of a study this config leaves out (DOC_SKIPPED, common.smk): their pages keep them as
# they are.
if VMS:
    DOC_BLOCKS["validation-machine-speed"] = doc_block(
        "validation_machine_speed",
        dict(
            summary="results/validation/machine_speed/summary.csv",
            cycles="results/validation/machine_speed/cycles.csv",
            meta=f"{VMS['dir']}/meta.json",
        ),
    )
else:
    DOC_SKIPPED.append("validation-machine-speed")
if SERV:
    DOC_BLOCKS["serving-policies"] = doc_block(
        "serving_policies",
        dict(
            capacity=expand("results/serving/capacity_{p}.csv", p=SERV_POLICIES),
            sweep=expand("results/serving/sweep_{p}.csv", p=SERV_POLICIES),
        ),
        near_load=0.85,
    )
else:
    DOC_SKIPPED.append("serving-policies")
# llmqueue plan's worked example (config plan): its answer (docs/cli.md) and the answer with the
# top 10 configurations by goodput per replica (docs/studies/plan.md)
if PLAN:
    DOC_PLAN = dict(summary="results/plan/summary.json", plan="results/plan/plan.csv")
    DOC_PLAN_HEADROOM = run_setting(PLAN, "headroom")
    DOC_BLOCKS["plan-answer"] = doc_block(
        "plan_summary", DOC_PLAN, top=0, headroom=DOC_PLAN_HEADROOM
    )
    DOC_BLOCKS["plan-summary"] = doc_block(
        "plan_summary", DOC_PLAN, top=10, headroom=DOC_PLAN_HEADROOM
    )
else:
    DOC_SKIPPED += ["plan-answer", "plan-summary"]
# {block: (renderer, its input, results/multibin/<table>.csv)}
MB_BLOCKS = {
    "multibin-synthetic": ("multibin_synthetic", "synthetic", "synthetic"),
    "multibin-llm": ("multibin_llm", "capacity", "llm_capacity"),
    "multibin-learned": ("multibin_learned", "learned", "llm_learned"),
    "multibin-latency": ("multibin_latency", "latency", "llm_latency"),
    "multibin-vs-continuous": ("multibin_vs_continuous", "vs", "vs_continuous"),
}
MB_LEARNED_OFF = bool(MB) and MB["llm"]["learned_model"] == "none"
for name, (kind, role, table) in MB_BLOCKS.items():
    if MB and not (table == "llm_learned" and MB_LEARNED_OFF):
        DOC_BLOCKS[name] = doc_block(kind, {role: f"results/multibin/{table}.csv"})
    else:
        DOC_SKIPPED.append(name)


DOC_SOURCES = sorted(
    {p for b in DOC_BLOCKS.values() for p in block_sources(b["inputs"])}
)


rule docs:
    """Render every generated block of the documentation and splice it into its page."""
    input:
        DOC_SOURCES,
        code=script_code("docs_blocks.py"),
        # the studies' renderers, which llmqueue.docgen imports by name from the registry
        renderers=sorted({f for m in docs_modules() for f in module_code(m)}),
    output:
        "results/docs/blocks.json",
    log:
        "logs/docs/blocks.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        blocks=DOC_BLOCKS,
        skipped=DOC_SKIPPED,
        pages=DOC_PAGES,
    script:
        "../scripts/docs_blocks.py"


# config/README.md: each section's table, from the schema alone (llmqueue.schema), so that it
# needs no result; a section the page lacks (a new study's) is appended with its heading
CONFIG_PAGE = "config/README.md"
CONFIG_BLOCKS = {
    f"config-{section}": doc_block(
        "config_table",
        dict(
            schemas=[
                str(p.relative_to(SCHEMA.parents[2])) for p in section_files(section)
            ]
        ),
        section=section,
    )
    for section in sections()
}


rule config_docs:
    """Render config/README.md's tables from the schema and splice them into the page."""
    input:
        sorted({p for b in CONFIG_BLOCKS.values() for p in block_sources(b["inputs"])}),
        code=script_code("docs_blocks.py"),
    output:
        "results/docs/config_blocks.json",
    log:
        "logs/docs/config_blocks.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        blocks=CONFIG_BLOCKS,
        skipped=[],
        pages=[CONFIG_PAGE],
        headed={CONFIG_PAGE: {f"config-{s}": section_heading(s) for s in sections()}},
    script:
        "../scripts/docs_blocks.py"


STUDY_TARGETS["docs"] = [*rules.docs.output, *rules.config_docs.output]
