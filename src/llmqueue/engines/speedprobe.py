"""Two fixed kernels that time the machine itself, between the engine's batches.

- :func:`stream_probe`: a bf16 matrix-vector product over a matrix of ``stream_mb`` megabytes
  (about the model's weights), i.e. what a decode step does per layer: it reads every weight once
  and is bound by the memory bandwidth of one core;
- :func:`compute_probe`: a bf16 ``n x n`` matrix product that stays in the core's caches
  (``n = 256``: 3 x 128 KiB), bound by the core's arithmetic.

Each runs back to back for ``seconds`` on the calling thread (one torch thread) and returns the
mean wall-clock seconds per call. On a machine whose speed holds, both return the same time
every time; set against the engine's step times over the same minutes they tell whether the
engine's speed follows the machine's (``llmqueue validate machine-speed``). Units: seconds,
megabytes (10^6 bytes). torch is imported inside the functions (the engine's environment).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

__all__ = ["ProbeKernels", "make_kernels", "stream_probe", "compute_probe"]

ROW = 1024  # columns of the streamed matrix (the default model's hidden size)


@dataclass(frozen=True)
class ProbeKernels:
    """The probes' operands, made once (torch tensors)."""

    matrix: Any
    vector: Any
    a: Any
    b: Any

    @property
    def stream_bytes(self) -> int:
        return int(self.matrix.numel() * self.matrix.element_size())

    @property
    def compute_flops(self) -> int:
        n = int(self.a.shape[0])
        return 2 * n * n * n


def make_kernels(stream_mb: float, compute_size: int, *, seed: int) -> ProbeKernels:
    """Random bf16 operands: a ``stream_mb``-MB matrix and a vector, two ``compute_size``-square
    matrices (seeded; the values do not matter to the time)."""
    import torch

    if not stream_mb > 0 or compute_size < 1:
        raise ValueError(
            f"stream_mb must be > 0 and compute_size >= 1, got {stream_mb}, {compute_size}"
        )
    gen = torch.Generator().manual_seed(int(seed))
    rows = max(1, int(stream_mb * 1e6 / 2 / ROW))
    bf = torch.bfloat16
    return ProbeKernels(
        matrix=torch.randn(rows, ROW, generator=gen).to(bf),
        vector=torch.randn(ROW, 1, generator=gen).to(bf),
        a=torch.randn(compute_size, compute_size, generator=gen).to(bf),
        b=torch.randn(compute_size, compute_size, generator=gen).to(bf),
    )


def _time_calls(fn: Any, seconds: float) -> float:
    fn()  # one untimed call: operands in place, kernels chosen
    n = 0
    t0 = time.monotonic()
    while True:
        fn()
        n += 1
        t = time.monotonic() - t0
        if t >= seconds:
            return t / n


def stream_probe(k: ProbeKernels, seconds: float) -> float:
    """Mean seconds per matrix-vector product over `seconds` of back-to-back calls."""
    import torch

    with torch.inference_mode():
        return _time_calls(lambda: torch.mm(k.matrix, k.vector), seconds)


def compute_probe(k: ProbeKernels, seconds: float) -> float:
    """Mean seconds per in-cache matrix product over `seconds` of back-to-back calls."""
    import torch

    with torch.inference_mode():
        return _time_calls(lambda: torch.mm(k.a, k.b), seconds)
