"""Every reader of request tables, behind one small interface returning one typed table.

A *request table* is a list of requests in arrival order with their prompt and output tokens:
the Azure LLM inference traces (``data/traces/``), any CSV with such columns, and the request
tables of a vLLM validation run (``requests_<run>.csv``, which also carry the measured first
token and finish times). Every one of them is read here into :class:`TraceRows`, whatever the
file's format; the simulators' workloads (:mod:`llmqueue.sim.workload`), the learned predictor
(:mod:`llmqueue.predictor`), token laws of a trace column (:mod:`llmqueue.tokens`), the profiling
and validation drivers and the studies read tables through this module only.

- :func:`read_trace`: a file as :class:`TraceRows`, by format name (:data:`FORMATS`): ``csv``
  (named timestamp, prompt, output and optional finish columns; timestamps are seconds or
  date-times), ``vllm-requests`` (a validation run's request table) or ``ssjf-predictions``
  (SSJF's published output lengths with their proxy model's predicted class,
  ``data/ssjf-predictions/``);
- :func:`read_columns`, :func:`read_timestamps`, :func:`read_column`, :func:`read_table`: the
  parts they are built from, for callers that need only some columns;
- :func:`parse_trace_spec`: the one parser of a ``trace:PATH:COLUMN[:cap=L]`` token-law spec.

A new format plugs in as one reader function ``(path, columns, where) -> TraceRows`` added to
:data:`FORMATS`. Errors are :class:`~llmqueue.errors.InputError` s naming the file, the column
and what exists (`where` names the flag or config key the path came from). Units: seconds and
tokens. pandas is imported on first use.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.errors import InputError

__all__ = [
    "DAY_S",
    "TraceRows",
    "TraceColumns",
    "TraceSpec",
    "FORMATS",
    "VLLM_REQUEST_COLUMNS",
    "SSJF_PREDICTION_COLUMNS",
    "PREDICTED_CLASS",
    "parse_trace_spec",
    "read_trace",
    "read_table",
    "read_columns",
    "read_column",
    "read_timestamps",
]

DAY_S = 86_400.0  # seconds in a day: a numeric timestamp's time of day is taken modulo this


@dataclass(frozen=True)
class TraceRows:
    """Requests in arrival order: arrival (s from the first request, unless the reader says
    otherwise), time of day (s since midnight), prompt and output tokens, optionally each
    request's finish time (s, the arrival's clock); ``source`` names where they came from.

    ``frame``: the table as it was read (a pandas DataFrame with every column, in file order),
    for formats that carry more than a trace (a validation run's measured times); None for the
    others."""

    arrival_s: np.ndarray
    time_of_day_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    finish_s: np.ndarray | None = None
    source: str = "trace"
    frame: Any = field(default=None, repr=False, compare=False)

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

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    def take(self, lo: int, hi: int | None = None) -> TraceRows:
        """Rows lo..hi-1 (arrival times kept on the trace's clock)."""
        s = slice(lo, hi)
        fin = None if self.finish_s is None else self.finish_s[s]
        frame = None if self.frame is None else self.frame.iloc[s]
        return TraceRows(
            self.arrival_s[s],
            self.time_of_day_s[s],
            self.prompt_tokens[s],
            self.output_tokens[s],
            fin,
            self.source,
            frame,
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
def _existing(path: str | os.PathLike[str], where: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{where}: trace file {str(path)!r} does not exist")
    return p


def _header(p: Path, where: str) -> list[str]:
    import pandas as pd

    try:
        return [str(c) for c in pd.read_csv(p, nrows=0).columns]
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise InputError(f"{where}: {p} cannot be read as CSV: {err}") from None


def read_table(path: str | os.PathLike[str], where: str = "--trace") -> Any:
    """The whole CSV as a pandas DataFrame (InputError for a missing or unreadable file)."""
    import pandas as pd

    p = _existing(path, where)
    try:
        return pd.read_csv(p)
    except Exception as err:  # noqa: BLE001 - any parse failure is the user's file
        raise InputError(f"{where}: {p} cannot be read as CSV: {err}") from None


def read_columns(
    path: str | os.PathLike[str], columns: list[str], where: str = "--trace"
) -> dict[str, np.ndarray]:
    """Numeric columns of a CSV trace as float64 (InputError naming the file, the column and what
    exists, or the column holding a non-numeric or empty value)."""
    import pandas as pd

    p = _existing(path, where)
    head = _header(p, where)
    missing = [c for c in columns if c not in head]
    if missing:
        what = f"column {missing[0]!r}" if len(missing) == 1 else f"columns {missing}"
        raise InputError(f"{where}: {path} has no {what}; its columns are {head}")
    df = pd.read_csv(p, usecols=columns)
    out = {}
    for c in columns:
        v = pd.to_numeric(df[c], errors="coerce")
        if v.isna().any():
            raise InputError(
                f"{where}: column {c!r} of {path}: {int(v.isna().sum())} values are not numbers "
                "(or are empty)"
            )
        out[c] = v.to_numpy(dtype=float)
    return out


def read_column(path: str | os.PathLike[str], column: str, where: str = "token law") -> np.ndarray:
    """One column of token counts (float64, at least one row, every value a number >= 0)."""
    values = read_columns(path, [column], where)[column]
    if values.size == 0:
        raise InputError(f"{where}: trace file {str(path)!r}, column {column!r}: no rows")
    if np.any(values < 0):
        raise InputError(
            f"{where}: trace file {str(path)!r}, column {column!r}: token counts must be >= 0"
        )
    return values


def read_timestamps(
    path: str | os.PathLike[str], column: str, where: str = "--trace"
) -> tuple[np.ndarray, np.ndarray]:
    """(absolute seconds, seconds since midnight) of a timestamp column, in file order: numbers
    are seconds (time of day: modulo :data:`DAY_S`), anything else is parsed as date-times."""
    import pandas as pd

    p = _existing(path, where)
    head = _header(p, where)
    if not column or column not in head:
        raise InputError(f"{where}: {path} has no timestamp column {column!r}; columns: {head}")
    ts = pd.read_csv(p, usecols=[column])[column]
    t = pd.to_numeric(ts, errors="coerce")
    if not t.isna().any():
        a = t.to_numpy(dtype=float)
        return a, np.mod(a, DAY_S)
    parsed = pd.to_datetime(ts, errors="coerce", utc=True, format="mixed")
    if parsed.isna().any():
        raise InputError(f"{where}: column {column!r} of {path} holds neither numbers nor dates")
    epoch = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(dtype=float)
    tod = (parsed - parsed.dt.normalize()).dt.total_seconds().to_numpy(dtype=float)
    return epoch, tod


# ---- the formats -------------------------------------------------------------------------------
def _read_csv(path: str | os.PathLike[str], columns: TraceColumns, where: str) -> TraceRows:
    """A CSV request table with named columns, sorted by arrival (stable), arrival times from the
    earliest request."""
    cols = read_columns(path, [columns.prompt, columns.output], where)
    abs_s, tod = read_timestamps(path, columns.timestamp, where)
    origin = float(abs_s.min())
    arr = abs_s - origin
    fin = None
    if columns.finish:
        fin = read_timestamps(path, columns.finish, where)[0] - origin
    order = np.argsort(arr, kind="stable")
    return TraceRows(
        arr[order],
        tod[order],
        cols[columns.prompt][order],
        cols[columns.output][order],
        None if fin is None else fin[order],
        source=f"{where} {Path(path).name}",
    )


# The columns of a validation run's request table (``requests_<run>.csv``, written by the vLLM
# driver, :mod:`llmqueue.validation.record`) that a replay and a comparison need: times in s from
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


Reader = Callable[[str | os.PathLike[str], TraceColumns, str], TraceRows]
FORMATS: dict[str, Reader] = {
    "csv": _read_csv,
    "vllm-requests": _read_vllm_requests,
    "ssjf-predictions": _read_ssjf_predictions,
}


def read_trace(
    path: str | os.PathLike[str],
    columns: TraceColumns | None = None,
    *,
    format: str = "csv",  # noqa: A002 - the format's name, as the CLI flag says
    where: str = "--trace",
) -> TraceRows:
    """A request table as :class:`TraceRows` by its format's reader (:data:`FORMATS`)."""
    reader = FORMATS.get(format)
    if reader is None:
        raise InputError(f"{where}: unknown trace format {format!r}; known: {sorted(FORMATS)}")
    return reader(path, columns or TraceColumns(), where)


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
