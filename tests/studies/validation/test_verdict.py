"""The matrix judged against its targets (llmqueue.studies.validation.verdict) and its docs
block: each target from the statistic it names, met only when within its limit, ``n/a`` (never
met) when the matrix cannot give the statistic."""

from __future__ import annotations

import math

import pandas as pd

from llmqueue import docgen
from llmqueue.studies.validation.matrix_spec import MatrixTargets
from llmqueue.studies.validation.verdict import VERDICT_COLUMNS, judge_targets


def _summary(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "variant": v,
                "metric": m,
                "runs": 12,
                "median_abs_rel_error": med,
                "max_abs_rel_error": mx,
                "worst_run": f"g/{v}",
            }
            for v, m, med, mx in rows
        ]  # fmt: skip
    )


SUMMARY = _summary([
    ("prediction", "jct_mean", 0.07, 0.25), ("prediction", "jct_p90", 0.11, 0.3),
    ("prediction", "ttft_mean", 0.05, 0.2), ("probe_scaled", "jct_mean", 0.049, 0.1),
])  # fmt: skip
BLOCKS = pd.DataFrame([
    {"group": "priority", "priority": "sjf", "variant": "prediction", "rounds": 6,
     "measured_reduction": 0.10, "measured_reduction_ci95": 0.02, "predicted_reduction": 0.125,
     "error_pp": 2.5},
    {"group": "priority", "priority": "spjf", "variant": "prediction", "rounds": 6,
     "measured_reduction": 0.10, "measured_reduction_ci95": 0.02, "predicted_reduction": 0.06,
     "error_pp": -4.0},
    {"group": "priority", "priority": "spjf", "variant": "probe_scaled", "rounds": 6,
     "measured_reduction": 0.10, "measured_reduction_ci95": 0.02, "predicted_reduction": 0.10,
     "error_pp": 0.0},
])  # fmt: skip
REDUCTIONS = pd.DataFrame([
    {"group": "priority", "run": "sjf", "priority": "sjf", "session": 1, "error_pp": 1.0},
    {"group": "priority", "run": "sjf_r2", "priority": "sjf", "session": 2, "error_pp": -7.0},
])  # fmt: skip


def _by(table: pd.DataFrame, target: str, variant: str, statistic: str) -> pd.Series:
    row = table[
        (table["target"] == target) & (table["variant"] == variant)
        & (table["statistic"] == statistic)
    ]  # fmt: skip
    assert len(row) == 1, (target, variant, statistic)
    return row.iloc[0]


def test_each_target_is_read_from_its_statistic_and_judged_against_its_limit() -> None:
    t = judge_targets(SUMMARY, BLOCKS, REDUCTIONS, ["kvpressure"], MatrixTargets())
    assert tuple(t.columns) == VERDICT_COLUMNS
    med = _by(t, "mean JCT", "prediction", "median abs. error")
    assert (med["value"], med["limit"], med["verdict"]) == (0.07, 0.08, "met")
    worst = _by(t, "mean JCT", "prediction", "largest abs. error")
    assert (worst["verdict"], worst["detail"]) == ("missed", "g/prediction")
    assert _by(t, "p90 JCT", "prediction", "median abs. error")["verdict"] == "missed"
    assert _by(t, "mean TTFT", "prediction", "median abs. error")["verdict"] == "met"
    assert _by(t, "mean JCT", "probe_scaled", "median abs. error")["verdict"] == "met"
    # the alternating blocks' prediction rows, not the probe-scaled ones nor the back-to-back runs
    stat = "abs. error of the mean over alternating blocks"
    sjf = _by(t, "sjf reduction against FCFS", "prediction", stat)
    spjf = _by(t, "spjf reduction against FCFS", "prediction", stat)
    assert (sjf["value"], sjf["verdict"]) == (2.5, "met")
    assert (spjf["value"], spjf["verdict"]) == (4.0, "missed")
    assert not t["statistic"].str.contains("back-to-back").any()
    defects = _by(t, "same-signed error beyond 2 sigma in every repeat", "prediction", "groups")
    assert (defects["value"], defects["detail"], defects["verdict"]) == (
        1.0,
        "kvpressure",
        "missed",
    )


def test_a_statistic_the_matrix_lacks_is_not_applicable_never_met() -> None:
    t = judge_targets(SUMMARY, BLOCKS.iloc[0:0], REDUCTIONS, [], MatrixTargets())
    run_speed = _by(t, "mean JCT", "run_speed", "median abs. error")
    assert math.isnan(run_speed["value"]) and run_speed["verdict"] == "n/a"
    # without alternating blocks: the back-to-back runs' largest miss
    sjf = _by(t, "sjf reduction against FCFS", "prediction",
              "largest abs. error over back-to-back runs")  # fmt: skip
    assert (sjf["value"], sjf["detail"], sjf["verdict"]) == (7.0, "priority/sjf_r2", "missed")
    none = _by(t, "same-signed error beyond 2 sigma in every repeat", "prediction", "groups")
    assert (none["detail"], none["verdict"]) == ("none", "met")


def test_targets_follow_the_config_not_the_defaults() -> None:
    loose = MatrixTargets(jct_mean_max=0.5, reduction_pp=5.0)
    t = judge_targets(SUMMARY, BLOCKS, REDUCTIONS, [], loose)
    assert _by(t, "mean JCT", "prediction", "largest abs. error")["verdict"] == "met"
    stat = "abs. error of the mean over alternating blocks"
    assert _by(t, "spjf reduction against FCFS", "prediction", stat)["verdict"] == "met"


def test_the_docs_block_shows_every_target_with_its_unit_and_verdict() -> None:
    t = judge_targets(SUMMARY, BLOCKS, REDUCTIONS, ["kvpressure"], MatrixTargets())
    text = docgen.render("validation_matrix_targets", targets=t.astype(str))
    lines = text.splitlines()
    assert len(lines) == 2 + len(t)
    assert "| 7.0% | 8% |" in text and "| 4.0 pp | 3.0 pp |" in text
    assert "probe-scaled prediction" in text and "kvpressure" in text
    assert "| n/a | 3% | - | n/a |" in text  # the run-speed row the summary lacks
    assert text.count("missed") == int((t["verdict"] == "missed").sum())
