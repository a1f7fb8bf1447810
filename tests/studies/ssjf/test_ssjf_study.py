"""The SSJF study's builders (llmqueue.studies.ssjf) and its config checks, on small inputs:
SSJF's throughput reading, the settings, the tables end to end on a tiny trace, claim 10."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.predictor.training import train_length_model
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.ssjf.checks import check
from llmqueue.studies.ssjf.claims import claims_rows
from llmqueue.studies.ssjf.spec import MODES, POLICIES, PROTOCOL_POLICIES, resolve_setting
from llmqueue.studies.ssjf.tables import (
    StudyTrace,
    capacity_table,
    jct_table,
    predictor_table,
    protocol_table,
    protocol_throughput,
    quality_table,
    slotted_arrivals,
    starvation_table,
)
from llmqueue.traces import TraceRows

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
COST = {
    "batch": {"k1": 0.0, "k2": 0.1, "k3": 0.0, "k4": 0.02},
    "step": {"c0_s": 0.02, "c_tok_s": 0.0, "c_ctx_s": 0.0},
    "dynamic_bmax": 2,
    "continuous_max_batch": 2,
}


def test_protocol_throughput_is_their_reading() -> None:
    fin = np.arange(1.0, 51.0)[::-1]  # 50 jobs finishing at 1, 2, ..., 50 s
    assert protocol_throughput(fin, 25) == pytest.approx(12 / 13)  # pos = int(12.25)
    assert protocol_throughput(fin, 50) == pytest.approx(24 / 25)


def test_slotted_arrivals_are_whole_seconds() -> None:
    a = slotted_arrivals(np.random.default_rng(1), 200, 2.0)
    assert a.size == 200 and np.all(np.diff(a) >= 0) and np.all(a == np.floor(a))
    assert 200 / (a[-1] + 1) == pytest.approx(2.0, rel=0.25)


def test_setting_of_the_cost_model() -> None:
    s = resolve_setting("ssjf_cost", COST, {}, {}, {})
    assert isinstance(s.batch, BatchLatency) and isinstance(s.step, StepLaw)
    np.testing.assert_allclose(s.service_s(np.array([0.0, 100.0])), [0.1, 2.1])
    assert s.policy("dynamic", "spjf", 100.0).label() == "dynamic b_max=2 spjf guard=100s"
    assert s.policy("continuous").bmax == 2 and s.latency("continuous") is s.step
    with pytest.raises(InputError, match="unknown batch profile"):
        resolve_setting("x", {**COST, "batch": "nope"}, {}, {}, {})


@pytest.fixture(scope="module")
def tiny():  # type: ignore[no-untyped-def]
    """A 1200-row synthetic trace (outputs follow the prompt), its split and a small model."""
    rng = np.random.default_rng(3)
    n = 1200
    arr = np.cumsum(rng.exponential(1.0, n))
    prompt = rng.integers(10, 1500, n).astype(float)
    out = np.maximum(1.0, np.floor(prompt / 5 + rng.integers(0, 60, n)))
    rows = TraceRows(arr, np.mod(arr, 86_400.0), prompt, out)
    trace = StudyTrace(rows, 840)
    model = train_length_model(rows, "classifier", train_fraction=0.7, max_iter=5)
    setting = resolve_setting("ssjf_cost", COST, {}, {}, {})
    cap = capacity_table(trace, [setting], 2000, 1)
    return trace, model, setting, cap


def test_tables_end_to_end(tiny) -> None:  # type: ignore[no-untyped-def]
    trace, model, setting, cap = tiny
    assert list(cap["mode"]) == list(MODES) and (cap["capacity_per_s"] > 0).all()
    # no batching: capacity 1 / E[S] of the held-out rows
    es = setting.service_s(trace.test.output_tokens).mean()
    assert cap["capacity_per_s"].iloc[0] == pytest.approx(1 / es, rel=0.1)
    sim = SimSettings(4000, 400, 10)
    jct = jct_table(trace, [setting], cap, model, "poisson", [0.6], sim, 50.0, 2)
    assert set(jct["policy"]) == set(POLICIES)
    none = jct[jct["mode"] == "none"].set_index("policy")
    assert none.loc["SJF", "jct_mean_s"] < none.loc["FCFS", "jct_mean_s"]
    assert np.isfinite(none.loc[["FCFS", "SJF", "SSJF"], "exact_jct_mean_s"]).all()
    assert none.loc["SJF+guard", "guard_s"] == 50.0
    rep = jct_table(
        trace, [setting], cap, model, "replay", [0.6], SimSettings(None, 20, 2), 50.0, 2
    )
    assert (rep["jct_mean_s"] > 0).all()
    preds = predictor_table(trace, ["oracle", "buckets:k=2,pe=0.5"], {"classifier": model}, 4)
    assert preds.set_index("predictor").loc["oracle", "kendall_tau"] == 1.0
    assert list(preds["kind"]) == ["oracle", "size-blind", "learned"]
    q = quality_table(trace, setting, cap, ["oracle"], {"classifier": model}, 0.6, sim, 5)
    assert set(q["predictor"]) == {"FCFS", "oracle", "learned:classifier"}
    qn = q[q["mode"] == "none"].set_index("predictor")
    assert qn.loc["FCFS", "gain_pct"] == 0.0 and qn.loc["oracle", "exact_gain_pct"] > 0
    st = starvation_table(trace, setting, cap, model, "none", 0.6, [None, 20.0], sim, 6)
    assert len(st) == 1 + 2 + 2
    pr = protocol_table(trace, [setting], cap, model, 20, 2, 1.0, "ssjf_cost", 25.0, 50.0, 7)
    assert len(pr) == len(MODES) * 2 * len(PROTOCOL_POLICIES)
    # every mode at the same fraction of its own FCFS capacity (the unbatched mode's load)
    assert np.allclose(pr["mode_load"], pr["mode_load"].iloc[0])
    none_load = pr.loc[pr["mode"] == "none", "offered_load"].iloc[0]
    assert pr.loc[pr["mode"] == "none", "mode_load"].iloc[0] == pytest.approx(none_load)
    assert (pr.loc[pr["mode"] != "none", "offered_load"] > none_load).all()  # batching serves more
    # further rates add their own runs and keep the reading rate's
    more = protocol_table(
        trace, [setting], cap, model, 20, 2, 1.0, "ssjf_cost", 25.0, 50.0, 7, [1.0, 3.0]
    )
    assert sorted(more["nominal_rate_per_s"].unique()) == [1.0, 3.0]
    one = more[more["nominal_rate_per_s"] == 1.0].reset_index(drop=True)
    pd.testing.assert_frame_equal(one, pr)
    # the same jobs for every policy: FCFS and SJF finish the last job at the same time with
    # no batching (the server never idles while work waits)
    p0 = pr[(pr["mode"] == "none") & (pr["run"] == 0)].set_index("policy")
    assert p0.loc["FCFS", "makespan_s"] == pytest.approx(p0.loc["SJF+guard", "makespan_s"])


def _frames(gain: float, ratio: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    prot, pois = [], []
    for setting in ("ssjf_cost", "a100"):
        for mode in MODES:
            for pol, j, t in (
                ("FCFS", 100.0, 1.0),
                ("SJF+guard", 50.0, 3.0),
                ("SSJF+guard", 100 - gain, ratio),
            ):
                for rate, k in ((1.0, 1.0), (9.0, 2.0)):  # at rate 9 the ratio is squared
                    prot.append(dict(setting=setting, mode=mode, run=0, policy=pol, jobs=50,
                                     jct_mean_s=j, throughput_per_s=t**k, offered_load=4.8,
                                     mode_load=4.8, nominal_rate_per_s=rate))  # fmt: skip
                pois.append(dict(setting=setting, mode=mode, policy=pol, load=0.9, guard_s=100.0,
                                 jct_mean_s=j, throughput_per_s=0.2))  # fmt: skip
            pois.append(dict(setting=setting, mode=mode, policy="SJF", load=0.9, guard_s=None,
                             jct_mean_s=40.0, throughput_per_s=0.2))  # fmt: skip
    return pd.DataFrame(prot), pd.DataFrame(pois)


def test_claim_rows_of_group_c_judge_the_published_ranges() -> None:
    ref = pd.read_csv(ROOT / "src/llmqueue/studies/ssjf/reference_claims.csv", dtype={"id": str})
    book = ClaimBook(ref, CONFIG["claims"]["tolerances"])
    preds = pd.DataFrame([{"predictor": "learned:classifier", "kendall_tau": 0.6, "accuracy": 0.7}])
    prot, pois = _frames(35.0, 3.0)
    rows = claims_rows(book, prot, pois, preds, ["ssjf_cost", "a100"], "classifier", 0.9)
    assert [r.id for r in rows] == [i for i in ref["id"] if i.startswith("10c")]
    verdict = {r.id: r.verdict for r in rows}
    assert verdict["10c1"] == "reproduced"  # 35% in SSJF's protocol, inside 30.5-39.6
    assert verdict["10c2"] == "reproduced"
    assert verdict["10c3"] == "reproduced"  # 3.0x, inside 2.2-3.6
    assert "learned classifier" in rows[2].note
    # the rate average: SSJF 3 and 9 per s, FCFS 1 and 1, averaged before the ratio: 6x
    assert "rates 1/9 per s as SSJF's evaluation does, the same policies give 6.00x" in rows[2].note
    prot, pois = _frames(20.0, 1.5)
    rows = claims_rows(book, prot, pois, preds, ["ssjf_cost", "a100"], "classifier", 0.9)
    assert (
        rows[0].verdict == "not_reproduced" and "SJF with true lengths gains 50.0%" in rows[0].note
    )
    pois.loc[pois["policy"] == "SJF+guard", "jct_mean_s"] = 80.0  # the guard gives back SJF's gain
    rows = claims_rows(book, prot, pois, preds, ["ssjf_cost", "a100"], "classifier", 0.9)
    assert "with the starvation guard (60.0% without)" in rows[1].note  # 10c2: no batching
    assert "serves several waiting requests at once" in rows[4].note  # 10c5: dynamic batching
    with pytest.raises(InputError, match="claim-10c rows"):
        claims_rows(book, prot, pois, preds, ["ssjf_cost"], "classifier", 0.9)


def test_shipped_config_passes_the_checks() -> None:
    check(CONFIG, ROOT)


@pytest.mark.parametrize(
    "path,value,match",
    [
        (("quality", "setting"), "nope", "ssjf.quality.setting"),
        (("claim_settings",), ["ssjf_cost", "nope"], "ssjf.claim_settings"),
        (("claim_load",), 0.85, "ssjf.claim_load"),
        (("quality", "predictors"), ["learned:x.model"], "ssjf.quality.predictors"),
        (("quality", "predictors"), ["buckets:k=1,acc=1"], "ssjf.quality.predictors"),
        (("settings", "a100", "step"), "no_such_profile", "ssjf.settings.a100.step"),
        (("settings", "ssjf_cost", "batch"), {"k1": 0, "k2": 0, "k3": 0, "k4": 0}, "k3 and k4"),
        (("learned", "ssjf_model"), "regressor", "ssjf.learned.ssjf_model"),
        (("replay", "warmup"), 5800, "ssjf.replay"),
        (("trace",), "no/such.csv", "ssjf.trace"),
        (("official", "ssjf_predictor"), "nope", "ssjf.official.ssjf_predictor"),
        (("official", "setting"), "nope", "ssjf.official.setting"),
        (("official", "predictions", 0, "file"), "no.csv", "predictions (five_class): file"),
        (("official", "predictions", 0, "edges"), [42, 141], "(five_class)"),
        (("official", "predictions", 1, "edges"), [503, 141], "edges must increase"),
        (("official", "predictions", 1, "name"), "five_class", "given twice"),
    ],
)
def test_config_checks_name_the_key(path, value, match) -> None:  # type: ignore[no-untyped-def]
    cfg = copy.deepcopy(CONFIG)
    node = cfg["ssjf"]
    if path == ("learned", "ssjf_model"):
        node["learned"]["kinds"] = ["classifier"]
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InputError, match=re.escape(match)):
        check(cfg, ROOT)
