"""KV-cache limit on the batch size (paper Sec. II-C, claim 2: "at most 49 sequences of 1280
tokens for LLaMA-2-7B-chat on an A100").

b_max = floor((memory - weights - overhead) / (sequence_tokens * KV bytes per token)), with
KV bytes per token = 2 (K, V) x layers x kv_heads x head_dim x bytes per value (docs/equations.md).
The paper states neither the A100 variant nor the precision of the cache; each reading is
computed and reported with its assumptions (weights and KV precision, overhead counted).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from llmqueue.errors import InputError
from llmqueue.hardware.devices import GIB, get_gpu
from llmqueue.hardware.models import DTYPE_BYTES, get_spec

__all__ = ["KvLimit", "kv_limit", "max_batch", "kv_tokens"]


def max_batch(
    memory_bytes: float,
    weight_bytes: float,
    kv_bytes_per_token: float,
    sequence_tokens: int,
    overhead_bytes: float = 0.0,
) -> int:
    """Largest b with weights + overhead + b * sequence_tokens * KV/token <= memory (0 if none fits)."""
    if sequence_tokens < 1 or kv_bytes_per_token <= 0:
        raise InputError("sequence_tokens must be >= 1 and KV bytes per token > 0")
    if memory_bytes <= 0 or weight_bytes < 0 or overhead_bytes < 0:
        raise InputError("memory must be > 0 bytes; weights and overhead >= 0 bytes")
    free = memory_bytes - weight_bytes - overhead_bytes
    if free <= 0:
        return 0
    return int(math.floor(free / (sequence_tokens * kv_bytes_per_token) + 1e-9))


@dataclass(frozen=True)
class KvLimit:
    model: str
    gpu: str
    memory_gib: float
    weights_dtype: str
    kv_dtype: str
    overhead_gib: float
    sequence_tokens: int
    weight_bytes: int
    kv_bytes_per_token: int
    max_batch: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def kv_limit(
    model: str,
    gpu: str,
    sequence_tokens: int,
    weights_dtype: str = "float16",
    kv_dtype: str = "float16",
    overhead_gib: float = 0.0,
) -> KvLimit:
    """KV-cache batch limit of `model` on `gpu` (a named spec) for sequences of `sequence_tokens`."""
    spec = get_spec(model)
    dev = get_gpu(gpu)
    for key, dt in (("weights_dtype", weights_dtype), ("kv_dtype", kv_dtype)):
        if dt not in DTYPE_BYTES:
            raise InputError(f"{key} {dt!r} unknown; allowed: {sorted(DTYPE_BYTES)}")
    weights = spec.params() * DTYPE_BYTES[weights_dtype]
    kv = spec.kv_bytes_per_token(DTYPE_BYTES[kv_dtype])
    b = max_batch(dev.memory_bytes, weights, kv, int(sequence_tokens), overhead_gib * GIB)
    return KvLimit(
        model,
        gpu,
        dev.memory_gib,
        weights_dtype,
        kv_dtype,
        float(overhead_gib),
        int(sequence_tokens),
        int(weights),
        int(kv),
        b,
    )


def kv_tokens(
    model: str,
    gpu: str | None = None,
    memory_gib: float | None = None,
    weights_dtype: str = "float16",
    kv_dtype: str = "float16",
    overhead_gib: float = 0.0,
    memory_fraction: float = 1.0,
) -> int:
    """KV-cache budget of a serving engine, in tokens: how many tokens of keys and values fit in
    a GPU's memory after the weights (and `overhead_gib`),
    floor((memory_fraction x memory - weights - overhead) / KV bytes per token).

    The memory is the named spec's (`gpu`, e.g. ``a100-80gb``) or `memory_gib` as measured (e.g.
    79.18 GiB reported by an H100 80GB); `memory_fraction` is the share an engine may use (vLLM's
    ``gpu_memory_utilization``, 0.9 by default there; 1.0 here). 0 when the weights do not fit.
    LLaMA-2-7B, fp16, A100-80GB: (80 GiB - 13.48 GB) / 512 KiB = 138,134 tokens.
    """
    spec = get_spec(model)
    if (gpu is None) == (memory_gib is None):
        raise InputError("kv_tokens: give exactly one of gpu (a named spec) or memory_gib")
    mem_gib = get_gpu(gpu).memory_gib if gpu is not None else float(memory_gib)  # type: ignore[arg-type]
    if not (mem_gib > 0):
        raise InputError(f"kv_tokens: memory must be > 0 GiB, got {mem_gib}")
    if not (0 < memory_fraction <= 1):
        raise InputError(f"kv_tokens: memory_fraction must be in (0, 1], got {memory_fraction}")
    if overhead_gib < 0:
        raise InputError(f"kv_tokens: overhead_gib must be >= 0, got {overhead_gib}")
    for key, dt in (("weights_dtype", weights_dtype), ("kv_dtype", kv_dtype)):
        if dt not in DTYPE_BYTES:
            raise InputError(f"{key} {dt!r} unknown; allowed: {sorted(DTYPE_BYTES)}")
    free = (
        mem_gib * memory_fraction * GIB
        - spec.params() * DTYPE_BYTES[weights_dtype]
        - overhead_gib * GIB
    )
    if free <= 0:
        return 0
    return int(math.floor(free / spec.kv_bytes_per_token(DTYPE_BYTES[kv_dtype]) + 1e-9))
