"""Serving step laws from every source: resolve_step_profile, the step fits of fit.json (measured
step_law.csv, timing grid, model sources), the config's step_profiles, the KV-token budget, and a
measured source without Fig. 2a runs."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.hardware.kvcache import kv_tokens
from llmqueue.latency import StepLaw
from llmqueue.profiles import resolve_step_profile
from llmqueue.profiling.fits import (
    kernel_fit_json,
    measured_fit_json,
    measured_step_fits,
    read_measured,
    read_step_law,
    roofline_fit_json,
)
from llmqueue.profiling.sweeps import TIMING_COLUMNS
from llmqueue.studies.profiling.checks import check_step_profiles

ROOT = Path(__file__).resolve().parents[2]
C0, CTOK, CCTX = 0.008, 2e-5, 1.8e-7


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def _step_rows(mode: str, c0: float, ctok: float, cctx: float) -> pd.DataFrame:
    rows = []
    for b in (1, 4, 16, 64):
        for c in (256, 1024):
            rows.append(("decode", mode, b, c, b, 0, b * c))
    if mode == "eager":
        for b, p in ((1, 128), (1, 1024), (4, 512)):
            rows.append(("prefill", mode, b, p, 0, b * p, b * p))
    df = pd.DataFrame(
        rows,
        columns=[
            "kind",
            "mode",
            "batch",
            "tokens_per_seq",
            "decode_seqs",
            "prefill_tokens",
            "context_tokens",
        ],
    )
    df.insert(0, "model", "llama2-7b-chat")
    df["time_s"] = (
        c0 + ctok * (df["decode_seqs"] + df["prefill_tokens"]) + cctx * df["context_tokens"]
    )
    return df


def test_resolve_step_profile_fixed_fit_and_errors() -> None:
    law = resolve_step_profile(
        "s", {"kind": "fixed", "c0_s": 0.01, "c_tok_s": 1e-4, "c_ctx_s": 2e-7}
    )
    assert isinstance(law, StepLaw) and law.step(4, 100, 4000) == pytest.approx(
        0.01 + 104e-4 + 8e-4
    )
    fit = {
        "label": "L",
        "verdict": "measured",
        "step": {"c0_s": 0.02, "c_tok_s": 3e-5, "c_ctx_s": 1e-7, "r2": 0.99, "n": 9},
        "step_graph": {"c0_s": 0.008, "c_tok_s": 0.0, "c_ctx_s": 1.8e-7, "r2": 0.997, "n": 8},
    }
    prof = {"kind": "fit", "source": "gpu", "model": "m"}
    assert resolve_step_profile("e", prof, fit).c0_s == 0.02
    g = resolve_step_profile("g", {**prof, "variant": "step_graph"}, fit)
    assert (g.c0_s, g.c_ctx_s, g.verdict) == (
        0.008,
        1.8e-7,
        "measured",
    ) and "step_graph" in g.source
    assert resolve_step_profile("v", {**prof, "verdict": "predicted"}, fit).verdict == "predicted"
    with pytest.raises(
        InputError, match=r"no 'step_graph' step law \(has \['step'\]\): no graph rows"
    ):
        resolve_step_profile(
            "g",
            {**prof, "variant": "step_graph"},
            {"step": fit["step"], "step_missing": "no graph rows"},
        )
    with pytest.raises(InputError, match="needs its fit.json"):
        resolve_step_profile("g", prof, None)
    with pytest.raises(InputError, match="variant"):
        resolve_step_profile("g", {**prof, "variant": "graph"}, fit)
    with pytest.raises(InputError, match="c_ctx_s"):
        resolve_step_profile("f", {"kind": "fixed", "c0_s": 0.01, "c_tok_s": 1e-4})
    with pytest.raises(InputError, match="kind must be"):
        resolve_step_profile("k", {"kind": "table"})
    with pytest.raises(InputError, match=r"c0_s must be a number in \[0, 1e\+09\]"):
        resolve_step_profile("n", {"kind": "fixed", "c0_s": -1, "c_tok_s": 0, "c_ctx_s": 0})


def test_measured_step_fits_split_eager_and_graph() -> None:
    step = pd.concat([_step_rows("eager", 0.02, 3e-5, 1e-7), _step_rows("graph", C0, CTOK, CCTX)])
    out = measured_step_fits(
        step, pd.DataFrame(columns=TIMING_COLUMNS), "llama2-7b-chat", 32, "GPU"
    )
    e, g = out["step"], out["step_graph"]
    assert e["c0_s"] == pytest.approx(0.02) and e["c_tok_s"] == pytest.approx(3e-5) and e["n"] == 11
    assert (g["c0_s"], g["c_tok_s"], g["c_ctx_s"]) == pytest.approx((C0, CTOK, CCTX))
    assert g["r2"] == pytest.approx(1.0) and g["max_abs_rel_residual"] < 1e-9 and g["n"] == 8
    assert "CUDA graph" in g["description"] and set(g["points"]["mode"]) == {"graph"}


def _gpu_timing(model: str = "llama2-7b-chat") -> pd.DataFrame:
    rows = []
    for b, s in [(1, 64), (1, 128), (1, 256), (1, 512), (2, 64), (4, 64), (4, 256)]:
        rows.append(
            {
                "model": model,
                "layers": 32,
                "full_layers": 32,
                "dtype": "float16",
                "batch": b,
                "input_tokens": s,
                "decode_steps": 32,
                "repeats": 3,
                "t1_s": 1e-4 * b * s + 0.02,
                "t2_s": 0.0005 * b + 0.022,
                "t2_mean_s": 0.0005 * b + 0.022,
                "total_s": 1.0,
                "t1_spread_s": 0.0,
                "t2_spread_s": 0.0,
                "grid": "table1",
            }
        )
    return pd.DataFrame(rows, columns=TIMING_COLUMNS)


def test_source_without_fig2a_runs_has_no_fig2a_fit_but_a_composed_law(config: dict) -> None:
    from llmqueue.studies.profiling.tables import fig2a_data

    prof = config["profiling"]
    timing = _gpu_timing()
    e2e = pd.DataFrame(
        [
            {
                "model": "llama2-7b-chat",
                "layers": 32,
                "full_layers": 32,
                "dtype": "float16",
                "kind": "composition",
                "request": 0,
                "trace_row": -1,
                "batch": 1,
                "input_tokens": 128,
                "output_tokens": 1024,
                "total_s": 70.0,
                "t1_s": 0.02,
                "t2_mean_s": 0.068,
            }
        ]
    )
    meta = {"environment": {"device": "cuda", "gpu": "NVIDIA H100 80GB HBM3"}}
    f = measured_fit_json("gpu-x", "llama2-7b-chat", timing, e2e, meta, prof)
    assert f["fig2a_runs"] == 0 and f["linear"]["method"].startswith("composed")
    # T = t1(128) + (n - 1) t2(128) at b = 1: slope t2 = 22.5 ms, intercept t1 - t2 = 12.8 + 20 - 22.5 ms
    assert f["linear"]["slope"] == pytest.approx(0.0225) and f["linear"][
        "intercept"
    ] == pytest.approx(0.0103)
    assert f["composition"]["runs"] == 1 and f["composition"]["median_rel_error"] < -0.6
    # no step_law.csv: the step law comes from the timing grid (decode at context s + steps / 2)
    assert f["step"]["n"] == 14 and "timing grid" in f["step"]["description"]
    pts, lines = fig2a_data(
        pd.read_csv(ROOT / "data/reference/table1.csv"),
        {"linear": {"slope": 0.023, "intercept": 0.19, "r2": 1.0, "n": 4}},
        [],
        {"gpu-x": (e2e, meta, [f])},
        512,
    )
    assert "gpu-x" not in set(pts["source"]) and "gpu-x" not in set(lines["source"])


def test_every_configured_step_profile_resolves(config: dict) -> None:
    """Each step_profiles entry against the fit.json its source writes (built here from the
    committed data: kernel CSVs, the measured H100 folder, the roofline)."""
    from llmqueue.profiling.kernels import load_kernel_profile

    prof = config["profiling"]
    fits: dict[tuple[str, str], dict] = {}
    for name, kc in prof["kernel_profiles"].items():
        kp = load_kernel_profile(name, kc, prof, ROOT)
        meta = yaml.safe_load((ROOT / kc["csv"]).parent.joinpath("meta.json").read_text())
        fits[(name, kc["model"])] = kernel_fit_json(kp, meta, prof)
    laws = {}
    for name, sp in config["step_profiles"].items():
        key = (sp["source"], sp["model"])
        if key not in fits:
            if sp["source"].startswith("roofline-"):
                fits[key] = roofline_fit_json(
                    sp["model"], sp["source"].removeprefix("roofline-"), prof
                )
            else:
                folder = ROOT / "data/profiling" / sp["source"]
                timing, e2e, meta = read_measured(folder)
                fits[key] = measured_fit_json(
                    sp["source"], sp["model"], timing, e2e, meta, prof, step=read_step_law(folder)
                )
        laws[name] = resolve_step_profile(name, sp, fits[key])
        assert laws[name].verdict == sp["verdict"]
    # facts of the committed data, not tuned: the CUDA-graph decode of the H100 costs ~8.4 ms plus
    # ~0.18 us per cached token read (0.5 MiB at ~2.9 TB/s); its eager decode is launch-bound
    g = laws["llama2_7b_h100_graph"]
    assert 0.0080 < g.c0_s < 0.0088 and 1.6e-7 < g.c_ctx_s < 2.0e-7
    assert laws["llama2_7b_h100_eager"].c0_s > 2 * g.c0_s
    # kernels measured on an A100 sit between the roofline bound and the eager H100
    r, v = laws["llama2_7b_roofline_a100"], laws["llama2_7b_vidur_a100"]
    assert r.step(1, 0, 1024) < v.step(1, 0, 1024) < laws["llama2_7b_h100_eager"].step(1, 0, 1024)


def test_step_profile_checks(config: dict, tmp_path: Path) -> None:
    check_step_profiles(config, ROOT)
    base = {"kind": "fit", "model": "llama2-7b-chat"}

    def bad(sp: dict, match: str, base_dir: Path = ROOT) -> None:
        with pytest.raises(InputError, match=match):
            check_step_profiles({**config, "step_profiles": {"x": sp}}, base_dir)

    bad({**base, "source": "paper"}, "batch 1 only")
    bad({**base, "source": "nowhere"}, "unknown source 'nowhere'")
    bad({**base, "source": "vidur-a100", "model": "chatglm3-6b"}, "has no model 'chatglm3-6b'")
    bad(
        {**base, "source": "roofline-a100-80gb", "variant": "step_graph"}, "only for a measured GPU"
    )
    bad({**base, "source": "nvidia-h100-80gb", "variant": "step_graph"}, "step_law.csv", tmp_path)
    bad({"kind": "fixed", "c0_s": 0.0, "c_tok_s": 0.0, "c_ctx_s": 1e-7}, "cannot both be 0")


def test_kernel_profile_and_fig2b_checks(config: dict) -> None:
    from llmqueue.studies.profiling.checks import check, check_profiling_section

    prof = config["profiling"]
    kp = prof["kernel_profiles"]
    with pytest.raises(InputError, match="unknown GPU 'v100'"):
        check_profiling_section(
            {**prof, "kernel_profiles": {**kp, "k": {**kp["vidur-a100"], "gpu": "v100"}}}
        )
    with pytest.raises(InputError, match="collides"):
        check_profiling_section(
            {**prof, "kernel_profiles": {"cpu-intel-xeon-2c": kp["vidur-a100"]}}
        )
    with pytest.raises(InputError, match="kernel_sources: 'vidur-h100' is on h100"):
        check_profiling_section(
            {**prof, "fig2b": {**prof["fig2b"], "kernel_sources": ["vidur-h100"]}}
        )
    with pytest.raises(InputError, match="not in profiling.kernel_profiles"):
        check_profiling_section({**prof, "fig2b": {**prof["fig2b"], "kernel_sources": ["nope"]}})
    missing = {**kp, "vidur-a100": {**kp["vidur-a100"], "csv": "data/profiling/none/mlp.csv"}}
    with pytest.raises(InputError, match="kernel_profiles.vidur-a100.csv"):
        check({**config, "profiling": {**prof, "kernel_profiles": missing}}, ROOT)


def test_kv_tokens_budget() -> None:
    weights = 6_738_415_616 * 2  # LLaMA-2-7B parameters, fp16
    kv = 2 * 32 * 4096 * 2  # 512 KiB per token
    assert kv_tokens("llama2-7b-chat", "a100-80gb") == (80 * 2**30 - weights) // kv == 138_134
    assert kv_tokens("llama2-7b-chat", "a100-80gb") // 1280 == 107  # claim 2's reading 2a
    assert kv_tokens("llama2-7b-chat", memory_gib=79.18) == int((79.18 * 2**30 - weights) // kv)
    half = int((0.9 * 80 * 2**30 - weights - 2 * 2**30) // kv)
    assert kv_tokens("llama2-7b-chat", "a100-80gb", memory_fraction=0.9, overhead_gib=2) == half
    # ChatGLM3-6B: 28 x 203,956,224 + 2 x 65024 x 4096 + 4096 = 6,243,454,976 parameters; 28 KiB/token
    assert kv_tokens("chatglm3-6b", "h100") == (80 * 2**30 - 6_243_454_976 * 2) // (28 * 1024)
    assert kv_tokens("llama2-7b-chat", "a100-80gb", kv_dtype="float32") == (
        80 * 2**30 - weights
    ) // (2 * kv)
    assert kv_tokens("llama2-7b-chat", memory_gib=12.0) == 0  # the weights alone do not fit
    with pytest.raises(InputError, match="exactly one"):
        kv_tokens("llama2-7b-chat")
    with pytest.raises(InputError, match="exactly one"):
        kv_tokens("llama2-7b-chat", "a100-80gb", memory_gib=80)
    with pytest.raises(InputError, match="memory_fraction"):
        kv_tokens("llama2-7b-chat", "a100-80gb", memory_fraction=1.5)
    with pytest.raises(InputError, match="unknown GPU"):
        kv_tokens("llama2-7b-chat", "v100")


def test_measure_knows_the_step_law_part(capsys: pytest.CaptureFixture[str]) -> None:
    from llmqueue.cli import main

    args = ["measure", "--device", "cpu", "--hardware-id", "x", "--parts", "timing,bogus"]
    assert main(["profile", *args]) == 2
    err = capsys.readouterr().err
    assert "unknown ['bogus']" in err and "step_law" in err


def test_latency_and_batch_profiles_naming_the_new_sources(config: dict) -> None:
    from llmqueue.profiles import resolve_batch_profile, resolve_linear_profile
    from llmqueue.profiling.kernels import load_kernel_profile

    prof = config["profiling"]
    kc = prof["kernel_profiles"]["vidur-a100"]
    meta = yaml.safe_load((ROOT / "data/profiling/vidur-a100/meta.json").read_text())
    vidur = kernel_fit_json(load_kernel_profile("vidur-a100", kc, prof, ROOT), meta, prof)
    folder = ROOT / "data/profiling/nvidia-h100-80gb"
    timing, e2e, hmeta = read_measured(folder)
    h100 = measured_fit_json("nvidia-h100-80gb", "llama2-7b-chat", timing, e2e, hmeta, prof)
    lat = resolve_linear_profile("vidur_a100", config["latency_profiles"]["vidur_a100"], vidur)
    assert lat.verdict == "measured-kernels" and 0.0090 < lat.a_s_per_token < 0.0098
    lat = resolve_linear_profile("h100_composed", config["latency_profiles"]["h100_composed"], h100)
    assert lat.verdict == "measured" and lat.a_s_per_token == pytest.approx(h100["linear"]["slope"])
    assert h100["linear"]["method"].startswith("composed")  # no Fig. 2a runs on the H100
    bat = resolve_batch_profile("v", config["batch_profiles"]["llama2_7b_vidur_a100"], vidur)
    assert bat.verdict == "measured-kernels" and bat.k4 == pytest.approx(vidur["batch"]["k4"])
    bat = resolve_batch_profile("h", config["batch_profiles"]["llama2_7b_h100"], h100)
    assert bat.verdict == "measured" and bat.k3 >= 0 and bat.k4 > 0.015  # flat eager t2 ~ 24 ms
