"""Profiling arithmetic without torch: fits on synthetic data, KV-cache limit, roofline against
docs/equations.md, bad data files and config, the CLI's error path."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.hardware.kvcache import kv_limit, max_batch
from llmqueue.hardware.models import MODEL_SPECS, get_spec
from llmqueue.hardware.roofline import roofline
from llmqueue.profiling.fits import (
    batch_fit,
    composed_time,
    composition_check,
    depth_fit,
    is_gpu_source,
    linear_fit_e2e,
    measured_fit_json,
    read_measured,
    roofline_fit_json,
)
from llmqueue.profiling.sweeps import E2E_COLUMNS, TIMING_COLUMNS, trace_requests
from llmqueue.studies.profiling.checks import check, check_profiling_section

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def prof() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())["profiling"]


def _timing(k=(0.03, 0.2, 0.004, 0.08), noise=0.0, seed=0, inp=64):
    rng = np.random.default_rng(seed)
    rows = []
    for b in (1, 2, 4, 8, 16, 32):
        t1 = k[0] * b + k[1]
        t2 = k[2] * b + k[3]
        rows.append(
            {
                "model": "m",
                "layers": 1,
                "full_layers": 32,
                "dtype": "float32",
                "batch": b,
                "input_tokens": inp,
                "decode_steps": 16,
                "repeats": 3,
                "t1_s": t1 * (1 + noise * rng.standard_normal()),
                "t2_s": t2 * (1 + noise * rng.standard_normal()),
                "t2_mean_s": t2,
                "total_s": 0.0,
                "t1_spread_s": 0.0,
                "t2_spread_s": 0.0,
                "grid": "fig2b_bottom",
            }
        )
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batch_fit_recovers_known_slopes(seed: int) -> None:
    k = (0.031, 0.21, 0.0042, 0.083)
    f = batch_fit(_timing(k, noise=0.01, seed=seed), "m", 64)
    for name, true, fit in (("k1", k[0], "t1_fit"), ("k3", k[2], "t2_fit")):
        lo, hi = f[fit]["slope_ci95"]
        assert lo <= true <= hi, (name, f[fit])
    assert f["k2"] == pytest.approx(k[1], rel=0.1) and f["k4"] == pytest.approx(k[3], rel=0.1)
    exact = batch_fit(_timing(k), "m", 64)
    assert [exact[x] for x in ("k1", "k2", "k3", "k4")] == pytest.approx(list(k), rel=1e-9)
    assert exact["t1_fit"]["r2"] == pytest.approx(1.0)


def test_batch_fit_clips_negative_intercept_and_says_so() -> None:
    f = batch_fit(_timing((0.03, -0.01, 0.004, 0.08)), "m", 64)
    assert f["k2"] == 0.0 and f["clipped"] == ["k2"] and f["t1_fit"]["intercept"] < 0


def test_linear_fit_recovers_a_and_b0() -> None:
    rng = np.random.default_rng(5)
    n = rng.integers(10, 500, 60)
    e2e = pd.DataFrame(
        {
            "model": "m",
            "layers": 1,
            "kind": "fig2a",
            "batch": 1,
            "input_tokens": 100,
            "output_tokens": n,
            "total_s": 0.023 * n + 0.19 + 0.01 * rng.standard_normal(60),
        }
    )
    f = linear_fit_e2e(e2e, "m")
    assert f["slope_ci95"][0] <= 0.023 <= f["slope_ci95"][1]
    assert f["intercept"] == pytest.approx(0.19, abs=0.02) and f["r2"] > 0.99 and f["n"] == 60


def test_depth_fit_linear_and_not() -> None:
    rows = [
        {
            "model": "m",
            "layers": L,
            "batch": 1,
            "input_tokens": 128,
            "t1_s": 0.1 + 0.5 * L,
            "t2_s": 0.05 + 0.02 * L,
        }
        for L in (1, 2, 4)
    ]
    d = depth_fit(pd.DataFrame(rows), "m", {"batch": 1, "input_tokens": 128}, 0.05)
    assert (
        d["linear_ok"]
        and d["t2"]["slope"] == pytest.approx(0.02)
        and d["t1"]["intercept"] == pytest.approx(0.1)
    )
    rows[2]["t2_s"] = 0.05 + 0.02 * 16  # quadratic-looking jump at 4 layers
    assert not depth_fit(pd.DataFrame(rows), "m", {"batch": 1, "input_tokens": 128}, 0.05)[
        "linear_ok"
    ]
    with pytest.raises(InputError, match="3 depths"):
        depth_fit(pd.DataFrame(rows[:2]), "m", {"batch": 1, "input_tokens": 128}, 0.05)


def test_composition_adds_first_token_and_n_minus_1_steps() -> None:
    assert composed_time(0.5, 0.02, 101) == pytest.approx(2.5)
    timing = _timing()
    e2e = pd.DataFrame(
        [
            {
                "model": "m",
                "layers": 1,
                "kind": "composition",
                "batch": 4,
                "input_tokens": 64,
                "output_tokens": 11,
                "total_s": 0.32 + 10 * 0.096,
            }
        ]
    )
    cc = composition_check(timing, e2e, "m")
    assert cc["rel_error"].abs().max() < 1e-9


def test_kv_limit_hand_computed() -> None:
    # 100 bytes of memory, 20 of weights, 1 byte/token, sequences of 10 tokens: 8 fit exactly.
    assert max_batch(100, 20, 1, 10) == 8
    assert max_batch(100, 21, 1, 10) == 7
    assert max_batch(100, 20, 1, 10, overhead_bytes=5) == 7
    assert max_batch(100, 120, 1, 10) == 0
    # docs/equations.md: LLaMA-2-7B fp16, (memory - weights) / (1280 x 512 KiB)
    assert kv_limit("llama2-7b-chat", "a100-80gb", 1280).max_batch == 107
    assert kv_limit("llama2-7b-chat", "a100-40gb", 1280).max_batch == 43
    assert kv_limit("llama2-7b-chat", "a100-80gb", 1280, kv_dtype="float32").max_batch == 53
    by_hand = int((80 * 2**30 - 6_738_415_616 * 2) // (1280 * 524288))
    assert kv_limit("llama2-7b-chat", "a100-80gb", 1280).max_batch == by_hand
    with pytest.raises(InputError, match="unknown GPU"):
        kv_limit("llama2-7b-chat", "v100", 1280)


def test_model_shapes_match_equations_md() -> None:
    assert get_spec("llama2-7b-chat").params() / 1e9 == pytest.approx(6.74, abs=0.005)
    assert get_spec("chatglm3-6b").params() / 1e9 == pytest.approx(6.24, abs=0.005)
    assert get_spec("llama2-7b-chat").kv_bytes_per_token(2) == 512 * 1024
    assert get_spec("chatglm3-6b").kv_bytes_per_token(2) == 28 * 1024
    assert get_spec("chinese-alpaca-2-7b").vocab == 55296
    with pytest.raises(InputError, match="unknown model"):
        get_spec("llama3")


def test_roofline_matches_equations_md() -> None:
    assert roofline("llama2-7b-chat", "a100-80gb").decode_time(1, 0) * 1e3 == pytest.approx(
        6.6, abs=0.05
    )
    assert roofline("llama2-7b-chat", "a100-40gb").decode_time(1, 0) * 1e3 == pytest.approx(
        8.7, abs=0.05
    )
    r = roofline("llama2-7b-chat", "a100-80gb")
    assert r.decode_time(8, 512) > r.decode_time(1, 512) > r.decode_time(1, 0)
    assert r.prefill_time(64, 64) > r.prefill_time(1, 64)  # compute bound at large b * s
    assert roofline("llama2-7b-chat", "h100").decode_time(1, 0) < r.decode_time(1, 0)
    with pytest.raises(InputError):
        roofline("llama2-7b-chat", "a100-80gb", bandwidth_efficiency=1.5)


def test_roofline_fit_json_contract(prof: dict) -> None:
    f = roofline_fit_json("llama2-7b-chat", "a100-80gb", prof)
    assert f["verdict"] == "predicted" and "roofline-predicted" in f["label"]
    assert all(f["batch"][k] >= 0 for k in ("k1", "k2", "k3", "k4"))
    assert f["batch"]["k4"] == pytest.approx(0.0066, abs=3e-4)
    assert f["linear"]["intercept"] >= 0 and {"slope", "r2", "slope_ci95", "n"} <= set(f["linear"])


def _write_measured(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _timing().to_csv(folder / "timing.csv", index=False)
    pd.DataFrame(
        [{c: 1 for c in E2E_COLUMNS} | {"model": "m", "kind": "fig2a", "dtype": "float32"}]
    ).to_csv(folder / "e2e.csv", index=False)
    (folder / "meta.json").write_text(json.dumps({"environment": {"cpu": "x", "device": "cpu"}}))


def test_read_measured_ok_and_bad_files(tmp_path: Path) -> None:
    _write_measured(tmp_path)
    timing, e2e, meta = read_measured(tmp_path)
    assert len(timing) == 6 and meta["environment"]["cpu"] == "x"
    (tmp_path / "e2e.csv").unlink()
    with pytest.raises(InputError, match="e2e.csv.*does not exist"):
        read_measured(tmp_path)
    _write_measured(tmp_path)
    (tmp_path / "timing.csv").write_text("model,layers\nm,1\n")
    with pytest.raises(InputError, match="lacks columns"):
        read_measured(tmp_path)
    bad = _timing().astype({"t1_s": object})
    bad.loc[2, "t1_s"] = "oops"
    bad.to_csv(tmp_path / "timing.csv", index=False)
    with pytest.raises(InputError, match="t1_s"):
        read_measured(tmp_path)
    (tmp_path / "timing.csv").write_bytes(b"\x00\xff\x00garbage")
    with pytest.raises(InputError, match="timing.csv"):
        read_measured(tmp_path)
    _write_measured(tmp_path)
    (tmp_path / "meta.json").write_text("{not json")
    with pytest.raises(InputError, match="meta.json"):
        read_measured(tmp_path)


def test_trace_requests(azure_trace: Path) -> None:
    trace = pd.read_csv(azure_trace)
    a = trace_requests(trace, 20, 512, 4096, 128, seed=7)
    b = trace_requests(trace, 20, 512, 4096, 128, seed=7)
    pd.testing.assert_frame_equal(a, b)
    assert (a["output_tokens"] < 512).all() and (a["output_tokens"] >= 1).all()
    assert (a["input_tokens"] <= 128).all() and (a["input_tokens"] <= a["input_tokens_trace"]).all()
    assert ((a["input_tokens"] + a["output_tokens"]) <= 4096).all()
    with pytest.raises(InputError, match="no column"):
        trace_requests(trace.drop(columns=["GeneratedTokens"]), 5, 512, 4096, None, 0)


def test_config_checks(prof: dict, tmp_path: Path) -> None:
    check_profiling_section(prof)
    with pytest.raises(InputError, match="unknown model"):
        check_profiling_section({**prof, "models": ["llama2-7b-chat", "gpt"]})
    bad_kv = {
        **prof["kv_limit"],
        "readings": [{"id": "x", "gpu": "v100", "weights_dtype": "float16", "kv_dtype": "float16"}],
    }
    with pytest.raises(InputError, match="unknown GPU"):
        check_profiling_section({**prof, "kv_limit": bad_kv})
    with pytest.raises(InputError, match="context"):
        check_profiling_section({**prof, "table1_pairs": [[4000, 512]]})
    with pytest.raises(InputError, match="lacks"):
        check({"profiling": {**prof, "measured": ["nowhere"]}}, tmp_path)
    assert set(MODEL_SPECS) >= set(prof["models"])


def test_cli_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    from llmqueue.cli import main

    assert main(["profile", "kv-limit", "--model", "llama2-7b-chat", "--gpu", "a100-80gb"]) == 0
    assert json.loads(capsys.readouterr().out)["max_batch"] == 107
    assert main(["profile", "kv-limit", "--model", "nope", "--gpu", "a100-80gb"]) == 2
    assert "llmqueue profile: error: " in capsys.readouterr().err
    assert main(["profile", "roofline", "--model", "llama2-7b-chat", "--gpu", "tpu"]) == 2


def test_measured_fit_json_contract_and_table1(prof: dict) -> None:
    from llmqueue.studies.profiling.tables import (
        fig2a_data,
        fig2b_data,
        table1_frame,
        table1_markdown,
    )

    model = "llama2-7b-chat"
    rows = []
    for b, s, grid in [
        (1, 64, "table1+fig2b_bottom"),
        (1, 128, "table1"),
        (1, 256, "table1+fig2b_top"),
        (1, 512, "table1"),
        (2, 64, "fig2b_bottom"),
        (4, 64, "fig2b_bottom"),
        (4, 256, "fig2b_top"),
    ]:
        rows.append(
            {
                "model": model,
                "layers": 1,
                "full_layers": 32,
                "dtype": "float32",
                "batch": b,
                "input_tokens": s,
                "decode_steps": 16,
                "repeats": 2,
                "t1_s": 0.002 * b * s + 0.05,
                "t2_s": 0.01 * b + 0.08,
                "t2_mean_s": 0.01 * b + 0.08,
                "total_s": 1.0,
                "t1_spread_s": 0.0,
                "t2_spread_s": 0.0,
                "grid": grid,
            }
        )
    for L in (2, 4):
        rows.append(
            {
                **rows[1],
                "layers": L,
                "t1_s": 0.256 * L + 0.05,
                "t2_s": 0.05 * L + 0.04,
                "grid": "depth",
            }
        )
    rows[1].update(t1_s=0.306, t2_s=0.09)
    timing = pd.DataFrame(rows, columns=TIMING_COLUMNS)
    n = np.array([20, 80, 150, 300, 450])
    e2e = pd.DataFrame(
        {
            "model": model,
            "layers": 1,
            "full_layers": 32,
            "dtype": "float32",
            "kind": "fig2a",
            "request": range(5),
            "trace_row": range(5),
            "batch": 1,
            "input_tokens": 128,
            "output_tokens": n,
            "total_s": 0.306 + (n - 1) * 0.09,
            "t1_s": 0.306,
            "t2_mean_s": 0.09,
        }
    )
    meta = {"environment": {"cpu": "Test CPU", "cpu_count": 2, "device": "cpu"}}
    f = measured_fit_json("cpu-test", model, timing, e2e, meta, prof, depth_tolerance=0.1)
    assert (
        f["verdict"] == "measured"
        and "measured on CPU Test CPU" in f["label"]
        and "1 of 32 layers" in f["label"]
    )
    assert (
        f["linear"]["slope"] == pytest.approx(0.09) and f["composition"]["max_abs_rel_error"] < 1e-9
    )
    assert f["batch"]["k3"] == pytest.approx(0.01) and f["batch"]["k4"] == pytest.approx(0.08)
    assert f["depth"]["linear_ok"] and f["full_depth"]["valid"]
    assert f["full_depth"]["t2_added_s"] == pytest.approx(31 * 0.05)
    table1 = pd.read_csv(ROOT / "data/reference/table1.csv")
    roof = [roofline_fit_json(model, "a100-80gb", prof)]
    t1 = table1_frame(table1, roof, prof, {"cpu-test": (timing, f)})
    assert list(t1["paper_a100_s"]) == list(table1["latency_s"])
    assert {
        "roofline-a100-80gb_predicted_s",
        "cpu-test_1layer_composed_s",
        "cpu-test_full_depth_extrapolated_s",
    } <= set(t1)
    assert t1.loc[0, "cpu-test_1layer_composed_s"] == pytest.approx(0.306 + 127 * 0.09)
    assert "PREDICTED" in table1_markdown(t1, ["PREDICTED by the roofline"])
    pts, lines = fig2a_data(
        table1,
        {"linear": {"slope": 0.023, "intercept": 0.19, "r2": 1.0, "n": 4}},
        roof,
        {"cpu-test": (e2e, meta, [f])},
        512,
    )
    assert set(pts["source"]) == {"paper", "cpu-test"} and set(lines["kind"]) == {
        "reference",
        "predicted",
        "measured",
    }
    pts, lines = fig2b_data(roof, {"cpu-test": (timing, meta, [f])}, prof, "a100-80gb")
    assert set(pts["quantity"]) == {"throughput", "t1", "t2"} and (pts["value"] > 0).all()


def test_committed_cpu_sweeps_pass_the_depth_check(prof: dict) -> None:
    """Every committed CPU sweep listed in profiling.measured: time linear in layers at full width
    (the condition for its full-depth extrapolation), and the plan issue 5 asks for: ~20 Fig. 2a
    requests per model measured end to end, batch sizes up to 16."""
    plan = prof["hardware"]["cpu"]
    cpu = []
    for hw in prof["measured"]:
        timing, e2e, meta = read_measured(ROOT / "data/profiling" / hw)
        if is_gpu_source(meta):
            continue
        cpu.append(hw)
        for model in plan["depth_models"]:
            d = depth_fit(timing, model, plan["depth_point"], prof["depth_tolerance"])
            assert d["linear_ok"], (hw, model, d)
        for model in prof["models"]:
            f2a = e2e[(e2e["model"] == model) & (e2e["kind"] == "fig2a")]
            assert len(f2a) >= 20 and (f2a["output_tokens"] < 512).all(), (hw, model)
            mine = timing[(timing["model"] == model) & (timing["grid"] != "depth")]
            assert mine["batch"].max() == 16, (hw, model)
    assert cpu, "no committed CPU sweep is listed in profiling.measured"


def test_harness_imports_only_what_the_gpu_machine_has() -> None:
    """`python -m llmqueue profile` must run with torch, transformers, numpy, scipy, pandas, pyyaml only."""
    import subprocess
    import sys

    code = (
        "import sys, importlib.abc\n"
        "class Block(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] in {'numba', 'matplotlib', 'seaborn', 'snakemake', 'hypothesis'}:\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import llmqueue.cli.profile, llmqueue.profiling.sweeps, llmqueue.profiling.fits\n"
        "import llmqueue.profiling.smoke, llmqueue.studies.profiling.tables, llmqueue.studies.profiling.checks\n"
        "from llmqueue.cli import main\n"
        "sys.exit(main(['profile', 'kv-limit', '--model', 'chatglm3-6b', '--gpu', 'h100']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["kv_bytes_per_token"] == 28 * 1024
