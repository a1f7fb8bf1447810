"""The request-table formats (:mod:`llmqueue.traces`): one reader ``(path, columns, where) ->
TraceRows`` per format in :data:`FORMATS` (a CSV with named columns, a vLLM validation run's
request table, SSJF's published predictions, and the traces operators have: BurstGPT, Mooncake,
vidur, vLLM's benchmark JSON), the recognition of a file's format (:func:`detect_format`),
:func:`read_trace` and the export to vidur's request CSV (:func:`write_vidur`). Built from the
shared parts of :mod:`llmqueue.traces.base`.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.blocks import blocks_from_lists
from llmqueue.errors import InputError
from llmqueue.io import atomic_path
from llmqueue.limits import MAX_TIME_S, MAX_TOKENS
from llmqueue.traces.base import (
    DAY_S,
    TraceColumns,
    TraceRows,
    checked,
    csv_frame,
    csv_header,
    data_row,
    enough_rows,
    existing_file,
    numbers,
    read_table,
    span_checked,
    timestamps_of,
    token_counts,
)

# its public names are re-exported by llmqueue.traces (their list is there)


# ---- the formats -------------------------------------------------------------------------------
def _read_csv(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """A CSV request table with named columns, sorted by arrival (stable), arrival times from the
    earliest request. Token counts must be finite numbers in [0, MAX_TOKENS], timestamps finite
    seconds or date-times; a ragged row is refused."""
    names = [columns.timestamp, columns.prompt, columns.output]
    df = csv_frame(path, names + ([columns.finish] if columns.finish else []), where)
    enough_rows(len(df), str(path), where)
    prompt = token_counts(df[columns.prompt], f"column {columns.prompt!r} of {path}", where)
    output = token_counts(df[columns.output], f"column {columns.output!r} of {path}", where)
    abs_s, tod = timestamps_of(df[columns.timestamp], columns.timestamp, str(path), where)
    origin = float(abs_s.min())
    arr = abs_s - origin
    fin = None
    if columns.finish:
        fin = timestamps_of(df[columns.finish], columns.finish, str(path), where)[0] - origin
    order = np.argsort(arr, kind="stable")
    return TraceRows(
        arr[order],
        tod[order],
        prompt[order],
        output[order],
        None if fin is None else fin[order],
        source=f"{where} {Path(path).name}",
    )


# The columns of a validation run's request table (``requests_<run>.csv``, written by the vLLM
# driver, :mod:`llmqueue.engines.record`) that a replay and a comparison need: times in s from
# the start of the run.
VLLM_REQUEST_COLUMNS = (
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "first_token_s",
    "finish_s",
    "warmup",
)


def _read_vllm_requests(
    path: str | os.PathLike[str], columns: TraceColumns, where: str
) -> TraceRows:
    """A validation run's request table, checked for what the simulator relies on: its columns,
    rows in arrival order, arrival <= first token <= finish, output tokens >= 1, prompt tokens
    >= 0, a True/False warm-up column. Arrival times stay on the run's clock; ``frame`` holds the
    table as read (request ids and measured times)."""
    df = read_table(path, where)
    f = str(Path(path))
    missing = [c for c in VLLM_REQUEST_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(f"{where}: request file {f!r} lacks columns {missing}")
    if len(df) < 2:
        raise InputError(f"{where}: request file {f!r} holds fewer than 2 requests")
    for col, hi, unit in (
        ("arrival_s", MAX_TIME_S, "s"),
        ("first_token_s", MAX_TIME_S, "s"),
        ("finish_s", MAX_TIME_S, "s"),
        ("prompt_tokens", MAX_TOKENS, "tokens"),
        ("output_tokens", MAX_TOKENS, "tokens"),
    ):
        checked(
            numbers(df[col]), df[col].iloc.__getitem__, f"column {col!r} of {f}", where,
            lo=0, hi=hi, unit=unit,
        )  # fmt: skip
    if not df["arrival_s"].is_monotonic_increasing:
        raise InputError(f"{where}: {f!r}: rows must be in arrival order")
    bad = ~((df["arrival_s"] <= df["first_token_s"]) & (df["first_token_s"] <= df["finish_s"]))
    if bad.any():
        raise InputError(
            f"{where}: {f!r}: {int(bad.sum())} row(s) break arrival <= first token <= finish"
        )
    if (df["output_tokens"] < 1).any() or (df["prompt_tokens"] < 0).any():
        raise InputError(f"{where}: {f!r}: output_tokens must be >= 1 and prompt_tokens >= 0")
    if df["warmup"].dtype != bool:
        raise InputError(f"{where}: {f!r}: column warmup must hold True/False")
    arrival = df["arrival_s"].to_numpy(dtype=float)
    return TraceRows(
        arrival,
        np.mod(arrival, DAY_S),
        df["prompt_tokens"].to_numpy(dtype=float),
        df["output_tokens"].to_numpy(dtype=float),
        None,
        source=f"{where} {Path(path).name}",
        frame=df,
    )


# The columns of SSJF's published predictions (data/ssjf-predictions/: the true output length and
# the class their proxy model predicted), and the name the predicted class has in ``frame``.
SSJF_PREDICTION_COLUMNS = ("output_token_length", "predicted_length")
PREDICTED_CLASS = "predicted_class"


def _read_ssjf_predictions(
    path: str | os.PathLike[str], columns: TraceColumns, where: str
) -> TraceRows:
    """SSJF's published predictions (Qiu et al., arXiv 2404.08509; data/ssjf-predictions/): one
    row per prompt, its true output length (tokens, whole, >= 1) and its proxy model's predicted
    class (an integer >= 0, shortest first). The rows are a length law, not a trace: no arrival
    times (all 0, in file order) and no prompt lengths (0). ``frame``: the output tokens, the
    predicted class (:data:`PREDICTED_CLASS`) and any other column of the file, in file order.
    `columns` is not read: the file's own column names are fixed."""
    import pandas as pd

    df = read_table(path, where)
    f = str(Path(path))
    missing = [c for c in SSJF_PREDICTION_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"{where}: SSJF prediction file {f!r} lacks columns {missing}; its columns are "
            f"{[str(c) for c in df.columns]}"
        )
    out = pd.to_numeric(df["output_token_length"], errors="coerce")
    cls = pd.to_numeric(df["predicted_length"], errors="coerce")
    if out.isna().any() or (out < 1).any() or (out != out.round()).any():
        raise InputError(f"{where}: {f!r}: output_token_length must hold whole numbers >= 1")
    if cls.isna().any() or (cls < 0).any() or (cls != cls.round()).any():
        raise InputError(f"{where}: {f!r}: predicted_length must hold classes 0, 1, 2, ...")
    n = len(df)
    frame = df.drop(columns=[c for c in df.columns if str(c).startswith("Unnamed")]).rename(
        columns={"output_token_length": "output_tokens", "predicted_length": PREDICTED_CLASS}
    )
    frame[PREDICTED_CLASS] = cls.to_numpy(dtype=np.int64)
    zeros = np.zeros(n)
    return TraceRows(
        zeros,
        zeros,
        zeros,
        out.to_numpy(dtype=float),
        None,
        source=f"{where} {Path(path).name}",
        frame=frame.reset_index(drop=True),
    )


# ---- the traces operators have ------------------------------------------------------------------
def _as_float(value: Any) -> float:
    """A JSON value as a float: NaN for anything but a number (null, text, true/false)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    try:
        return float(value)
    except OverflowError:  # an integer beyond float64
        return math.inf


def _json_floats(values: Sequence[Any]) -> np.ndarray:
    return np.array([_as_float(v) for v in values], dtype=float)


def _json_document(p: Path, where: str) -> Any:
    """A whole file parsed as one JSON document (InputError for an empty, non-UTF-8 or
    malformed file)."""
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{where}: {p} is not UTF-8 text (expected JSON)") from None
    if not text.strip():
        raise InputError(f"{where}: {p} is empty (expected a JSON object)")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: {p} is not JSON ({err.msg}, line {err.lineno})") from None


def _time_and_tokens(
    df: Any, columns: Sequence[str], f: str, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(times in [0, MAX_TIME_S] s, prompt tokens, output tokens) from a table's three columns
    (time, prompt, output), each refused with its row when out of range."""
    t_col, prompt_col, output_col = columns
    t = checked(
        numbers(df[t_col]),
        df[t_col].iloc.__getitem__,
        f"column {t_col!r} of {f}",
        where,
        lo=0,
        hi=MAX_TIME_S,
        unit="s",
    )
    prompt = token_counts(df[prompt_col], f"column {prompt_col!r} of {f}", where)
    output = token_counts(df[output_col], f"column {output_col!r} of {f}", where)
    return t, prompt, output


def _in_order(
    t: np.ndarray, f: str, where: str, label: Callable[[int], str], column: str, unit: str
) -> None:
    """Refuse a timestamp earlier than the one before it (a format that promises arrival order)."""
    back = np.flatnonzero(np.diff(t) < 0)
    if back.size:
        i = int(back[0]) + 1
        raise InputError(
            f"{where}: {f}, {label(i)}: {column} {t[i]:g} {unit} is earlier than the "
            f"{t[i - 1]:g} {unit} of {label(i - 1)}; the format promises arrival order (sort the "
            f"file by {column})"
        )


# BurstGPT (Wang et al., arXiv 2401.17644; github.com/HPMLL/BurstGPT, data under CC-BY-4.0): the
# columns this reader needs. Its files also hold Model, Total tokens and Log Type and, in the later
# releases, Session ID and Elapsed time, none of which is read.
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def _read_burstgpt(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """BurstGPT's CSV. Its README ("Schema") gives ``Timestamp``: request submission time, s from
    0:00:00 on the trace's first day (local time); ``Request tokens`` and ``Response tokens``:
    the request's and the response's lengths; and says the files with failures (BurstGPT_1.csv,
    ...) hold "some failure that `Response tokens` are `0`s" (the *_without_fails_* files leave
    them out). So rows with 0 response tokens are failed requests: they are dropped and their
    count goes into ``source``; a file with no successful row is refused. The README promises no
    order: rows are sorted (stable) by Timestamp, arrival in s from the earliest kept request,
    time of day Timestamp modulo a day. Timestamp in [0, MAX_TIME_S] s, token counts in
    [0, MAX_TOKENS]. `columns` is not read: BurstGPT's names are fixed."""
    df = csv_frame(path, BURSTGPT_COLUMNS, where)
    f = str(path)
    ts_col, req_col, resp_col = BURSTGPT_COLUMNS
    if len(df) == 0:
        raise InputError(f"{where}: {f} holds no rows (a header only)")
    ts, prompt, output = _time_and_tokens(df, BURSTGPT_COLUMNS, f, where)
    ok = output > 0
    if not ok.any():
        raise InputError(
            f"{where}: {f}: all {len(df)} rows are failed requests ({resp_col!r} is 0); a trace "
            "needs successful ones"
        )
    enough_rows(int(ok.sum()), f, where, "successful requests")
    order = np.argsort(ts[ok], kind="stable")
    ts, prompt, output = ts[ok][order], prompt[ok][order], output[ok][order]
    dropped = int((~ok).sum())
    return TraceRows(
        ts - ts[0],
        np.mod(ts, DAY_S),
        prompt,
        output,
        None,
        source=f"{where} {Path(path).name} (burstgpt, {dropped} failed requests dropped)",
    )


# Mooncake's traces (Qin et al., FAST'25; github.com/kvcache-ai/Mooncake, FAST25-release/traces,
# repository under Apache-2.0; a copy with its licence in data/traces/mooncake-fast25/): the keys
# of each line this reader needs, and the optional key of the prompt's KV-cache block ids (the
# remapped hashes of its blocks of MOONCAKE_BLOCK_TOKENS tokens).
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")
MOONCAKE_IDS = "hash_ids"
MOONCAKE_BLOCK_TOKENS = 512


def _read_mooncake(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """Mooncake's JSONL trace: one JSON object per line with ``timestamp`` (ms from the trace's
    start), ``input_length`` (prompt tokens) and ``output_length`` (output tokens); blank lines
    are skipped. The released traces are in arrival order (timestamps non-decreasing, many
    equal): a line earlier than the one before it is refused, naming both lines. Arrival: s from
    the first request (timestamp / 1000); time of day: arrival modulo a day (the traces carry no
    clock time). Timestamps in [0, 1000 MAX_TIME_S] ms, token counts in [0, MAX_TOKENS].
    ``hash_ids`` (optional per line; a line without it shares nothing), a list of non-negative
    integers over blocks of 512 tokens, at most ceil(input_length / 512) of them, are the rows'
    ``blocks`` (:class:`~llmqueue.blocks.PromptBlocks`; None when no line has any).
    `columns` is not read: Mooncake's keys are fixed."""
    p = existing_file(path, where)
    f = str(path)
    fields: dict[str, list[Any]] = {k: [] for k in MOONCAKE_KEYS}
    ids: list[Any] = []
    lines: list[int] = []
    form = f"one JSON object per line with keys {list(MOONCAKE_KEYS)}"
    try:
        with p.open(encoding="utf-8-sig") as fh:
            for lineno, line in enumerate(fh, 1):
                text = line.strip()
                if not text:
                    continue
                try:
                    obj = json.loads(text)
                except json.JSONDecodeError as err:
                    raise InputError(
                        f"{where}: {f}, line {lineno}: not JSON ({err.msg}); allowed: {form}"
                    ) from None
                if not isinstance(obj, dict):
                    raise InputError(f"{where}: {f}, line {lineno}: not an object; allowed: {form}")
                missing = [k for k in MOONCAKE_KEYS if k not in obj]
                if missing:
                    raise InputError(
                        f"{where}: {f}, line {lineno}: no key {missing[0]!r}; allowed: {form}"
                    )
                for k in MOONCAKE_KEYS:
                    fields[k].append(obj[k])
                ids.append(obj.get(MOONCAKE_IDS, []))
                lines.append(lineno)
    except UnicodeDecodeError:
        raise InputError(f"{where}: {f} is not UTF-8 text; allowed: {form}") from None
    if not lines:
        raise InputError(f"{where}: {f} is empty; allowed: {form}")
    enough_rows(len(lines), f, where, "requests")

    def label(i: int) -> str:
        return f"line {lines[i]}"

    def values(key: str, hi: float, unit: str) -> np.ndarray:
        raw = fields[key]
        place = f"key {key!r} of {f}"
        return checked(_json_floats(raw), raw.__getitem__, place, where, label, 0, hi, unit)

    t = values("timestamp", 1e3 * MAX_TIME_S, "ms")
    prompt = values("input_length", MAX_TOKENS, "tokens")
    output = values("output_length", MAX_TOKENS, "tokens")
    _in_order(t, f, where, label, "timestamp", "ms")
    arrival = (t - t[0]) / 1e3
    blocks = None
    if any(x != [] for x in ids):
        blocks = blocks_from_lists(
            ids, MOONCAKE_BLOCK_TOKENS, where=f"{where}: key {MOONCAKE_IDS!r} of {f}", label=label
        )
        blocks.check_prompts(prompt, label)
    return TraceRows(
        arrival,
        np.mod(arrival, DAY_S),
        prompt,
        output,
        None,
        source=f"{where} {p.name} (mooncake)",
        blocks=blocks,
    )


# vidur's request CSV (github.com/microsoft/vidur, MIT): the columns its trace_replay request
# generator reads (vidur/request_generator/trace_replay_request_generator.py; e.g. its
# data/processed_traces/splitwise_conv.csv), and what write_vidur writes.
VIDUR_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


def _read_vidur(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """vidur's request CSV: ``arrived_at`` (s), ``num_prefill_tokens`` (prompt tokens) and
    ``num_decode_tokens`` (output tokens); other columns are ignored. vidur's processed traces
    are in arrival order and its synthetic generator sorts its requests: a row earlier than the
    one before it is refused (not reordered). Arrival: s from the first request; time of day:
    arrival modulo a day. arrived_at in [0, MAX_TIME_S] s, token counts in [0, MAX_TOKENS].
    `columns` is not read: vidur's names are fixed."""
    df = csv_frame(path, VIDUR_COLUMNS, where)
    f = str(path)
    enough_rows(len(df), f, where)
    at_col, prefill_col, decode_col = VIDUR_COLUMNS
    t, prompt, output = _time_and_tokens(df, VIDUR_COLUMNS, f, where)
    _in_order(t, f, where, data_row, "arrived_at", "s")
    arrival = t - t[0]
    return TraceRows(
        arrival,
        np.mod(arrival, DAY_S),
        prompt,
        output,
        None,
        source=f"{where} {Path(path).name} (vidur)",
    )


# vLLM's benchmark result JSON (``vllm bench serve --save-result --save-detailed``,
# vllm/benchmarks/serve.py; formerly benchmarks/benchmark_serving.py; github.com/vllm-project/vllm,
# Apache-2.0): the per-request lists this reader needs. It also reads, when present, ``errors``,
# ``start_times``, ``latencies`` and ``ttfts`` (not ``itls`` nor ``generated_texts``).
VLLM_BENCH_KEYS = ("input_lens", "output_lens")
_VLLM_BENCH_LISTS = (*VLLM_BENCH_KEYS, "errors", "start_times", "latencies", "ttfts")


def _read_vllm_bench(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """vLLM's benchmark result: one JSON object whose per-request lists (one entry per request,
    in the order the benchmark issued them) are ``input_lens`` and ``output_lens`` (tokens),
    ``errors`` ("" for a success), ``ttfts`` and ``latencies`` (s) and, in the newer versions,
    ``start_times`` (time.perf_counter() when the request was sent, s). vLLM keeps these lists
    only with ``--save-detailed``: a file without them is refused, saying so.

    Failed requests (a non-empty ``errors`` entry; without ``errors``, 0 output tokens, which vLLM
    writes for a failed request) are dropped, their count in ``source``; a file with no successful
    request is refused. Arrival: with ``start_times``, s from the earliest send, rows sorted
    (stable) by it, and the finish time arrival + latency when ``latencies`` is there; without
    ``start_times`` the send times are unknown: every arrival is 0 (the rows are a length law,
    drawn at ``--rate``; a replay refuses them as all timestamps are equal), and the request
    rate the file records is not turned into times (vLLM drew its gaps at random). Time of day:
    arrival modulo a day. ``frame``: per kept row, its index in the file (``request``), the
    tokens and, where present, ``arrival_s``, ``ttft_s`` and ``latency_s``. Token counts in
    [0, MAX_TOKENS], times in [0, MAX_TIME_S] s (latencies > 0). `columns` is not read."""
    import pandas as pd

    p = existing_file(path, where)
    f = str(path)
    obj = _json_document(p, where)
    if not isinstance(obj, dict):
        raise InputError(f"{where}: {f}: a JSON {type(obj).__name__}, not a vLLM result object")
    missing = [k for k in VLLM_BENCH_KEYS if k not in obj]
    if missing:
        raise InputError(
            f"{where}: {f}: a vLLM benchmark result without the per-request list {missing[0]!r}; "
            "allowed: a result saved with --save-result --save-detailed"
        )
    if not isinstance(obj["input_lens"], list):
        raise InputError(
            f"{where}: {f}: key 'input_lens' holds a JSON {type(obj['input_lens']).__name__}; "
            "allowed: a list of one prompt length per request"
        )
    n = len(obj["input_lens"])
    lists: dict[str, list[Any]] = {}
    for key in _VLLM_BENCH_LISTS:
        if key in obj:
            v = obj[key]
            if not isinstance(v, list) or len(v) != n:
                got = f"{len(v)} entries" if isinstance(v, list) else f"a JSON {type(v).__name__}"
                raise InputError(
                    f"{where}: {f}: key {key!r} holds {got}; allowed: a list of one value per "
                    f"request ({n}, as input_lens)"
                )
            lists[key] = v
    if n == 0:
        raise InputError(f"{where}: {f}: its per-request lists are empty (no request)")
    if "errors" in lists:
        failed = np.array([bool(e) for e in lists["errors"]])
    else:
        failed = _json_floats(lists["output_lens"]) == 0
    keep = np.flatnonzero(~failed)
    if keep.size == 0:
        raise InputError(f"{where}: {f}: all {n} requests failed; a trace needs successful ones")
    enough_rows(int(keep.size), f, where, "successful requests")

    def values(key: str, hi: float, unit: str, lo_open: bool = False) -> np.ndarray:
        raw = lists[key]
        return checked(
            _json_floats([raw[i] for i in keep]),
            lambda j: raw[keep[j]],
            f"key {key!r} of {f}",
            where,
            lambda j: f"entry {keep[j]}",
            0 if math.isfinite(hi) else -math.inf,
            hi,
            unit,
            lo_open,
        )

    prompt = values("input_lens", MAX_TOKENS, "tokens")
    output = values("output_lens", MAX_TOKENS, "tokens")
    cols: dict[str, np.ndarray] = {
        "request": keep,
        "prompt_tokens": prompt,
        "output_tokens": output,
    }
    arrival = np.zeros(keep.size)
    finish = None
    note = "no start_times: arrival times unknown, all 0"
    if "start_times" in lists:
        start = values("start_times", math.inf, "s")  # a perf_counter clock: any finite origin
        span_checked(start, f"key 'start_times' of {f}", where, lambda j: f"entry {keep[j]}")
        arrival = start - start.min()
        note = "arrivals from start_times"
        cols["arrival_s"] = arrival
        if "latencies" in lists:
            lat = values("latencies", MAX_TIME_S, "s", lo_open=True)
            finish = arrival + lat
            cols["latency_s"] = lat
    if "ttfts" in lists:
        cols["ttft_s"] = values("ttfts", MAX_TIME_S, "s")
    order = np.argsort(arrival, kind="stable")
    frame = pd.DataFrame({k: v[order] for k, v in cols.items()})
    dropped = n - int(keep.size)
    return TraceRows(
        arrival[order],
        np.mod(arrival[order], DAY_S),
        prompt[order],
        output[order],
        None if finish is None else finish[order],
        source=f"{where} {p.name} (vllm-bench, {dropped} failed requests dropped, {note})",
        frame=frame,
    )


# ---- the registry -------------------------------------------------------------------------------
Reader = Callable[[str | os.PathLike[str], TraceColumns, str], TraceRows]


@dataclass(frozen=True)
class TraceFormat:
    """One request-table format of the registry (:data:`FORMATS`): its `name` (``--trace-format``,
    config), its `read`er ``(path, columns, where) -> TraceRows``, the names it gives its
    (arrival, prompt tokens, output tokens) in `columns` (None for ``csv``: the named
    :class:`~llmqueue.traces.base.TraceColumns`), and how :func:`detect_format` recognises a file
    of it: a CSV whose header holds every column of `header` (in registry order, after ``csv``),
    or JSON (`json`: how the file holds it, e.g. "lines with keys") whose first object holds every
    key of one of `json_keys`. A format with neither is read only when named."""

    name: str
    read: Reader
    columns: tuple[str, str, str] | None
    header: tuple[str, ...] = ()
    json: str = ""
    json_keys: tuple[tuple[str, ...], ...] = ()


# the keys of a vLLM benchmark result saved without --save-detailed (recognised, then refused
# by the reader with the reason)
_VLLM_BENCH_SUMMARY = ("completed", "request_throughput")


def _read_auto(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """The file by the reader of the format :func:`detect_format` recognises."""
    return FORMATS[detect_format(path, columns, where=where)].read(path, columns, where)


FORMATS: dict[str, TraceFormat] = {
    f.name: f
    for f in (
        TraceFormat("auto", _read_auto, None),
        TraceFormat("csv", _read_csv, None),
        TraceFormat("burstgpt", _read_burstgpt, BURSTGPT_COLUMNS, header=BURSTGPT_COLUMNS),
        TraceFormat("vidur", _read_vidur, VIDUR_COLUMNS, header=VIDUR_COLUMNS),
        TraceFormat(
            "vllm-requests",
            _read_vllm_requests,
            ("arrival_s", "prompt_tokens", "output_tokens"),
            header=VLLM_REQUEST_COLUMNS,
        ),
        TraceFormat(
            "ssjf-predictions",
            _read_ssjf_predictions,
            ("(none)", "(none)", "output_token_length"),
            header=SSJF_PREDICTION_COLUMNS,
        ),
        TraceFormat(
            "mooncake",
            _read_mooncake,
            MOONCAKE_KEYS,
            json="lines with keys",
            json_keys=(MOONCAKE_KEYS,),
        ),
        TraceFormat(
            "vllm-bench",
            _read_vllm_bench,
            ("start_times", *VLLM_BENCH_KEYS),
            json="an object with keys",
            json_keys=(VLLM_BENCH_KEYS, _VLLM_BENCH_SUMMARY),
        ),
    )
}


# ---- recognising a format ------------------------------------------------------------------------
def _known() -> list[str]:
    return sorted(k for k in FORMATS if k != "auto")


def _first_line(p: Path, where: str) -> str:
    with p.open(encoding="utf-8-sig", errors="replace") as fh:
        for line in fh:
            if line.strip():
                return line
    raise InputError(f"{where}: trace file {str(p)!r} is empty; known formats: {_known()}")


def detect_format(
    path: str | os.PathLike[str], columns: TraceColumns | None = None, *, where: str = "--trace"
) -> str:
    """The format (a key of :data:`FORMATS`) of a trace file, recognised from its content: a
    file whose first non-blank line starts a JSON value, or named ``*.json``/``*.jsonl``, is JSON,
    of the first format of :data:`FORMATS` one of whose `json_keys` its first object (or the
    whole document) holds: ``mooncake`` (its first line an object with :data:`MOONCAKE_KEYS`),
    ``vllm-bench`` (an object with :data:`VLLM_BENCH_KEYS`, or the summary keys of a result
    saved without them). Any other file is a CSV: ``csv`` when its header holds the `columns`
    named (default the Azure trace's TIMESTAMP, ContextTokens, GeneratedTokens, and finish when
    named), so every table the csv reader reads keeps reading as csv; else the first format of
    :data:`FORMATS` whose `header` it holds (``burstgpt``, ``vidur``, ``vllm-requests``,
    ``ssjf-predictions``). Anything else: an InputError naming the file, what it lacks and the
    known formats."""
    p = existing_file(path, where)
    first = _first_line(p, where)
    if first.lstrip().startswith(("{", "[")) or p.suffix.lower() in (".json", ".jsonl"):
        try:
            obj = json.loads(first)
        except json.JSONDecodeError:
            obj = _json_document(p, where)  # one document over several lines
        if isinstance(obj, dict):
            for f in FORMATS.values():
                if any(set(keys) <= set(obj) for keys in f.json_keys):
                    return f.name
        shapes = "; ".join(
            f"{f.name}: {f.json} {list(f.json_keys[0])}" for f in FORMATS.values() if f.json_keys
        )
        raise InputError(
            f"{where}: {p}: JSON of no known trace format ({shapes}); known formats: {_known()}"
        )
    head = csv_header(p, where)
    cols = columns or TraceColumns()
    wanted = [cols.timestamp, cols.prompt, cols.output] + ([cols.finish] if cols.finish else [])
    missing = [c for c in wanted if c not in head]
    if not missing:
        return "csv"
    for f in FORMATS.values():
        if f.header and set(f.header) <= set(head):
            return f.name
    raise InputError(
        f"{where}: {p}: no known trace format: as csv it lacks columns {missing} (its columns "
        f"are {head}); known formats: {_known()}"
    )


def format_columns(format: str, columns: TraceColumns | None = None) -> tuple[str, str, str]:  # noqa: A002
    """The names a format (not ``auto``: :func:`detect_format` first) gives its (arrival, prompt
    tokens, output tokens): the named `columns` for ``csv``, each other format's own (a replay's
    description quotes them)."""
    if format not in _known():
        raise InputError(f"unknown trace format {format!r}; known: {_known()}")
    if FORMATS[format].columns is None:
        cols = columns or TraceColumns()
        return cols.timestamp, cols.prompt, cols.output
    a, b, c = FORMATS[format].columns  # type: ignore[misc]
    return a, b, c


def read_trace(
    path: str | os.PathLike[str],
    columns: TraceColumns | None = None,
    *,
    format: str = "auto",  # noqa: A002 - the format's name, as the CLI flag says
    where: str = "--trace",
) -> TraceRows:
    """A request table as :class:`TraceRows` by its format's reader (:data:`FORMATS`); the
    default ``auto`` reads a CSV holding the named `columns` as ``csv``, as before, and
    recognises the other formats (:func:`detect_format`)."""
    f = FORMATS.get(format)
    if f is None:
        raise InputError(f"{where}: unknown trace format {format!r}; known: {sorted(FORMATS)}")
    return f.read(path, columns or TraceColumns(), where)


# ---- export ------------------------------------------------------------------------------------
def write_vidur(rows: TraceRows, path: str | os.PathLike[str]) -> None:
    """Write `rows` as vidur's request CSV (:data:`VIDUR_COLUMNS`: ``arrived_at`` in s from the
    first request, whole prompt and output tokens), atomically (:func:`llmqueue.io.atomic_path`),
    for vidur's trace_replay request generator (``--request_generator_config_type trace_replay
    --trace_request_generator_config_trace_file PATH``). Times keep every digit (the shortest
    text that reads back as the same float64), so reading the file back (format ``vidur``) gives
    the same arrival, prompt and output columns. vidur itself raises counts below 1 to 1 and
    trims prompts so that prompt + output <= its ``trace_request_generator_config_max_tokens``
    (default 4096): set that above the longest request to run the same load. InputError for a
    token count that is not a whole number (vidur's columns hold integers)."""
    import pandas as pd

    for name, col in (("prompt", rows.prompt_tokens), ("output", rows.output_tokens)):
        frac = np.flatnonzero(col != np.round(col))
        if frac.size:
            i = int(frac[0])
            raise InputError(
                f"write_vidur: {rows.source}: {frac.size} {name} token counts are not whole "
                f"numbers, the first in row {i + 1}: {col[i]:g}; vidur's columns hold integers"
            )
    at_col, prefill_col, decode_col = VIDUR_COLUMNS
    df = pd.DataFrame(
        {
            at_col: rows.arrival_s - rows.arrival_s[0],
            prefill_col: rows.prompt_tokens.astype(np.int64),
            decode_col: rows.output_tokens.astype(np.int64),
        }
    )
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, lineterminator="\n")
