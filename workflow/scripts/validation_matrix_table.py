"""The error table of the held-out validation matrix (figures/table_vllm_matrix.{csv,md}) and its
summaries: median and largest |error| per metric, SJF/SSJF reductions, run-to-run spread, closed
forms (llmqueue.studies.validation.matrix); the protocol's alternating blocks, the repeats' noise
floor and every run's error in units of it (llmqueue.studies.validation.protocol)."""

import pandas as pd

from llmqueue.io import write_csv, write_text
from llmqueue.studies.validation.matrix import (
    markdown_matrix,
    priority_reductions,
    repeat_spread,
    summary_rows,
)
from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings
from llmqueue.studies.validation.protocol import (
    block_reductions,
    block_summary,
    judged_in_sigma,
    noise_floor,
    pooled_sigma,
)

sm = snakemake  # noqa: F821
cfg = MatrixCompareSettings.from_config(sm.params.compare, sm.params.seed)
comparison = pd.concat([pd.read_csv(p) for p in sm.input.comparisons], ignore_index=True)
closed = pd.concat(
    [c for c in (pd.read_csv(p) for p in sm.input.closed) if len(c)], ignore_index=True
)
variants = list(dict.fromkeys(comparison["variant"]))
summary = pd.concat([summary_rows(comparison, v) for v in variants], ignore_index=True)
reductions = priority_reductions(comparison)
spread = repeat_spread(comparison)
write_csv(comparison, sm.output.csv)
write_csv(summary, sm.output.summary)
write_csv(reductions, sm.output.reductions)
write_csv(spread, sm.output.spread)
write_csv(closed, sm.output.closed)
write_text(markdown_matrix(comparison, summary, reductions, spread, closed, cfg), sm.output.md)
blocks = block_reductions(comparison)
write_csv(blocks, sm.output.blocks)
write_csv(block_summary(blocks), sm.output.block_summary)
floor = noise_floor(comparison)
sigma = pooled_sigma(floor, "sigma_session_law")
if sigma != sigma:  # no per-session laws (a matrix measured without the protocol)
    sigma = pooled_sigma(floor, "sigma_prediction")
in_sigma, defects = judged_in_sigma(comparison, sigma)
in_sigma["sigma"] = sigma
in_sigma["defect_group"] = in_sigma["group"].isin(defects)
write_csv(floor, sm.output.noise)
write_csv(in_sigma, sm.output.sigma)
