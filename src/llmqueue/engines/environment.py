"""The vLLM environment of ``llmqueue validate``: its pins, a full check (``check-env``) and the
quick check every engine command makes before it writes anything.

vLLM's CPU build lives in its own environment ``.venv-vllm``, installed from ``envs/vllm-cpu.txt``
(the whole pinned closure, ``make validate-vllm``). :func:`require_engine` is cheap (it finds the
package, imports nothing) and runs before a model, a work file or a run folder is written;
:func:`check_env` imports vLLM and compares every pinned version.
"""

from __future__ import annotations

import sys
from pathlib import Path

from llmqueue.errors import InputError

__all__ = [
    "PINS", "MUST_BE_ABSENT", "ENGINE_ENVS", "read_pins", "check_env", "cpu_bf16", "require_engine",
]  # fmt: skip

PINS = Path("envs/vllm-cpu.txt")
# Packages that vllm-cpu 0.32.0 declares but that break its start with torch 2.13.0+cpu.
MUST_BE_ABSENT = ("torchvision", "torchaudio", "torchcodec")


def read_pins(path: Path = PINS) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and "==" in line:
            name, ver = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = ver.strip()
    return pins


def check_env() -> str:
    """One line: the vLLM environment is usable (returned), or what is wrong with it (InputError
    naming the environment file to install)."""
    from importlib import metadata, util

    problems = []
    pins = read_pins() if PINS.is_file() else {}
    for name in ("vllm-cpu", "torch", "transformers", "numpy", "pandas", "scipy"):
        try:
            ver = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        if name in pins and pins[name] != ver:
            problems.append(f"{name} {ver} installed, envs/vllm-cpu.txt pins {pins[name]}")
    present = [n for n in MUST_BE_ABSENT if util.find_spec(n) is not None]
    if present:
        problems.append(f"{', '.join(present)} must be removed (they break vLLM with this torch)")
    if not problems:
        try:
            import vllm  # noqa: F401
            from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401
        except Exception as err:  # noqa: BLE001
            problems.append(f"import vllm failed: {type(err).__name__}: {err}")
    if problems:
        raise InputError(
            f"the vLLM environment ({sys.prefix}) is broken: {'; '.join(problems)}; rebuild it "
            "with: rm -rf .venv-vllm && make validate-vllm"
        )
    note = ""
    if cpu_bf16() is False:
        note = (
            "; note: this CPU has no AVX-512 BF16 (nor AMX): a model of dtype auto is made in "
            "float32 here, one of dtype bfloat16 runs 5-16x slower than on a CPU that has them"
        )
    return (
        f"vLLM environment OK: vllm-cpu {metadata.version('vllm-cpu')}, "
        f"torch {metadata.version('torch')}{note}"
    )


def cpu_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU has bfloat16 matrix instructions (avx512_bf16 or amx_bf16); None when the
    flags cannot be read (not Linux)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


# per engine: the packages it needs, its environment file, its virtual environment and the make
# target that builds it
ENGINE_ENVS = {
    "vllm": (("vllm",), PINS, ".venv-vllm", "make validate-vllm"),
    "transformers": (
        ("torch", "transformers"), "envs/transformers-cpu.txt", ".venv-transformers",
        "make validate-transformers",
    ),
}  # fmt: skip


def require_engine(
    command: str, packages: tuple[str, ...] | None = None, engine: str = "vllm"
) -> None:
    """Refuse ``llmqueue validate <command>`` in one line, before anything is written, when one of
    `packages` (default: those `engine` needs, :data:`ENGINE_ENVS`) is not importable from this
    interpreter: the fix is the engine's environment file to install. Finds the packages only;
    imports nothing."""
    from importlib import util

    if engine not in ENGINE_ENVS:
        raise InputError(f"--engine must be one of {', '.join(ENGINE_ENVS)}, got {engine!r}")
    needed, env_file, venv, target = ENGINE_ENVS[engine]
    missing = [name for name in (packages or needed) if util.find_spec(name) is None]
    if missing:
        raise InputError(
            f"llmqueue validate {command} needs {', '.join(missing)}, which this Python "
            f"({sys.prefix}) lacks: install {env_file} into {venv} ({target} does) and "
            f"run it as PYTHONPATH=src {venv}/bin/python -m llmqueue validate ..."
        )
