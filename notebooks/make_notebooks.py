"""Write the three study notebooks (notebooks/<study>.ipynb) from one template.

Run `python notebooks/make_notebooks.py` after editing this file; the pipeline executes the
notebooks with papermill (workflow/rules/notebooks.smk), which injects the parameters below.
The code cells only read files, so the notebooks never recompute a long job, and they show
whatever tables a study writes (CSV heads, JSON fits) without knowing their columns in advance.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).parent

INTRO = {
    "profiling": r"""# Profiling and calibration: Table I, Fig. 2a, Fig. 2b

The paper measured LLaMA-2-7B-chat, Chinese-Alpaca-2-7B and ChatGLM3-6B on an NVIDIA A100 and
fitted the **linear latency laws** that every later section uses.

* **Single request** (Table I, Fig. 2a): the latency of a request with $N$ output tokens is
  $S = a\,N + b_0$ (Eq. 3-5): a per-token decode time $a$ and a fixed cost $b_0$ (prefill and
  the first token). Input length moves the first-token time only, so it barely matters.
* **Batches** (Fig. 2b): a batch of $b$ requests spends $t_1(b) = k_1 b + k_2$ on the first
  token and $t_2(b) = k_3 b + k_4$ on each later one, so
  $T_b = k_1 b + k_2 + (k_3 b + k_4)\,L_b$ with $L_b$ the longest output in the batch (Eq. 18).
* **KV-cache limit**: the largest batch whose keys and values fit in device memory beside the
  weights (claim 2: 49 sequences of 1280 tokens on an A100).

Our numbers come from three kinds of source, and each point says which: the **paper's** published
values (reference), **measured** on hardware we had (models built from their architectures with
random weights: timing does not need trained weights), and a **roofline** prediction for a named
GPU. A CPU or a different GPU is never counted as the paper's A100.
""",
    "token_limit": r"""# The max-token limit: Fig. 4a-4d (Sec. III, V-B)

Requests arrive as a Poisson stream of rate $\lambda$ to one FCFS server. A request wants $N$
output tokens ($N \sim$ LogNormal(7, 0.7) by default); the provider clips it at a **max-token
limit** $l$, so its service time is $S = a\,\min(N, l) + b_0$ (Eq. 3-5, latency law from Table I).

* **Patient users** (Fig. 4a): an M/G/1 queue; the mean wait is the Pollaczek-Khinchine formula
  $W_q = \lambda E[S^2] / (2(1-\rho))$ with $\rho = \lambda E[S]$ (Eq. 1-2), using the exact clipped
  moments $E[\min(N,l)^k]$.
* **Impatient users** (Fig. 4b-4c): a user leaves if service has not started within $\tau$ (an
  M/G/1+D queue). The paper approximates the lost fraction $\pi$ and the mean wait of served
  users $W_{qs}$ by the De Kok-Tijms interpolation (Eq. 6-8); we add the exact M/G/1+D solution
  (a renewal equation solved on a grid with a controlled error) and a simulation.
* **Trade-off** (Fig. 4d): $F_1$ and $F_2$ (Eq. 10-13) weigh the quality lost by clipping (the
  served fraction of tokens through a utility $g(r) = r^\gamma$) against delay or loss; the optimal
  limit $l^*$ maximises them on the $l$ grid.

Simulations are seeded per sweep point and give 95% confidence intervals by batch means; points
with $\rho \ge 1$ for patient users are marked unstable, never given a number.
""",
    "batching": r"""# Batching: Fig. 3a, 3b, 5, 6a, 6b (Sec. IV, V-C)

A GPU serves requests in batches. A batch of $b$ requests takes
$T_b = k_1 b + k_2 + (k_3 b + k_4)\,L_b$ (Eq. 18), where $L_b$ is the **longest** output in the
batch: shorter replies are padded to it.

* **Batch time and rate** (Fig. 3a-3b): $E[L_b]$, the expected maximum of $b$ output lengths, in
  closed form for the uniform law (Eq. 19), as an integral for the truncated Gaussian (Eq. 23) and
  by quadrature otherwise; the batch service rate $\mu_b = b / E[T_b]$ (Eq. 24). Heavy tails
  (LogNormal) make $\mu_b$ peak at an interior $b$.
* **Dynamic batching** (Fig. 5, 6b): the server takes every waiting request (up to $b_{\max}$)
  whenever it frees up. The paper bounds its mean delay by (16); we add the exact mean by the
  embedded Markov chain at batch starts, and a simulation.
* **Fixed batching** (Fig. 6a): the server waits for $K$ requests: the bulk queue $M/D^K/1$ of
  Eq. (25), which assumes a *fixed* batch time (a fixed-T approximation), beside a simulation with
  random batch times; the optimal $K^*$ for wait and for response time.
* **Elastic batching** (Fig. 5, 6b): each reply leaves as soon as it is done, without padding.

Wait is arrival to batch start; response is arrival to the reply returned. Simulations give 95%
confidence bands; profiles with negative times and rates beyond stability are refused.
""",
}

PARAMETERS = """# Parameters (papermill replaces this cell's values; these defaults let it run by hand
# from the repository root after `make reproduce`).
study = "{study}"
figures = {figures!r}
claim_numbers = {claims!r}
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
CONFIG_SECTIONS = {
    "profiling": ["profiling", "latency_profiles"],
    "token_limit": ["token_limit", "latency_profiles"],
    "batching": ["batching", "batch_profiles"],
}"""

CONFIG = """for key in CONFIG_SECTIONS.get(study, [study]):
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

STUDIES = {
    "profiling": (["table1", "fig2a_time_token_line", "fig2b_throughput"], [1, 2]),
    "token_limit": (
        ["fig4a_mg1_EW", "fig4b_mg1_EWqs", "fig4c_mg1_pai", "fig4d_tradeoff"],
        [3, 4, 5],
    ),
    "batching": (
        [
            "fig3a_EL_Hb",
            "fig3b_miub",
            "fig5_junyun_llama",
            "fig5_junyun_alpaca",
            "fig5_junyun_chatglm",
            "fig6a_fix_bsz",
            "fig6b_dy_bmax",
        ],
        [6, 7, 8, 9],
    ),
}


def build(study: str) -> nbformat.NotebookNode:
    figures, claims = STUDIES[study]
    params = new_code_cell(PARAMETERS.format(study=study, figures=figures, claims=claims))
    params.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell(INTRO[study]),
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


if __name__ == "__main__":
    for study in STUDIES:
        nb = build(study)
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{study}-{i}"
        nbformat.write(nb, HERE / f"{study}.ipynb")
        print(HERE / f"{study}.ipynb")
