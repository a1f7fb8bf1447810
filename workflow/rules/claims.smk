# The study's verdict: every study's claims rows gathered into results/claims.csv.


rule gather_claims:
    input:
        CLAIM_TABLES,
        code=script_code("gather_claims.py"),
    output:
        "results/claims.csv",
    log:
        "logs/claims/gather.log",
    conda:
        "../../envs/analysis.yaml"
    script:
        "../scripts/gather_claims.py"
