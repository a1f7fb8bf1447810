"""The validation study's rule steps (the real-engine comparisons, the matrices, the law forms and
the machine speed): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def compare(sm: Any) -> None:
    """One committed vLLM run replayed through the serving simulator: the error table and the
    per-request predictions (llmqueue.studies.validation.compare_run)."""
    import logging

    from llmqueue.io import write_csv
    from llmqueue.studies.validation.spec import CompareSettings, read_run
    from llmqueue.studies.validation.tables import compare_run

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    cfg = CompareSettings.from_config(sm.params.compare, sm.params.seed)
    data = read_run(sm.params.folder, cfg.tables)
    comparison, predictions = compare_run(data, cfg)
    logging.info(
        "%s: %d comparison rows, %d predicted requests",
        data.run_id,
        len(comparison),
        len(predictions),
    )
    write_csv(comparison, sm.output.comparison)
    write_csv(predictions, sm.output.predictions)


def law_forms(sm: Any) -> None:
    """The step law's form on the validation matrix's committed groups
    (llmqueue.studies.validation.law_form): per group and form, leave-one-batch-out on the calibration
    batches, and the judged runs' iterations and mean JCT; the forms' table with the chosen form
    (results/validation/matrix/<engine>/law_forms.csv, figures/table_<engine>_law_forms.md)."""
    import logging

    import pandas as pd

    from llmqueue.io import write_csv, write_text
    from llmqueue.studies.validation.law_form import (
        choose_form,
        group_rows,
        mark_chosen,
        markdown_law_forms,
    )
    from llmqueue.studies.validation.matrix_spec import read_group

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    settings = dict(sm.params.settings, seed=sm.params.seed)
    rows = pd.concat(
        [group_rows(read_group(folder), settings) for folder in sm.params.folders],
        ignore_index=True,
    )
    rows = mark_chosen(rows)
    logging.info(
        "%d groups, %d rows; chosen form %s", len(sm.params.folders), len(rows), choose_form(rows)
    )
    write_csv(rows, sm.output.csv)
    write_text(markdown_law_forms(rows), sm.output.md)


def machine_speed(sm: Any) -> None:
    """The committed machine-speed run, cycle by cycle: the engine's iteration, the model's forward
    pass and the two fixed kernels per cycle, and per series its spread and its correlation with the
    forward pass (llmqueue.studies.validation.machine_speed)."""
    import json
    from pathlib import Path

    from llmqueue.io import write_csv
    from llmqueue.studies.validation.machine_speed import cycle_table, read_speed_run, speed_summary

    folder = Path(sm.input.meta).parent
    cycles, steps, model = read_speed_run(folder)
    meta = json.loads((folder / "meta.json").read_text())
    table = cycle_table(cycles, steps, model, int(meta["machine_speed"]["batch"]))
    write_csv(table, sm.output.cycles)
    write_csv(speed_summary(table), sm.output.summary)


def matrix(sm: Any) -> None:
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


def matrix_curve(sm: Any) -> None:
    """The paper's Fig. 4a closed form for the no-batching group of the validation matrix: W_q(l) by
    Eq. (1)-(5) over token limits l at the runs' planned rate, with the calibrated per-request law
    and the trace's length law (llmqueue.studies.validation.matrix.token_limit_rows)."""
    from llmqueue.io import write_csv
    from llmqueue.studies.validation.matrix import token_limit_rows
    from llmqueue.studies.validation.matrix_spec import read_group

    data = read_group(sm.params.folder)
    write_csv(token_limit_rows(data, sm.params.points), sm.output[0])


def matrix_engines(sm: Any) -> None:
    """Every engine's held-out validation matrix in one error table (figures/table_engine_matrix.csv:
    each engine's error table with its engine and machine columns) and the medians per engine and
    machine beside the targets each engine met (results/validation/matrix/engine_medians.csv,
    figures/table_engine_matrix.md; llmqueue.studies.validation.matrix_summary.engine_medians)."""
    import pandas as pd

    from llmqueue.io import write_csv, write_text
    from llmqueue.studies.validation.matrix_summary import engine_medians, markdown_engines

    table = pd.concat([pd.read_csv(p) for p in sm.input.tables], ignore_index=True)
    targets = pd.concat([pd.read_csv(p) for p in sm.input.targets], ignore_index=True)
    medians = engine_medians(table, targets)
    write_csv(table, sm.output.csv)
    write_csv(medians, sm.output.medians)
    write_text(
        "# The serving model against every engine's validation matrix\n\n"
        "Median absolute relative error (predicted / measured - 1) over each engine's judged runs; "
        "the prediction's step law is fitted on each group's calibration only; probe-scaled: that "
        "law scaled by the speed probe served right before each run; the next two are diagnoses "
        "that read the run (its mean speed, the law fitted on its own iterations).\n\n"
        + markdown_engines(medians),
        sm.output.md,
    )


def matrix_table(sm: Any) -> None:
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


def table(sm: Any) -> None:
    """The error table of every compared vLLM run: figures/table_vllm_validation.csv (all rows) and
    .md (llmqueue.studies.validation.markdown_table)."""
    from pathlib import Path

    import pandas as pd

    from llmqueue.io import read_json, write_csv, write_text
    from llmqueue.studies.validation.tables import markdown_table, settings_note

    comparison = pd.concat([pd.read_csv(p) for p in sm.input.comparisons], ignore_index=True)
    notes = [
        settings_note(Path(p).parent.name, read_json(p), sm.params.kv_model, sm.params.kv_budget)
        for p in sm.input.settings
    ]
    write_csv(comparison, sm.output.csv)
    write_text(markdown_table(comparison, "\n".join(notes)), sm.output.md)
