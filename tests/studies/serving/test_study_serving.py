"""The serving study's library (llmqueue.studies.serving): one hardware law for static and
continuous batching, KV budgets, exact waits, the sweep / capacity / replay tables, config checks."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, StepLaw, batch_law_from_step
from llmqueue.policy import Policy
from llmqueue.policy_text import policy_spec
from llmqueue.sim.settings import SimSettings
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.studies.serving.checks import check
from llmqueue.studies.serving.spec import serving_setup
from llmqueue.studies.serving.tables import (
    SWEEP_COLUMNS,
    capacity_table,
    geometric_rates,
    policy_sweep,
    replay_markdown,
    replay_table,
)
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[3]
TRACE = ROOT / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
STEP = StepLaw(0.008, 6e-5, 2.6e-7, name="s", verdict="measured-kernels")


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_batch_law_from_step_prices_one_prefill_and_decode_steps() -> None:
    law = batch_law_from_step(STEP, 1000.0, 1100.0)
    b = 8
    # t1(b): one iteration prefilling b prompts of 1000 tokens, each reading its own 1000 tokens
    assert math.isclose(law.t1(b), STEP.step(0, b * 1000, b * 1000))
    # t2(b): one decode step of b sequences at a context of 1100 tokens each
    assert math.isclose(law.t2(b), STEP.step(b, 0, b * 1100))
    assert law.verdict == "measured-kernels" and "Eq. (18)" in law.name
    with pytest.raises(InputError):
        batch_law_from_step(STEP, -1.0, 10.0)


POLICIES = {"none": Policy("none"), "elastic": Policy("elastic", bmax=8)}
LAW = BatchLatency(0.0, 0.05, 1e-4, 0.01)


def test_sweep_marks_rates_beyond_capacity_and_is_reproducible() -> None:
    w = PoissonWorkload(parse_law("lognormal:mu=4,sigma=0.8,cap=1024"), 1.0)
    lats = dict.fromkeys(POLICIES, LAW)
    caps = capacity_table(POLICIES, lats, w, requests=20_000, seed=3)
    assert list(caps["method"]) == ["formula", "formula"]
    cap = dict(zip(caps["policy"], caps["max_rate_per_s"], strict=True))
    rates = geometric_rates(0.2, 3.0, 4)
    sim = SimSettings(20_000, 2_000, 20)
    df = policy_sweep(POLICIES, lats, w, rates, cap, sim, seed=3)
    assert list(df.columns) == SWEEP_COLUMNS and len(df) == 8
    over = df["rate_per_s"] >= 0.97 * df["policy"].map(cap)
    assert over.any() and df.loc[over, "unstable"].all()
    assert df.loc[over, "jct_mean_s"].isna().all()  # never a mean beyond the max rate
    ok = df[~df["unstable"].astype(bool)]
    assert (ok["jct_p99_s"] > ok["jct_mean_s"]).all()
    assert np.allclose(ok["throughput_per_s"], ok["rate_per_s"], rtol=0.05)
    again = policy_sweep(POLICIES, lats, w, rates, cap, sim, seed=3)
    pd.testing.assert_frame_equal(df, again)


def test_replay_table_and_markdown() -> None:
    rng = np.random.default_rng(0)
    n = 3_000
    replay = ReplayWorkload(
        np.cumsum(rng.exponential(1.0, n)),
        rng.integers(0, 50, n) * 1.0,
        rng.integers(1, 200, n) * 1.0,
    )
    lats = dict.fromkeys(POLICIES, LAW)
    caps = {"none": 0.4, "elastic": 8.0}
    df = replay_table(
        POLICIES, lats, replay, [0.5], caps, reference_rate_per_s=2.0, reference_name="elastic",
        warmup=100, seed=1,
    )  # fmt: skip
    assert len(df) == 2 and set(df["replay_load"]) == {0.5}
    assert np.allclose(df["rate_per_s"], 1.0)
    md = replay_markdown(df, "elastic")
    assert "over capacity" in md  # none runs at 2.5 x its own max rate
    with pytest.raises(InputError, match="warmup"):
        replay_table(
            POLICIES, lats, replay, [0.5], caps, reference_rate_per_s=2.0, reference_name="x",
            warmup=n, seed=1,
        )  # fmt: skip


def test_serving_setup_with_fixed_step_profile(config: dict) -> None:
    profiles = {
        "step_profiles": {
            "fixed_s": {"kind": "fixed", "c0_s": 0.01, "c_tok_s": 5e-5, "c_ctx_s": 2e-7}
        }
    }
    section = {
        "step_profile": "fixed_s",
        "kv_tokens": 50_000,
        "trace_columns": {
            "timestamp": "TIMESTAMP",
            "prompt": "ContextTokens",
            "output": "GeneratedTokens",
        },
        "policies": {"a": "dynamic:bmax=8", "b": "continuous:max_batch=16"},
    }
    st = serving_setup(section, profiles, None, None, TRACE)
    assert st.policies["b"].kv_tokens == 50_000 and st.policies["a"].kind == "dynamic"
    assert isinstance(st.latencies["b"], StepLaw) and isinstance(st.latencies["a"], BatchLatency)
    assert math.isclose(st.latencies["a"].k2, 0.01)
    assert (
        policy_spec(st.policies["b"]) == "continuous:max_batch=16,kv_tokens=50000,admission=reserve"
    )


@pytest.mark.parametrize(
    "edit,needle",
    [
        (lambda s: s.update(step_profile="nope"), "serving.step_profile"),
        (lambda s: s["policies"].update(x="continuous:max_batch=0"), "serving.policies.x"),
        (lambda s: s["policies"].update(x="none:order=spjf"), "predictor"),
        (lambda s: s["replay"].update(reference="nope"), "serving.replay.reference"),
        (lambda s: s.update(static_law="nope"), "serving.static_law"),
        (lambda s: s["trace_columns"].update(prompt="nope"), "nope"),
    ],
)
def test_config_checks_name_the_key(config: dict, edit, needle: str) -> None:  # type: ignore[no-untyped-def]
    cfg = copy.deepcopy(config)
    edit(cfg["serving"])
    with pytest.raises(InputError, match=needle):
        check(cfg, ROOT)


def test_shipped_config_passes_the_checks(config: dict) -> None:
    check(config, ROOT)
