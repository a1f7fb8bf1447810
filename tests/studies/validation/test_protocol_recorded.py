"""A group measured under the protocol on vLLM, read back without vLLM: a recorded smoke run of
the ``priority`` group (``tests/data/validation-protocol/priority``: ``llmqueue validate matrix
--groups priority --requests 20 --warmup-requests 2 --capacity-requests 20
--calibration-batches 3 --repeat-sessions 1``, on the 2-core VM with other jobs running, so its
speeds mean nothing; its structure is what is checked).

The folder must hold what the protocol promises: calibration rounds in random orders over two
engine sessions, each round holding the probe batch; a probe right before and right after every
judged run; FCFS, SJF and SSJF in alternating blocks. The study must read it: probe factors for
every run, the probe-scaled and session-law variants, one reduction per order and round.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from llmqueue.studies.validation.matrix import calibration_laws, compare_group
from llmqueue.studies.validation.matrix_spec import (
    MatrixCompareSettings,
    engine_section,
    read_group,
)
from llmqueue.studies.validation.protocol import (
    block_reductions,
    block_summary,
    calibration_knots,
    calibration_rounds,
    probe_factors,
)

ROOT = Path(__file__).resolve().parents[3]
FOLDER = ROOT / "tests" / "data" / "validation-protocol" / "priority"
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture(scope="module")
def data():  # type: ignore[no-untyped-def]
    return read_group(FOLDER, all_runs=True)


@pytest.fixture(scope="module")
def compared(data):  # type: ignore[no-untyped-def]
    cfg = MatrixCompareSettings.from_config(
        {**engine_section(CONFIG["validation"]["matrix_compare"]), "groups": ["priority"]},
        CONFIG["seed"],
    )
    return compare_group(data, cfg)[0]


def test_the_calibration_ran_in_rounds_over_two_sessions(data) -> None:  # type: ignore[no-untyped-def]
    meta = json.loads((FOLDER / "meta.json").read_text())
    p = meta["protocol"]
    rounds = p["calibration_rounds_run"]
    assert sorted(r["round"] for r in rounds) == list(range(1, p["calibration_rounds"] + 1))
    assert {r["session"] for r in rounds} == {1, 2}
    cal = data.calibration
    assert set(cal["round"]) == set(range(1, p["calibration_rounds"] + 1))
    # each round admitted the grid's batches and the probe's: as many requests as in the plan
    plan = meta["plan"]
    assert [s["session"] for s in plan] == [1, 2]
    starts = [t for t in plan[0]["steps"] + plan[1]["steps"] if t.startswith("calibration:")]
    assert len(starts) == p["calibration_rounds"]
    per_round = cal.groupby("round")["admitted_ids"].apply(
        lambda s: sum(len(str(x).split("|")) for x in s.dropna() if str(x))
    )
    probe = p["probe"]["batch"]
    grid = sum(b[0] for b in data.spec.calibration)
    assert (per_round == grid + probe).all(), per_round.to_dict()
    assert p["calibration_span_s"] > 0


def test_every_judged_run_has_its_two_probes(data) -> None:  # type: ignore[no-untyped-def]
    probes = data.probes
    assert probes is not None
    judged = data.judged
    by_run = Counter(
        zip(
            probes.drop_duplicates("probe")["run"],
            probes.drop_duplicates("probe")["position"],
            strict=True,
        )
    )
    for run in judged:
        assert by_run[(run, "before")] == 1 and by_run[(run, "after")] == 1, run
    # the runs are the alternating blocks, FCFS SJF SSJF in every round
    orders = [data.run_spec(t).priority for t in judged]
    rounds = CONFIG["validation"]["vllm"]["matrix"]["protocol"]["alternate_rounds"]
    assert orders == ["fcfs", "sjf", "ssjf"] * rounds
    blocks = [data.run_meta(t)["block"] for t in judged]
    assert blocks == [k for k in range(1, rounds + 1) for _ in range(3)]


def test_the_study_reads_the_protocol(data, compared) -> None:  # type: ignore[no-untyped-def]
    law = calibration_laws(data)["shaped"]
    f = probe_factors(data.probes, law, data.max_gap_s)
    assert len(f) == 2 * len(data.judged)
    assert np.isfinite(f["factor"]).all() and (f["factor"] > 0).all()
    r = calibration_rounds(data.calibration, law)
    assert len(r) == 6 and np.isfinite(r["factor"]).all()
    # the pooled law prices the rounds on average: their factors straddle 1
    assert r["factor"].min() < 1.0 < r["factor"].max()
    assert not calibration_knots(data.calibration).empty
    variants = set(compared["variant"])
    assert {"prediction", "probe_scaled", "session_law", "window_speed"} <= variants
    pred = compared[compared["variant"] == "prediction"]
    assert np.isfinite(pred["probe_before_factor"]).all()
    b = block_reductions(compared)
    per = b[b["variant"] == "prediction"]
    assert sorted(per["priority"].unique()) == ["sjf", "ssjf"]
    assert sorted(per["block"].unique()) == list(range(1, 7))
    s = block_summary(b)
    main = s[s["variant"].isin(["prediction", "probe_scaled"])]
    assert len(main) == 4  # SJF and SSJF, each predicted with and without the probe scaling
    assert (main["rounds"] == 6).all()
    assert np.isfinite(main["measured_reduction_ci95"]).all()
