"""The committed single-run measurements (data/validation/vllm-cpu-*/ and the transformers
engine's transformers-cpu-*/) are whole and self-consistent: the step-law fit, the engine's
first-token times and every summary in meta.json are recomputed here from the raw CSVs by the
same library code (no vLLM or transformers needed)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmqueue.engines.calibration import fit_calibration, iteration_times
from llmqueue.engines.record import engine_first_token, read_requests
from llmqueue.engines.steplog import STEP_COLUMNS

ROOT = Path(__file__).resolve().parents[2]
RUNS = sorted(
    p for pat in ("vllm-cpu-*", "transformers-cpu-*")
    for p in (ROOT / "data" / "validation").glob(pat) if p.is_dir()
)  # fmt: skip
SIMULATOR_SETTINGS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "num_kv_blocks",
    "block_size",
    "kv_tokens",
    "usable_kv_tokens",
    "preemption_mode",
    "scheduling_policy",
    "reserve_full_prompt_on_admission",
)


def test_there_is_a_committed_run() -> None:
    assert RUNS, "no committed vLLM measurements under data/validation/vllm-cpu-*/"


@pytest.fixture(params=RUNS, ids=lambda p: p.name)
def run(request: pytest.FixtureRequest) -> Path:
    return request.param  # type: ignore[no-any-return]


def meta(run: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((run / "meta.json").read_text())


def test_settings_hold_what_the_simulator_needs(run: Path) -> None:
    s = json.loads((run / "settings.json").read_text())
    missing = [k for k in SIMULATOR_SETTINGS if k not in s]
    assert not missing, f"{run.name}/settings.json lacks {missing}"
    assert s["kv_tokens"] == s["num_kv_blocks"] * s["block_size"]
    assert s["usable_kv_tokens"] <= s["kv_tokens"]
    assert s["preemption_mode"] == "recompute"


def test_calibration_fit_recomputes(run: Path) -> None:
    steps = pd.read_csv(run / "calibration_steps.csv")
    stored = json.loads((run / "calibration_fit.json").read_text())["calibration"]
    m = meta(run)
    fit, rows = fit_calibration(steps[STEP_COLUMNS], float(m["calibration"]["max_gap_s"]))
    for key in ("c0_s", "c_tok_s", "c_ctx_s", "r2"):
        assert fit.to_dict()[key] == pytest.approx(stored[key], rel=1e-6, abs=1e-12), key
    assert np.allclose(rows["time_s"], steps["time_s"], rtol=1e-6)
    # the linear law is vLLM's; transformers' packed attention bends it (its own test file)
    engine = json.loads((run / "settings.json").read_text()).get("engine", "vllm")
    assert fit.n == stored["n"] and fit.r2 > (0.9 if engine == "vllm" else 0.5)


def test_request_files_are_whole(run: Path) -> None:
    m = meta(run)
    for name, r in m["runs"].items():
        df = read_requests(run / f"requests_{name}.csv")
        assert len(df) == r["requests"] == m["requests_per_load"]
        assert (~df["warmup"]).sum() == r["measured_requests"] >= 200
        assert (df["tokens_received"] == df["output_tokens"]).all()
        assert (df["prompt_tokens"] + df["output_tokens"] <= 1024).all()
        assert df["arrival_s"].is_monotonic_increasing


def test_engine_first_tokens_recompute_from_the_step_log(run: Path) -> None:
    for name in meta(run)["runs"]:
        df = pd.read_csv(run / f"requests_{name}.csv")
        steps = pd.read_csv(run / f"steps_{name}.csv")
        got = engine_first_token(steps, list(df["request_id"]))
        assert len(got) == len(df)
        assert np.allclose([got[r] for r in df["request_id"]], df["engine_first_token_s"])
        # the engine has the token before the client sees it, and after the request arrived
        assert (df["engine_first_token_s"] <= df["first_token_s"]).all()
        assert (df["engine_first_token_s"] >= df["arrival_s"]).all()


def test_run_summaries_recompute(run: Path) -> None:
    m = meta(run)
    for name, r in m["runs"].items():
        df = pd.read_csv(run / f"requests_{name}.csv")
        x = df[~df["warmup"]]
        jct = x["finish_s"] - x["arrival_s"]
        ttft = x["first_token_s"] - x["arrival_s"]
        for stats, vals in ((r["jct_s"], jct), (r["ttft_s"], ttft)):
            assert stats["mean"] == pytest.approx(vals.mean(), rel=1e-6)
            assert stats["p90"] == pytest.approx(np.percentile(vals, 90), rel=1e-6)
        steps = pd.read_csv(run / f"steps_{name}.csv")
        assert r["iterations"] == len(steps) and r["preemptions"] == steps["preempted"].sum()
        t = iteration_times(steps, float(m["calibration"]["max_gap_s"]))
        assert (t > 0).all()
        # the loads are the configured fractions of the measured capacity
        assert r["rate_per_s"] == pytest.approx(r["load"] * m["capacity"]["capacity_per_s"])
