"""The committed transformers run (data/validation/transformers-cpu-*/, the second engine) against
its scheduler's rules and the serving model's mapping, on recorded data (no transformers needed):
every recorded step within the token budget and the request cap; the prediction's step law is the
form cross-validation on the calibration batches chooses; the comparison
recomputes to the committed table, with the unmodelled scheduler rules named where the step log
shows they could have acted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.studies.validation.law_form import heldout_summary, leave_one_batch_out
from llmqueue.studies.validation.spec import CompareSettings, read_run
from llmqueue.studies.validation.tables import compare_run, unmodelled_rules

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
COMPARE = CONFIG["validation"]["compare"]
RUNS = [r for r in COMPARE["runs"] if r.startswith("transformers-cpu-")]
TABLE = ROOT / "figures" / "table_vllm_validation.csv"


def test_a_transformers_run_is_compared() -> None:
    assert RUNS, "validation.compare.runs names no transformers-cpu-* run folder"


@pytest.fixture(params=RUNS)
def folder(request: pytest.FixtureRequest) -> Path:
    return ROOT / COMPARE["dir"] / request.param  # type: ignore[no-any-return]


def _settings(folder: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((folder / "settings.json").read_text())  # type: ignore[no-any-return]


def test_every_step_keeps_the_budget_and_the_cap(folder: Path) -> None:
    s = _settings(folder)
    assert s["engine"] == "transformers" and s["scheduling_policy"] == "fcfs"
    cfg = CONFIG["validation"]["transformers"]["engine"]
    assert s["max_num_batched_tokens"] == cfg["max_batch_tokens"]
    assert s["kv_tokens"] == cfg["num_blocks"] * cfg["page_size"]
    for table in COMPARE["tables"]:
        st = pd.read_csv(folder / f"steps_{table}.csv")
        assert (st["decode_seqs"] + st["prefill_tokens"] <= s["max_num_batched_tokens"]).all()
        assert (st["scheduled_reqs"] <= s["max_num_seqs"]).all()
        assert st["kv_usage"].between(0.0, 1.0).all()


# the forms a transformers run's law may take, simplest first (parameters: 3, 4, knots + 3, + 1)
FORMS = ("linear", "packed", "split", "split_attention")


def test_the_configured_law_is_the_one_cross_validation_chooses(folder: Path) -> None:
    """Leave-one-batch-out on the run's calibration batches only, the one-standard-error rule
    (llmqueue.studies.validation.law_form.choose_form's): the form config
    validation.compare.laws.transformers names is the first, simplest first, within one standard
    error of the best score (the mean over held-out batches of their per-iteration RMS relative
    error)."""
    cal = pd.read_csv(folder / "calibration_steps.csv")
    score, se = {}, {}
    for form in FORMS:
        s = heldout_summary(leave_one_batch_out(cal, form, folder.name))
        score[form] = s["batch_rms_mean"]
        se[form] = s["batch_rms_sd"] / math.sqrt(s["batches"])
    best = min(score, key=score.__getitem__)
    chosen = next(f for f in FORMS if score[f] <= score[best] + se[best])
    assert COMPARE["laws"]["transformers"] == chosen, score
    # the packed form (attention over the step's tokens x context) beats the linear one
    assert score["packed"] < score["linear"]


def test_the_comparison_recomputes_to_the_committed_table(folder: Path) -> None:
    cfg = CompareSettings.from_config(COMPARE, int(CONFIG["seed"]))
    data = read_run(folder, cfg.tables)
    comp, _ = compare_run(data, cfg)
    committed = pd.read_csv(TABLE)
    committed = committed[committed["run_id"] == folder.name].reset_index(drop=True)
    assert len(committed) == len(comp) > 0
    assert set(comp["engine"]) == {"transformers"}
    for col in ("measured_mean_s", "predicted_mean_s", "predicted_p90_s", "c_qk_s"):
        np.testing.assert_allclose(comp[col].to_numpy(dtype=float),
                                   committed[col].to_numpy(dtype=float), rtol=1e-9)  # fmt: skip
    # the unmodelled rules, recomputed from each table's step log
    for table in cfg.tables:
        want = unmodelled_rules(data.steps[table], data.settings)
        got = comp[comp["run"] == table]["unmodelled_rules"].fillna("").astype(str)
        assert set(got) == {want}, table


def test_the_burst_is_scheduled_step_by_step_as_the_engine_did(folder: Path) -> None:
    """The serving model's per-chunk scheduler (the policy ``engine_policy`` maps the run's
    settings to) replayed on the capacity burst with the engine's own step times, so that every
    iteration starts when the engine's step was planned: each iteration's decodes and prompt
    tokens are the engine's recorded step, step by step, through the safety margin acting
    (the plain-Python reference engine, tests/reference_engine.py)."""
    from reference_engine import RefPolicy, Req, run_continuous

    from llmqueue.studies.validation.tables import engine_policy

    s = _settings(folder)
    pol = engine_policy(s)
    assert pol.admission == "per_chunk" and pol.kv_margin == s["safety_margin"] > 0
    st = pd.read_csv(folder / "steps_capacity.csv")
    req = pd.read_csv(folder / "requests_capacity.csv")
    t = st["t_sched_s"].to_numpy(dtype=float)
    assert req["arrival_s"].max() < t[0]  # the whole burst was in before the first step
    dur = np.append(np.diff(t), st["t_done_s"].iloc[-1] - t[-1])
    calls: list[tuple[int, float]] = []

    def step(d: int, p: float, x: float) -> float:
        calls.append((int(d), float(p)))
        return float(dur[len(calls) - 1]) if len(calls) <= dur.size else 1.0

    ref = RefPolicy(
        "continuous", bmax=pol.bmax, kv_tokens=pol.kv_tokens, admission="per_chunk",
        max_batched_tokens=pol.max_batched_tokens, block_size=pol.block_size,
        kv_margin=pol.kv_margin,
    )  # fmt: skip
    reqs = [Req(i, float(r.arrival_s), float(r.prompt_tokens), float(r.output_tokens),
                float(r.output_tokens)) for i, r in enumerate(req.itertuples())]  # fmt: skip
    run_continuous(reqs, ref, step, start_at=float(t[0]))
    got = np.array(calls[: len(st)])
    want = st[["decode_seqs", "prefill_tokens"]].to_numpy()
    assert len(calls) == len(st), (len(calls), len(st))
    bad = np.flatnonzero((got != want).any(axis=1))
    assert bad.size == 0, (
        f"first differing step {int(bad[0])} of {len(st)}: model {got[bad[0]].tolist()}, "
        f"engine {want[bad[0]].tolist()}"
    )
    # the margin acted in this burst: without it the model schedules it otherwise
    calls.clear()
    run_continuous([Req(r.i, r.arrival, r.prompt, r.output, r.pred) for r in reqs],
                   RefPolicy(**{**ref.__dict__, "kv_margin": 0.0}), step, start_at=float(t[0]))  # fmt: skip
    assert calls[: len(st)] != [tuple(x) for x in want.tolist()]
