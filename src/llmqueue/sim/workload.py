"""Workloads of the serving engine: request tables generated chunk by chunk.

A workload yields :class:`RequestChunk` s (arrival time, prompt tokens, output tokens, predicted
output tokens; arrays in arrival order), so a run of 10^8 requests needs O(chunk) memory. Three
sources:

- :class:`PoissonWorkload`: Poisson arrivals at ``rate_per_s``; output (and optionally prompt)
  tokens drawn independently from token laws (:mod:`llmqueue.tokens`);
- :class:`TraceWorkload`: Poisson arrivals at ``rate_per_s``; (prompt, output) drawn jointly from
  a trace's rows (uniformly, with replacement), e.g. the Azure trace's ``ContextTokens`` and
  ``GeneratedTokens``;
- :class:`ReplayWorkload`: a trace's own rows in order at its own timestamps, optionally scaled in
  time (``time_scale`` < 1 compresses: a higher rate).

Predictions come from the workload's predictor (:mod:`llmqueue.sim.predictors`), which sees the
true output length only to add its own error; a predictor with class edges at the length law's
quantiles (``buckets:k=K``) gets them from the workload (the law's ppf, or the trace's outputs).
A learned predictor (``learned:PATH``, :mod:`llmqueue.predictor`) needs trace rows: the two
trace workloads compute one prediction per row from the row's features (``row_pred``; the
Poisson workload refuses it) and every request drawn from a row carries that row's prediction.
Random numbers: two 64-bit PCG64 words per request
(:mod:`llmqueue.sim.rng`): word 0 gives the interarrival gap (low 32 bits) and the output or the
row (high 32 bits), word 1 the prompt (low) and the predictor's noise (high). Same seed, same
chunk size: the same table. With ``whole_tokens`` (continuous batching needs it) lengths are
rounded to the nearest integer, outputs at least 1 and prompts at least 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numba import njit

from llmqueue.blocks import PromptBlocks
from llmqueue.errors import InputError
from llmqueue.limits import MAX_TOKENS
from llmqueue.sim.laws import draw, encode_law
from llmqueue.sim.predictors import Column, Oracle, Predictor, predict_chunk
from llmqueue.sim.rng import EXP_F, EXP_K, EXP_W, WordStream, std_exp, uniform32
from llmqueue.tokens import TokenLaw
from llmqueue.traces import (
    DAY_S,
    TraceColumns,
    TraceRows,
    detect_format,
    format_columns,
    read_columns,
    read_token_columns,
    read_trace,
)

__all__ = [
    "RequestChunk",
    "Workload",
    "PoissonWorkload",
    "TraceWorkload",
    "ReplayWorkload",
    "column_predictions",
]


class RequestChunk(NamedTuple):
    """Requests in arrival order: times (s) and token counts (float64 arrays of equal length)."""

    arrival_s: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    pred: np.ndarray


@njit(cache=True, nogil=True)
def _fill(  # type: ignore[no-untyped-def]  # noqa: ANN001
    rng, t_last, inv_rate, src, out_law, prompt_law, rows, whole, dest,
):  # fmt: skip
    """Poisson arrivals with tokens from laws (src 0) or joint rows (src 1, the row drawn into
    row[:]); returns (last arrival time, spare index)."""
    raw0, raw1, spare, sp = rng
    ok, oprm, ocap, ovals, ocum = out_law
    pk, pprm, pcap, pvals, pcum = prompt_law
    rows_prompt, rows_out = rows
    arr, prompt, out, row = dest
    nrows = rows_out.size
    for j in range(raw0.size):
        w0 = raw0[j]
        e, sp = std_exp(np.uint32(w0 & np.uint64(0xFFFFFFFF)), EXP_K, EXP_W, EXP_F, spare, sp)
        t_last += e * inv_rate
        arr[j] = t_last
        hi = np.uint32(w0 >> np.uint64(32))
        if src == 0:
            x, sp = draw(ok, oprm, ocap, ovals, ocum, hi, spare, sp)
            if pk >= 0:
                lo1 = np.uint32(raw1[j] & np.uint64(0xFFFFFFFF))
                y, sp = draw(pk, pprm, pcap, pvals, pcum, lo1, spare, sp)
            else:
                y = 0.0
        else:
            i = int(uniform32(hi) * nrows)
            if i >= nrows:
                i = nrows - 1
            x = rows_out[i]
            y = rows_prompt[i]
            row[j] = i
        if whole:
            x = max(1.0, math.floor(x + 0.5))
            y = max(0.0, math.floor(y + 0.5))
        out[j] = x
        prompt[j] = y
    return t_last, sp


@njit(cache=True, nogil=True)
def _round_rows(prompt, out):  # type: ignore[no-untyped-def]  # noqa: ANN001
    for j in range(out.size):
        out[j] = max(1.0, math.floor(out[j] + 0.5))
        prompt[j] = max(0.0, math.floor(prompt[j] + 0.5))


class Workload:
    """Base: ``chunks(seed, chunk, whole_tokens)`` yields RequestChunks; ``rate_per_s`` is the mean
    arrival rate; ``total`` the number of requests available (None: unlimited)."""

    rate_per_s: float
    predictor: Predictor
    total: int | None = None

    def chunks(
        self, seed: int | np.random.SeedSequence, chunk: int, whole_tokens: bool
    ) -> Iterator[RequestChunk]:  # pragma: no cover - abstract
        raise NotImplementedError

    def mean_output(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def mean_prompt(self) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    def at_rate(self, rate_per_s: float) -> Workload:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def run_sizes(self, requests: int, warmup: int) -> tuple[int, int]:
        """(requests, warmup) of a run on this workload: as asked, except that a replayed trace
        (``total`` rows) runs its own rows, the warm-up at most a tenth of them
        (:data:`REPLAY_WARMUP_SHARE`) and the measured requests at most the rows after it."""
        if self.total is None:
            return requests, warmup
        warm = min(warmup, int(self.total * REPLAY_WARMUP_SHARE))
        return min(requests, self.total - warm), warm

    def check_replay_rows(self, warmup: int, where: str) -> None:
        """Refuse (InputError naming `where`) a replayed trace with fewer than
        :data:`MIN_REPLAY_ROWS` measured rows after its warm-up (:meth:`run_sizes`): too few for
        the batch-means confidence interval of its statistics."""
        if self.total is None:
            return
        if self.total < MIN_REPLAY_ROWS + self.run_sizes(self.total, warmup)[1]:
            raise InputError(
                f"{where}: {self.total} rows; replaying needs at least {MIN_REPLAY_ROWS} measured "
                f"rows after the warm-up ({REPLAY_WARMUP_SHARE:.0%} of the rows at most)"
            )


# a replayed trace: the most of its rows a warm-up takes, and the fewest measured rows after it
REPLAY_WARMUP_SHARE = 0.1
MIN_REPLAY_ROWS = 400


def _check_rate(rate: float) -> float:
    r = float(rate)
    if not (math.isfinite(r) and r > 0):
        raise InputError(f"rate_per_s must be a finite arrival rate > 0 requests/s, got {rate!r}")
    return r


def _predict(
    predictor: Predictor, output: np.ndarray, raw1: np.ndarray, spare: np.ndarray, sp: int
) -> tuple[np.ndarray, int]:
    if predictor.needs_rows:  # pragma: no cover - the workloads never let it get here
        raise InputError(f"--predictor {predictor.spec}: predictions come per trace row")
    pred = np.empty(output.size)
    sp = predict_chunk(
        predictor.kind,
        predictor.params(),
        predictor.edges(),
        predictor.values(),
        output,
        raw1,
        spare,
        sp,
        pred,
    )
    return pred, int(sp)


@dataclass(frozen=True)
class PoissonWorkload(Workload):
    """Poisson(rate_per_s) arrivals; output ~ `output`, prompt ~ `prompt` (None: 0 tokens)."""

    output: TokenLaw
    rate_per_s: float
    prompt: TokenLaw | None = None
    predictor: Predictor = field(default_factory=Oracle)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_per_s", _check_rate(self.rate_per_s))
        if self.predictor.needs_rows:
            raise InputError(
                f"--predictor {self.predictor.spec}: it reads trace rows (a learned predictor: "
                "prompt tokens, timestamps, recent outputs; column:NAME: a column); a workload "
                "drawn from token laws has none: use --trace PATH (TraceWorkload or ReplayWorkload)"
            )
        object.__setattr__(self, "predictor", self.predictor.resolved(lambda q: self.output.ppf(q)))

    def mean_output(self) -> float:
        return float(self.output.mean())

    def mean_prompt(self) -> float:
        return 0.0 if self.prompt is None else float(self.prompt.mean())

    def at_rate(self, rate_per_s: float) -> PoissonWorkload:
        return replace(self, rate_per_s=rate_per_s)

    def describe(self) -> str:
        p = "none" if self.prompt is None else self.prompt.spec
        return (
            f"Poisson {self.rate_per_s:g}/s, output {self.output.spec}, prompt {p}, "
            f"predictor {self.predictor.spec}"
        )

    def chunks(
        self, seed: int | np.random.SeedSequence, chunk: int, whole_tokens: bool
    ) -> Iterator[RequestChunk]:
        oc = encode_law(self.output)
        pc = encode_law(self.prompt) if self.prompt is not None else None
        per = oc.spare_per_draw + (pc.spare_per_draw if pc else 0.0) + 0.2
        ws = WordStream(seed, int(chunk * per) + 64)
        empty = np.zeros(1)
        no_rows = np.zeros(1, dtype=np.int64)
        t = 0.0
        inv = 1.0 / self.rate_per_s
        while True:
            raw0 = ws.words(chunk)
            raw1 = ws.words(chunk)
            spare, sp = ws.spare()
            arr, prompt, out = np.empty(chunk), np.empty(chunk), np.empty(chunk)
            prompt_law = (
                (pc.kind, pc.prm, pc.cap, pc.values, pc.cum) if pc else (-1, empty, math.inf, empty, empty)
            )  # fmt: skip
            t, sp = _fill(
                (raw0, raw1, spare, sp),
                t,
                inv,
                0,
                (oc.kind, oc.prm, oc.cap, oc.values, oc.cum),
                prompt_law,
                (empty, empty),
                whole_tokens,
                (arr, prompt, out, no_rows),
            )
            pred, sp = _predict(self.predictor, out, raw1, spare, sp)
            ws.used(sp)
            yield RequestChunk(arr, prompt, out, pred)


def _row_predictions(
    predictor: Predictor,
    row_pred: np.ndarray | None,
    n: int,
    what: str,
) -> np.ndarray | None:
    """Validated per-row predictions (tokens), or None for a compiled predictor."""
    if row_pred is None:
        if predictor.needs_rows:
            raise InputError(
                f"--predictor {predictor.spec}: the {what} needs the trace's timestamps to "
                "compute the learned predictor's features (build it with from_csv)"
            )
        return None
    r = np.asarray(row_pred, dtype=float)
    if r.shape != (n,) or not np.all(np.isfinite(r)):
        raise InputError(f"{what}: row_pred must hold one finite prediction per row ({n})")
    return r


@dataclass(frozen=True)
class TraceWorkload(Workload):
    """Poisson(rate_per_s) arrivals; (prompt, output) drawn jointly from trace rows.

    ``row_pred``: one prediction per row (tokens) for a predictor that reads rows (``learned``);
    a request drawn from row i then carries row_pred[i]."""

    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    rate_per_s: float
    predictor: Predictor = field(default_factory=Oracle)
    source: str = "trace"
    row_pred: np.ndarray | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rate_per_s", _check_rate(self.rate_per_s))
        p = np.asarray(self.prompt_tokens, dtype=float)
        o = np.asarray(self.output_tokens, dtype=float)
        if p.shape != o.shape or p.ndim != 1 or p.size == 0:
            raise InputError("trace workload: prompt and output columns must be equal, non-empty")
        for what, x in (("prompt", p), ("output", o)):
            bad = ~((x >= 0) & (x <= MAX_TOKENS))  # NaN too
            if bad.any():
                i = int(np.flatnonzero(bad)[0])
                raise InputError(
                    f"trace workload {self.source}: {int(bad.sum())} {what} token counts are "
                    f"not numbers in [0, {MAX_TOKENS:g}], the first in row {i + 1}: {x[i]:g}"
                )
        object.__setattr__(self, "prompt_tokens", p)
        object.__setattr__(self, "output_tokens", o)
        object.__setattr__(
            self,
            "row_pred",
            _row_predictions(self.predictor, self.row_pred, o.size, "trace workload"),
        )
        object.__setattr__(self, "predictor", self.predictor.resolved(lambda q: np.quantile(o, q)))

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        rate_per_s: float,
        prompt_column: str = "ContextTokens",
        output_column: str = "GeneratedTokens",
        predictor: Predictor | None = None,
        timestamp_column: str = "TIMESTAMP",
        trace_format: str = "auto",
        where: str = "--trace",
    ) -> TraceWorkload:
        """Rows of a trace (a CSV's columns, or a file of another format of
        :data:`llmqueue.traces.FORMATS`, whose columns the format fixes); `timestamp_column` is
        read only for a predictor that reads rows (``learned``: its features need arrival times
        and the history of finished requests). Token counts must be numbers in
        [0, :data:`~llmqueue.limits.MAX_TOKENS`]; `where` (the flag) starts the message of an
        InputError about the file."""
        pred = predictor or Oracle()
        columns = TraceColumns(timestamp_column, prompt_column, output_column)
        if isinstance(pred, Column):
            row_pred = column_predictions(path, pred, trace_format, where)
            cols = read_token_columns(path, [prompt_column, output_column], where)
            source = f"{Path(path).name}:{prompt_column},{output_column}"
            return cls(cols[prompt_column], cols[output_column], rate_per_s, pred, source, row_pred)
        if trace_format == "auto":
            try:
                trace_format = detect_format(path, columns)
            except InputError:
                if pred.needs_rows:
                    raise
                trace_format = "csv"  # drawn rows need no timestamps: the prompt and output columns
        source = f"{Path(path).name}:{prompt_column},{output_column}"
        if trace_format != "csv":
            source = f"{Path(path).name} ({trace_format})"
        if pred.needs_rows or trace_format != "csv":
            rows = read_trace(path, columns, format=trace_format, where=where)
            return cls(
                rows.prompt_tokens,
                rows.output_tokens,
                rate_per_s,
                pred,
                source,
                _learned_rows(pred, rows) if pred.needs_rows else None,
            )
        cols = read_token_columns(path, [prompt_column, output_column], where)
        return cls(cols[prompt_column], cols[output_column], rate_per_s, pred, source)

    def mean_output(self) -> float:
        return float(self.output_tokens.mean())

    def mean_prompt(self) -> float:
        return float(self.prompt_tokens.mean())

    def at_rate(self, rate_per_s: float) -> TraceWorkload:
        return replace(self, rate_per_s=rate_per_s)

    def describe(self) -> str:
        return (
            f"Poisson {self.rate_per_s:g}/s, rows of {self.source} ({self.output_tokens.size}), "
            f"predictor {self.predictor.spec}"
        )

    def chunks(
        self, seed: int | np.random.SeedSequence, chunk: int, whole_tokens: bool
    ) -> Iterator[RequestChunk]:
        ws = WordStream(seed, int(chunk * 0.3) + 64)
        empty = np.zeros(1)
        t = 0.0
        inv = 1.0 / self.rate_per_s
        while True:
            raw0 = ws.words(chunk)
            raw1 = ws.words(chunk)
            spare, sp = ws.spare()
            arr, prompt, out = np.empty(chunk), np.empty(chunk), np.empty(chunk)
            row = np.zeros(chunk, dtype=np.int64)
            t, sp = _fill(
                (raw0, raw1, spare, sp),
                t,
                inv,
                1,
                (0, empty, math.inf, empty, empty),
                (-1, empty, math.inf, empty, empty),
                (self.prompt_tokens, self.output_tokens),
                whole_tokens,
                (arr, prompt, out, row),
            )
            if self.row_pred is not None:
                pred = self.row_pred[row]
            else:
                pred, sp = _predict(self.predictor, out, raw1, spare, sp)
            ws.used(sp)
            yield RequestChunk(arr, prompt, out, pred)


def column_predictions(
    path: str | Path, predictor: Column, trace_format: str = "csv", where: str = "--trace"
) -> np.ndarray:
    """The per-row predictions (tokens) of a ``column:NAME`` predictor: the CSV trace's column
    NAME, one finite number per row (InputError naming the file and the column otherwise, or for
    a trace of another format)."""
    if trace_format not in ("auto", "csv"):
        raise InputError(
            f"--predictor {predictor.spec}: reads a column of a CSV trace; {where} is in the "
            f"{trace_format} format"
        )
    return read_columns(path, [predictor.column], where)[predictor.column]


def _learned_rows(predictor: Predictor, rows: TraceRows) -> np.ndarray:
    """Per-row predictions (tokens) of a row-reading predictor (``learned``)."""
    from llmqueue.sim.predictors import Learned

    if not isinstance(predictor, Learned):  # pragma: no cover - only Learned reads rows
        raise InputError(f"--predictor {predictor.spec}: cannot predict from trace rows")
    return predictor.predict_rows(
        rows.arrival_s, rows.time_of_day_s, rows.prompt_tokens, rows.output_tokens, rows.finish_s
    )


@dataclass(frozen=True)
class ReplayWorkload(Workload):
    """A trace's rows in order at their own timestamps times ``time_scale`` (from the first).

    ``time_of_day_s``: each row's time of day (s; default arrival modulo 86400), read by a learned
    predictor; ``row_pred``: one prediction per row (computed here for a learned predictor);
    ``blocks``: the rows' prompt block ids (:class:`llmqueue.blocks.PromptBlocks`, read by prefix
    caching; request r is row r)."""

    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    time_scale: float = 1.0
    predictor: Predictor = field(default_factory=Oracle)
    source: str = "trace"
    time_of_day_s: np.ndarray | None = field(default=None, repr=False)
    row_pred: np.ndarray | None = field(default=None, repr=False)
    blocks: PromptBlocks | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        a = np.asarray(self.arrival_s, dtype=float)
        p = np.asarray(self.prompt_tokens, dtype=float)
        o = np.asarray(self.output_tokens, dtype=float)
        if not (a.shape == p.shape == o.shape) or a.ndim != 1 or a.size < 2:
            raise InputError("replay workload: timestamps, prompt and output need >= 2 equal rows")
        if np.any(np.diff(a) < 0):
            raise InputError("replay workload: timestamps must be non-decreasing")
        if not (math.isfinite(self.time_scale) and self.time_scale > 0):
            raise InputError(f"replay workload: time_scale must be > 0, got {self.time_scale}")
        tod = np.mod(a, DAY_S) if self.time_of_day_s is None else self.time_of_day_s
        tod = np.asarray(tod, dtype=float)
        if tod.shape != a.shape:
            raise InputError("replay workload: time_of_day_s needs one value per row")
        row_pred = self.row_pred
        if row_pred is None and self.predictor.needs_rows:
            row_pred = _learned_rows(self.predictor, TraceRows(a - a[0], tod, p, o))
        if self.blocks is not None:
            if self.blocks.n != a.size:
                raise InputError(
                    f"replay workload: block ids for {self.blocks.n} rows, the trace has {a.size}"
                )
            self.blocks.check_prompts(p)
        object.__setattr__(self, "arrival_s", a - a[0])
        object.__setattr__(self, "prompt_tokens", p)
        object.__setattr__(self, "output_tokens", o)
        object.__setattr__(self, "time_of_day_s", tod)
        object.__setattr__(
            self, "row_pred", _row_predictions(self.predictor, row_pred, o.size, "replay workload")
        )
        object.__setattr__(self, "predictor", self.predictor.resolved(lambda q: np.quantile(o, q)))
        object.__setattr__(self, "total", int(a.size))
        span = float(self.arrival_s[-1]) * self.time_scale
        if span <= 0:
            raise InputError("replay workload: all timestamps are equal")
        object.__setattr__(self, "rate_per_s", (a.size - 1) / span)

    @classmethod
    def from_csv(
        cls,
        path: str | Path,
        timestamp_column: str = "TIMESTAMP",
        prompt_column: str = "ContextTokens",
        output_column: str = "GeneratedTokens",
        rate_per_s: float | None = None,
        predictor: Predictor | None = None,
        trace_format: str = "auto",
    ) -> ReplayWorkload:
        """Replay a trace (:func:`llmqueue.traces.read_trace`, format `trace_format`); timestamps
        may be numbers (s) or date-times; `rate_per_s` rescales time so the mean rate is that
        (None: the trace's own)."""
        columns = TraceColumns(timestamp_column, prompt_column, output_column)
        if trace_format == "auto":
            trace_format = detect_format(path, columns)
        rows = read_trace(path, columns, format=trace_format)
        # the description names the columns the format read (its own, or the named CSV columns)
        named = ",".join(format_columns(trace_format, columns))
        w = cls(
            rows.arrival_s,
            rows.prompt_tokens,
            rows.output_tokens,
            1.0,
            predictor or Oracle(),
            f"{Path(path).name}:{named}" + ("" if trace_format == "csv" else f" ({trace_format})"),
            rows.time_of_day_s,
            blocks=rows.blocks,
        )
        return w if rate_per_s is None else w.at_rate(rate_per_s)

    def mean_output(self) -> float:
        return float(self.output_tokens.mean())

    def mean_prompt(self) -> float:
        return float(self.prompt_tokens.mean())

    def at_rate(self, rate_per_s: float) -> ReplayWorkload:
        r = _check_rate(rate_per_s)
        span = float(self.arrival_s[-1])
        return replace(self, time_scale=(self.output_tokens.size - 1) / (span * r))

    def describe(self) -> str:
        return (
            f"replay of {self.source} ({self.output_tokens.size} rows) at x{1 / self.time_scale:.4g} "
            f"speed ({self.rate_per_s:.4g}/s), predictor {self.predictor.spec}"
        )

    def chunks(
        self, seed: int | np.random.SeedSequence, chunk: int, whole_tokens: bool
    ) -> Iterator[RequestChunk]:
        ws = WordStream(seed, int(chunk * 0.3) + 64)
        n = self.output_tokens.size
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            arr = self.arrival_s[lo:hi] * self.time_scale
            prompt = self.prompt_tokens[lo:hi].copy()
            out = self.output_tokens[lo:hi].copy()
            if whole_tokens:
                _round_rows(prompt, out)
            raw1 = ws.words(hi - lo)
            if self.row_pred is not None:
                pred = self.row_pred[lo:hi].copy()
            else:
                spare, sp = ws.spare()
                pred, sp = _predict(self.predictor, out, raw1, spare, sp)
                ws.used(sp)
            yield RequestChunk(arr, prompt, out, pred)
