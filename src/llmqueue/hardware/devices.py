"""Named GPU specifications for the roofline and the KV-cache limit (predicted, never measured).

Memory in GiB (as ``nvidia-smi`` counts it), HBM bandwidth in bytes/s and dense fp16/bf16 tensor
peak in FLOP/s, from NVIDIA's data sheets (A100: SXM4, 40 GB HBM2 1,555 GB/s, 80 GB HBM2e
2,039 GB/s, 312 TFLOP/s; H100: SXM5 80 GB HBM3 3,350 GB/s, 989 TFLOP/s dense).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from llmqueue.errors import InputError

__all__ = ["GpuSpec", "GPU_SPECS", "get_gpu"]

GIB = 1 << 30


@dataclass(frozen=True)
class GpuSpec:
    name: str
    label: str
    memory_gib: float
    bandwidth_bytes_per_s: float
    peak_flops: float  # dense fp16/bf16 tensor-core FLOP/s

    @property
    def memory_bytes(self) -> float:
        return self.memory_gib * GIB

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


GPU_SPECS: dict[str, GpuSpec] = {
    "a100-40gb": GpuSpec("a100-40gb", "A100-40GB", 40.0, 1.555e12, 312e12),
    "a100-80gb": GpuSpec("a100-80gb", "A100-80GB", 80.0, 2.039e12, 312e12),
    "h100": GpuSpec("h100", "H100-SXM-80GB", 80.0, 3.35e12, 989e12),
}


def get_gpu(name: str) -> GpuSpec:
    try:
        return GPU_SPECS[name]
    except KeyError:
        raise InputError(f"unknown GPU {name!r}; known GPU specs: {sorted(GPU_SPECS)}") from None
