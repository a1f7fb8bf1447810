"""The reviewer layer: captions for every figure, the claims rendering, the study notebooks and
the stale-lock clearing. Fast checks on fixtures; the full report is built by `make report`."""

from __future__ import annotations

import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nbformat
import pandas as pd
import pytest
import yaml
from docutils.core import publish_parts
from jinja2 import Environment

from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "workflow" / "report"
SCRIPTS = ROOT / "workflow" / "scripts"


def test_report_captions_named_by_rules_exist() -> None:
    for smk in [ROOT / "Snakefile", *(ROOT / f for f in rule_files())]:
        for m in re.finditer(r'caption\s*=\s*(f?)"([^"]+)"', smk.read_text()):
            if m.group(1):
                continue  # per-figure f-string: covered by tests/workflow/test_figure_registry.py
            # Snakemake does not fill wildcards into caption paths: "{panel}" is literal.
            path = (smk.parent / m.group(2)).resolve()
            assert path.is_file(), f"{smk.name}: caption {m.group(2)} does not exist"


class Params(list):  # type: ignore[type-arg]
    """Stands in for Snakemake's Namedlist: a list with .items()."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(kw.values())
        self._kw = kw

    def items(self) -> Any:
        return self._kw.items()

    def __getattr__(self, name: str) -> Any:
        try:
            return self._kw[name]
        except KeyError as err:
            raise AttributeError(name) from err


def render(path: Path, files: list[str], cwd: Path) -> str:
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    sm = SimpleNamespace(
        config=config,
        params=Params(
            module="x", grid=list(range(50)), label="a `tick` and *star*", panel="alpaca"
        ),
        wildcards=SimpleNamespace(study="token_limit", panel="alpaca"),
        output=SimpleNamespace(verdicts=["a", "b"]),
    )
    env = Environment(trim_blocks=True, lstrip_blocks=True)
    text = env.from_string(path.read_text()).render(
        snakemake=sm, files=[SimpleNamespace(target=f) for f in files], categories={}
    )
    old = Path.cwd()
    os.chdir(cwd)
    try:
        # halt on warnings: a caption with broken RST fails here, not in a reviewer's report
        return publish_parts(
            text, writer="html", settings_overrides={"halt_level": 2, "report_level": 2}
        )["body"]
    finally:
        os.chdir(old)


@pytest.mark.parametrize("caption", sorted(p.name for p in REPORT.glob("*.rst")))
def test_caption_renders_with_and_without_its_verdict(caption: str, tmp_path: Path) -> None:
    stem = caption.removesuffix(".rst")
    if "snakemake.params.panel" in (REPORT / caption).read_text():
        stem += "_alpaca"  # a caption shared by the panels of one figure
    snippet = tmp_path / "results" / "report" / f"verdict_{stem}.rst"
    snippet.parent.mkdir(parents=True)
    snippet.write_text("Claim 3: 1 reproduced.\n")
    (tmp_path / "results" / "report" / "claims_summary.rst").write_text("Claims table: 0 rows.\n")
    without = render(REPORT / caption, [], tmp_path)
    with_it = render(REPORT / caption, [f"verdict_{stem}.rst", "claims.html"], tmp_path)
    if "verdict_" in (REPORT / caption).read_text():
        assert "Claim 3: 1 reproduced." in with_it
        assert "Claim 3: 1 reproduced." not in without
        assert "results/claims.csv" in without


def fake_claims() -> pd.DataFrame:
    rows = [
        ("1a", "Table I cell", "2.91", "3.1", "s", "rel=0.05", "not_reproduced", "roofline A100"),
        ("2", "KV limit", "49", "49", "sequences", "exact", "reproduced", ""),
        ("3a", "l* patient", "1600", "1300", "tokens", "exact", "not_reproduced", "g not given"),
        ("3b-back_solved", "W_q", "23", "23.0", "s", "rel=0.05", "back_solved", "a*b `x` |y|"),
        ("8a", "K* by Eq. (25)", "8", "8", "requests", "exact", "reproduced", "profile paper_k8"),
    ]
    cols = ["id", "claim", "paper", "ours", "unit", "tolerance", "verdict", "note"]
    return pd.DataFrame(rows, columns=cols)


def run_script(name: str, sm: Any) -> None:
    runpy.run_path(str(SCRIPTS / name), init_globals={"snakemake": sm}, run_name="__main__")


@pytest.mark.parametrize("empty", [False, True])
def test_report_claims_renders_every_row(tmp_path: Path, empty: bool) -> None:
    claims = fake_claims().iloc[:0] if empty else fake_claims()
    claims.to_csv(tmp_path / "claims.csv", index=False)
    figure_claims = {"table1": [1], "fig4a_mg1_EW": [3], "fig6a_fix_bsz": [8], "fig5_x": [7]}
    out = tmp_path / "out"
    sm = SimpleNamespace(
        input=SimpleNamespace(claims=str(tmp_path / "claims.csv")),
        output=SimpleNamespace(
            table=str(out / "claims.html"),
            summary=str(out / "claims_summary.rst"),
            markdown=str(out / "claims.md"),
            verdicts=[str(out / f"verdict_{s}.rst") for s in figure_claims],
        ),
        params=SimpleNamespace(figure_claims=figure_claims),
    )
    run_script("report_claims.py", sm)
    page = (out / "claims.html").read_text()
    for cid in claims["id"]:
        assert f"<td>{cid}</td>" in page
    for stem, numbers in figure_claims.items():
        text = (out / f"verdict_{stem}.rst").read_text()
        publish_parts(text, writer="html", settings_overrides={"halt_level": 2})
        for cid in claims["id"]:
            shown = int(re.match(r"\d+", cid).group()) in numbers  # type: ignore[union-attr]
            row = "   * - " + cid.replace("_", r"\_") + "\n"
            assert (row in text) == shown, (stem, cid)
        if empty or stem == "fig5_x":
            assert text.startswith("No rows for claim")
    summary = (out / "claims_summary.rst").read_text()
    publish_parts(summary, writer="html", settings_overrides={"halt_level": 2})
    assert f"{len(claims)} rows" in summary
    markdown = (out / "claims.md").read_text()
    assert all(f"| {cid} |" in markdown for cid in claims["id"])
    assert r"a*b `x` \|y\|" in markdown or empty


def fixture_tree(root: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (root / "figures").mkdir()
    (root / "results" / "token_limit" / "table1_fit").mkdir(parents=True)
    (root / "config").mkdir()
    shutil.copy(ROOT / "config" / "config.yaml", root / "config" / "config.yaml")
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(root / "figures" / "fig4a_mg1_EW.png")
    plt.close(fig)
    (root / "figures" / "table1.md").write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    pd.DataFrame({"limit_tokens": [100, 200], "an_unknown_column": [0.5, 0.7]}).to_csv(
        root / "results" / "token_limit" / "table1_fit" / "patient.csv", index=False
    )
    (root / "results" / "token_limit" / "fit.json").write_text(json.dumps({"a": 1}))
    (root / "results" / "token_limit" / "empty.csv").write_text("")  # a table with no columns
    fake_claims().to_csv(root / "results" / "claims.csv", index=False)


@pytest.mark.slow
def test_study_notebook_runs_from_cached_results(tmp_path: Path) -> None:
    """One notebook end to end (papermill + nbconvert), with columns it has never seen."""
    fixture_tree(tmp_path)
    log = tmp_path / "nb.log"
    sm = SimpleNamespace(
        input=SimpleNamespace(
            notebook=str(ROOT / "notebooks" / "token_limit.ipynb"), claims="results/claims.csv"
        ),
        output=SimpleNamespace(
            ipynb=str(tmp_path / "out" / "token_limit.ipynb"),
            html=str(tmp_path / "out" / "token_limit.html"),
        ),
        params=SimpleNamespace(
            figures=["fig4a_mg1_EW", "fig4b_mg1_EWqs", "table1"],
            claim_numbers=[3, 4, 5],
            results_dir="results/token_limit",
        ),
        wildcards=SimpleNamespace(study="token_limit"),
        log=[str(log)],
    )
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        run_script("notebook_run.py", sm)
    finally:
        os.chdir(old)
    page = (tmp_path / "out" / "token_limit.html").read_text()
    assert "an_unknown_column" in page  # the CSV head, whatever its columns
    assert "data:image/png;base64" in page  # the figure, embedded
    assert "Not built in this run" in page  # fig4b is missing in the fixture
    assert "3b-back_solved" in page and "1a" not in re.findall(r">(\w+)</td>", page)
    assert "g not given" in page  # the reason of a row that is not reproduced
    assert "empty.csv" in page and "not shown" in page  # shown, not fatal


@pytest.mark.parametrize("study", sorted(p.stem for p in (ROOT / "notebooks/intro").glob("*.md")))
def test_notebooks_are_generated_and_parametrised(study: str, tmp_path: Path) -> None:
    committed = nbformat.read(ROOT / "notebooks" / f"{study}.ipynb", as_version=4)
    tagged = [c for c in committed.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1
    for name in ("study", "figures", "claim_numbers", "results_dir", "claims_csv", "root"):
        assert re.search(rf"^{name} = ", tagged[0].source, re.M), name
    # The committed notebooks are what notebooks/make_notebooks.py writes.
    gen = runpy.run_path(str(ROOT / "notebooks" / "make_notebooks.py"), run_name="not_main")
    fresh = gen["build"](study)
    assert [c.source for c in fresh.cells] == [c.source for c in committed.cells]


def test_a_study_without_an_intro_page_gets_the_templates_code_cells() -> None:
    """The notebook of a study with no intro page opens with its package's docstring, and its
    code cells are every notebook's (so the notebook rule may take a committed notebook's code
    inputs for it before its source is written)."""
    gen = runpy.run_path(str(ROOT / "notebooks" / "make_notebooks.py"), run_name="not_main")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(gen["intro"].__globals__, "INTRO_DIR", ROOT / "no-such-folder")
        bare = gen["build"]("ssjf")
    first = bare.cells[0].source
    assert (
        first.startswith("# The ssjf study") and "speculative shortest-job-first" in first.lower()
    )

    def code(nb: nbformat.NotebookNode) -> list[str]:
        return [c.source for c in nb.cells if c.cell_type == "code" and "parameters" not in
                c.metadata.get("tags", [])]  # fmt: skip

    assert code(bare) == code(nbformat.read(ROOT / "notebooks/batching.ipynb", as_version=4))


def fake_snakemake(path: Path, body: str) -> Path:
    exe = path / "snakemake"
    exe.write_text(f"#!{sys.executable}\n{body}\n")
    exe.chmod(0o755)
    return exe


def test_stale_lock_is_cleared_when_no_snakemake_runs(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    exe = fake_snakemake(
        tmp_path,
        "import shutil, sys; assert '--unlock' in sys.argv; shutil.rmtree('.snakemake/locks')",
    )
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / "unlock_if_stale.py"),
            "--snakemake",
            str(exe),
            "--dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "clearing a stale Snakemake lock" in done.stdout
    assert not locks.exists()


def test_live_lock_is_kept(tmp_path: Path) -> None:
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.input.lock").write_text("x")
    live = fake_snakemake(tmp_path, "import time; time.sleep(60)")
    proc = subprocess.Popen([str(live), "--cores", "1"], cwd=tmp_path)
    try:
        time.sleep(0.5)
        done = subprocess.run(
            [
                sys.executable,
                str(SCRIPTS / "unlock_if_stale.py"),
                "--snakemake",
                "false",
                "--dir",
                str(tmp_path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        proc.kill()
        proc.wait()
    assert done.returncode == 0, done.stderr
    assert "lock kept" in done.stdout
    assert (locks / "0.input.lock").exists()


def test_makefile_unlock_runs_from_make(tmp_path: Path) -> None:
    """`make unlock` itself clears a stale lock (the old pgrep test matched make's own shell)."""
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "envs", tmp_path / "envs")
    (tmp_path / "workflow" / "scripts").mkdir(parents=True)
    shutil.copy2(SCRIPTS / "unlock_if_stale.py", tmp_path / "workflow" / "scripts")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(sys.executable)
    fake_snakemake(bin_dir, "import shutil; shutil.rmtree('.snakemake/locks')")
    (tmp_path / ".venv" / ".llmqueue-installed").touch()
    locks = tmp_path / ".snakemake" / "locks"
    locks.mkdir(parents=True)
    (locks / "0.output.lock").write_text("x")
    done = subprocess.run(
        ["make", "-o", ".venv/.llmqueue-installed", "unlock"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not locks.exists(), done.stdout


def test_verify_copies_the_tree_as_git_sees_it(tmp_path: Path) -> None:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import verify_checksums as vc
    finally:
        sys.path.remove(str(SCRIPTS))
    src = tmp_path / "src_tree"
    (src / "results" / "a").mkdir(parents=True)
    (src / ".venv" / "bin").mkdir(parents=True)
    (src / "figures").mkdir()
    (src / ".gitignore").write_text("results/\n.venv/\n")
    (src / "tracked.txt").write_text("t")
    (src / "results" / "a" / "x.csv").write_text("a,b\n1,2\n")
    (src / "figures" / "table1.csv").write_text("c\n3\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=src, check=True)
    subprocess.run([*git, "add", ".gitignore", "tracked.txt"], cwd=src, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=src, check=True)
    (src / "untracked.txt").write_text("u")  # not ignored: part of the working tree
    dest = tmp_path / "second"
    dest.mkdir()
    vc.copy_tree(src, dest)
    assert (dest / "tracked.txt").exists() and (dest / "untracked.txt").exists()
    assert (dest / "figures" / "table1.csv").exists()
    assert not (dest / "results").exists()
    assert (dest / ".venv").is_symlink()
    sums = vc.csv_checksums(src)
    assert set(sums) == {"results/a/x.csv", "figures/table1.csv"}
