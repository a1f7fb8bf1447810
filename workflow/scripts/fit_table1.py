"""Least-squares fit of Table I (paper, A100) rows with a fixed input length: S = a*N + b0."""

import pandas as pd

from llmqueue.io import write_json
from llmqueue.latency import fit_linear_latency

sm = snakemake  # noqa: F821
table = pd.read_csv(sm.input.table)
rows = table[table["input_tokens"] == sm.params.input_tokens].drop_duplicates()
fit = fit_linear_latency(rows["output_tokens"], rows["latency_s"])
write_json(
    {
        "source": "paper",
        "model": "llama2-7b-chat",
        "label": "paper (A100, Table I)",
        "verdict": "reference",
        "hardware": "NVIDIA A100 (paper, Table I)",
        "description": f"Table I rows with input {sm.params.input_tokens} tokens ({len(rows)} rows)",
        "x": "output tokens N",
        "y": "latency S (s)",
        "points": rows[["output_tokens", "latency_s"]].to_dict(orient="list"),
        "linear": fit.to_dict(),
    },
    sm.output[0],
)
