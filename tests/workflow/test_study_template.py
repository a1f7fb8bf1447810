"""The worked example of docs/architecture.md ("A study"): a new study with one figure and one
generated documentation table, added to a copy of the working tree in five hand-written files,
whose figure the pipeline builds (``snakemake fig_toy``) and whose block the docs job renders.

The five: its record in the study registry (``src/llmqueue/studies/__init__.py``), its package
(the table function and the block's renderer), its rule file in the package's folder (the table
through the shared ``study_table.py`` script, ``declare_figure`` and ``DOC_BLOCKS``), the plot
module in the package's folder (its docstring the figure's caption, as it has no caption file;
its ``example()`` the table the suite draws it on) and its page. Nothing else is edited: the Snakefile includes the rule file from the registry, the
figure registry makes the plot and target rules, docgen finds the renderer and the docs rule
takes the block and the renderer's code.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from worktree import copy_worktree

pytestmark = pytest.mark.slow

REGISTRY_END = '    Study("plan", ("plan",), "llmqueue.plan"),\n)'

FILES = {
    # 1. the package: the table (an M/M/1 queue's mean response time, exact) and its renderer
    "src/llmqueue/studies/toy/__init__.py": '''
        """A toy study: the mean response time of an M/M/1 queue, 1 / (mu - lambda), in s."""

        import pandas as pd

        from llmqueue.markdown import md_table


        def table(rates_per_s: list[float], service_s: float) -> pd.DataFrame:
            mu = 1.0 / service_s
            return pd.DataFrame(
                {"rate_per_s": rates_per_s, "jct_mean_s": [1.0 / (mu - r) for r in rates_per_s]}
            )


        def render_toy_table(table: pd.DataFrame) -> str:
            rows = [[r, f"{float(t):.3g}"] for r, t in zip(table["rate_per_s"], table["jct_mean_s"])]
            return md_table(["rate (requests/s)", "mean JCT (s)"], rows)
    ''',
    # 2. its rules, in its package: the table through the shared script, its figure and its
    # documentation block
    "src/llmqueue/studies/toy/toy.smk": """
        rule toy_table:
            input:
                code=script_code("study_table.py") + module_code("llmqueue.studies.toy"),
            output:
                "results/toy/table.csv",
            params:
                function="llmqueue.studies.toy:table",
                kwargs=dict(rates_per_s=[0.2, 0.5, 0.8], service_s=1.0),
            script:
                "../../../../workflow/scripts/study_table.py"


        declare_figure("fig_toy", study="toy", plot="fig_toy", data={"table": "results/toy/table.csv"})
        DOC_BLOCKS["toy-table"] = doc_block("toy_table", {"table": "results/toy/table.csv"})
    """,
    # 3. the plot module, in the package, with the small table the suite draws it on
    "src/llmqueue/studies/toy/fig_toy.py": '''
        """The toy study's figure: mean response time against the arrival rate."""

        import pandas as pd

        from llmqueue import figstyle as style


        def plot(inputs, params):
            fig, ax = style.new_figure((3.2, 2.4))
            df = inputs["table"]
            style.formula_line(ax, df["rate_per_s"], df["jct_mean_s"], "M/M/1")
            ax.set_xlabel("arrival rate (requests/s)")
            ax.set_ylabel("mean response time (s)")
            return fig


        def example():
            """A small table of the rule's input, drawn by the suite."""
            return {"table": pd.DataFrame({"rate_per_s": [0.2, 0.8], "jct_mean_s": [1.25, 5.0]})}, {}
    ''',
    # 4. its page, where the block goes
    "docs/studies/toy.md": """
        # The toy study

        <!-- generated: toy-table (from results/toy/table.csv) -->
        <!-- end generated: toy-table -->
    """,
}


def test_a_new_study_takes_five_files_and_the_pipeline_builds_it(tmp_path: Path) -> None:
    tree = copy_worktree(tmp_path)
    registry = tree / "src/llmqueue/studies/__init__.py"
    text = registry.read_text()
    assert REGISTRY_END in text, "the registry's last record moved: update this worked example"
    # 5. its record in the registry
    registry.write_text(text.replace(REGISTRY_END, REGISTRY_END[:-1] + (
        '    Study("toy", ("toy",), "llmqueue.studies.toy", docs="llmqueue.studies.toy"),\n)')))  # fmt: skip
    for rel, body in FILES.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(textwrap.dedent(body).lstrip("\n"))

    snakemake = str(tree / ".venv/bin/snakemake")
    done = subprocess.run([snakemake, "--cores", "1", "fig_toy"], cwd=tree, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    table = pd.read_csv(tree / "results/toy/table.csv")
    assert list(table["jct_mean_s"].round(6)) == [1.25, 2.0, 5.0]  # 1 / (1 - lambda)
    for suffix in ("pdf", "png"):
        assert (tree / f"figures/fig_toy.{suffix}").stat().st_size > 0
    # its caption is its plot module's docstring, through the shared caption
    listed = subprocess.run([snakemake, "--cores", "1", "figure_list"], cwd=tree, text=True,
                            capture_output=True, timeout=600)  # fmt: skip
    assert listed.returncode == 0, listed.stderr[-2000:]
    rows = pd.read_csv(tree / "results/figures.tsv", sep="\t", dtype=str)
    assert rows.set_index("target").loc["fig_toy", "caption"] == "workflow/report/figure.rst"

    # the docs job takes the block (its table an input, its renderer's code too) ...
    plan = subprocess.run([snakemake, "-n", "--cores", "1", "docs"], cwd=tree, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    docs_job = plan.stdout[plan.stdout.index("rule docs:") :].split("\n\n")[0]
    assert "results/toy/table.csv" in docs_job
    assert "src/llmqueue/studies/toy/__init__.py" in docs_job
    # ... and docgen renders it with the study's renderer, found through the registry
    code = (
        "import pandas as pd; from llmqueue import docgen; "
        "print(docgen.render('toy_table', table=pd.read_csv('results/toy/table.csv')))"
    )
    shown = subprocess.run([str(tree / ".venv/bin/python"), "-c", code], cwd=tree, text=True,
                           capture_output=True, env={"PYTHONPATH": str(tree / "src")}, timeout=120)  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "| 0.8 | 5 |" in shown.stdout

    # the suite's plot checks take its plot module: drawn on its own example table, no fixture
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    drawn = subprocess.run(
        [str(tree / ".venv/bin/python"), "-m", "pytest", "-o", "addopts=", "-v", "-p", "no:cacheprovider",
         "tests/plots/test_every_plot_is_drawn.py"],
        cwd=tree, text=True, capture_output=True, env=env, timeout=600,
    )  # fmt: skip
    assert drawn.returncode == 0, drawn.stdout[-3000:]
    assert "test_a_plot_module_draws_its_own_example[fig_toy] PASSED" in drawn.stdout
