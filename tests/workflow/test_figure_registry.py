"""The figure registry (declare_figure, workflow/rules/common.smk): every figure is declared once,
and the Makefile targets, plot rules, captions, notebooks and report verdicts all follow from it.

One fixture copies the working tree (as git sees it) into a temp dir sharing .venv and runs
`make figures` there, which builds results/figures.tsv from the registry and prints it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
from worktree import copy_worktree

ROOT = Path(__file__).resolve().parents[2]
STAMP = ".venv/.llmqueue-installed"
# Captions of the report that belong to no figure.
OTHER_CAPTIONS = {"claims", "notebook", "provenance", "verdict", "workflow", "figure"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_worktree(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def printed(tree: Path) -> str:
    done = subprocess.run(
        ["make", "-o", STAMP, "figures"], cwd=tree, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def registry(tree: Path, printed: str) -> pd.DataFrame:
    return pd.read_csv(tree / "results" / "figures.tsv", sep="\t", dtype=str)


def test_make_figures_prints_every_registered_figure(registry: pd.DataFrame, printed: str) -> None:
    assert len(registry) >= 12 and registry["target"].is_unique
    for target in registry["target"]:
        assert target in printed
    # the paper's figures (docs/figures.md) and Table I, each declared by its study
    paper = {"table1", "fig2a", "fig2b", "fig3a", "fig3b", "fig4a", "fig4b", "fig4c", "fig4d"}
    assert paper | {"fig5", "fig6a", "fig6b"} <= set(registry["target"])
    assert {"profiling", "token_limit", "batching"} <= set(registry["study"])
    # an intro page is a figure study's, and its notebook is committed beside it (a study
    # without one gets the template's notebook, its package's docstring as its intro)
    intros = {p.stem for p in (ROOT / "notebooks/intro").glob("*.md")}
    assert intros <= set(registry["study"]), intros - set(registry["study"])
    committed = {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")}
    assert committed == intros, committed ^ intros


def module_file(dotted: str) -> Path:
    path = ROOT / "src" / (dotted.replace(".", "/") + ".py")
    return path if path.is_file() else path.with_suffix("") / "__init__.py"


def test_every_figure_has_its_plot_module_caption_and_files(registry: pd.DataFrame) -> None:
    from llmqueue.studies import study

    for _, f in registry.iterrows():
        if f["module"] != "-":
            # a module of its study's package, and its caption beside it (or the shared one)
            assert module_file(f["module"]).is_file(), f["target"]
            package = study(f["study"]).package  # the package itself, or one of its modules
            assert f"{f['module']}.".startswith(f"{package}."), f["target"]
        assert (ROOT / f["caption"]).is_file(), f["caption"]
        outputs = f["outputs"].split()
        assert outputs and all(o.startswith("figures/") for o in outputs), f["target"]


def test_every_plot_module_and_caption_belongs_to_a_figure(registry: pd.DataFrame) -> None:
    import ast

    from llmqueue.studies import STUDIES

    plots = {
        ".".join(p.relative_to(ROOT / "src").with_suffix("").parts).removesuffix(".__init__")
        for s in STUDIES
        for p in (ROOT / s.folder).glob("*.py")
        if any(
            isinstance(n, ast.FunctionDef) and n.name == "plot"
            for n in ast.parse(p.read_text()).body
        )
    }
    assert plots == set(registry.loc[registry["module"] != "-", "module"])
    shared = {p.stem for p in (ROOT / "workflow/report").glob("*.rst")}
    assert shared == OTHER_CAPTIONS, shared ^ OTHER_CAPTIONS
    captions = {str(p.relative_to(ROOT)) for s in STUDIES for p in (ROOT / s.folder).glob("*.rst")}
    assert captions == set(registry["caption"]) - {"workflow/report/figure.rst"}


def test_claims_of_each_figure(registry: pd.DataFrame) -> None:
    claims = dict(zip(registry["target"], registry["claims"], strict=True))
    assert claims["fig4d"] == "3,4,5" and claims["table1"] == "1" and claims["fig5"] == "7"
    assert claims["fig3a"] == "-"  # no claim of the paper rests on Fig. 3a


def test_each_figure_is_a_make_and_snakemake_target(tree: Path, registry: pd.DataFrame) -> None:
    rules = subprocess.run(
        [str(tree / ".venv/bin/snakemake"), "--list-target-rules"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rules.returncode == 0, rules.stderr[-2000:]
    listed = set(rules.stdout.split())
    for target in registry["target"]:
        assert target in listed, target
        dry = subprocess.run(
            ["make", "--no-print-directory", "-n", "-o", STAMP, target],
            cwd=tree,
            capture_output=True,
            text=True,
        )
        assert dry.returncode == 0, dry.stderr
        assert dry.stdout.strip().splitlines()[-1].endswith(f" {target}"), dry.stdout
    # the Makefile itself names no figure (outside comments): the registry is the one list
    code = [ln for ln in (ROOT / "Makefile").read_text().splitlines() if not ln.startswith("#")]
    named = [t for t in registry["target"] for ln in code if t in ln.split()]
    assert not named, named


def test_committed_gallery_pngs_are_registered_figures(registry: pd.DataFrame) -> None:
    outputs = {o for row in registry["outputs"] for o in row.split()}
    tracked = subprocess.run(
        ["git", "ls-files", "figures"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    assert tracked and set(tracked) <= outputs, set(tracked) - outputs
