"""Render one figure: load the rule's named inputs, call <module>.plot (a study's plot module), save.

Rule usage::

    input: data="results/x.csv", code=module_code("llmqueue.studies.token_limit.fig4a_mg1_EW")
    output: pdf="figures/fig4a_mg1_EW.pdf", png="figures/fig4a_mg1_EW.png"
    params: module="llmqueue.studies.token_limit.fig4a_mg1_EW", ...anything the plot needs
    script: "../scripts/plot_figure.py"

CSV inputs arrive as DataFrames (a list of CSVs as one, concatenated), JSON inputs as dicts (the
`code` input is skipped).
"""

import importlib
import json

import matplotlib

matplotlib.use("Agg")
import pandas as pd

from llmqueue.io import atomic_path

sm = snakemake  # noqa: F821
inputs = {}
for name, path in sm.input.items():
    if name == "code":
        continue
    if isinstance(path, str) and path.endswith(".csv"):
        inputs[name] = pd.read_csv(path)
    elif not isinstance(path, str) and all(str(p).endswith(".csv") for p in path):
        inputs[name] = pd.concat([pd.read_csv(p) for p in path], ignore_index=True)
    elif isinstance(path, str) and path.endswith(".json"):
        with open(path) as fh:
            inputs[name] = json.load(fh)
params = {k: v for k, v in sm.params.items()}
params.pop("caption", None)  # a figure without a caption file: its caption text, not the plot's
module = importlib.import_module(params.pop("module"))
fig = module.plot(inputs, params)
for key in ("pdf", "png"):
    with atomic_path(sm.output[key]) as tmp:
        fig.savefig(tmp, format=key, metadata={"CreationDate": None} if key == "pdf" else None)
