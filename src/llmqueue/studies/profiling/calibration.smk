# Calibration from the paper's published numbers: the Table I least-squares fit S = a*N + b0
# (four rows with input 128, docs/equations.md) that the token-limit study uses by default.


rule fit_table1:
    input:
        table=config["data"]["table1"],
        code=step_code("llmqueue.studies.profiling.steps:fit_table1"),
    output:
        "results/profiling/paper/llama2-7b-chat/fit.json",
    log:
        "logs/calibration/fit_table1.log",
    benchmark:
        "logs/benchmarks/fit_table1.tsv"
    conda:
        "../../../../envs/analysis.yaml"
    params:
        step="llmqueue.studies.profiling.steps:fit_table1",
        input_tokens=128,
    script:
        "../../../../workflow/scripts/step.py"
