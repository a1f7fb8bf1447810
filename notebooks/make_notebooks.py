"""Write one notebook per study (notebooks/<study>.ipynb) from one template.

A study's notebook opens with its intro page, notebooks/intro/<study>.md (the first line may name
the config sections the notebook prints), or, for a study without one, its package's docstring
(llmqueue.catalog). Run `python notebooks/make_notebooks.py` after editing an intro page or the
template; `python notebooks/make_notebooks.py --study S --out PATH` writes one study's notebook
(the pipeline's source for a study without a committed notebook). The pipeline executes the
notebooks with papermill (workflow/rules/notebooks.smk), which injects the parameters below.
The code cells only read files, so the notebooks never recompute a long job, and they show
whatever tables a study writes (CSV heads, JSON fits) without knowing their columns in advance.
"""

import argparse
import ast
import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

INTRO_DIR = HERE / "intro"
CONFIG_LINE = re.compile(r"^<!-- config sections: (.*) -->\n")


def studies() -> list[str]:
    """Every study with an intro page (notebooks/intro/<study>.md), in name order."""
    return sorted(p.stem for p in INTRO_DIR.glob("*.md"))


def intro(study: str) -> tuple[str, list[str]]:
    """The study's intro (Markdown) and the config sections its notebook prints (first line
    ``<!-- config sections: a, b -->``; default: the section named after the study)."""
    page = INTRO_DIR / f"{study}.md"
    text = page.read_text() if page.is_file() else package_intro(study)
    m = CONFIG_LINE.match(text)
    if not m:
        return text.strip(), [study]
    return text[m.end() :].strip(), [x.strip() for x in m.group(1).split(",") if x.strip()]


def package_intro(study: str) -> str:
    """A study without an intro page: its package's docstring, titled with the study's name."""
    from llmqueue.catalog import PACKAGE
    from llmqueue.catalog import study as find

    init = PACKAGE.parents[1] / find(study).folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text())) or ""
    return f"# The {study} study\n\n{doc}\n"


PARAMETERS = """# Parameters (papermill replaces this cell's values; these defaults let it run by hand
# from the repository root after `make reproduce`).
study = "{study}"
figures = None  # None: this study's figures in results/figures.tsv (the figure registry)
claim_numbers = None  # None: the claims those figures report
config_sections = {sections!r}
results_dir = "results/{study}"
claims_csv = "results/claims.csv"
config_file = "config/config.yaml"
root = "."
"""

SETUP = """import json
import os
from pathlib import Path

import pandas as pd
import yaml
from IPython.display import Image, Markdown, display

os.chdir(root)
pd.set_option("display.max_columns", 40)
pd.set_option("display.width", 160)
config = yaml.safe_load(Path(config_file).read_text())
if figures is None or claim_numbers is None:  # run by hand: read the registry
    tsv = Path("results/figures.tsv")  # written by `make figures`
    registry = pd.read_csv(tsv, sep="\t", dtype=str).fillna("-") if tsv.exists() else None
    if registry is None:
        display(Markdown("*No `results/figures.tsv`: run `make figures` to list the figures.*"))
        registry = pd.DataFrame(columns=["study", "outputs", "claims"])
    mine = registry[registry["study"] == study]
    if figures is None:
        figures = [Path(o).stem for outs in mine["outputs"] for o in outs.split() if not o.endswith(".pdf")]
    if claim_numbers is None:
        claim_numbers = sorted({int(c) for cs in mine["claims"] if cs != "-" for c in cs.split(",")})"""

CONFIG = """for key in config_sections:
    display(Markdown(f"**`{key}`** (from `{config_file}`)"))
    print(yaml.safe_dump(config.get(key, {}), sort_keys=False, width=100))"""

FIGURES = """for stem in figures:
    png, table = Path("figures") / f"{stem}.png", Path("figures") / f"{stem}.md"
    if png.exists():
        display(Markdown(f"### `{stem}`"))
        display(Image(filename=str(png), width=720))
    elif table.exists():
        display(Markdown(f"### `{stem}`\\n\\n" + table.read_text()))
    else:
        display(Markdown(f"### `{stem}`\\n\\n*Not built in this run.*"))"""

RESULTS = """MAX_FILES = 60
files = sorted(p for p in Path(results_dir).rglob("*") if p.suffix in (".csv", ".json"))
if not files:
    display(Markdown(f"*No cached results under `{results_dir}/` yet.*"))
for path in files[:MAX_FILES]:
    try:
        if path.suffix == ".csv":
            table = pd.read_csv(path)
            columns = ", ".join(map(str, table.columns))
            display(Markdown(f"**`{path}`**: {len(table)} rows, columns {columns}"))
            display(table.head(8))
        else:
            text = json.dumps(json.loads(path.read_text()), indent=1)
            display(Markdown(f"**`{path}`**"))
            print(text if len(text) < 1500 else text[:1500] + "\\n...")
    except (ValueError, OSError) as err:  # an empty or unreadable table is shown, not fatal
        display(Markdown(f"**`{path}`**: not shown ({type(err).__name__}: {err})"))
if len(files) > MAX_FILES:
    display(Markdown(f"*{len(files) - MAX_FILES} more files under `{results_dir}/` not shown.*"))"""

CLAIMS = """COLOURS = {"reproduced": "#d8f0d8", "not_reproduced": "#f6d5d5", "back_solved": "#f8ecc8"}
try:
    claims = pd.read_csv(claims_csv, dtype=str, keep_default_na=False)
except (ValueError, OSError):
    claims = pd.DataFrame(columns=["id", "verdict"])
if "id" not in claims:
    claims["id"] = ""
if "verdict" not in claims:
    claims["verdict"] = ""
number = pd.to_numeric(claims["id"].str.extract(r"^\\s*(\\d+)")[0], errors="coerce")
rows = claims[number.isin(claim_numbers)].reset_index(drop=True)
if rows.empty:
    display(Markdown(f"*No rows for claims {claim_numbers} in `{claims_csv}` yet.*"))
else:
    tally = rows["verdict"].value_counts()
    display(Markdown(f"{len(rows)} rows: " + ", ".join(f"{n} {v}" for v, n in tally.items())))
    display(rows.style.apply(
        lambda r: [f"background-color: {COLOURS.get(r.get('verdict'), '')}"] * len(r), axis=1
    ).hide(axis="index"))"""

NOTES = """misses = rows[rows["verdict"] != "reproduced"] if not rows.empty else rows
if misses.empty:
    display(Markdown("Every row of this study is reproduced." if not rows.empty else ""))
for _, row in misses.iterrows():
    display(Markdown(f"- **{row['id']}** ({row['verdict']}): {row.get('note', '')}"))"""


def build(study: str) -> nbformat.NotebookNode:
    text, sections = intro(study)
    params = new_code_cell(PARAMETERS.format(study=study, sections=sections))
    params.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell(text),
        params,
        new_code_cell(SETUP),
        new_markdown_cell(
            "## Parameters of this run\n\nThe study's sections of the config, as the pipeline read them."
        ),
        new_code_cell(CONFIG),
        new_markdown_cell(
            "## Figures\n\nThe figures the pipeline drew (PNG; the PDFs are beside them in `figures/`)."
        ),
        new_code_cell(FIGURES),
        new_markdown_cell(
            "## Cached results\n\nThe tables the figures are drawn from (first rows of each), read from disk: nothing is recomputed here."
        ),
        new_code_cell(RESULTS),
        new_markdown_cell(
            "## Claims\n\nThe paper's numbers beside ours, with the tolerance fixed in config and the verdict."
        ),
        new_code_cell(CLAIMS),
        new_markdown_cell("### Not reproduced or back-solved, and why"),
        new_code_cell(NOTES),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write(study: str, path: Path) -> None:
    """Write study `study`'s notebook to `path` (cell ids fixed, so a rewrite is byte-identical)."""
    nb = build(study)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"{study}-{i}"
    nbformat.write(nb, path)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--study", help="write this study's notebook only (to --out)")
    cli.add_argument("--out", type=Path, help="where --study's notebook goes")
    args = cli.parse_args()
    if args.study:
        if args.out is None:
            cli.error("--study needs --out")
        write(args.study, args.out)
    else:
        for study in studies():
            write(study, HERE / f"{study}.ipynb")
            print(HERE / f"{study}.ipynb")
