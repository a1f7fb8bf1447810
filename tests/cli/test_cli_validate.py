"""``llmqueue validate`` refuses what it cannot run, in one line naming the flag, the config key or
the environment file, with exit 2, before it writes anything: a model, a work file or a run folder.

Run in the main environment, which has no vLLM: every engine command (``model`` lacks nothing
there, it needs torch and transformers only when those are missing) must stop at the environment
check once its flags and config are good, and earlier when they are not. Names that become
folder names (the hardware id, group names) can never lead a run outside the folder it names.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.cli import main
from llmqueue.engines.record import SAFE_NAME, child_folder, resolve_hardware_id
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
HAS_VLLM = __import__("importlib").util.find_spec("vllm") is not None


def run_validate(tmp: Path, cfg: dict[str, Any] | None, *argv: str) -> tuple[int, str, str]:
    """``llmqueue validate ARGV --config <cfg written to tmp>`` from the project's folder."""
    args = list(argv)
    if cfg is not None:
        path = tmp / "config.yaml"
        path.write_text(yaml.safe_dump(cfg))
        args += ["--config", str(path)]
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["validate", *args])
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def config_in(tmp: Path) -> dict[str, Any]:
    """The project's config with every folder the validation commands write under `tmp`."""
    cfg = copy.deepcopy(CONFIG)
    vllm = cfg["validation"]["vllm"]
    vllm["out"] = str(tmp / "out")
    vllm["model"]["dir"] = str(tmp / "model")
    vllm["machine_speed"]["out"] = str(tmp / "speed")
    vllm["matrix"]["out"] = str(tmp / "matrix")
    for m in (vllm["matrix"].get("models") or {}).values():
        m["dir"] = str(tmp / "model2")
    return cfg


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    return lines[0]


def written(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("*") if p.name != "config.yaml")


@pytest.mark.skipif(HAS_VLLM, reason="checks the refusal where vLLM is missing")
@pytest.mark.parametrize(
    "argv",
    [
        ["measure"],
        ["matrix"],
        ["matrix", "--groups", "fcfs"],
        ["machine-speed"],
    ],
)
def test_engine_commands_without_vllm_name_the_environment_file(
    tmp_path: Path, argv: list[str]
) -> None:
    code, _, err = run_validate(tmp_path, config_in(tmp_path), *argv)
    line = one_line(code, err)
    assert "envs/vllm-cpu.txt" in line and "vllm" in line, line
    assert written(tmp_path) == [], "wrote before refusing"


def _set(cfg: dict[str, Any], key: str, value: Any) -> None:
    node = cfg
    parts = key.split(".")
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    node[parts[-1]] = value


# (config key under validation.vllm, bad value, what the line must name)
BAD_CONFIG = [
    ("requests", float("inf"), "validation.vllm.requests"),
    ("requests", "abc", "validation.vllm.requests"),
    ("loads", [1.5], "validation.vllm.loads"),
    ("trace.scale", 0, "validation.vllm.trace.scale"),
    ("machine_speed.cycles", 2, "validation.vllm.machine_speed.cycles"),
    ("engine.max_num_seqs", "many", "validation.vllm.engine.max_num_seqs"),
    ("model.dtype", "float16", "validation.vllm.model.dtype"),
    ("model.seed", -1, "validation.vllm.model.seed"),
    ("hardware_id", "../../../tmp/x", "validation.vllm.hardware_id"),
    ("capacity.requests", 0, "validation.vllm.capacity.requests"),
    ("matrix.protocol.calibration_rounds", 3, "validation.vllm.matrix.protocol.calibration_rounds"),
    ("matrix.protocol.calibration_min_span_s", 10, "protocol.calibration_min_span_s"),
    (
        "matrix.protocol.probe.output_tokens",
        2,
        "validation.vllm.matrix.protocol.probe.output_tokens",
    ),
    ("matrix.protocol.alternate_rounds", 2, "validation.vllm.matrix.protocol.alternate_rounds"),
    ("matrix.groups.priority.alternate", "yes", "validation.vllm.matrix.groups.priority.alternate"),
]


@pytest.mark.parametrize(("key", "value", "named"), BAD_CONFIG)
@pytest.mark.parametrize("command", [["matrix", "--check"], ["measure"], ["machine-speed"]])
def test_bad_config_values_are_refused_by_key_before_anything(
    tmp_path: Path, key: str, value: Any, named: str, command: list[str]
) -> None:
    cfg = config_in(tmp_path)
    _set(cfg["validation"]["vllm"], key, value)
    code, _, err = run_validate(tmp_path, cfg, *command)
    line = one_line(code, err)
    assert named in line, line
    assert written(tmp_path) == []


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["matrix", "--check", "--groups", ""], "--groups"),
        (["matrix", "--check", "--groups", ", ,"], "--groups"),
        (["matrix", "--check", "--groups", "nosuch"], "nosuch"),
        (["matrix", "--capacity-requests", "0"], "--capacity-requests"),
        (["matrix", "--requests", "5"], "--requests"),
        (["matrix", "--repeat-sessions", "-1"], "--repeat-sessions"),
        (["measure", "--capacity-requests", "0"], "--capacity-requests"),
        (["measure", "--warmup-requests", "-3"], "--warmup-requests"),
        (["machine-speed", "--cycles", "2"], "--cycles"),
    ],
)
def test_bad_flags_are_refused_by_name(tmp_path: Path, argv: list[str], flag: str) -> None:
    code, _, err = run_validate(tmp_path, config_in(tmp_path), *argv)
    assert flag in one_line(code, err)
    assert written(tmp_path) == []


def test_matrix_check_passes_on_the_project_config(tmp_path: Path) -> None:
    code, out, err = run_validate(tmp_path, config_in(tmp_path), "matrix", "--check")
    assert code == 0, err
    assert "OK" in out and str(tmp_path / "matrix") in out


def test_a_config_that_is_no_yaml_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("validation: [unclosed\n")
    code, _, err = run_validate(tmp_path, None, "matrix", "--check", "--config", str(bad))
    assert "bad.yaml" in one_line(code, err)


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.text(min_size=1, max_size=24))
def test_a_name_never_leads_outside_its_folder(name: str) -> None:
    parent = Path("/tmp/llmqueue-parent")
    try:
        out = child_folder(parent, name, "validation.vllm.matrix.groups")
    except InputError as err:
        assert "validation.vllm.matrix.groups" in str(err)
        return
    assert SAFE_NAME.match(name)
    assert out.resolve().parent == parent.resolve()


@pytest.mark.parametrize("name", ["..", "../x", "a/b", "/etc", "A", "", "x y", "-x", "."])
def test_unsafe_names_are_refused(name: str) -> None:
    with pytest.raises(InputError, match="lower-case letters, digits and hyphens"):
        child_folder("/tmp/p", name, "here")


def test_hardware_id_must_be_folder_safe() -> None:
    assert resolve_hardware_id({"hardware_id": "amd-epyc-2c"}) == "amd-epyc-2c"
    with pytest.raises(InputError, match="validation.vllm.hardware_id"):
        resolve_hardware_id({"hardware_id": "../../../tmp/x"})
