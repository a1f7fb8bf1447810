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

ROOT = Path(__file__).resolve().parents[2]


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


# ---- every profile read checks its keys and numbers (issue 25) -----------------------------------
DROP = object()  # a mutation that deletes the key
FIXED = {
    "latency_profiles": {"kind": "fixed", "a_s_per_token": 0.02, "b0_s": 0.5},
    "batch_profiles": {"kind": "fixed", "k1": 0.0, "k2": 0.0, "k3": 3e-4, "k4": 2e-3},
    "step_profiles": {"kind": "fixed", "c0_s": 0.01, "c_tok_s": 1e-4, "c_ctx_s": 1e-7},
}
FORMER = {"latency_profiles": "none", "batch_profiles": "dynamic", "step_profiles": "continuous"}


def _named(section: str, prof: object, base_dir: Path = Path(".")) -> object:
    cfg = {section: {"p": prof}}
    return profiles.named_latency(cfg, "p", FORMER[section], base_dir, where="--config c.yaml")


@pytest.mark.parametrize(
    ("section", "key", "value", "message"),
    [
        ("latency_profiles", "a_s_per_token", "abc", r"a_s_per_token must be a number in \[0, "),
        ("latency_profiles", "a_s_per_token", DROP, r"missing key 'a_s_per_token' \(a number in"),
        ("latency_profiles", "b0_s", float("inf"), r"\.b0_s must be a number in \[0, 1e\+09\] s,"),
        ("latency_profiles", "b0_s", -1, r"\.b0_s must be a number in \[0, 1e\+09\] s, got -1"),
        ("latency_profiles", "b0_s", None, r"\.b0_s must be a number .*got None"),
        ("latency_profiles", "a_s_per_token", [1], r"\.a_s_per_token must be a number"),
        ("latency_profiles", "solved_from", 3, r"\.solved_from must be a list of claim ids"),
        ("batch_profiles", "k3", "fast", r"\.k3 must be a number in \[0, 1e\+09\] s/token"),
        ("batch_profiles", "k4", DROP, r"kind fixed needs k1, k2, k3, k4 \('k4' missing"),
        ("batch_profiles", "k1", 1e308, r"\.k1 must be a number in \[0, 1e\+09\] s, got 1e\+308"),
        ("batch_profiles", "k2", True, r"\.k2 must be a number"),
        ("step_profiles", "c_ctx_s", DROP, r"kind fixed needs c0_s, c_tok_s, c_ctx_s"),
        ("step_profiles", "c0_s", float("nan"), r"\.c0_s must be a number in \[0, 1e\+09\] s,"),
        ("step_profiles", "c_tok_s", {}, r"\.c_tok_s must be a number"),
    ],
)
def test_a_fixed_profile_with_a_bad_key_names_the_file_profile_and_key(
    section: str, key: str, value: object, message: str
) -> None:
    prof = dict(FIXED[section])
    if value is DROP:
        del prof[key]
    else:
        prof[key] = value
    with pytest.raises(InputError, match=message) as err:
        _named(section, prof)
    text = str(err.value)
    assert text.startswith(f"--config c.yaml: {section}.p") and "\n" not in text


def test_numeric_text_still_reads_as_a_number() -> None:
    # YAML reads 1e-3 (no dot) as text: it has always been accepted, and still is
    law, _ = _named("latency_profiles", {**FIXED["latency_profiles"], "a_s_per_token": "1e-3"})
    assert isinstance(law, LinearLatency) and law.a_s_per_token == 1e-3


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"latency_profiles": {"p": 3}}, r"latency_profiles\.p must be a mapping of keys, got int"),
        ({"latency_profiles": ["p"]}, r"latency_profiles must be a mapping of keys, got list"),
        ({"latency_profiles": {"p": {"kind": "fit", "source": "s"}}}, "kind fit needs model"),
        ({"latency_profiles": {"p": {"kind": "fit", "model": "m"}}}, "kind fit needs source"),
        ({"batch_profiles": {"p": {"kind": "fit", "source": "", "model": "m"}}}, "needs source"),
        ({"latency_profiles": {"p": {"kind": "guess"}}}, "kind must be 'fixed' or 'fit'"),
    ],
)
def test_a_profile_that_is_not_a_profile_is_refused_in_one_line(config: dict, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        profiles.named_latency(config, "p", "dynamic", where="--config c.yaml")
    assert str(err.value).startswith("--config c.yaml: ")


@pytest.mark.parametrize(
    ("section", "content", "message"),
    [
        ("latency_profiles", "{not json", r"fit.json is not JSON \(Expecting"),
        ("latency_profiles", "[1, 2]", "fit.json must hold a JSON object, got list"),
        ("latency_profiles", '{"linear": 3}', r"fit.json's 'linear' entry must be a mapping"),
        ("latency_profiles", '{"linear": {"slope": 0.02}}', r"linear: missing key 'intercept'"),
        (
            "latency_profiles",
            '{"linear": {"slope": "x", "intercept": 0.1}}',
            r"s/m/fit.json: linear.slope must be a number in \[0, 1e\+09\] s/token, got 'x'",
        ),
        ("batch_profiles", '{"batch": {"k1": 0, "k2": 0, "k3": 1e-4}}', r"batch: missing key 'k4'"),
        (
            "step_profiles",
            '{"step": {"c0_s": 1e300, "c_tok_s": 0, "c_ctx_s": 0}}',
            r"fit.json: step.c0_s must be a number in \[0, 1e\+09\] s, got 1e\+300",
        ),
        ("step_profiles", '{"step": "fast"}', r"fit.json: step must be a mapping of keys"),
    ],
)
def test_a_bad_fit_json_is_refused_naming_the_file_and_key(
    tmp_path: Path, section: str, content: str, message: str
) -> None:
    fit = tmp_path / "results/profiling/s/m/fit.json"
    fit.parent.mkdir(parents=True)
    fit.write_text(content)
    with pytest.raises(InputError, match=message) as err:
        _named(section, {"kind": "fit", "source": "s", "model": "m"}, tmp_path)
    assert str(err.value).startswith(f"--config c.yaml: {section}.p") and "\n" not in str(err.value)


def test_a_fit_json_gpu_memory_must_be_a_number() -> None:
    with pytest.raises(InputError, match=r"gpu.memory_gib must be a number in \(0, "):
        profiles.kv_tokens_of_fit({"model": "llama2-7b-chat", "gpu": {"memory_gib": "lots"}})


def test_an_inline_setting_names_its_own_key() -> None:
    with pytest.raises(InputError, match=r"^x\.latency\.b0_s must be a number in \[0, 1e\+09\] s"):
        profiles.law_of_setting(
            {"a_s_per_token": 0.02, "b0_s": "slow"}, "latency", {}, where="x.latency", name="x"
        )
