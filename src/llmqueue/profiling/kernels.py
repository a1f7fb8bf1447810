"""Kernel-profile source: a forward pass built from per-operator GPU kernel times measured by
others (vidur's ``mlp.csv``, data/profiling/vidur-<gpu>/), never by this project.

What is measured and what is predicted (per forward pass of a Llama-style model):

- **linear part, measured**: t_linear(n) = layers x (sum of one block's operator medians) + the
  embedding's median, at n token rows (the CSV's ``num_tokens``, 1 to 4096). The block's operators
  are :data:`BLOCK_OPS` (norms, QKV projection, rotary, output projection, gated MLP, residual add;
  the add counted once per block, as vidur's own ``ExecutionTime`` sums it). Medians are in ms in
  the CSV, seconds here. Between token counts t_linear is interpolated linearly in n; above the
  largest count (4096) it is scaled by n / 4096 (compute-bound GEMMs, marked ``extrapolated``).
  Kernel medians are not monotone in n (at 1 to 8 tokens the four sums spread by 3.5%); the
  source takes their isotonic least-squares fit (pool adjacent violators), so t_linear never
  falls when n grows, and records the largest change it made.
- **attention and LM head, predicted** by the roofline of the named GPU spec
  (:class:`~llmqueue.hardware.roofline.Roofline`): a decode step reads each sequence's KV cache
  (0.5 MiB per token of context for LLaMA-2-7B in fp16), a prefill runs causal attention over the
  prompt; the LM head reads its vocab x hidden weights once per pass.
- **not counted**: sampling, the final norm, and framework overhead between kernels (Python,
  launch gaps): the source is a lower bound on an eager server, with kernels measured instead of
  predicted.

So for one model and GPU:
  t1(b, s) = t_linear(b s) + attention_prefill(b, s) + lm_head(b)     (prefill of b prompts)
  t2(b, c) = t_linear(b) + attention_decode(b, c) + lm_head(b)       (one decode step)
and the serving step law is fitted to these on the step-law grid (:mod:`llmqueue.profiling.fits`).
Only pandas/numpy are needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.hardware.models import ModelSpec, get_spec
from llmqueue.hardware.roofline import Roofline, roofline

__all__ = [
    "BLOCK_OPS",
    "EMBED_OP",
    "SHAPE_COLUMNS",
    "KernelProfile",
    "read_kernel_csv",
    "linear_part",
    "isotonic",
    "load_kernel_profile",
]

BLOCK_OPS = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
EMBED_OP = "emb"
# CSV column -> ModelSpec attribute that must agree
SHAPE_COLUMNS = {
    "n_head": "heads",
    "n_kv_head": "kv_heads",
    "n_embd": "hidden",
    "n_expanded_embd": "ffn",
}


def _median_col(op: str) -> str:
    return f"time_stats.{op}.median"


def read_kernel_csv(path: str | Path, model: str, tensor_parallel: int = 1) -> pd.DataFrame:
    """The rows of a vidur ``mlp.csv`` at `tensor_parallel`, checked against `model`'s shapes.

    Raises InputError naming the file when it is missing or unreadable, lacks a needed column,
    has non-numeric or negative medians, holds no row at that tensor-parallel degree, or profiles
    a model whose shapes (heads, KV heads, hidden, FFN, gated MLP) are not `model`'s.
    """
    path = Path(path)
    spec = get_spec(model)
    if not path.is_file():
        raise InputError(f"kernel profile {str(path)!r} does not exist")
    try:
        df = pd.read_csv(path)
    except Exception as err:  # noqa: BLE001  (pandas raises several kinds)
        raise InputError(f"kernel profile {str(path)!r} is not a readable CSV: {err}") from None
    times = [_median_col(op) for op in (*BLOCK_OPS, EMBED_OP)]
    needed = [*times, "num_tokens", "num_tensor_parallel_workers", *SHAPE_COLUMNS, "use_gated_mlp"]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise InputError(
            f"kernel profile {str(path)!r} lacks columns {missing} (a vidur mlp.csv has "
            "time_stats.<op>.median for the block's operators and the embedding, num_tokens, "
            "num_tensor_parallel_workers and the shape columns)"
        )
    rows = df[df["num_tensor_parallel_workers"] == tensor_parallel]
    if rows.empty:
        have = sorted(int(x) for x in df["num_tensor_parallel_workers"].unique())
        raise InputError(
            f"kernel profile {str(path)!r} has no rows at tensor-parallel degree {tensor_parallel} "
            f"(has {have})"
        )
    for col, attr in SHAPE_COLUMNS.items():
        vals = sorted({int(v) for v in rows[col]})
        if vals != [int(getattr(spec, attr))]:
            raise InputError(
                f"kernel profile {str(path)!r} is for another model: {col} = {vals}, but {model} has "
                f"{attr} = {getattr(spec, attr)} ({spec.note})"
            )
    gated = {str(v).strip().lower() for v in rows["use_gated_mlp"]}
    if gated != {"true"}:
        raise InputError(
            f"kernel profile {str(path)!r}: use_gated_mlp = {sorted(gated)}, but {model} has a gated (SwiGLU) MLP"
        )
    for c in [*times, "num_tokens"]:
        v = pd.to_numeric(rows[c], errors="coerce")
        if v.isna().any() or (v < 0).any():
            raise InputError(
                f"kernel profile {str(path)!r}: column {c!r} has missing, non-numeric or negative values"
            )
    if (rows["num_tokens"] < 1).any():
        raise InputError(f"kernel profile {str(path)!r}: num_tokens must be >= 1")
    return rows.reset_index(drop=True)


def isotonic(y: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    """Non-decreasing least-squares fit of `y` (weights `w`) by pool adjacent violators."""
    y = np.asarray(y, dtype=float)
    w = np.ones_like(y) if w is None else np.asarray(w, dtype=float)
    vals: list[float] = []
    wts: list[float] = []
    counts: list[int] = []
    for yi, wi in zip(y, w, strict=True):
        vals.append(float(yi))
        wts.append(float(wi))
        counts.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v2, w2, c2 = vals.pop(), wts.pop(), counts.pop()
            v1, w1, c1 = vals.pop(), wts.pop(), counts.pop()
            vals.append((v1 * w1 + v2 * w2) / (w1 + w2))
            wts.append(w1 + w2)
            counts.append(c1 + c2)
    return np.repeat(vals, counts)


def linear_part(rows: pd.DataFrame, layers: int) -> pd.DataFrame:
    """Per token count: ``raw_s`` = layers x (sum of the block's operator medians) + embedding
    median (s), averaged over duplicate rows; ``linear_s`` its isotonic fit (weights = rows)."""
    block_ms = sum(rows[_median_col(op)].astype(float) for op in BLOCK_OPS)
    total_ms = layers * block_ms + rows[_median_col(EMBED_OP)].astype(float)
    g = (
        pd.DataFrame({"tokens": rows["num_tokens"].astype(int), "raw_s": total_ms / 1e3})
        .groupby("tokens", as_index=False)
        .agg(raw_s=("raw_s", "mean"), rows=("raw_s", "size"))
        .sort_values("tokens", ignore_index=True)
    )
    g["linear_s"] = isotonic(g["raw_s"].to_numpy(), g["rows"].to_numpy())
    return g


@dataclass(frozen=True, eq=False)
class KernelProfile:
    """t1, t2 and request times from measured linear-layer kernels plus roofline attention/LM head.

    `name`: the source name (e.g. ``vidur-a100``); `roof`: the roofline of the matching GPU spec,
    used for attention and the LM head only; `table`: :func:`linear_part`'s frame.
    """

    name: str
    model: ModelSpec
    roof: Roofline
    table: pd.DataFrame
    tensor_parallel: int = 1

    @property
    def max_tokens(self) -> int:
        return int(self.table["tokens"].max())

    def linear_time(self, tokens: Any) -> Any:
        """Measured linear part (s) of a pass over `tokens` token rows (>= 1): interpolated in
        tokens, scaled proportionally above the largest profiled count."""
        n = np.asarray(tokens, dtype=float)
        if np.any(n < 1) or not np.all(np.isfinite(n)):
            raise InputError(f"{self.name}: a forward pass needs >= 1 token, got {tokens}")
        x = self.table["tokens"].to_numpy(float)
        y = self.table["linear_s"].to_numpy(float)
        out = np.where(n <= x[-1], np.interp(n, x, y), y[-1] * n / x[-1])
        return float(out) if out.ndim == 0 else out

    def decode_time(self, batch: float, context: float) -> float:
        """t2: one decode step of `batch` sequences with `context` cached tokens each (s)."""
        return (
            float(self.linear_time(batch))
            + self.roof.attention_decode_time(batch, context)
            + self.roof.lm_head_time(batch)
        )

    def prefill_time(self, batch: float, input_tokens: float) -> float:
        """t1: prefill of `batch` prompts of `input_tokens` and the first token (s)."""
        return (
            float(self.linear_time(float(batch) * float(input_tokens)))
            + self.roof.attention_prefill_time(batch, input_tokens)
            + self.roof.lm_head_time(batch)
        )

    def request_time(self, input_tokens: int, output_tokens: int, batch: int = 1) -> float:
        """End-to-end time of a batch generating `output_tokens` each: t1 + the n - 1 decode steps
        at growing context (as :meth:`Roofline.request_time`)."""
        if output_tokens < 1:
            raise InputError("output_tokens must be >= 1")
        steps = sum(
            self.decode_time(batch, float(input_tokens + i)) for i in range(1, output_tokens)
        )
        return self.prefill_time(batch, input_tokens) + float(steps)

    def parts(self) -> dict[str, Any]:
        """Which part of a pass is measured and which predicted (for fit.json)."""
        raw, fit = self.table["raw_s"].to_numpy(float), self.table["linear_s"].to_numpy(float)
        return {
            "linear_layers": (
                f"measured by others (kernel medians, {self.model.layers} blocks x "
                f"{' + '.join(BLOCK_OPS)}, + {EMBED_OP}; tensor parallel {self.tensor_parallel}), "
                f"interpolated in tokens over {int(self.table['tokens'].min())}..{self.max_tokens}, "
                f"scaled by n / {self.max_tokens} above"
            ),
            "attention": f"roofline-predicted {self.roof.gpu.label}: KV-cache read per decode step, causal attention per prompt",
            "lm_head": f"roofline-predicted {self.roof.gpu.label}: vocab x hidden weights read once per pass",
            "not_counted": "sampling, final norm, framework overhead between kernels (Python, launch gaps)",
            "monotone_fit": (
                "isotonic least squares (pool adjacent violators) of the per-token-count sums; "
                f"largest change {float(np.max(np.abs(fit / raw - 1))):.2%} of a raw sum"
            ),
        }


def load_kernel_profile(
    name: str, cfg: Mapping[str, Any], profiling: Mapping[str, Any], base_dir: str | Path = "."
) -> KernelProfile:
    """The :class:`KernelProfile` of config ``profiling.kernel_profiles.<name>``:
    ``{csv, model, gpu, tensor_parallel}``; attention and LM head use ``profiling.roofline``'s
    dtype and efficiencies on the ``gpu`` spec."""
    model = str(cfg["model"])
    tp = int(cfg.get("tensor_parallel", 1))
    rows = read_kernel_csv(Path(base_dir) / str(cfg["csv"]), model, tp)
    spec = get_spec(model)
    rp = profiling["roofline"]
    r = roofline(
        model, str(cfg["gpu"]), rp["dtype"], rp["bandwidth_efficiency"], rp["flops_efficiency"]
    )
    return KernelProfile(name, spec, r, linear_part(rows, spec.layers), tp)
