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

The validation matrix (:mod:`llmqueue.engines.groups`) adds, per run (:func:`group_table`,
then :func:`run_table`): rows drawn from the held-out part of the trace only (``held_out``: those
after the learned predictor's training fraction), a fixed prompt length instead of the trace's
(the paper's Sec. III and IV laws have no prompt term), a token limit (``requested_tokens`` is the
scaled trace length n, ``output_tokens`` = min(n, l) what the engine is asked for, ``max_tokens``),
and the ``priority`` given to vLLM (0 for FCFS; the true output length for SJF; the learned
predictor's prediction for the request's trace row, in whole trace tokens, for SSJF; smaller is
served first, ties by arrival).

Pure functions: the random streams come in as ``numpy.random.Generator`` objects.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.policy import FCFS_ORDER, SJF_ORDER, SPJF_ORDER, QueueOrder
from llmqueue.traces import read_columns

__all__ = [
    "PRIORITY_ORDERS",
    "FCFS_PRIORITY",
    "TABLE_COLUMNS",
    "read_trace_lengths",
    "scale_lengths",
    "poisson_arrivals",
    "build_request_table",
    "prompt_token_ids",
    "table_prompts",
    "MATRIX_COLUMNS",
    "candidate_rows",
    "group_table",
    "run_table",
]

# The request priority of a validation run (vLLM's ``priority`` per request: smaller first) by
# name, as SSJF (arXiv 2404.08509) names its policies, and the engine's queue order it realises:
# ``fcfs`` (every priority 0), ``sjf`` (the true output length), ``ssjf`` (the learned predictor's
# predicted output length).
PRIORITY_ORDERS: dict[str, QueueOrder] = {
    FCFS_ORDER.name: FCFS_ORDER,
    SJF_ORDER.name: SJF_ORDER,
    "ssjf": SPJF_ORDER,
}
FCFS_PRIORITY = FCFS_ORDER.name

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


def table_prompts(
    table: pd.DataFrame, vocab_size: int, rng: np.random.Generator
) -> dict[str, list[int]]:
    """Per request of a table (``request_id``, ``prompt_tokens``), in table order, its random
    prompt token ids (:func:`prompt_token_ids`, drawn from `rng` one request after the other)."""
    return {
        str(r): prompt_token_ids(int(n), vocab_size, rng)
        for r, n in zip(table["request_id"], table["prompt_tokens"], strict=True)
    }


# the request table of a matrix run: TABLE_COLUMNS plus these
MATRIX_COLUMNS = [*TABLE_COLUMNS, "requested_tokens", "token_limit", "priority", "predicted_tokens"]


def candidate_rows(n_rows: int, rows: str, train_fraction: float) -> np.ndarray:
    """Indices of the trace rows requests may be drawn from: every row (``all``) or the rows
    after the learned predictor's training part (``held_out``, the same split as
    :func:`llmqueue.predictor.features.split_index`)."""
    if rows == "all":
        return np.arange(n_rows, dtype=np.int64)
    if rows != "held_out":
        raise InputError(f"rows must be all or held_out, got {rows!r}")
    from llmqueue.predictor.features import split_index

    return np.arange(split_index(n_rows, train_fraction), n_rows, dtype=np.int64)


def group_table(
    prompt: np.ndarray,
    output: np.ndarray,
    rows: np.ndarray,
    n: int,
    rate_per_s: float,
    scale: float,
    max_model_len: int,
    warmup: int,
    rng: np.random.Generator,
    run: str,
    prompt_tokens: int | None = None,
) -> pd.DataFrame:
    """A request table (:data:`TABLE_COLUMNS` and ``requested_tokens``) of `n` requests drawn from
    the trace rows `rows` (indices into `prompt`, `output`) with Poisson arrivals at `rate_per_s`;
    with `prompt_tokens` every prompt has that many tokens (the trace's prompt is kept in
    ``trace_prompt_tokens``)."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0 or rows.min() < 0 or rows.max() >= len(prompt):
        raise InputError("candidate trace rows must be non-empty indices into the trace")
    sub_p, sub_o = np.asarray(prompt)[rows], np.asarray(output)[rows]
    tab = build_request_table(sub_p, sub_o, n, rate_per_s, scale, max_model_len, warmup, rng, run)
    tab["trace_row"] = rows[tab["trace_row"].to_numpy()]
    if prompt_tokens is not None:
        if not (1 <= prompt_tokens < max_model_len):
            raise InputError(
                f"fixed prompt_tokens must be in [1, {max_model_len}), got {prompt_tokens}"
            )
        tab["prompt_tokens"] = np.minimum(
            int(prompt_tokens), max_model_len - tab["output_tokens"].to_numpy()
        ).astype(np.int64)
    tab["requested_tokens"] = tab["output_tokens"].to_numpy()
    return tab


def run_table(
    base: pd.DataFrame,
    run: str,
    token_limit: int | None = None,
    priority: str = FCFS_ORDER.name,
    predictions: np.ndarray | None = None,
) -> pd.DataFrame:
    """The table one run sends (:data:`MATRIX_COLUMNS`): `base` (:func:`group_table`, shared by
    the runs of one table key) with its request ids renamed to `run`, the output clipped to
    `token_limit`, and the vLLM priority of `priority` (``ssjf`` reads `predictions`: one predicted
    output length per trace row, trace tokens)."""
    tab = base.copy()
    width = max(4, len(str(len(tab) - 1)))
    tab["request_id"] = [f"{run}-{i:0{width}d}" for i in range(len(tab))]
    req = tab["requested_tokens"].to_numpy(dtype=np.int64)
    if token_limit is not None:
        if token_limit < 1:
            raise InputError(f"token_limit must be >= 1, got {token_limit}")
        tab["output_tokens"] = np.minimum(req, int(token_limit))
    tab["token_limit"] = -1 if token_limit is None else int(token_limit)
    pred = np.full(len(tab), np.nan)
    if predictions is not None:
        p = np.asarray(predictions, dtype=float)
        rows = tab["trace_row"].to_numpy()
        if rows.max() >= p.size:
            raise InputError(
                f"predictions hold {p.size} trace rows; the table draws row {int(rows.max())}"
            )
        pred = p[rows]
        if not np.all(np.isfinite(pred)):
            raise InputError("predictions: a drawn trace row has no finite prediction")
    tab["predicted_tokens"] = pred
    order = PRIORITY_ORDERS.get(priority)
    if order is None:
        raise InputError(f"priority must be one of {', '.join(PRIORITY_ORDERS)}, got {priority!r}")
    if order.key == "arrival":
        prio = np.zeros(len(tab), dtype=np.int64)
    elif order.key == "size":
        prio = tab["output_tokens"].to_numpy(dtype=np.int64)
    else:
        if predictions is None:
            raise InputError(
                f"run {run}: priority {priority} needs the learned predictor's predictions"
            )
        prio = np.rint(pred).astype(np.int64)
    tab["priority"] = prio
    return tab[MATRIX_COLUMNS]
