# The study's verdict: every study's claims rows gathered into results/claims.csv.


rule gather_claims:
    input:
        CLAIM_TABLES,
        code=step_code("llmqueue.steps:gather_claims"),
    output:
        "results/claims.csv",
    log:
        "logs/claims/gather.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        step="llmqueue.steps:gather_claims",
    script:
        "../scripts/step.py"
