"""Either measured engine started the same way: vLLM's CPU build (:mod:`llmqueue.engines.engine`,
the engine core in a child process) or Hugging Face transformers' continuous batching
(:mod:`llmqueue.engines.hf_engine`, a thread of the client's process). The single run and the
matrix's engine sessions open an engine here and get the open-loop client's ``stream``, the
serving settings read back from the started engine, the function that stops it and the CPUs
its model runs on (empty when not pinned).

Each engine leaves its scheduler facts (usable KV blocks, block size) beside the step log
(:func:`llmqueue.engines.steplog.core_facts_path`): vLLM's engine core writes them itself;
for the transformers engine, whose KV pages are all usable, they are written here. The engines'
packages are imported only when one opens.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llmqueue.engines.record import log
from llmqueue.errors import InputError

__all__ = ["ENGINE_NOTES", "OpenEngine", "open_engine", "engine_environment_record"]

# what meta.json says of each engine
ENGINE_NOTES: Mapping[str, str] = {
    "vllm": "vLLM (CPU build), V1 engine, AsyncLLM in the client's process, engine core in a child process",
    "transformers": "Hugging Face transformers, continuous batching (ContinuousBatchingManager): its "
    "generation thread and the client in one process",
}


@dataclass(frozen=True)
class OpenEngine:
    """A started engine: the client's ``stream`` (:data:`llmqueue.engines.client.StreamFn`),
    its settings as read back, ``close`` (stops it once) and the CPUs its model is pinned to."""

    stream: Callable[..., Any]
    settings: dict[str, Any]
    close: Callable[[], None]
    model_cpus: frozenset[int]


def open_engine(
    engine: str, model_dir: os.PathLike[str] | str, shape: Mapping[str, Any], dtype: str,
    settings: Any, step_log: os.PathLike[str] | str, scheduler: str = "recording",
) -> OpenEngine:  # fmt: skip
    """Start `engine` (``vllm`` or ``transformers``) on the model folder `model_dir` (its
    `shape`, `dtype` as configured: ``auto`` resolves by the CPU) with its checked `settings`,
    every step recorded into `step_log`; vLLM's `scheduler` is ``recording`` (its own) or
    ``batch_queue`` (:class:`llmqueue.engines.admission.BatchQueueMixin`)."""
    if engine == "transformers":
        from llmqueue.engines.hf_engine import open_hf_engine
        from llmqueue.engines.steplog import core_facts_path, write_core_facts

        log(f"starting transformers' continuous batching on {model_dir} (in this process)")
        hf = open_hf_engine(model_dir, dtype, settings, step_log)
        try:
            read_back = hf.read_settings()
            write_core_facts(core_facts_path(step_log), {
                "kv_blocks_free_at_start": read_back["num_kv_blocks"],
                "block_size": read_back["block_size"],
            })  # fmt: skip
        except BaseException:
            hf.close()
            raise
        return OpenEngine(hf.stream, read_back, hf.close, frozenset())
    if engine != "vllm":
        raise InputError(f"--engine must be one of {', '.join(ENGINE_NOTES)}, got {engine!r}")
    from vllm.v1.core.sched.scheduler import Scheduler

    from llmqueue.engines.engine import (
        bind_host,
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.engines.placement import parse_cpu_list

    log(f"starting vLLM ({scheduler} scheduler) on {model_dir} (engine core in a child process)")
    vllm = open_async_engine(model_dir, shape, dtype, settings, step_log, scheduler=scheduler)
    try:
        read_back = read_settings(vllm.vllm_config, Scheduler)
        read_back["placement"] = bind_host(settings)
    except BaseException:
        close_engine(vllm)
        raise
    cpus = parse_cpu_list(settings.omp_threads_bind) or frozenset()
    return OpenEngine(make_stream(vllm), read_back, lambda: close_engine(vllm), frozenset(cpus))


def engine_environment_record(engine: str, settings: Any) -> dict[str, Any]:
    """The engine's environment as a run folder records it."""
    if engine == "transformers":
        return {"torch_threads": int(settings.threads)}
    return {
        "VLLM_CPU_OMP_THREADS_BIND": settings.omp_threads_bind,
        "VLLM_CPU_KVCACHE_SPACE": "unset (KV cache sized by num_gpu_blocks_override and kv_cache_memory_bytes)",
        "VLLM_ENABLE_V1_MULTIPROCESSING": os.environ.get(
            "VLLM_ENABLE_V1_MULTIPROCESSING", "1 (default)"
        ),
    }
