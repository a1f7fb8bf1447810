"""One group of the held-out validation matrix replayed through the serving simulator: the
comparison rows, per-request predictions and closed forms
(llmqueue.studies.validation.matrix.compare_group), and the engine's speed through its sessions
against the prediction's law (speed_timeline); the protocol's calibration rounds, knots and
probe factors (llmqueue.studies.validation.protocol; empty without the protocol)."""

import logging

import pandas as pd

from llmqueue.io import write_csv
from llmqueue.studies.validation.matrix import calibration_laws, compare_group, speed_timeline
from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings, read_group
from llmqueue.studies.validation.protocol import (
    calibration_knots,
    calibration_rounds,
    probe_factors,
)

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
cfg = MatrixCompareSettings.from_config(sm.params.compare, sm.params.seed)
data = read_group(sm.params.folder, all_runs=True)
comparison, predictions, closed = compare_group(data, cfg)
logging.info("%s: %d comparison rows, %d closed forms", data.name, len(comparison), len(closed))
write_csv(comparison, sm.output.comparison)
write_csv(predictions, sm.output.predictions)
if closed.empty:  # a group without a closed form (continuous batching): header only
    closed = pd.DataFrame(columns=["group", "run"])
write_csv(closed, sm.output.closed)
law = calibration_laws(data)[cfg.law]
timeline = speed_timeline(data, law, data.max_gap_s, cfg.speed_window_s)
write_csv(timeline, sm.output.speed)
write_csv(calibration_rounds(data.calibration, law), sm.output.rounds)
write_csv(calibration_knots(data.calibration), sm.output.knots)
write_csv(probe_factors(data.probes, law, data.max_gap_s), sm.output.probes)
