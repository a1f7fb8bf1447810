"""Named profiles (llmqueue.profiles): a law by name from config or fit.json, a study setting that
is a profile name or an inline dict, the KV budget of a fit's model and GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmqueue import profiles
from llmqueue.errors import InputError
from llmqueue.hardware.kvcache import kv_tokens
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_kv_tokens_of_a_named_gpu_a_measured_gpu_and_a_cpu() -> None:
    named = {"model": "llama2-7b-chat", "gpu": {"name": "a100-80gb", "memory_gib": 80.0}}
    assert (
        profiles.kv_tokens_of_fit(named) == kv_tokens("llama2-7b-chat", memory_gib=80.0) == 138_134
    )
    assert profiles.kv_tokens_of_fit(named, memory_fraction=0.9) < 138_134
    measured = {"model": "llama2-7b-chat", "hardware": {"gpu_memory_gib": 79.18}}
    assert profiles.kv_tokens_of_fit(measured) == kv_tokens("llama2-7b-chat", memory_gib=79.18)
    with pytest.raises(InputError, match="--kv-tokens N"):
        profiles.kv_tokens_of_fit(
            {"model": "llama2-7b-chat", "hardware": {"cpu": "x"}, "source": "cpu"}
        )
    with pytest.raises(InputError, match="--profile"):
        profiles.kv_tokens_of_fit(None)


def test_named_latency_by_former(config: dict) -> None:
    law, fit = profiles.named_latency(config, "paper_k8", "dynamic")
    assert isinstance(law, BatchLatency) and fit is None and law.verdict == "back_solved"
    with pytest.raises(InputError, match="no such profile for continuous"):
        profiles.named_latency(config, "paper_k8", "continuous")
    with pytest.raises(InputError, match="make reproduce"):
        profiles.named_latency(
            config, "llama2_7b_vidur_a100", "continuous", base_dir="/nonexistent"
        )


def test_a_setting_is_a_profile_name_or_an_inline_dict(config: dict) -> None:
    batch = profiles.law_of_setting("paper_k8", "batch", config, where="x.batch", name="x")
    assert isinstance(batch, BatchLatency) and batch.name == "paper_k8"
    inline = {"k1": 0.0, "k2": 0.1, "k3": 0.0, "k4": 0.02}
    law = profiles.law_of_setting(inline, "batch", config, where="x.batch", name="x_batch")
    assert isinstance(law, BatchLatency) and (law.k2, law.k4, law.name) == (0.1, 0.02, "x_batch")
    step = {"c0_s": 0.02, "c_tok_s": 0.0, "c_ctx_s": 0.0}
    assert isinstance(profiles.law_of_setting(step, "step", config, where="s", name="s"), StepLaw)
    lin = {"a_s_per_token": 0.02, "b0_s": 0.1}
    assert isinstance(
        profiles.law_of_setting(lin, "latency", config, where="l", name="l"), LinearLatency
    )
    with pytest.raises(InputError, match=r"x.batch: unknown batch profile 'nope'; defined: \["):
        profiles.law_of_setting("nope", "batch", config, where="x.batch", name="x")
    with pytest.raises(InputError, match=r"x.step: missing \['c_ctx_s'\]"):
        profiles.law_of_setting({"c0_s": 1, "c_tok_s": 0}, "step", config, where="x.step", name="x")
    with pytest.raises(InputError, match="x.batch: .*k3 and k4 cannot both be 0"):
        profiles.check_setting(
            {"k1": 0, "k2": 1, "k3": 0, "k4": 0}, "batch", config, where="x.batch"
        )
    with pytest.raises(InputError, match="one of"):
        profiles.law_of_setting("paper_k8", "kernel", config, where="x", name="x")
    # a named profile of kind fit needs its fit.json; the check does not
    profiles.check_setting("llama2_7b_vidur_a100", "step", config, where="x.step")
    with pytest.raises(InputError, match="fit.json"):
        profiles.law_of_setting("llama2_7b_vidur_a100", "step", config, where="x", name="x")


def test_the_fit_files_a_setting_reads(config: dict) -> None:
    assert profiles.setting_fit_paths({"k1": 1}, "batch", config) == []
    assert profiles.setting_fit_paths("paper_k8", "batch", config) == []  # kind fixed
    (path,) = profiles.setting_fit_paths("llama2_7b_vidur_a100", "step", config)
    assert path == profiles.fit_json_path(config["step_profiles"]["llama2_7b_vidur_a100"])
    assert path.startswith("results/profiling/") and path.endswith("/fit.json")
