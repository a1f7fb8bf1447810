"""The random-weight Llama-shaped model the validation engine serves (made locally, no download).

:func:`make_model` builds ``transformers.LlamaConfig(**shape)`` with weights drawn from the
library's own initialiser under ``torch.manual_seed(seed)`` and saves it with
``save_pretrained`` (safetensors) in the target folder, plus ``llmqueue-model.json`` holding the
shape, dtype and seed it was made from: a folder whose stamp matches is reused as it is.
Timing depends on the shapes only; the weights being random, the output tokens are meaningless,
which is why every request runs with ``ignore_eos`` and a fixed number of tokens.

Needs torch and transformers (the vLLM environment has both), imported lazily.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError

__all__ = [
    "STAMP", "DTYPES", "resolve_dtype", "model_stamp", "kv_bytes_per_token", "param_count",
    "make_model",
]  # fmt: skip

STAMP = "llmqueue-model.json"
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# the dtypes a config may name: one of DTYPE_BYTES or ``auto``
DTYPES = (*DTYPE_BYTES, "auto")


def resolve_dtype(dtype: str, bf16_instructions: bool | None = None) -> str:
    """The dtype the model is made and served in: `dtype` itself, or for ``auto`` bfloat16 where
    the CPU has bfloat16 matrix instructions (AVX-512 BF16 or AMX; `bf16_instructions`, read from
    /proc/cpuinfo when None, unknown counting as present) and float32 where it has not: torch's
    bfloat16 matrix products fall back to a path several times slower than float32 there."""
    if dtype not in DTYPES:
        raise InputError(f"model dtype must be one of {list(DTYPES)}, got {dtype!r}")
    if dtype != "auto":
        return dtype
    if bf16_instructions is None:
        from llmqueue.engines.environment import cpu_bf16

        bf16_instructions = cpu_bf16()
    return "float32" if bf16_instructions is False else "bfloat16"


def model_stamp(shape: Mapping[str, Any], dtype: str, seed: int) -> dict[str, Any]:
    return {"shape": dict(sorted(shape.items())), "dtype": dtype, "seed": int(seed)}


def _head_dim(shape: Mapping[str, Any]) -> int:
    return int(shape.get("head_dim") or shape["hidden_size"] // shape["num_attention_heads"])


def kv_bytes_per_token(shape: Mapping[str, Any], dtype: str) -> int:
    """Bytes of KV cache one token takes: 2 (K and V) x layers x KV heads x head dim x dtype
    (``auto`` resolved by :func:`resolve_dtype`)."""
    dtype = resolve_dtype(dtype)
    kv_heads = int(shape.get("num_key_value_heads") or shape["num_attention_heads"])
    return 2 * int(shape["num_hidden_layers"]) * kv_heads * _head_dim(shape) * DTYPE_BYTES[dtype]


def param_count(shape: Mapping[str, Any]) -> int:
    """Parameters of a Llama model of this shape (untied embeddings, no biases)."""
    h, inter, v = (
        int(shape["hidden_size"]),
        int(shape["intermediate_size"]),
        int(shape["vocab_size"]),
    )
    heads = int(shape["num_attention_heads"])
    kv = int(shape.get("num_key_value_heads") or heads)
    d = _head_dim(shape)
    attn = h * heads * d * 2 + h * kv * d * 2
    layer = attn + 3 * h * inter + 2 * h
    return int(shape["num_hidden_layers"]) * layer + 2 * v * h + h


def make_model(
    shape: Mapping[str, Any], dtype: str, seed: int, out_dir: str | Path, log: Any = print
) -> Path:
    """Create (or reuse, when its stamp matches) the model folder `out_dir` in `dtype` (``auto``
    resolved by :func:`resolve_dtype`); returns it."""
    out = Path(out_dir)
    dtype = resolve_dtype(dtype)
    stamp = model_stamp(shape, dtype, seed)
    if (out / STAMP).is_file() and json.loads((out / STAMP).read_text()) == stamp:
        log(f"model: {out} is up to date")
        return out
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    try:
        cfg = LlamaConfig(**dict(shape))
    except (TypeError, ValueError) as err:
        raise InputError(f"model shape {dict(shape)}: {err}") from None
    torch.manual_seed(int(seed))
    model = LlamaForCausalLM(cfg).to(getattr(torch, dtype))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        model.save_pretrained(tmp)
        (tmp / STAMP).write_text(json.dumps(stamp, indent=2, sort_keys=True) + "\n")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    n = sum(p.numel() for p in model.parameters())
    log(f"model: {n / 1e6:.1f} M parameters ({dtype}) -> {out}")
    return out
