"""Time laws of the serving engine (compiled part): how long a batch or an iteration takes.

Static batches (``none``, ``dynamic``, ``fixed``, ``elastic``; :func:`batch_time`):

- ``EQ18`` (0): padded batching, Eq. (18): T_b = k1*b + k2 + (k3*b + k4)*max_i n_i; every member
  replies at T_b; elastic batching, Eq. (26): members leave as they finish, member i (i-th
  shortest) at t1(b) + sum_{j<=i} t2(b - j + 1)*(n_(j) - n_(j-1)), the batch ends with the last;
- ``TABLE`` (1): a fixed time per batch size, T_b = table[b] (the fixed-T approximation of
  Eq. 25, T = E[T_b]).

The first token of every member comes at t1(b) = k1*b + k2 (``EQ18``; unknown, NaN, for
``TABLE``). N counts the tokens after the first (the paper's convention: no "- 1").

Iterations of continuous batching (:func:`step_time`, :func:`decode_run_time`): the step law
c0 + c_tok*(decode_seqs + prefill_tokens) + c_ctx*context_tokens (:class:`llmqueue.latency.StepLaw`);
m decode-only iterations of B sequences starting at total context C take
m*(c0 + c_tok*B + c_ctx*C) + c_ctx*B*m*(m - 1)/2 (the context grows by B per iteration).

A shaped step law (:class:`llmqueue.latency.ShapedStepLaw`) replaces c0 + c_tok*B by g(B), read
from a dense table up to its last knot (linear beyond it with slope c_tok) and prices prefill
tokens at c_pre: the coefficient array (:func:`step_coefficients`) is then
``(c0, c_tok, c_ctx, SHAPED, c_pre, m, g(0), ..., g(m - 1))``; the linear law's is
``(c0, c_tok, c_ctx)``, computed exactly as before.

A split step law (:class:`llmqueue.latency.SplitStepLaw`) is a shaped one with flag ``SPLIT`` and
two more numbers after the table, ``(c0, c_tok, c_ctx, SPLIT, c_pre, m, g(0), ..., g(m - 1),
c_ctx_pre, c_attn)``: decode-only iterations (and so :func:`decode_run_time`) as the shaped law,
an iteration with prefill tokens at g(0) + c_pre*(decode_seqs + prefill_tokens) +
c_ctx_pre*context_tokens + c_attn*prefill_tokens*context_tokens.

A packed step law (:class:`llmqueue.latency.PackedStepLaw`: attention over the whole step packed
as one sequence) is ``(c0, c_tok, c_ctx, PACKED, c_qk)``: every iteration
c0 + c_tok*(decode_seqs + prefill_tokens) + c_ctx*context_tokens
+ c_qk*(decode_seqs + prefill_tokens)*context_tokens, so a run of decode-only iterations of B
sequences is the linear law's with the context priced at c_ctx + c_qk*B (:func:`context_price`).

A staircase step law (:class:`llmqueue.latency.StaircaseStepLaw`, Dai, Li and Peng) is
``(c0, c_tok, c_ctx, STAIR, stair, k)``: every iteration c0 + stair*ceil((decode_seqs +
prefill_tokens) / k) + c_ctx*context_tokens; its decode part (:func:`decode_part`) is
c0 + stair*ceil(B / k), so a decode-only run is the linear law's with that fixed part.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.latency import (
    BatchLatency,
    LinearLatency,
    PackedStepLaw,
    ShapedStepLaw,
    SplitStepLaw,
    StaircaseStepLaw,
    StepLaw,
)
from llmqueue.policy import Policy

__all__ = [
    "EQ18",
    "TABLE",
    "SHAPED",
    "SPLIT",
    "PACKED",
    "STAIR",
    "StaticLaw",
    "static_law",
    "static_settings",
    "step_coefficients",
    "batch_time",
    "decode_part",
    "context_price",
    "step_time",
    "decode_run_time",
    "iterations_until",
]

EQ18, TABLE = 0, 1
SHAPED = 1.0  # c[3] of a shaped step law's coefficient array
SPLIT = 2.0  # c[3] of a split step law's (a shaped one that prices prefill iterations apart)
PACKED = 3.0  # c[3] of a packed step law's (attention over the step's tokens x its context)
STAIR = 4.0  # c[3] of a staircase step law's (c0 + stair x ceil(tokens / stair_tokens))


@dataclass(frozen=True)
class StaticLaw:
    """What a static former's kernel reads of its time law: ``kind`` (:data:`EQ18` or
    :data:`TABLE`), the Eq. (18) coefficients ``kcoef`` (k1, k2, k3, k4) and the fixed-T
    ``table`` (T_b = table[b]; a placeholder for Eq. 18)."""

    kind: int
    kcoef: np.ndarray
    table: np.ndarray

    @property
    def args(self) -> tuple[int, np.ndarray, np.ndarray]:
        """(kind, kcoef, table): the law as the static loops take it."""
        return self.kind, self.kcoef, self.table


def static_law(latency: BatchLatency | LinearLatency) -> np.ndarray:
    """Eq. (18) coefficients (k1, k2, k3, k4) of a batch law; a single-request law S = a*N + b0
    is the batch law of one request: (0, b0, 0, a)."""
    if isinstance(latency, BatchLatency):
        return np.array([latency.k1, latency.k2, latency.k3, latency.k4], dtype=float)
    return np.array([0.0, latency.b0_s, 0.0, latency.a_s_per_token], dtype=float)


def static_settings(policy: Policy, latency: Any, batch_time_table: np.ndarray | None) -> StaticLaw:
    """The :class:`StaticLaw` of a static former (``none``, ``dynamic``, ``fixed``, ``elastic``,
    ``multibin``): an Eq. (18) batch law or a single-request law, or the fixed-T table of a
    padded batch; InputError for any other law."""
    if not isinstance(latency, (BatchLatency, LinearLatency)):
        raise InputError(
            f"batching {policy.kind} needs a batch law (Eq. 18: llmqueue.latency.BatchLatency) or "
            f"a single-request law (LinearLatency), got {type(latency).__name__}"
        )
    if batch_time_table is None:
        return StaticLaw(EQ18, static_law(latency), np.zeros(1))
    if policy.elastic:
        raise InputError("fixed-T mode applies to padded batches (dynamic, fixed), not elastic")
    return StaticLaw(TABLE, static_law(latency), np.asarray(batch_time_table, dtype=float))


def step_coefficients(latency: Any, batch_time_table: np.ndarray | None) -> np.ndarray:
    """(c0, c_tok, c_ctx) of the step law that prices continuous batching's iterations;
    InputError for any other law or a batch-time table."""
    if not isinstance(latency, StepLaw):
        raise InputError(
            "continuous batching needs a step law (llmqueue.latency.StepLaw: c0, c_tok, c_ctx), "
            f"got {type(latency).__name__}"
        )
    if batch_time_table is not None:
        raise InputError("a fixed batch-time table applies to static batches only")
    head = np.array([latency.c0_s, latency.c_tok_s, latency.c_ctx_s], dtype=float)
    if isinstance(latency, PackedStepLaw):
        return np.concatenate([head, [PACKED, latency.c_qk_s]])
    if isinstance(latency, StaircaseStepLaw):
        return np.concatenate([head, [STAIR, latency.stair_s, float(latency.stair_tokens)]])
    if isinstance(latency, SplitStepLaw):
        g = latency.table()
        tail = [latency.c_ctx_pre_s, latency.c_attn_s]
        return np.concatenate([head, [SPLIT, latency.c_pre_s, float(g.size)], g, tail])
    if isinstance(latency, ShapedStepLaw):
        g = latency.table()
        return np.concatenate([head, [SHAPED, latency.c_pre_s, float(g.size)], g])
    return head


@njit(cache=True, nogil=True, inline="always")
def batch_time(kind, k, table, lengths, b, elastic, comp, idx):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Duration of a static batch of b members with output lengths lengths[:b] (tokens); writes
    each member's reply time after the batch start into comp[:b]; returns (T_b, t1(b))."""
    if kind == 1:
        d = table[b] if b < table.size else np.nan
        for i in range(b):
            comp[i] = d
        return d, np.nan
    t1 = k[0] * b + k[1]
    if not elastic:
        mx = 0.0
        for i in range(b):
            if lengths[i] > mx:
                mx = lengths[i]
        d = t1 + (k[2] * b + k[3]) * mx
        for i in range(b):
            comp[i] = d
        return d, t1
    # Eq. (26): sort members by length (insertion sort on an index buffer; b is small)
    for i in range(b):
        idx[i] = i
    for i in range(1, b):
        j = i
        v = idx[i]
        while j > 0 and lengths[idx[j - 1]] > lengths[v]:
            idx[j] = idx[j - 1]
            j -= 1
        idx[j] = v
    t = t1
    prev = 0.0
    for j in range(b):
        n = lengths[idx[j]]
        t += (k[2] * (b - j) + k[3]) * (n - prev)
        prev = n
        comp[idx[j]] = t
    return t, t1


@njit(cache=True, nogil=True, inline="always")
def decode_part(c, b):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The fixed and per-sequence part of an iteration decoding b sequences (s): c0 + c_tok*b,
    a shaped (or split) law's g(b) (its table, then slope c_tok beyond it), or a staircase's
    c0 + stair*ceil(b / k)."""
    if c.size > 3 and c[3] == 4.0:
        return c[0] + c[4] * math.ceil(b / c[5])
    if c.size > 3 and (c[3] == 1.0 or c[3] == 2.0):
        m = np.int64(c[5])
        bi = np.int64(b)
        if bi < m:
            return c[6 + bi]
        return c[5 + m] + c[1] * (b - (m - 1.0))
    return c[0] + c[1] * b


@njit(cache=True, nogil=True, inline="always")
def step_time(c, decode_seqs, prefill_tokens, context_tokens):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """One iteration (s): c = (c0, c_tok, c_ctx), or a shaped or split law's array (module
    docstring)."""
    if c.size > 3 and c[3] == 3.0:
        n = decode_seqs + prefill_tokens
        return c[0] + c[1] * n + c[2] * context_tokens + c[4] * n * context_tokens
    if c.size > 3 and c[3] == 4.0:
        return (
            c[0] + c[4] * math.ceil((decode_seqs + prefill_tokens) / c[5]) + c[2] * context_tokens
        )
    if c.size > 3 and c[3] == 2.0 and prefill_tokens > 0.0:
        m = np.int64(c[5])
        return (
            c[0]
            + c[4] * (decode_seqs + prefill_tokens)
            + c[6 + m] * context_tokens
            + c[7 + m] * prefill_tokens * context_tokens
        )
    if c.size > 3 and (c[3] == 1.0 or c[3] == 2.0):
        return decode_part(c, decode_seqs) + c[4] * prefill_tokens + c[2] * context_tokens
    return c[0] + c[1] * (decode_seqs + prefill_tokens) + c[2] * context_tokens


@njit(cache=True, nogil=True, inline="always")
def context_price(c, b):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """The price (s) of one context token in a decode-only iteration of b sequences: c_ctx, or a
    packed law's c_ctx + c_qk*b."""
    if c.size > 3 and c[3] == 3.0:
        return c[2] + c[4] * b
    return c[2]


@njit(cache=True, nogil=True, inline="always")
def decode_run_time(c, b, ctx, m):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Total time (s) of m decode-only iterations of b sequences starting at total context ctx."""
    cp = context_price(c, b)
    return m * (decode_part(c, b) + cp * ctx) + cp * b * (m * (m - 1.0) * 0.5)


@njit(cache=True, nogil=True, inline="always")
def iterations_until(c, b, ctx, span, m_max):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Fewest m >= 1 decode-only iterations (b sequences, context ctx) whose total time reaches
    `span` seconds, at most m_max (returned when even m_max iterations end before `span`)."""
    if span <= 0.0:
        return 1
    if decode_run_time(c, b, ctx, m_max) < span:
        return m_max
    cp = context_price(c, b)
    a = cp * b * 0.5
    lin = decode_part(c, b) + cp * ctx - a
    if a > 0.0:
        m = (-lin + math.sqrt(lin * lin + 4.0 * a * span)) / (2.0 * a)
    else:
        m = span / lin
    mi = max(1, int(math.ceil(m)) - 1)
    while mi > 1 and decode_run_time(c, b, ctx, mi - 1) >= span:
        mi -= 1
    while decode_run_time(c, b, ctx, mi) < span:
        mi += 1
    return min(mi, m_max)
