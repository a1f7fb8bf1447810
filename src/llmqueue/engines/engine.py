"""vLLM as the validation engine: its settings, the async engine, the token stream, the readback.

- :class:`EngineSettings`: the engine knobs that the serving model also has (config
  ``validation.vllm.engine``), set explicitly rather than left to vLLM's defaults.
- :func:`open_async_engine`: vLLM's ``AsyncLLM`` in this process, its engine core in a child
  process (vLLM's default), the model's OpenMP threads bound as configured
  (``VLLM_CPU_OMP_THREADS_BIND``), the KV cache sized to exactly ``kv_blocks`` blocks
  (``num_gpu_blocks_override`` and ``kv_cache_memory_bytes``; the legacy ``VLLM_CPU_KVCACHE_SPACE``
  is removed from the environment, since it would override the latter in whole GiB), and the
  scheduler replaced by :class:`llmqueue.engines.probe.RecordingScheduler` (vLLM's scheduler
  plus a per-iteration record).
- :func:`bind_host`: once the engine is up, every thread but the model worker's bound to
  ``host_cpus_bind`` (:mod:`llmqueue.engines.placement`), so nothing else runs on the model's
  core.
- :func:`make_stream`: requests as token ids, ``SamplingParams(max_tokens=n, ignore_eos=True)``,
  greedy, delta outputs: a stream of new-token counts for :mod:`llmqueue.engines.client`.
- :func:`read_settings`: what the running engine actually uses (from its ``VllmConfig`` after
  start-up, when vLLM has filled in the KV block count), for ``settings.json``.

vLLM is imported inside the functions only.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from llmqueue.engines.model import kv_bytes_per_token, resolve_dtype
from llmqueue.engines.placement import (
    bind_host_processes,
    bind_process,
    check_binding,
    parse_cpu_list,
)
from llmqueue.engines.steplog import MODEL_LOG_ENV, STEP_LOG_ENV
from llmqueue.errors import InputError
from llmqueue.limits import section_keys

__all__ = [
    "SCHEDULING_POLICIES",
    "FIFO_SCHEDULING",
    "request_tokens",
    "PROBE_SCHEDULER",
    "TIMING_WORKER",
    "SCHEDULERS",
    "EngineSettings",
    "engine_environment",
    "open_async_engine",
    "bind_host",
    "require_cpus",
    "make_stream",
    "close_engine",
    "read_settings",
    "preemption_mode",
]

# vLLM's EngineArgs.scheduling_policy values: first come first served, or the requests' priority
SCHEDULING_POLICIES = ("fcfs", "priority")
FIFO_SCHEDULING = SCHEDULING_POLICIES[0]

PROBE_SCHEDULER = "llmqueue.engines.probe.RecordingScheduler"
# the model worker that times its forward passes (open_async_engine with a model_log)
TIMING_WORKER = "llmqueue.engines.worker.TimingWorker"
# this process's CPUs when the engine was opened (close_engine puts its threads back on them)
_AFFINITY_BEFORE = "_llmqueue_affinity_before"
# the scheduler class of each kind (llmqueue.engines.groups.GroupSpec.scheduler)
SCHEDULERS = {
    "recording": PROBE_SCHEDULER,
    "batch_queue": "llmqueue.engines.probe.BatchQueueScheduler",
}


@dataclass(frozen=True)
class EngineSettings:
    """Engine knobs (config ``validation.vllm.engine``); token counts in tokens."""

    max_model_len: int
    max_num_seqs: int
    max_num_batched_tokens: int
    kv_blocks: int
    block_size: int
    enable_chunked_prefill: bool
    enable_prefix_caching: bool
    enforce_eager: bool
    scheduling_policy: str
    omp_threads_bind: str
    host_cpus_bind: str
    seed: int

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> EngineSettings:
        names = [f.name for f in fields(cls)]
        section_keys(section, "validation.vllm.engine", names)
        s = cls(**{n: section[n] for n in names})
        for key in (
            "max_model_len",
            "max_num_seqs",
            "max_num_batched_tokens",
            "kv_blocks",
            "block_size",
            "seed",
        ):
            v = getattr(s, key)
            lo = 0 if key == "seed" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(
                    f"validation.vllm.engine.{key} must be an integer >= {lo}, got {v!r}"
                )
        for key in ("enable_chunked_prefill", "enable_prefix_caching", "enforce_eager"):
            if not isinstance(getattr(s, key), bool):
                raise InputError(
                    f"validation.vllm.engine.{key} must be true or false, got {getattr(s, key)!r}"
                )
        if s.kv_blocks * s.block_size < s.max_model_len:
            raise InputError(
                f"validation.vllm.engine: kv_blocks x block_size = {s.kv_blocks * s.block_size} "
                f"tokens cannot hold one request of max_model_len = {s.max_model_len}"
            )
        if not s.enable_chunked_prefill and s.max_num_batched_tokens < s.max_model_len:
            raise InputError(
                "validation.vllm.engine.max_num_batched_tokens must be >= max_model_len when "
                "enable_chunked_prefill is false"
            )
        if s.scheduling_policy not in SCHEDULING_POLICIES:
            raise InputError(
                f"validation.vllm.engine.scheduling_policy must be fcfs or priority, got {s.scheduling_policy!r}"
            )
        check_binding(str(s.omp_threads_bind), str(s.host_cpus_bind))
        return s

    def check_batch(
        self, batch: int, prompt_tokens: int, output_tokens: int, where: str,
        engine: str = "the engine's",
    ) -> None:  # fmt: skip
        """A controlled batch (`batch` requests of `prompt_tokens` asking `output_tokens`) that
        this engine serves whole: each request within max_model_len and the batch's KV blocks
        within the cache (one block is vLLM's null block), else an InputError naming `where` (the
        config key) and `engine` (whose settings)."""
        n = request_tokens(prompt_tokens, output_tokens, self.max_model_len, where, engine)
        blocks = batch * -(-n // self.block_size)
        if blocks > self.kv_blocks - 1:
            raise InputError(
                f"{where}: batch x ceil((prompt_tokens + output_tokens) / block_size) = {blocks} "
                f"KV blocks exceed {engine} {self.kv_blocks - 1} usable "
                "(validation.vllm.engine.kv_blocks - 1): the batch would be preempted"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def request_tokens(
    prompt_tokens: int, output_tokens: int, max_model_len: int, where: str, engine: str
) -> int:
    """The tokens one request holds at its end (prompt + output), refused with an InputError
    naming `where` (the config key) and `engine` (whose settings) when above `max_model_len`: the
    request-length check every engine's controlled batches share."""
    n = prompt_tokens + output_tokens
    if n > max_model_len:
        raise InputError(
            f"{where}: prompt_tokens + output_tokens ({n}) exceed {engine} max_model_len "
            f"{max_model_len}"
        )
    return n


def engine_environment(
    settings: EngineSettings,
    step_log: str | os.PathLike[str],
    model_log: str | os.PathLike[str] | None = None,
) -> dict[str, str]:
    """Environment variables the engine's processes need (set before the engine starts); with a
    `model_log`, the file the timing worker writes its forward passes to."""
    src = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p]
    if src not in parts:
        parts.insert(0, src)  # the engine core imports the probe scheduler from llmqueue
    return {
        "VLLM_CPU_OMP_THREADS_BIND": str(settings.omp_threads_bind),
        STEP_LOG_ENV: os.fspath(step_log),
        "PYTHONPATH": os.pathsep.join(parts),
        **({MODEL_LOG_ENV: os.fspath(model_log)} if model_log is not None else {}),
    }


def open_async_engine(
    model_dir: str | os.PathLike[str],
    shape: Mapping[str, Any],
    dtype: str,
    settings: EngineSettings,
    step_log: str | os.PathLike[str],
    scheduler: str = "recording",
    model_log: str | os.PathLike[str] | None = None,
) -> Any:
    """Start vLLM's ``AsyncLLM`` on the model folder; returns the engine (call ``shutdown()``).
    `scheduler`: a key of :data:`SCHEDULERS` (``batch_queue``: the paper's batch queue);
    `model_log`: a CSV file for the model worker's forward passes (:data:`TIMING_WORKER`), none
    by default (vLLM's own worker)."""
    if scheduler not in SCHEDULERS:
        raise InputError(f"scheduler must be one of {sorted(SCHEDULERS)}, got {scheduler!r}")
    require_cpus(settings)
    os.environ.pop(MODEL_LOG_ENV, None)
    os.environ.update(engine_environment(settings, step_log, model_log))
    os.environ.pop("VLLM_CPU_KVCACHE_SPACE", None)
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    kv_bytes = settings.kv_blocks * settings.block_size * kv_bytes_per_token(shape, dtype)
    args = AsyncEngineArgs(
        model=os.fspath(model_dir),
        skip_tokenizer_init=True,
        dtype=resolve_dtype(dtype),
        seed=settings.seed,
        max_model_len=settings.max_model_len,
        max_num_seqs=settings.max_num_seqs,
        max_num_batched_tokens=settings.max_num_batched_tokens,
        enable_chunked_prefill=settings.enable_chunked_prefill,
        enable_prefix_caching=settings.enable_prefix_caching,
        block_size=settings.block_size,
        num_gpu_blocks_override=settings.kv_blocks,
        kv_cache_memory_bytes=kv_bytes,
        enforce_eager=settings.enforce_eager,
        scheduling_policy=settings.scheduling_policy,
        scheduler_cls=SCHEDULERS[scheduler],
        disable_log_stats=True,
        **({"worker_cls": TIMING_WORKER} if model_log is not None else {}),
    )
    before = frozenset(os.sched_getaffinity(0))
    engine = AsyncLLM.from_engine_args(args)
    setattr(engine, _AFFINITY_BEFORE, before)
    return engine


def bind_host(settings: EngineSettings) -> list[dict[str, Any]] | None:
    """Once the engine is up: bind this process tree's threads, except the model worker's, to
    ``settings.host_cpus_bind`` (:mod:`llmqueue.engines.placement`); returns the placement read
    back per process, or None with ``nobind``."""
    host = parse_cpu_list(settings.host_cpus_bind)
    model = parse_cpu_list(settings.omp_threads_bind)
    if host is None or model is None:
        return None
    return bind_host_processes(os.getpid(), host, model)


def require_cpus(settings: EngineSettings) -> None:
    """Refuse, before the engine starts, a host or model CPU list naming CPUs this process may not
    run on (InputError naming the key and the CPUs available)."""
    available = set(os.sched_getaffinity(0))
    for key in ("omp_threads_bind", "host_cpus_bind"):
        cpus = parse_cpu_list(getattr(settings, key))
        missing = sorted((cpus or set()) - available)
        if missing:
            raise InputError(
                f"validation.vllm.engine.{key}: CPUs {missing} are not available on this machine "
                f"(available: {sorted(available)})"
            )


def close_engine(engine: Any) -> None:
    """Shut the engine down (its core process ends) once: vLLM's ``AsyncLLM.__del__`` shuts it
    down again when the object is collected, which at interpreter exit fails with vLLM's module
    globals already gone; the instance's ``shutdown`` is made a no-op after the real one. This
    process's threads then go back to the CPUs they had when the engine was opened (undoing
    :func:`bind_host`), so the next engine starts as the first did."""
    engine.shutdown()
    engine.shutdown = lambda *args, **kwargs: None
    before = getattr(engine, _AFFINITY_BEFORE, None)
    if before is not None:
        bind_process(os.getpid(), before)


def make_stream(engine: Any) -> Any:
    """``stream(request_id, prompt_token_ids, max_tokens)``: the engine's outputs as new-token
    counts (exactly `max_tokens` tokens in all: ``ignore_eos``, greedy, delta outputs)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    async def stream(
        request_id: str, prompt: Sequence[int], max_tokens: int, priority: int = 0
    ) -> AsyncIterator[int]:
        params = SamplingParams(
            max_tokens=int(max_tokens),
            ignore_eos=True,
            temperature=0.0,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA,
        )
        async for out in engine.generate(
            {"prompt_token_ids": list(prompt)}, params, request_id, priority=int(priority)
        ):
            yield sum(len(o.token_ids) for o in out.outputs)

    return stream


def preemption_mode(scheduler_cls: Any) -> str:
    """How the scheduler class preempts, read from its code: ``recompute`` when preempting
    frees the request's KV blocks and resets its computed tokens to 0 (vLLM V1's only mode),
    ``swap`` when it swaps blocks out, else ``unknown``."""
    try:
        src = inspect.getsource(scheduler_cls._preempt_request)
    except (AttributeError, OSError, TypeError):
        return "unknown"
    if "swap" in src.lower():
        return "swap"
    if "num_computed_tokens = 0" in src and "_free_request_blocks" in src:
        return "recompute"
    return "unknown"


def read_settings(vllm_config: Any, scheduler_cls: Any = None) -> dict[str, Any]:
    """The serving-relevant settings of a started engine, read from its ``VllmConfig``.

    ``kv_tokens`` = ``num_kv_blocks`` x ``block_size``: the KV cache allocated, in tokens, which
    vLLM hands out a whole block at a time (a request holding t tokens takes ceil(t / block_size)
    blocks). ``reserve_full_prompt_on_admission``: a waiting request is admitted only when its
    whole prompt fits in the free blocks (blocks are then taken chunk by chunk).
    """
    sched = vllm_config.scheduler_config
    cache = vllm_config.cache_config
    model = vllm_config.model_config
    blocks = cache.num_gpu_blocks
    if blocks is None:
        raise InputError(
            "engine settings: the KV block count is not known yet (engine not started?)"
        )
    out: dict[str, Any] = {
        "max_num_seqs": int(sched.max_num_seqs),
        "max_num_batched_tokens": int(sched.max_num_batched_tokens),
        "enable_chunked_prefill": bool(sched.enable_chunked_prefill),
        "long_prefill_token_threshold": int(getattr(sched, "long_prefill_token_threshold", 0) or 0),
        "watermark": float(getattr(sched, "watermark", 0.0) or 0.0),
        "reserve_full_prompt_on_admission": bool(
            getattr(sched, "scheduler_reserve_full_isl", False)
        ),
        "scheduling_policy": str(sched.policy),
        "async_scheduling": bool(getattr(sched, "async_scheduling", False)),
        "scheduler_cls": str(sched.scheduler_cls),
        "num_kv_blocks": int(blocks),
        "block_size": int(cache.block_size),
        "kv_tokens": int(blocks) * int(cache.block_size),
        "enable_prefix_caching": bool(cache.enable_prefix_caching),
        "kv_cache_dtype": str(cache.cache_dtype),
        "max_model_len": int(model.max_model_len),
        "dtype": str(model.dtype).removeprefix("torch."),
        "enforce_eager": bool(model.enforce_eager),
    }
    if scheduler_cls is not None:
        out["preemption_mode"] = preemption_mode(scheduler_cls)
    return out
