"""Request tables for the vLLM validation runs: Poisson arrivals, trace lengths scaled to the model.

A request table has one row per request, in arrival order:

- ``request_id``: ``<run>-<index>`` (index from 0, zero-padded);
- ``planned_s``: its Poisson arrival time (s from the run start; i.i.d. exponential gaps of mean
  1/rate);
- ``prompt_tokens``, ``output_tokens``: lengths drawn i.i.d. (with replacement) from the Azure
  conversation trace and multiplied by one ``scale`` for both (the shape of the joint law is
  kept; only its unit shrinks so the requests fit a small model's context and a 2-core CPU),
  rounded, at least 1 token each, and clipped so that prompt + output <= ``max_model_len``
  (the prompt is shortened, the output kept: the output length is what the queue serves);
- ``warmup``: the first ``warmup`` requests, sent like the others but left out of the statistics
  (they bring the queue from empty to its load);
- ``trace_row``, ``trace_prompt_tokens``, ``trace_output_tokens``: the trace row drawn and its
  unscaled lengths (provenance).

Pure functions: the random streams come in as ``numpy.random.Generator`` objects.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.traces import read_columns

__all__ = [
    "TABLE_COLUMNS",
    "read_trace_lengths",
    "scale_lengths",
    "poisson_arrivals",
    "build_request_table",
    "prompt_token_ids",
]

TABLE_COLUMNS = [
    "request_id",
    "planned_s",
    "prompt_tokens",
    "output_tokens",
    "warmup",
    "trace_row",
    "trace_prompt_tokens",
    "trace_output_tokens",
]


def read_trace_lengths(
    path: str | Path, input_column: str, output_column: str
) -> tuple[np.ndarray, np.ndarray]:
    """Prompt and output token counts (int arrays) of a trace CSV, read by
    :func:`llmqueue.traces.read_columns` (InputError naming the file and column); both >= 1."""
    cols = read_columns(path, [input_column, output_column], where="trace file")
    prompt, output = cols[input_column], cols[output_column]
    if prompt.size == 0:
        raise InputError(f"trace file {str(path)!r}: no rows")
    if np.any(prompt < 1) or np.any(output < 1):
        raise InputError(f"trace file {str(path)!r}: token counts must be >= 1")
    return prompt.astype(np.int64), output.astype(np.int64)


def scale_lengths(
    prompt: np.ndarray, output: np.ndarray, scale: float, max_model_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths times `scale`, rounded, >= 1, clipped so prompt + output <= `max_model_len`.

    The output keeps its scaled length up to ``max_model_len - 1``; the prompt takes what is left.
    """
    if not (0 < scale <= 1):
        raise InputError(f"trace scale must be in (0, 1], got {scale}")
    if max_model_len < 2:
        raise InputError(f"max_model_len must be >= 2, got {max_model_len}")
    out = np.clip(np.rint(np.asarray(output, dtype=float) * scale), 1, max_model_len - 1)
    pr = np.clip(np.rint(np.asarray(prompt, dtype=float) * scale), 1, None)
    pr = np.minimum(pr, max_model_len - out)
    return pr.astype(np.int64), out.astype(np.int64)


def poisson_arrivals(rate_per_s: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """`n` arrival times (s) of a Poisson process of rate `rate_per_s`, the first one gap after 0."""
    if not (np.isfinite(rate_per_s) and rate_per_s > 0):
        raise InputError(f"arrival rate must be > 0 requests/s, got {rate_per_s}")
    if n < 1:
        raise InputError(f"a run needs >= 1 request, got {n}")
    return np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))


def build_request_table(
    prompt: np.ndarray,
    output: np.ndarray,
    n: int,
    rate_per_s: float,
    scale: float,
    max_model_len: int,
    warmup: int,
    rng: np.random.Generator,
    run: str,
) -> pd.DataFrame:
    """A request table (columns :data:`TABLE_COLUMNS`) of `n` requests, the first `warmup` of
    them flagged ``warmup``; lengths drawn from the trace arrays `prompt`, `output`."""
    if not (0 <= warmup < n):
        raise InputError(f"warm-up requests must be in [0, {n}), got {warmup}")
    if len(prompt) != len(output) or len(prompt) == 0:
        raise InputError("trace prompt and output arrays must be non-empty and of equal length")
    rows = rng.integers(0, len(prompt), size=n)
    planned = poisson_arrivals(rate_per_s, n, rng)
    p, o = scale_lengths(prompt[rows], output[rows], scale, max_model_len)
    width = max(4, len(str(n - 1)))
    return pd.DataFrame(
        {
            "request_id": [f"{run}-{i:0{width}d}" for i in range(n)],
            "planned_s": planned,
            "prompt_tokens": p,
            "output_tokens": o,
            "warmup": np.arange(n) < warmup,
            "trace_row": rows.astype(np.int64),
            "trace_prompt_tokens": np.asarray(prompt)[rows].astype(np.int64),
            "trace_output_tokens": np.asarray(output)[rows].astype(np.int64),
        },
        columns=TABLE_COLUMNS,
    )


def prompt_token_ids(
    n: int, vocab_size: int, rng: np.random.Generator, first_id: int = 3
) -> list[int]:
    """`n` random token ids in [first_id, vocab_size) (ids below `first_id` are the special
    tokens of a Llama vocabulary: unk, bos, eos). Random prompts share no prefix, so no prefix
    cache could serve them even if it were on."""
    if n < 1:
        raise InputError(f"a prompt needs >= 1 token, got {n}")
    if vocab_size <= first_id:
        raise InputError(f"vocab_size must exceed {first_id}, got {vocab_size}")
    return [int(x) for x in rng.integers(first_id, vocab_size, size=n)]
