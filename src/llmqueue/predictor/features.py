"""The features of the learned output-length predictor: what a server knows when a request
arrives.

SSJF (Qiu et al., arXiv 2404.08509) predicts a request's output length with a BERT proxy model
reading the prompt. Our traces carry no prompt text, so the model reads what a serving trace
does carry, all of it known when the request arrives (:func:`trace_features`):

- ``log_prompt_tokens``: log(1 + prompt tokens);
- ``time_of_day_s``: seconds since midnight of the arrival timestamp (a numeric timestamp in
  seconds is taken modulo 86400);
- ``recent_log_output_M`` for each M of ``FeatureSpec.history``: the mean of log(1 + output
  tokens) over the M requests whose outputs became known most recently *before this arrival*
  (NaN while none is known). An output is known when its request finished: at its finish time
  when the trace has one (``finish_s``), else ``known_after_s`` seconds after its arrival (a
  stated assumption: every request completes within that time; the trace's own timeline). The
  request's own output, and every output known after its arrival, are never read.

The rows come from :mod:`llmqueue.traces` (:class:`~llmqueue.traces.TraceRows`); the first
``train_fraction`` of them (arrival order) train a model, the rest are held out
(:func:`split_index`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from llmqueue.errors import InputError
from llmqueue.traces import TraceColumns, TraceRows, read_trace

__all__ = [
    "FeatureSpec",
    "split_index",
    "HeldOutTrace",
    "read_heldout",
    "known_history",
    "trace_features",
]


@dataclass(frozen=True)
class FeatureSpec:
    """Which features: history lengths M (requests) and when an output becomes known (s)."""

    history: tuple[int, ...] = (16, 64, 256)
    known_after_s: float = 60.0

    def __post_init__(self) -> None:
        h = tuple(self.history)
        if not h or any(not (isinstance(m, int) and m >= 1) for m in h):
            raise InputError(f"features.history: integers >= 1 (requests), got {list(h)}")
        if not (math.isfinite(self.known_after_s) and self.known_after_s > 0):
            raise InputError(
                f"features.known_after_s must be a time > 0 s (an output is never known at its "
                f"own arrival), got {self.known_after_s}"
            )
        object.__setattr__(self, "history", h)

    @property
    def names(self) -> list[str]:
        return ["log_prompt_tokens", "time_of_day_s"] + [
            f"recent_log_output_{m}" for m in self.history
        ]


def split_index(n: int, train_fraction: float) -> int:
    """Rows 0..k-1 train, k..n-1 test (arrival order); at least 2 rows each side."""
    if not (0.0 < train_fraction < 1.0):
        raise InputError(f"train_fraction must be in (0, 1), got {train_fraction}")
    k = int(round(n * train_fraction))
    if k < 2 or n - k < 2:
        raise InputError(
            f"train_fraction {train_fraction} of {n} rows leaves fewer than 2 rows to train or test"
        )
    return k


@dataclass(frozen=True)
class HeldOutTrace:
    """A trace (arrival order) and where its held-out part starts (:func:`split_index`): the rows
    before `split` train a predictor, every simulation draws from the rows from it on."""

    rows: TraceRows
    split: int

    @property
    def test(self) -> TraceRows:
        """The held-out rows every simulation draws from."""
        return self.rows.take(self.split)


def read_heldout(
    path: str, columns: Mapping[str, str], train_fraction: float, *, where: str
) -> HeldOutTrace:
    """The trace at `path` (its columns by role, :meth:`TraceColumns.from_mapping`), split at
    `train_fraction` of its rows; errors name `where` (the config key of the path)."""
    rows = read_trace(path, TraceColumns.from_mapping(columns), where=where)
    return HeldOutTrace(rows, split_index(rows.n, train_fraction))


def known_history(rows: TraceRows, spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:
    """(order, count): `order` sorts the rows by the time their output became known; row i may
    read the outputs of rows order[count[i] - M : count[i]] (the M known most recently before
    its arrival), and of no other row."""
    known = rows.finish_s if rows.finish_s is not None else rows.arrival_s + spec.known_after_s
    order = np.argsort(known, kind="stable")
    count = np.searchsorted(known[order], rows.arrival_s, side="right")
    return order, count


def trace_features(rows: TraceRows, spec: FeatureSpec) -> np.ndarray:
    """The feature matrix (rows x len(spec.names)) of the module docstring."""
    order, count = known_history(rows, spec)
    lo = np.log1p(rows.output_tokens)[order]
    cs = np.concatenate([[0.0], np.cumsum(lo)])
    cols = [np.log1p(rows.prompt_tokens), rows.time_of_day_s]
    for m in spec.history:
        j0 = np.maximum(count - m, 0)
        cnt = count - j0
        with np.errstate(invalid="ignore", divide="ignore"):
            cols.append(np.where(cnt > 0, (cs[count] - cs[j0]) / cnt, np.nan))
    return np.column_stack(cols)
