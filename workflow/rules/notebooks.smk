# Reviewer experience (issue 6): one executed notebook per study, the claims table, a verdict
# snippet per figure caption and the provenance page, all shown by `snakemake --report`.
# Included last, so the study targets above are known: the notebooks and the provenance page
# depend on them, never the other way round.
import hashlib
import json
import os
import shutil
import subprocess
import sys

# The job environment (kept here so every rule file sees it; the lead may move it to common.smk):
# - PYTHONPATH: jobs import this checkout's llmqueue, also inside a conda env (--sdm conda), on a
#   cluster node, or in the second build directory of `make verify`;
# - PATH: `shell:` rules that call `python` get the interpreter running Snakemake (.venv), not
#   whatever `python` comes first on the caller's PATH (a conda env, activated for a job, still
#   comes first).
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        p
        for p in [str(Path(workflow.basedir) / "src"), os.environ.get("PYTHONPATH", "")]
        if p
    ),
    PATH=os.pathsep.join(
        [str(Path(sys.executable).parent), os.environ.get("PATH", "")]
    ),
)

# Figure and table stems of each study (figures.md); a notebook shows those that exist.
REPORT_STUDIES = {
    "profiling": ["table1", "fig2a_time_token_line", "fig2b_throughput"],
    "token_limit": [
        "fig4a_mg1_EW",
        "fig4b_mg1_EWqs",
        "fig4c_mg1_pai",
        "fig4d_tradeoff",
    ],
    "batching": [
        "fig3a_EL_Hb",
        "fig3b_miub",
        "fig5_junyun_llama",
        "fig5_junyun_alpaca",
        "fig5_junyun_chatglm",
        "fig6a_fix_bsz",
        "fig6b_dy_bmax",
    ],
}
# The paper's claim numbers (figures.md) each study and each figure caption reports.
STUDY_CLAIMS = {"profiling": [1, 2], "token_limit": [3, 4, 5], "batching": [6, 7, 8, 9]}
FIGURE_CLAIMS = {
    "table1": [1],
    "fig2b_throughput": [2],
    "fig3b_miub": [6],
    "fig4a_mg1_EW": [3],
    "fig4b_mg1_EWqs": [4],
    "fig4c_mg1_pai": [4],
    "fig4d_tradeoff": [3, 4, 5],
    "fig5_junyun_llama": [7],
    "fig5_junyun_alpaca": [7],
    "fig5_junyun_chatglm": [7],
    "fig6a_fix_bsz": [8],
    "fig6b_dy_bmax": [9],
}
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


rule notebook:
    input:
        notebook="notebooks/{study}.ipynb",
        claims="results/claims.csv",
        shown=lambda wc: STUDY_SHOWN[wc.study],
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
