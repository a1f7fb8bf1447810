# The rules of the figure registry (common.smk: declare_figure), made once every study has
# declared its figures: one plot rule per figure file set (one per panel), one target rule per
# figure named after it (`snakemake fig4d`, `make fig4d`), and the list `make figures` prints.


for _fig in FIGURES.values():
    if _fig["module"] is None:
        continue
    for _panel, _stem in zip(_fig["panels"] or [None], _fig["stems"]):

        rule:
            name:
                f"plot_{_stem}"
            input:
                **_plot_inputs(_fig, _panel),
            output:
                pdf=f"figures/{_stem}.pdf",
                png=report(
                    f"figures/{_stem}.png",
                    caption=f"../../{_fig['caption']}",
                    category=_fig["category"],
                ),
            log:
                f"logs/figures/{_stem}.log",
            benchmark:
                f"logs/benchmarks/figures/{_stem}.tsv"
            conda:
                "../../envs/analysis.yaml"
            params:
                **_plot_params(_fig, _panel),
            script:
                "../scripts/plot_figure.py"


for _fig in FIGURES.values():

    rule:
        name:
            _fig["target"]
        input:
            _fig["outputs"],


rule figure_list:
    """results/figures.tsv: every registered figure (`make figures` prints it)."""
    input:
        code=step_code("llmqueue.steps:figure_list"),
    output:
        "results/figures.tsv",
    log:
        "logs/figures/figure_list.log",
    conda:
        "../../envs/analysis.yaml"
    params:
        step="llmqueue.steps:figure_list",
        rows=[
            [
                f["target"],
                f["study"],
                f["module"] or "-",
                f["caption"],
                ",".join(map(str, f["claims"])) or "-",
                " ".join(f["outputs"]),
            ]
            for f in FIGURES.values()
        ],
    script:
        "../scripts/step.py"
