"""Every reader of request tables, behind one small interface returning one typed table.

A *request table* is a list of requests in arrival order with their prompt and output tokens:
the Azure LLM inference traces (``data/traces/``), any CSV with such columns, the request tables
of a vLLM validation run (``requests_<run>.csv``, which also carry the measured first token and
finish times), and the traces operators have: BurstGPT's CSV, Mooncake's JSONL, vidur's request
CSV and vLLM's benchmark result JSON (docs/traces.md). Every one of them is read here into
:class:`TraceRows`, whatever the file's format; the simulators' workloads
(:mod:`llmqueue.sim.workload`), the learned predictor (:mod:`llmqueue.predictor`), token laws of
a trace column (:mod:`llmqueue.tokens`), the profiling and validation drivers and the studies read
tables through this package only (its parts: :mod:`llmqueue.traces.base`, the typed table and
the shared readers; :mod:`llmqueue.traces.formats`, one reader per format).

- :func:`read_trace`: a file as :class:`TraceRows`, by format name (:data:`FORMATS`): ``csv``
  (named timestamp, prompt, output and optional finish columns; timestamps are seconds or
  date-times), ``vllm-requests`` (a validation run's request table), ``ssjf-predictions``
  (SSJF's published output lengths with their proxy model's predicted class,
  ``data/ssjf-predictions/``), ``burstgpt``, ``mooncake``, ``vidur``, ``vllm-bench``, or
  ``auto`` (the default: the format :func:`detect_format` recognises from the file);
- :func:`write_vidur`: rows as vidur's request CSV (atomically), to run the same load in vidur;
- :func:`read_columns`, :func:`read_token_columns`, :func:`read_timestamps`, :func:`read_column`,
  :func:`read_table`: the parts they are built from, for callers that need only some columns;
- :func:`parse_trace_spec`: the one parser of a ``trace:PATH:COLUMN[:cap=L]`` token-law spec.

A new format plugs in as one :class:`~llmqueue.traces.formats.TraceFormat` record in
:data:`FORMATS`: its reader ``(path, columns, where) -> TraceRows``, the names of its arrival,
prompt and output columns, and the CSV header or JSON keys :func:`detect_format` recognises it
by. Errors are
:class:`~llmqueue.errors.InputError` s of one line naming the file, the column or key, the row
and what is allowed (`where` names the flag or config key the path came from): a missing file or
column, an empty file, a ragged CSV row, a value that is not a finite number or is out of range
(token counts in [0, :data:`~llmqueue.limits.MAX_TOKENS`]). Units: seconds and tokens (Mooncake's
timestamps are read in ms and returned in s). pandas is imported on first use.
"""

from llmqueue.traces.base import (
    DAY_S,
    TRACE_FORM,
    TraceColumns,
    TraceRows,
    TraceSpec,
    parse_trace_spec,
    path_kind,
    read_column,
    read_columns,
    read_table,
    read_timestamps,
    read_token_columns,
)
from llmqueue.traces.formats import (
    BURSTGPT_COLUMNS,
    FORMATS,
    MOONCAKE_KEYS,
    PREDICTED_CLASS,
    SSJF_PREDICTION_COLUMNS,
    VIDUR_COLUMNS,
    VLLM_BENCH_KEYS,
    VLLM_REQUEST_COLUMNS,
    TraceFormat,
    detect_format,
    format_columns,
    read_trace,
    write_vidur,
)

__all__ = [
    "DAY_S",
    "TraceRows",
    "TraceColumns",
    "TraceSpec",
    "TRACE_FORM",
    "FORMATS",
    "TraceFormat",
    "VLLM_REQUEST_COLUMNS",
    "SSJF_PREDICTION_COLUMNS",
    "PREDICTED_CLASS",
    "BURSTGPT_COLUMNS",
    "MOONCAKE_KEYS",
    "VIDUR_COLUMNS",
    "VLLM_BENCH_KEYS",
    "detect_format",
    "format_columns",
    "path_kind",
    "parse_trace_spec",
    "read_trace",
    "read_table",
    "read_columns",
    "read_token_columns",
    "read_column",
    "read_timestamps",
    "write_vidur",
]
