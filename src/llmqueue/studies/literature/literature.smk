# The literature study (claim 12; llmqueue.studies.literature): published numbers of the
# scheduling-with-predictions literature (Mitzenmacher and Shahout's Tables 1-3) beside the
# engine's simulated and the exact mean response times. `make literature` builds its table,
# claims and figure.
LIT = config.get("literature") or {}
LIT_REFERENCE = "src/llmqueue/studies/literature/reference_claims.csv"
if LIT:

    rule literature_table:
        """The engine's and the exact mean response time of every point a reference row names."""
        input:
            reference=LIT_REFERENCE,
            code=step_code("llmqueue.studies.literature.steps:table"),
        output:
            "results/literature/table.csv",
        log:
            "logs/literature/table.log",
        benchmark:
            "logs/benchmarks/literature_table.tsv"
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.literature.steps:table",
            spec=LIT,
            seed=config["seed"],
        script:
            "../../../../workflow/scripts/step.py"

    rule literature_curves:
        """The exact mean response time of each (setting, order) against the load."""
        input:
            reference=LIT_REFERENCE,
            code=step_code("llmqueue.studies.literature.steps:curves"),
        output:
            "results/literature/curves.csv",
        log:
            "logs/literature/curves.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.literature.steps:curves",
            spec=LIT,
        script:
            "../../../../workflow/scripts/step.py"

    rule literature_claims:
        input:
            reference=LIT_REFERENCE,
            table="results/literature/table.csv",
            code=step_code("llmqueue.studies.literature.steps:claims"),
        output:
            "results/claims/literature.csv",
        log:
            "logs/literature/claims.log",
        conda:
            "../../../../envs/analysis.yaml"
        params:
            step="llmqueue.studies.literature.steps:claims",
            tolerances=config["claims"]["tolerances"],
        script:
            "../../../../workflow/scripts/step.py"

    CLAIM_TABLES.append("results/claims/literature.csv")
    declare_figure(
        "fig_literature_orders",
        study="literature",
        claims=[12],
        plot="fig_literature_orders",
        data={
            "table": "results/literature/table.csv",
            "curves": "results/literature/curves.csv",
            "reference": LIT_REFERENCE,
        },
        category="The literature (Mitzenmacher and Shahout, arXiv 2503.07545)",
    )

    rule literature:
        """`make literature`: the study's table, claim rows and figure."""
        input:
            "results/literature/table.csv",
            "results/claims/literature.csv",
            "figures/fig_literature_orders.png",
