"""Model architectures for profiling (paper Sec. II, V-A), built with random weights.

Timing needs the shapes, not the trained weights (weights cannot be downloaded here): every model
is built from its architecture with random weights (seeded). Shapes follow docs/equations.md
("Model shapes for profiling"):

- ``llama2-7b-chat``: LLaMA-2-7B, 32 layers, hidden 4096, 32 heads, 32 KV heads, FFN 11008,
  vocab 32000, context 4096; 6.74 B parameters; KV cache 512 KiB/token in fp16.
- ``chinese-alpaca-2-7b``: the same architecture with vocab 55296 (6.93 B).
- ``chatglm3-6b``: 28 layers, hidden 4096, 32 heads, 2 KV groups (multi-query attention with 2
  groups), FFN 13696 (SwiGLU), vocab 65024, context 8192; 6.24 B; 28 KiB/token in fp16.
  **Built as a Llama-style block with these shapes** (Hugging Face ``LlamaForCausalLM`` with
  ``num_key_value_heads=2``): ChatGLM's own block differs in details that barely move timing
  (bias on the fused QKV projection, rotary embedding on half of each head, a fused gate/up
  projection), which the Llama block omits.
- ``tiny``: a 2-layer, 64-wide model for the tests and the smoke profile (not a paper model).

The CPU path builds full-width models with fewer layers (``layers=``) and extrapolates to full
depth after checking that time is linear in the number of layers (:mod:`llmqueue.profiling.depth`).
This module imports torch/transformers only inside :func:`build_model`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from llmqueue.errors import InputError

__all__ = [
    "ModelSpec",
    "MODEL_SPECS",
    "get_spec",
    "build_model",
    "DTYPE_BYTES",
    "resolve_dtype",
    "resolve_device",
    "fill_random_",
]

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


@dataclass(frozen=True)
class ModelSpec:
    """Architecture shapes of a decoder-only (Llama-style) model."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    context: int
    note: str = ""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def layer_params(self) -> int:
        """Parameters of one block: Q, K, V, O projections, SwiGLU MLP (3 matrices), 2 RMSNorms."""
        kv = self.kv_heads * self.head_dim
        attn = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        return attn + 3 * self.hidden * self.ffn + 2 * self.hidden

    def params(self, layers: int | None = None) -> int:
        """All parameters with `layers` blocks (default: full depth); untied embedding and LM head."""
        n = self.layers if layers is None else layers
        return n * self.layer_params() + 2 * self.vocab * self.hidden + self.hidden

    def kv_bytes_per_token(self, kv_bytes: int = 2, layers: int | None = None) -> int:
        """KV-cache bytes per token: 2 (K and V) x layers x kv_heads x head_dim x bytes per value."""
        n = self.layers if layers is None else layers
        return 2 * n * self.kv_heads * self.head_dim * kv_bytes

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["params"] = self.params()
        d["kv_bytes_per_token_fp16"] = self.kv_bytes_per_token(2)
        return d


MODEL_SPECS: dict[str, ModelSpec] = {
    "llama2-7b-chat": ModelSpec(
        "llama2-7b-chat", 32, 4096, 32, 32, 11008, 32000, 4096, "LLaMA-2-7B shapes"
    ),
    "chinese-alpaca-2-7b": ModelSpec(
        "chinese-alpaca-2-7b",
        32,
        4096,
        32,
        32,
        11008,
        55296,
        4096,
        "LLaMA-2-7B shapes, vocab 55296",
    ),
    "chatglm3-6b": ModelSpec(
        "chatglm3-6b",
        28,
        4096,
        32,
        2,
        13696,
        65024,
        8192,
        "ChatGLM3-6B shapes in a Llama-style block (2 KV groups; no QKV bias, full rotary)",
    ),
    "tiny": ModelSpec("tiny", 2, 64, 4, 2, 128, 256, 512, "tiny test config (not a paper model)"),
}


def get_spec(name: str) -> ModelSpec:
    try:
        return MODEL_SPECS[name]
    except KeyError:
        raise InputError(f"unknown model {name!r}; known models: {sorted(MODEL_SPECS)}") from None


def resolve_dtype(device: str, dtype: str) -> Any:
    """torch dtype for a name; fp32 or bf16 on CPU, fp16 or bf16 (or fp32) on CUDA."""
    import torch

    if dtype not in DTYPE_BYTES:
        raise InputError(f"dtype {dtype!r} unknown; allowed: {sorted(DTYPE_BYTES)}")
    if device == "cpu" and dtype == "float16":
        raise InputError("dtype float16 is not supported on CPU; use float32 or bfloat16")
    return getattr(torch, dtype)


def resolve_device(device: str) -> Any:
    """torch.device for 'cpu' or 'cuda' ('cuda:N'); CUDA asked for but absent is an InputError."""
    import torch

    if device == "cpu":
        return torch.device("cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(
                f"device {device!r} asked for, but CUDA is not available on this machine (use --device cpu)"
            )
        return torch.device(device)
    raise InputError(f"device {device!r} unknown; allowed: cpu, cuda, cuda:N")


def build_model(
    name: str, device: str = "cpu", dtype: str = "float32", layers: int | None = None, seed: int = 0
) -> Any:
    """A random-weight ``LlamaForCausalLM`` with the shapes of `name` (eval mode, no grad).

    `layers` overrides the depth (CPU path: full width, fewer layers). Weights are drawn from the
    Hugging Face initializer with ``torch.manual_seed(seed)``.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    spec = get_spec(name)
    n_layers = spec.layers if layers is None else int(layers)
    if n_layers < 1:
        raise InputError(f"layers must be >= 1, got {layers}")
    dev = resolve_device(device)
    tdtype = resolve_dtype(dev.type, dtype)
    cfg = LlamaConfig(
        vocab_size=spec.vocab,
        hidden_size=spec.hidden,
        intermediate_size=spec.ffn,
        num_hidden_layers=n_layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.context,
        tie_word_embeddings=False,
        attention_bias=False,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )
    cfg._attn_implementation = "sdpa"
    from transformers.initialization import no_init_weights

    with dev, no_init_weights():
        model = LlamaForCausalLM._from_config(cfg, dtype=tdtype)
    fill_random_(model, seed)
    model.eval()
    model.requires_grad_(False)
    return model


def fill_random_(model: Any, seed: int = 0, scale: float = 0.0346) -> None:
    """Fill weights with seeded U(-scale, scale) values (sd 0.02, the Hugging Face default); norms to 1.

    To build multi-GB models quickly, one block of 2^20 random values is tiled over each matrix:
    timing of dense kernels does not depend on the values (they are finite, not denormal).
    """
    import torch

    params = list(model.parameters())
    gen = torch.Generator(device="cpu").manual_seed(seed)
    base_cpu = torch.empty(1 << 20, dtype=torch.float32).uniform_(-scale, scale, generator=gen)
    with torch.no_grad():
        cache: dict[Any, Any] = {}
        for p in params:
            if p.ndim == 1:
                p.fill_(1.0)
                continue
            key = (p.device, p.dtype)
            if key not in cache:
                cache[key] = base_cpu.to(device=p.device, dtype=p.dtype)
            base = cache[key]
            flat = p.view(-1)
            n, k = flat.numel(), base.numel()
            full = n // k
            if full:
                flat[: full * k].view(full, k).copy_(base.expand(full, k))
            rest = n - full * k
            if rest:
                flat[full * k :].copy_(base[:rest])
