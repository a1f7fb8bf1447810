"""`depth: full` in latency and batch profiles: a fewer-layer CPU sweep's full-depth extrapolation."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.profiles import fit_section, resolve_batch_profile, resolve_linear_profile
from llmqueue.schema import fill_defaults

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = str(ROOT / "workflow/schemas/config.schema.yaml")


def _cpu_fit(valid: bool = True) -> dict:
    return {
        "source": "cpu-x",
        "model": "llama2-7b-chat",
        "verdict": "measured",
        "label": "measured on CPU X (2 cores), 1 of 32 layers, full width",
        "description": "1-layer sweep",
        "linear": {"slope": 0.06, "intercept": 0.3},
        "batch": {"k1": 0.13, "k2": 0.03, "k3": 0.005, "k4": 0.07},
        "full_depth": {
            "valid": valid,
            "method": "t2 + 31 x per-layer t2 slope",
            "label": "measured on CPU X, extrapolated from 1 to 32 layers (never a GPU stand-in)",
            "linear": {"slope": 1.28, "intercept": 10.0},
            "batch": {"k1": 4.3, "k2": 1.0, "k3": 0.005, "k4": 1.29},
        },
    }


def _gpu_fit() -> dict:
    fit = _cpu_fit()
    del fit["full_depth"]
    return {**fit, "label": "measured on NVIDIA H100 80GB HBM3, full depth"}


LIN = {"kind": "fit", "source": "cpu-x", "model": "llama2-7b-chat"}
BAT = {"kind": "fit", "source": "cpu-x", "model": "llama2-7b-chat"}


def test_measured_depth_is_the_default() -> None:
    lat = resolve_linear_profile("p", LIN, _cpu_fit())
    assert (lat.a_s_per_token, lat.b0_s) == (0.06, 0.3)
    bat = resolve_batch_profile("q", BAT, _cpu_fit())
    assert (bat.k1, bat.k4) == (0.13, 0.07) and "1 of 32 layers" in bat.source


def test_full_depth_takes_the_extrapolation_and_says_so() -> None:
    lat = resolve_linear_profile("p", {**LIN, "depth": "full"}, _cpu_fit())
    assert (lat.a_s_per_token, lat.b0_s) == (
        1.28,
        10.0,
    ) and "extrapolated from 1 to 32 layers" in lat.source
    bat = resolve_batch_profile("q", {**BAT, "depth": "full"}, _cpu_fit())
    assert (bat.k1, bat.k2, bat.k3, bat.k4) == (4.3, 1.0, 0.005, 1.29)
    assert "extrapolated" in bat.source and bat.verdict == "measured"


def test_full_depth_source_is_its_own_full_depth() -> None:
    lat = resolve_linear_profile("p", {**LIN, "depth": "full"}, _gpu_fit())
    assert (lat.a_s_per_token, lat.b0_s) == (0.06, 0.3)


def test_failed_depth_check_refuses_full_depth() -> None:
    with pytest.raises(InputError, match=r"latency_profiles\.p.*depth check"):
        resolve_linear_profile("p", {**LIN, "depth": "full"}, _cpu_fit(valid=False))
    with pytest.raises(InputError, match=r"batch_profiles\.q.*depth check"):
        resolve_batch_profile("q", {**BAT, "depth": "full"}, _cpu_fit(valid=False))
    # the law at the measured depth is still available
    assert resolve_linear_profile("p", LIN, _cpu_fit(valid=False)).a_s_per_token == 0.06


def test_bad_depth_and_missing_entry() -> None:
    with pytest.raises(InputError, match=r"x\.depth.*\['measured', 'full'\]"):
        fit_section(_cpu_fit(), "linear", "half", "x")
    with pytest.raises(InputError, match="no 'batch' entry"):
        fit_section({"linear": {}}, "batch", "measured", "x")


@pytest.mark.parametrize("section", ["latency_profiles", "batch_profiles"])
def test_schema_knows_depth(section: str) -> None:
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    ok = copy.deepcopy(cfg)
    ok[section]["cpu_full"] = {**LIN, "depth": "full"}
    fill_defaults(ok, SCHEMA)
    bad = copy.deepcopy(cfg)
    bad[section]["cpu_full"] = {**LIN, "depth": "deep"}
    with pytest.raises(InputError):
        fill_defaults(bad, SCHEMA)
