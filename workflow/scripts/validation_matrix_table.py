"""One engine's held-out validation matrix: its error table (figures/table_<engine>_matrix.{csv,md}) and its
summaries: median and largest |error| per metric, SJF/SSJF reductions, run-to-run spread, closed
forms (llmqueue.studies.validation.matrix, matrix_summary); the protocol's alternating blocks, the repeats' noise
floor and every run's error in units of it (llmqueue.studies.validation.protocol); every target
met or missed (llmqueue.studies.validation.verdict)."""

import math

import numpy as np
import pandas as pd

from llmqueue.io import write_csv, write_text
from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings
from llmqueue.studies.validation.matrix_summary import (
    markdown_matrix,
    priority_reductions,
    repeat_spread,
    summary_rows,
)
from llmqueue.studies.validation.protocol import (
    block_reductions,
    block_summary,
    calibration_noise,
    judged_in_sigma,
    noise_floor,
    pooled_sigma,
)
from llmqueue.studies.validation.verdict import judge_targets

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
blocks = block_reductions(comparison)
floor = noise_floor(comparison)
# the repeats' sigma with the calibration's noise where each session calibrated on its own, else
# (a matrix measured without the protocol) the spread of the errors over the repeats
sigma = pooled_sigma(floor, "sigma_session_law")
if math.isnan(sigma):
    sigma = pooled_sigma(floor, "sigma_prediction")
in_sigma, defects = judged_in_sigma(comparison, sigma)
in_sigma["sigma"] = sigma
in_sigma["defect_group"] = in_sigma["group"].isin(defects)
# the error table gains each run's mean-JCT error in sigma units and its group's calibration noise
comparison["jct_mean_error_sigma"] = np.log1p(comparison["jct_mean_rel_error"]) / sigma
for group, path in zip(sm.params.compare["groups"], sm.input.rounds, strict=True):
    noise = calibration_noise(pd.read_csv(path))
    at = comparison["group"] == group
    comparison.loc[at, "calibration_rounds"] = noise["rounds"]
    comparison.loc[at, "calibration_noise_cv"] = noise["cv"]
    comparison.loc[at, "calibration_level_ci95"] = noise["ci95_rel"]
write_csv(comparison, sm.output.csv)
write_csv(summary, sm.output.summary)
write_csv(reductions, sm.output.reductions)
write_csv(spread, sm.output.spread)
write_csv(closed, sm.output.closed)
write_text(markdown_matrix(comparison, summary, reductions, spread, closed, cfg), sm.output.md)
write_csv(blocks, sm.output.blocks)
blocks_summary = block_summary(blocks)
write_csv(blocks_summary, sm.output.block_summary)
verdicts = judge_targets(summary, blocks_summary, reductions, defects, cfg.targets)
verdicts.insert(0, "engine", cfg.engine)
write_csv(verdicts, sm.output.targets)
write_csv(floor, sm.output.noise)
write_csv(in_sigma, sm.output.sigma)
