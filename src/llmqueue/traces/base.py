"""The parts every request-table reader is built from (:mod:`llmqueue.traces`): the typed table
:class:`TraceRows` and its column names :class:`TraceColumns`, the checked file, header, CSV frame,
number, token and timestamp readers the format readers share (:mod:`llmqueue.traces.formats`), the
column readers for callers that need only some columns, and the ``trace:PATH:COLUMN`` token-law
spec. Errors are one-line :class:`~llmqueue.errors.InputError` s naming the file, column and row.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.blocks import PromptBlocks
from llmqueue.errors import InputError
from llmqueue.limits import MAX_TIME_S, MAX_TOKENS

__all__ = [
    "DAY_S",
    "MAX_EPOCH_S",
    "TraceRows",
    "TraceColumns",
    "TraceSpec",
    "TRACE_FORM",
    "path_kind",
    "parse_trace_spec",
    "read_table",
    "read_columns",
    "read_token_columns",
    "read_column",
    "read_timestamps",
    "checked",
    "csv_frame",
    "data_row",
    "enough_rows",
    "existing_file",
    "csv_header",
    "numbers",
    "span_checked",
    "timestamps_of",
    "token_counts",
]

DAY_S = 86_400.0  # seconds in a day: a numeric timestamp's time of day is taken modulo this
# the largest numeric timestamp of a CSV (s): any clock's origin up to ~30,000 years, with float64
# still resolving microseconds; the span of a trace's timestamps is at most MAX_TIME_S
MAX_EPOCH_S = 1e12


@dataclass(frozen=True)
class TraceRows:
    """Requests in arrival order: arrival (s from the first request, unless the reader says
    otherwise), time of day (s since midnight), prompt and output tokens, optionally each
    request's finish time (s, the arrival's clock); ``source`` names where they came from.

    ``frame``: the table as it was read (a pandas DataFrame with every column, in file order),
    for formats that carry more than a trace (a validation run's measured times); None for the
    others. ``blocks``: the prompts' KV-cache block ids (:class:`~llmqueue.blocks.PromptBlocks`,
    e.g. Mooncake's ``hash_ids``) for prefix caching; None: the prompts share nothing."""

    arrival_s: np.ndarray
    time_of_day_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    finish_s: np.ndarray | None = None
    source: str = "trace"
    frame: Any = field(default=None, repr=False, compare=False)
    blocks: PromptBlocks | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        cols = [self.arrival_s, self.time_of_day_s, self.prompt_tokens, self.output_tokens]
        if self.finish_s is not None:
            cols.append(self.finish_s)
        arr = [np.asarray(c, dtype=float) for c in cols]
        n = arr[0].size
        if any(a.ndim != 1 or a.size != n for a in arr) or n < 2:
            raise InputError(f"{self.source}: trace columns must be equal, 1-D, >= 2 rows")
        if any(not np.all(np.isfinite(a)) for a in arr):
            raise InputError(f"{self.source}: trace columns must be finite numbers")
        if np.any(np.diff(arr[0]) < 0):
            raise InputError(f"{self.source}: rows must be in arrival order")
        times = arr[0] if self.finish_s is None else np.concatenate([arr[0], arr[4]])
        if not float(times.max() - times.min()) <= MAX_TIME_S:
            raise InputError(
                f"{self.source}: its times span {float(times.max() - times.min()):.4g} s; "
                f"allowed: at most {MAX_TIME_S:g} s"
            )
        if np.any(arr[2] < 0) or np.any(arr[3] < 0):
            raise InputError(f"{self.source}: token counts must be >= 0")
        if self.finish_s is not None and np.any(arr[4] <= arr[0]):
            raise InputError(f"{self.source}: every finish time must be after its arrival")
        object.__setattr__(self, "arrival_s", arr[0])
        object.__setattr__(self, "time_of_day_s", arr[1])
        object.__setattr__(self, "prompt_tokens", arr[2])
        object.__setattr__(self, "output_tokens", arr[3])
        if self.finish_s is not None:
            object.__setattr__(self, "finish_s", arr[4])
        if self.blocks is not None:
            self.blocks.check_prompts(arr[2])

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    def take(self, lo: int, hi: int | None = None) -> TraceRows:
        """Rows lo..hi-1 (arrival times kept on the trace's clock)."""
        s = slice(lo, hi)
        fin = None if self.finish_s is None else self.finish_s[s]
        frame = None if self.frame is None else self.frame.iloc[s]
        blocks = None if self.blocks is None else self.blocks.take(*s.indices(self.n)[:2])
        return TraceRows(
            self.arrival_s[s],
            self.time_of_day_s[s],
            self.prompt_tokens[s],
            self.output_tokens[s],
            fin,
            self.source,
            frame,
            blocks,
        )

    def fingerprint(self) -> str:
        """SHA-256 of the arrival, prompt and output columns (tells one trace from another)."""
        h = hashlib.sha256()
        for a in (self.arrival_s, self.prompt_tokens, self.output_tokens):
            h.update(np.ascontiguousarray(a, dtype="<f8").tobytes())
        return h.hexdigest()


@dataclass(frozen=True)
class TraceColumns:
    """Which columns of a CSV request table hold what (the Azure traces' names by default);
    ``finish`` is optional (None: the table has no finish times)."""

    timestamp: str = "TIMESTAMP"
    prompt: str = "ContextTokens"
    output: str = "GeneratedTokens"
    finish: str | None = None

    @classmethod
    def from_mapping(cls, cols: Mapping[str, Any]) -> TraceColumns:
        """From a config ``columns`` mapping (keys timestamp, prompt, output[, finish])."""
        known = {"timestamp", "prompt", "output", "finish"}
        extra = sorted(set(cols) - known)
        if extra:
            raise InputError(f"trace columns: unknown keys {extra}; known: {sorted(known)}")
        given = {k: str(v) for k, v in cols.items() if v is not None}
        finish = given.pop("finish", None)
        return cls(**given, finish=finish)


# ---- the parts ---------------------------------------------------------------------------------
def existing_file(path: str | os.PathLike[str], where: str) -> Path:
    """`path` when it is a regular file (or a link to one) that can be read and does not start
    with a UTF-16 or UTF-32 byte-order mark; else one InputError saying what it is instead: no
    such file, a directory, a FIFO (named pipe), a device, a socket, unreadable, or text in
    another encoding (a UTF-8 byte-order mark is accepted by every reader)."""
    p = Path(path)
    what = path_kind(p)
    if what:
        raise InputError(f"{where}: trace file {str(path)!r} {what}; allowed: a regular file")
    try:
        with p.open("rb") as fh:
            head = fh.read(4)
    except OSError as err:
        raise InputError(
            f"{where}: trace file {str(path)!r} cannot be read ({err.strerror})"
        ) from None
    for bom, name in _OTHER_BOMS:
        if head.startswith(bom):
            raise InputError(
                f"{where}: trace file {str(path)!r} starts with a {name} byte-order mark; allowed: "
                "UTF-8 text (with or without its byte-order mark): save it as UTF-8"
            )
    return p


# byte-order marks of encodings no reader takes (UTF-32 first: its LE mark starts like UTF-16's)
_OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def path_kind(path: str | os.PathLike[str]) -> str:
    """ "" when `path` is a regular file (or a link to one); else what it is, as an error message
    says it: "does not exist", "is a directory", "is a FIFO (named pipe)", "is a device",
    "is a socket" (never opened: opening a FIFO would block)."""
    import stat

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as err:
        return f"cannot be read ({err.strerror})"
    if stat.S_ISREG(mode):
        return ""
    if stat.S_ISDIR(mode):
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a FIFO (named pipe), not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is not a regular file"


def csv_header(p: Path, where: str) -> list[str]:
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(p, nrows=0, encoding="utf-8-sig").columns]
    except pd.errors.EmptyDataError:
        raise InputError(f"{where}: {p} is empty (no header, no rows)") from None
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise InputError(f"{where}: {p} cannot be read as CSV: {err}") from None


def _check_rows(p: Path, where: str) -> None:
    """Refuse a ragged CSV: every non-blank line holds as many fields as the header (pandas would
    pad a short row with NaN, or drop a long row's extra fields, without a word)."""
    import csv

    try:
        with p.open(newline="", encoding="utf-8-sig", errors="replace") as fh:
            reader = csv.reader(fh)
            width = None
            for row in reader:
                if not row:
                    continue  # a blank line (pandas skips it too)
                if width is None:
                    width = len(row)
                elif len(row) != width:
                    raise InputError(
                        f"{where}: {p}, line {reader.line_num}: {len(row)} fields where the "
                        f"header has {width} (a ragged row); every row needs one value per column"
                    )
    except csv.Error as err:
        raise InputError(f"{where}: {p} cannot be read as CSV: {err}") from None


def csv_frame(path: str | os.PathLike[str], columns: Sequence[str], where: str) -> Any:
    """The named columns of a CSV (a pandas DataFrame, file order), after refusing a missing
    file, an empty file, a missing column (naming what exists) and a ragged row."""
    import pandas as pd

    p = existing_file(path, where)
    head = csv_header(p, where)
    missing = [c for c in columns if c not in head]
    if missing:
        what = f"column {missing[0]!r}" if len(missing) == 1 else f"columns {missing}"
        raise InputError(f"{where}: {path} has no {what}; its columns are {head}")
    _check_rows(p, where)
    try:
        return pd.read_csv(p, usecols=list(dict.fromkeys(columns)), encoding="utf-8-sig")
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise InputError(f"{where}: {p} cannot be read as CSV: {err}") from None


def _show(value: Any) -> str:
    """A raw value as an error message quotes it."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None:
        return "null"
    if isinstance(value, float) and math.isnan(value):
        return "an empty value or NaN"
    return repr(value)


def data_row(i: int) -> str:
    return f"data row {i + 1}"


def checked(
    values: np.ndarray,
    raw: Callable[[int], Any],
    place: str,
    where: str,
    label: Callable[[int], str] = data_row,
    lo: float = -math.inf,
    hi: float = math.inf,
    unit: str = "",
    lo_open: bool = False,
) -> np.ndarray:
    """`values` (float64, NaN where the raw value is not a number) when every one is a finite
    number in [lo, hi] (lo excluded when `lo_open`); else an InputError naming `where`, the
    `place` (``column 'x' of FILE``), how many values are bad, the first (`label` names its row
    or line, `raw` gives what the file holds) and what is allowed."""
    bounded = math.isfinite(lo) or math.isfinite(hi)
    rng = f"{'>' if lo_open else '>='} {lo:g} and <= {hi:g}{' ' + unit if unit else ''}"
    allowed = f"numbers {rng}" if bounded else "finite numbers"
    for bad, what in (
        (np.isnan(values), "are not numbers (or are empty)"),
        (np.isinf(values), "are not finite"),
    ):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{where}: {place}: {int(bad.sum())} values {what}, the first in {label(i)}: "
                f"{_show(raw(i))}; allowed: {allowed}"
            )
    out = (values <= lo if lo_open else values < lo) | (values > hi)
    if out.any():
        i = int(np.flatnonzero(out)[0])
        raise InputError(
            f"{where}: {place}: {int(out.sum())} values are out of range, the first in "
            f"{label(i)}: {values[i]:g}; allowed: {allowed}"
        )
    return values


def numbers(series: Any) -> np.ndarray:
    """A pandas column as float64, NaN where a value is not a number."""
    import pandas as pd

    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)


def token_counts(series: Any, place: str, where: str) -> np.ndarray:
    """A column of token counts: finite numbers in [0, MAX_TOKENS]."""
    return checked(
        numbers(series), series.iloc.__getitem__, place, where, lo=0, hi=MAX_TOKENS, unit="tokens"
    )


def enough_rows(n: int, f: str, where: str, what: str = "rows") -> None:
    if n < 2:
        raise InputError(f"{where}: {f} holds {n} {what}; a trace needs at least 2")


def span_checked(
    t: np.ndarray, place: str, where: str, label: Callable[[int], str] = data_row, unit: str = "s"
) -> np.ndarray:
    """`t` (finite seconds, any order) when its span, latest minus earliest, is at most
    :data:`~llmqueue.limits.MAX_TIME_S` (the engine's clock keeps sub-millisecond steps there);
    else an InputError naming the latest row."""
    if t.size:
        span = float(t.max() - t.min())
        if not span <= MAX_TIME_S:
            i = int(np.argmax(t))
            raise InputError(
                f"{where}: {place}: {label(i)} lies {span:.4g} {unit} after the earliest "
                f"timestamp; allowed: a span of at most {MAX_TIME_S:g} s"
            )
    return t


def read_table(path: str | os.PathLike[str], where: str = "--trace") -> Any:
    """The whole CSV as a pandas DataFrame (InputError for a missing, empty, unreadable or ragged
    file)."""
    p = existing_file(path, where)
    return csv_frame(p, csv_header(p, where), where)


def read_columns(
    path: str | os.PathLike[str], columns: list[str], where: str = "--trace"
) -> dict[str, np.ndarray]:
    """Numeric columns of a CSV trace as float64 (InputError naming the file, the column and what
    exists, a ragged row, or the column holding a value that is not a finite number)."""
    df = csv_frame(path, columns, where)
    return {
        c: checked(numbers(df[c]), df[c].iloc.__getitem__, f"column {c!r} of {path}", where)
        for c in columns
    }


def read_token_columns(
    path: str | os.PathLike[str], columns: list[str], where: str = "--trace"
) -> dict[str, np.ndarray]:
    """Columns of token counts of a CSV trace as float64, every value a number in
    [0, MAX_TOKENS] (so that it fits the engine's integers); else one InputError naming `where`,
    the column, the file, how many values are bad and the first one's row, as :func:`read_columns`
    does."""
    df = csv_frame(path, columns, where)
    return {c: token_counts(df[c], f"column {c!r} of {path}", where) for c in columns}


def read_column(path: str | os.PathLike[str], column: str, where: str = "token law") -> np.ndarray:
    """One column of token counts (float64, at least one row, every value a number in
    [0, MAX_TOKENS])."""
    df = csv_frame(path, [column], where)
    if len(df) == 0:
        raise InputError(f"{where}: trace file {str(path)!r}, column {column!r}: no rows")
    return token_counts(df[column], f"column {column!r} of {path}", where)


def timestamps_of(series: Any, column: str, f: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """(absolute seconds, seconds since midnight) of a timestamp column: finite numbers are
    seconds (time of day: modulo :data:`DAY_S`), anything else is parsed as date-times."""
    import pandas as pd

    place = f"timestamp column {column!r} of {f}"
    t = numbers(series)
    if not np.isnan(t).any():
        a = checked(t, series.iloc.__getitem__, place, where, lo=0, hi=MAX_EPOCH_S, unit="s")
        return span_checked(a, place, where), np.mod(a, DAY_S)
    parsed = pd.to_datetime(series, errors="coerce", utc=True, format="mixed")
    if parsed.isna().any():
        i = int(np.flatnonzero(parsed.isna().to_numpy())[0])
        raise InputError(
            f"{where}: column {column!r} of {f} holds neither numbers nor dates, the first in "
            f"{data_row(i)}: {_show(series.iloc[i])}; allowed: seconds or date-times"
        )
    epoch = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
    tod = (parsed - parsed.dt.normalize()).dt.total_seconds().to_numpy(dtype=float)
    return span_checked(epoch, place, where), tod


def read_timestamps(
    path: str | os.PathLike[str], column: str, where: str = "--trace"
) -> tuple[np.ndarray, np.ndarray]:
    """(absolute seconds, seconds since midnight) of a timestamp column, in file order: numbers
    are seconds (time of day: modulo :data:`DAY_S`), anything else is parsed as date-times."""
    p = existing_file(path, where)
    head = csv_header(p, where)
    if not column or column not in head:
        raise InputError(f"{where}: {path} has no timestamp column {column!r}; columns: {head}")
    return timestamps_of(csv_frame(p, [column], where)[column], column, str(path), where)


# ---- the trace: token-law spec -----------------------------------------------------------------
TRACE_FORM = "trace:PATH:COLUMN (a CSV file and one of its numeric columns)"


@dataclass(frozen=True)
class TraceSpec:
    """A parsed ``trace:PATH:COLUMN[:cap=L]`` spec: the file, its column, the optional cap."""

    path: str
    column: str
    cap_text: str | None = None


def parse_trace_spec(spec: str) -> TraceSpec:
    """Split ``trace:PATH:COLUMN[:cap=L]`` (PATH may hold colons); InputError when malformed.
    The cap's number is left as text (the token-law parser checks it)."""
    kind, _, rest = spec.strip().partition(":")
    if kind.strip().lower() != "trace":
        raise InputError(f"token law {spec!r} is not a trace law; expected {TRACE_FORM}")
    parts = rest.split(":")
    cap = None
    if len(parts) >= 3 and parts[-1].startswith("cap="):
        cap = parts[-1][4:]
        parts = parts[:-1]
    if len(parts) < 2 or not parts[-1] or not ":".join(parts[:-1]):
        raise InputError(f"token law {spec!r} is malformed; expected {TRACE_FORM}")
    return TraceSpec(":".join(parts[:-1]), parts[-1], cap)
