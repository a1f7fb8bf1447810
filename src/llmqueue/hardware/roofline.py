"""Roofline model of decoder inference: time from bytes moved and FLOPs on a named GPU spec.

PREDICTED, never measured: a lower bound that assumes perfect overlap, 100% of peak bandwidth
(times ``bandwidth_efficiency``) and of peak FLOP/s, and no framework overhead. Eager Hugging Face
decoding on a real A100 measures about 3x more per token (the paper's Table I: ~22.9 ms/token
against the roofline's 6.6 ms at batch 1, docs/equations.md).

Per step with batch b and per-sequence context c (tokens already cached):
- bytes = weights (all parameters, read once per step) + b * c * KV bytes/token (cache read)
  + b * KV bytes/token (cache written);
- FLOPs = 2 * b * q * P_nonembed (matmuls of q new tokens per sequence) + 2 * b * q * vocab * hidden
  (LM head on the last token only: q = 1 for the head) + attention 4 * b * layers * hidden * q * c_mean;
- time = max(bytes / (BW * eff), FLOPs / (peak * eff_flops)).
Decode (t2): q = 1. Prefill (t1): q = input tokens, c_mean = input/2 (causal), plus one step's
worth of bytes. With weights read once per step, decode at b = 1 is memory bound:
LLaMA-2-7B fp16 6.74e9 * 2 B / 2.039e12 B/s = 6.6 ms (A100-80GB), 8.7 ms (A100-40GB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from llmqueue.errors import InputError
from llmqueue.hardware.devices import GpuSpec, get_gpu
from llmqueue.hardware.models import DTYPE_BYTES, ModelSpec, get_spec

__all__ = ["Roofline", "roofline"]


@dataclass(frozen=True)
class Roofline:
    model: ModelSpec
    gpu: GpuSpec
    dtype: str = "float16"
    bandwidth_efficiency: float = 1.0
    flops_efficiency: float = 1.0

    def __post_init__(self) -> None:
        if self.dtype not in DTYPE_BYTES:
            raise InputError(
                f"roofline dtype {self.dtype!r} unknown; allowed: {sorted(DTYPE_BYTES)}"
            )
        for key in ("bandwidth_efficiency", "flops_efficiency"):
            v = getattr(self, key)
            if not 0 < v <= 1:
                raise InputError(f"roofline {key} must be in (0, 1], got {v}")

    @property
    def bytes_per_value(self) -> int:
        return DTYPE_BYTES[self.dtype]

    @property
    def weight_bytes(self) -> float:
        return float(self.model.params() * self.bytes_per_value)

    @property
    def kv_bytes_per_token(self) -> float:
        return float(self.model.kv_bytes_per_token(self.bytes_per_value))

    def _time(self, nbytes: float, flops: float) -> float:
        bw = self.gpu.bandwidth_bytes_per_s * self.bandwidth_efficiency
        peak = self.gpu.peak_flops * self.flops_efficiency
        return max(nbytes / bw, flops / peak)

    def _matmul_flops(self, tokens: float) -> float:
        m = self.model
        nonembed = m.params() - 2 * m.vocab * m.hidden
        return 2.0 * tokens * nonembed

    def decode_time(self, batch: float, context: float) -> float:
        """t2: seconds for one decode step of `batch` sequences with `context` cached tokens each."""
        m = self.model
        b, c = float(batch), float(context)
        if b < 1 or c < 0:
            raise InputError(
                f"decode_time needs batch >= 1 and context >= 0, got {batch}, {context}"
            )
        nbytes = self.weight_bytes + b * (c + 1) * self.kv_bytes_per_token
        flops = (
            self._matmul_flops(b)
            + 2.0 * b * m.vocab * m.hidden
            + 4.0 * b * m.layers * m.hidden * (c + 1)
        )
        return self._time(nbytes, flops)

    def prefill_time(self, batch: float, input_tokens: float) -> float:
        """t1: seconds for the prefill of `batch` prompts of `input_tokens` and the first token."""
        m = self.model
        b, s = float(batch), float(input_tokens)
        if b < 1 or s < 1:
            raise InputError(
                f"prefill_time needs batch >= 1 and input >= 1 token, got {batch}, {input_tokens}"
            )
        nbytes = self.weight_bytes + b * s * self.kv_bytes_per_token
        flops = (
            self._matmul_flops(b * s)
            + 2.0 * b * m.vocab * m.hidden
            + 4.0 * b * m.layers * m.hidden * s * (s + 1) / 2
        )
        return self._time(nbytes, flops)

    # Parts of a forward pass, for sources that measure the rest (llmqueue.profiling.kernels).

    def attention_decode_time(self, batch: float, context: float) -> float:
        """Attention of one decode step, all layers: read `context` cached tokens and write one per
        sequence (b (c + 1) KV bytes/token), 4 * layers * hidden * (c + 1) FLOPs per sequence."""
        m = self.model
        b, c = float(batch), float(context)
        if b < 1 or c < 0:
            raise InputError(f"attention needs batch >= 1 and context >= 0, got {batch}, {context}")
        return self._time(
            b * (c + 1) * self.kv_bytes_per_token, 4.0 * b * m.layers * m.hidden * (c + 1)
        )

    def attention_prefill_time(self, batch: float, input_tokens: float) -> float:
        """Causal attention over `batch` prompts of `input_tokens`, all layers: the prompts' KV
        written (b s KV bytes/token), 4 * layers * hidden * s (s + 1) / 2 FLOPs per prompt."""
        m = self.model
        b, s = float(batch), float(input_tokens)
        if b < 1 or s < 1:
            raise InputError(
                f"attention needs batch >= 1 and input >= 1 token, got {batch}, {input_tokens}"
            )
        return self._time(
            b * s * self.kv_bytes_per_token, 4.0 * b * m.layers * m.hidden * s * (s + 1) / 2
        )

    def lm_head_time(self, batch: float) -> float:
        """LM head on the last token of `batch` sequences: its vocab x hidden weights read once,
        2 * b * vocab * hidden FLOPs."""
        m = self.model
        b = float(batch)
        if b < 1:
            raise InputError(f"lm_head_time needs batch >= 1, got {batch}")
        return self._time(
            float(m.vocab * m.hidden * self.bytes_per_value), 2.0 * b * m.vocab * m.hidden
        )

    def request_time(self, input_tokens: int, output_tokens: int, batch: int = 1) -> float:
        """End-to-end time of a batch generating `output_tokens` tokens each: t1 + sum of the
        n - 1 decode steps at growing context (the first token comes with t1)."""
        if output_tokens < 1:
            raise InputError("output_tokens must be >= 1")
        steps = [self.decode_time(batch, float(input_tokens + i)) for i in range(1, output_tokens)]
        return self.prefill_time(batch, input_tokens) + float(np.sum(steps))


def roofline(
    model: str,
    gpu: str,
    dtype: str = "float16",
    bandwidth_efficiency: float = 1.0,
    flops_efficiency: float = 1.0,
) -> Roofline:
    return Roofline(get_spec(model), get_gpu(gpu), dtype, bandwidth_efficiency, flops_efficiency)
