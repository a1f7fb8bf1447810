# The literature study (claim 12; llmqueue.studies.literature): published numbers of the
# scheduling-with-predictions literature (Mitzenmacher and Shahout's Tables 1-3) beside the
# engine's simulated and the exact mean response times. `make literature` builds its table,
# claims and figure.
LIT = config.get("literature") or {}
LIT_REFERENCE = "data/reference/claims_literature.csv"
if LIT:

    rule literature_table:
        """The engine's and the exact mean response time of every point a reference row names."""
        input:
            reference=LIT_REFERENCE,
            code=script_code("literature_table.py"),
        output:
            "results/literature/table.csv",
        log:
            "logs/literature/table.log",
        benchmark:
            "logs/benchmarks/literature_table.tsv"
        conda:
            "../../envs/analysis.yaml"
        params:
            spec=LIT,
            seed=config["seed"],
        script:
            "../scripts/literature_table.py"

    rule literature_curves:
        """The exact mean response time of each (setting, order) against the load."""
        input:
            reference=LIT_REFERENCE,
            code=script_code("literature_curves.py"),
        output:
            "results/literature/curves.csv",
        log:
            "logs/literature/curves.log",
        conda:
            "../../envs/analysis.yaml"
        params:
            spec=LIT,
        script:
            "../scripts/literature_curves.py"

    rule literature_claims:
        input:
            reference=LIT_REFERENCE,
            table="results/literature/table.csv",
            code=script_code("literature_claims.py"),
        output:
            "results/claims/literature.csv",
        log:
            "logs/literature/claims.log",
        conda:
            "../../envs/analysis.yaml"
        params:
            tolerances=config["claims"]["tolerances"],
        script:
            "../scripts/literature_claims.py"

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
