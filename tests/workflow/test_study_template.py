"""The worked example of docs/architecture.md ("A study"): a new study with one figure, one
claims row and one setting, added to a copy of the working tree in six hand-written files in
three folders (its package, its documentation page, ``config/config.yaml``), which the pipeline
builds and the suite's registry, schema and plot checks take as they take every study.

The six: the package's ``__init__.py`` (its catalogue record, its table, its claims step, its
figure's plot with an ``example()`` table, its documentation renderer), its config section's
schema and its rules beside it, its reference claims beside them, its page, and its setting in
``config/config.yaml``. Nothing else is edited: the catalogue finds the package, the Snakefile
includes its rule file, the root schema takes its section, the figure registry makes its plot
rule, the docs jobs add its config table and its claims block, and the notebook template gives it
a notebook (its package's docstring as its introduction). The test fails if one more file is
needed: the copy is checked to differ from the working tree in exactly these six files before
the generated ones are written.
"""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from worktree import copy_worktree

from llmqueue.catalog import claim_titles

pytestmark = pytest.mark.slow

PACKAGE = "src/llmqueue/studies/toy"
CLAIM = max(claim_titles()) + 1  # the next claim number after the catalogued studies'

FILES = {
    # 1. the package: its record, its table (an M/M/1 queue's mean response time, exact), its
    # claims step, its figure and its documentation renderer
    f"{PACKAGE}/__init__.py": f'''
        """The toy study: the mean response time of an M/M/1 queue, 1 / (mu - lambda), in s."""

        import pandas as pd

        STUDY = {{
            "follows": "plan",
            "claims": {{{CLAIM}: "the M/M/1 mean response time"}},
            "docs": "llmqueue.studies.toy",  # its renderers are here, not in a docs module
        }}
        LOADS = (0.2, 0.5, 0.8)  # the table's loads lambda / mu


        def table(service_s: float) -> pd.DataFrame:
            rates = [rho / service_s for rho in LOADS]
            return pd.DataFrame(
                {{"rate_per_s": rates, "jct_mean_s": [service_s / (1 - rho) for rho in LOADS]}}
            )


        def claims(sm) -> None:
            from llmqueue.claims import ClaimBook, claims_frame
            from llmqueue.io import write_csv

            book = ClaimBook(pd.read_csv(sm.input.reference, dtype={{"id": str}}), sm.params.tolerances)
            ours = pd.read_csv(sm.input.table)["jct_mean_s"].iloc[1]
            write_csv(claims_frame([book.judge("{CLAIM}a", float(ours))]), sm.output[0])


        def plot(inputs, params):
            from llmqueue import figstyle as style

            fig, ax = style.new_figure((3.2, 2.4))
            df = inputs["table"]
            style.formula_line(ax, df["rate_per_s"], df["jct_mean_s"], "M/M/1")
            ax.set_xlabel("arrival rate (requests/s)")
            ax.set_ylabel("mean response time (s)")
            return fig


        def example():
            """A small table of the plot rule's input, drawn by the suite."""
            return {{"table": pd.DataFrame({{"rate_per_s": [0.2, 0.8], "jct_mean_s": [1.25, 5.0]}})}}, {{}}


        def render_toy_table(table: pd.DataFrame) -> str:
            from llmqueue.markdown import md_table

            rows = [[r, f"{{float(t):.3g}}"] for r, t in zip(table["rate_per_s"], table["jct_mean_s"])]
            return md_table(["rate (requests/s)", "mean JCT (s)"], rows)
    ''',
    # 2. its config section's schema
    f"{PACKAGE}/schema.yaml": """
        $schema: "https://json-schema.org/draft/2020-12/schema"
        description: config section `toy`, the toy study (an M/M/1 queue).
        type: object
        additionalProperties: false
        required: [service_s]
        properties:
          service_s:
            type: number
            exclusiveMinimum: 0
            description: the mean service time 1 / mu
            x-unit: s
    """,
    # 3. its rules: the table through the shared runner, its claims row, figure and block
    f"{PACKAGE}/toy.smk": f"""
        rule toy_table:
            input:
                code=script_code("study_table.py") + module_code("llmqueue.studies.toy"),
            output:
                "results/toy/table.csv",
            params:
                function="llmqueue.studies.toy:table",
                kwargs=dict(service_s=config["toy"]["service_s"]),
            script:
                "../../../../workflow/scripts/study_table.py"


        rule toy_claims:
            input:
                reference="{PACKAGE}/reference_claims.csv",
                table="results/toy/table.csv",
                code=step_code("llmqueue.studies.toy:claims"),
            output:
                "results/claims/toy.csv",
            params:
                step="llmqueue.studies.toy:claims",
                tolerances=config["claims"]["tolerances"],
            script:
                "../../../../workflow/scripts/step.py"


        CLAIM_TABLES.append("results/claims/toy.csv")
        declare_figure("fig_toy", study="toy", plot="fig_toy", plot_module=".", claims=[{CLAIM}],
                       data={{"table": "results/toy/table.csv"}})
        DOC_BLOCKS["toy-table"] = doc_block("toy_table", {{"table": "results/toy/table.csv"}})
    """,
    # 4. its reference claims: the published number, its unit, tolerance class and scope
    f"{PACKAGE}/reference_claims.csv": f"""
        id,claim,paper,unit,tolerance,scope
        {CLAIM}a,"M/M/1 with mean service 1 s at 0.5 requests/s: mean response time",2.0,s,time,internal
    """,
    # 5. its page, where its blocks go
    "docs/studies/toy.md": """
        # The toy study

        <!-- generated: toy-table (from results/toy/table.csv) -->
        <!-- end generated: toy-table -->
    """,
}
# 6. its setting
CONFIG = "\ntoy:\n  service_s: 1.0\n"


def run(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    return subprocess.run(args, cwd=tree, capture_output=True, text=True, env=env, timeout=600)


def changed(tree: Path) -> set[str]:
    """The files of `tree` that differ from the working tree's, or that it lacks."""
    root = Path(__file__).resolve().parents[2]
    out = set()
    for path in tree.rglob("*"):
        rel = path.relative_to(tree)
        if rel.parts[0] in {".venv", ".snakemake"} or not path.is_file():
            continue
        if not (root / rel).is_file() or (root / rel).read_bytes() != path.read_bytes():
            out.add(str(rel))
    return out


def test_a_new_study_takes_six_files_in_three_folders(tmp_path: Path) -> None:
    tree = copy_worktree(tmp_path)
    for rel, body in FILES.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(textwrap.dedent(body).lstrip("\n"))
    with (tree / "config/config.yaml").open("a") as fh:
        fh.write(CONFIG)
    assert changed(tree) == {*FILES, "config/config.yaml"}
    assert {str(Path(f).parent) for f in changed(tree)} == {PACKAGE, "docs/studies", "config"}
    snakemake, python = str(tree / ".venv/bin/snakemake"), str(tree / ".venv/bin/python")

    # its figure, its claims row and its config table, built by the pipeline
    done = run(tree, snakemake, "--cores", "1", "fig_toy", "results/claims/toy.csv", "config_docs")
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    table = pd.read_csv(tree / "results/toy/table.csv")
    assert list(table["jct_mean_s"].round(6)) == [1.25, 2.0, 5.0]  # 1 / (1 - rho)
    row = pd.read_csv(tree / "results/claims/toy.csv", dtype={"id": str}).iloc[0]
    assert (row["id"], row["ours"], row["verdict"]) == (f"{CLAIM}a", 2.0, "reproduced")
    for suffix in ("pdf", "png"):
        assert (tree / f"figures/fig_toy.{suffix}").stat().st_size > 0
    readme = (tree / "config/README.md").read_text()
    assert "## `toy`" in readme and "<!-- generated: config-toy (from " in readme
    assert "| `service_s` |" in readme

    # the claims table gathers its row, the docs job renders its blocks, the report its notebook
    plan = run(tree, snakemake, "-n", "--cores", "1", "results/claims.csv", "docs",
               "results/notebooks/toy.html")  # fmt: skip
    assert plan.returncode == 0, (plan.stdout + plan.stderr)[-3000:]
    gather = plan.stdout[plan.stdout.index("rule gather_claims:") :].split("\n\n")[0]
    assert "results/claims/toy.csv" in gather
    docs_job = plan.stdout[plan.stdout.index("rule docs:") :].split("\n\n")[0]
    assert "results/toy/table.csv" in docs_job and f"{PACKAGE}/__init__.py" in docs_job
    assert "rule notebook_source:" in plan.stdout
    shown = run(tree, python, "-c", "import pandas as pd; from llmqueue import docgen; "
                "print(docgen.render('toy_table', table=pd.read_csv('results/toy/table.csv')))")  # fmt: skip
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "| 0.8 | 5 |" in shown.stdout
    # its notebook: the template's, its introduction the package's docstring
    source = tmp_path / "toy.ipynb"
    wrote = run(tree, python, "notebooks/make_notebooks.py", "--study", "toy", "--out", str(source))
    assert wrote.returncode == 0, wrote.stderr[-2000:]
    assert "The toy study: the mean response time of an M/M/1 queue" in source.read_text()

    # the suite's registry, schema, config and plot checks take it as they take every study
    checks = ["tests/studies/test_registry.py", "tests/core/test_schema.py",
              "tests/workflow/test_workflow_config.py", "tests/plots/test_every_plot_is_drawn.py"]  # fmt: skip
    suite = run(tree, python, "-m", "pytest", "-o", "addopts=", "-v", "-p", "no:cacheprovider",
                *checks)  # fmt: skip
    assert suite.returncode == 0, suite.stdout[-4000:]
    for case in ("test_each_registered_study_has_its_files[toy]",
                 "test_a_plot_module_draws_its_own_example[toy]"):  # fmt: skip
        assert f"{case} PASSED" in suite.stdout, case
