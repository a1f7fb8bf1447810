# Reviewer experience (issue 6): one executed notebook per study, the claims table, a verdict
# snippet per figure caption and the provenance page, all shown by `snakemake --report`.
# Included last, so the study targets above are known: the notebooks and the provenance page
# depend on them, never the other way round.
import hashlib
import json
import shutil
import subprocess

# The figures and tables of each study (the figure registry, common.smk), the claim numbers each
# notebook reports and each figure caption's verdict lists.
REPORT_STUDIES = {
    study: figures_of(study)
    for study in dict.fromkeys(f["study"] for f in FIGURES.values())
}
STUDY_CLAIMS = {study: study_claims(study) for study in REPORT_STUDIES}
FIGURE_CLAIMS = figure_claims()
# Everything the studies registered so far (this file is included last).
UPSTREAM_TARGETS = all_targets()


# What each notebook shows: the study's figures and tables (PNG, CSV, Markdown), so it runs
# after them.
STUDY_SHOWN = {
    study: sorted(
        t
        for t in UPSTREAM_TARGETS
        if not t.endswith(".pdf")
        and (Path(t).stem in stems or t in STUDY_TARGETS.get(study, []))
    )
    for study, stems in REPORT_STUDIES.items()
}
# HEAD of the checkout ('unknown' outside git): a new commit refreshes the provenance page.
GIT_COMMIT = (
    subprocess.run(
        ["git", "rev-parse", "HEAD"],
        cwd=workflow.basedir,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if shutil.which("git") and Path(workflow.basedir, ".git").exists()
    else ""
) or "unknown"
CONFIG_SHA256 = hashlib.sha256(
    json.dumps(config, sort_keys=True, default=str).encode()
).hexdigest()


wildcard_constraints:
    study="|".join(REPORT_STUDIES),


rule notebook_source:
    """The notebook of a study without a committed one, written by the notebooks' template."""
    input:
        code=["notebooks/make_notebooks.py", *module_code("llmqueue.catalog")],
    output:
        "results/notebooks/source/{study}.ipynb",
    log:
        "logs/notebooks/source_{study}.log",
    conda:
        "../../envs/analysis.yaml"
    shell:
        "python notebooks/make_notebooks.py --study {wildcards.study} --out {output} > {log} 2>&1"


rule notebook:
    input:
        notebook=lambda wc: notebook_source(wc.study),
        claims="results/claims.csv",
        shown=lambda wc: STUDY_SHOWN[wc.study],
        code=lambda wc: sorted(
            {
                *script_code("notebook_run.py"),
                *notebook_source_code(wc.study),
            }
        ),
    output:
        ipynb="results/notebooks/{study}.ipynb",
        html=report(
            "results/notebooks/{study}.html",
            caption="../report/notebook.rst",
            category="Notebooks",
        ),
    log:
        "logs/notebooks/{study}.log",
    benchmark:
        "logs/benchmarks/notebooks/{study}.tsv"
    conda:
        "../../envs/analysis.yaml"
    params:
        figures=lambda wc: REPORT_STUDIES[wc.study],
        claim_numbers=lambda wc: STUDY_CLAIMS[wc.study],
        results_dir=lambda wc: f"results/{wc.study}",
    script:
        "../scripts/notebook_run.py"


rule report_claims:
    input:
        claims="results/claims.csv",
        code=script_code("report_claims.py"),
    output:
        table=report(
            "results/report/claims.html",
            caption="../report/claims.rst",
            category="Claims",
        ),
        verdicts=[
            report(
                f"results/report/verdict_{stem}.rst",
                caption="../report/verdict.rst",
                category="Claims",
                subcategory="Verdict per figure",
            )
            for stem in FIGURE_CLAIMS
        ],
        summary="results/report/claims_summary.rst",
        markdown="results/report/claims.md",
    log:
        "logs/report/claims.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        figure_claims=FIGURE_CLAIMS,
    script:
        "../scripts/report_claims.py"


rule provenance:
    input:
        UPSTREAM_TARGETS,
        "results/claims.csv",
        expand("results/notebooks/{study}.html", study=REPORT_STUDIES),
        config="config/config.yaml",
        code=script_code("report_provenance.py"),
    output:
        json="results/report/provenance.json",
        html=report(
            "results/report/provenance.html",
            caption="../report/provenance.rst",
            category="Provenance",
        ),
    log:
        "logs/report/provenance.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        commit=GIT_COMMIT,
        config_sha256=CONFIG_SHA256,
        benchmarks_dir="logs/benchmarks",
    script:
        "../scripts/report_provenance.py"


STUDY_TARGETS["notebooks"] = expand(
    "results/notebooks/{study}.html", study=REPORT_STUDIES
)
STUDY_TARGETS["report"] = [*rules.report_claims.output, *rules.provenance.output]
