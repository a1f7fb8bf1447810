"""The flags a workload, a time law and a KV budget are given by, shared by ``llmqueue simulate`` and
``llmqueue plan``, and their conversion into library objects (every error naming its flag).

- workload: ``--tokens LAW`` [``--prompt-tokens LAW``] (Poisson arrivals), or ``--trace PATH``
  (joint prompt/output rows; ``--trace-format NAME``, :data:`llmqueue.traces.FORMATS`) drawn
  i.i.d. or, with ``--replay``, at the trace's own timestamps; ``--predictor SPEC``;
- time law: ``--profile NAME`` (a config profile; its fit.json), ``--step``, ``--batch-time`` or
  ``--latency``; ``--config`` (its profile's keys and numbers checked, errors naming the file,
  the profile and the key: :mod:`llmqueue.profiles`);
- KV budget: ``--kv-tokens N|auto|none`` with ``--kv-memory-fraction``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.latency import parse_batch_time, parse_linear_latency, parse_step_law
from llmqueue.limits import MAX_RATE_PER_S, integer
from llmqueue.plan.space import MAX_KV_TOKENS
from llmqueue.policy import predicting_names
from llmqueue.profiles import Latency, kv_tokens_of_fit, named_latency
from llmqueue.sim.predictors import KNOWN, Column, parse_predictor
from llmqueue.sim.workload import (
    PoissonWorkload,
    ReplayWorkload,
    TraceWorkload,
    Workload,
    column_predictions,
)
from llmqueue.tokens import LAW_FORMS, parse_law
from llmqueue.traces import (
    FORMATS,
    TraceColumns,
    detect_format,
    format_columns,
    path_kind,
    read_trace,
)

__all__ = [
    "DEFAULT_CONFIG",
    "MAX_KV_TOKENS",
    "add_workload_flags",
    "add_law_flags",
    "flagged",
    "predictor_from",
    "workload_from",
    "latency_from",
    "kv_tokens_from",
    "EXPORT_FORMATS",
    "check_export",
    "check_outputs",
    "smallest_request",
    "at_rate",
    "export_workload",
]

EXPORT_FORMATS = ("vidur",)

DEFAULT_CONFIG = "config/config.yaml"


def add_workload_flags(g: Any) -> None:
    """--tokens, --prompt-tokens, --trace (--trace-format, --replay, its columns), --predictor."""
    g.add_argument(
        "--tokens",
        help=f"output-token law: {', '.join(LAW_FORMS)} (forms and caps: docs/cli.md); e.g. "
        "lognormal:mu=5,sigma=1,cap=2048",
    )
    g.add_argument("--prompt-tokens", help="prompt-token law (default: no prompt)")
    g.add_argument("--trace", help="a request table with prompt and output tokens (joint rows)")
    g.add_argument(
        "--trace-format",
        choices=sorted(FORMATS),
        default="auto",
        help="the --trace file's format (default auto: recognised from the file; csv: the "
        "columns below; docs/traces.md)",
    )
    g.add_argument("--replay", action="store_true", help="replay --trace at its own timestamps")
    g.add_argument("--prompt-column", default="ContextTokens")
    g.add_argument("--output-column", default="GeneratedTokens")
    g.add_argument("--timestamp-column", default="TIMESTAMP")
    g.add_argument("--predictor", help=KNOWN)
    g.add_argument(
        "--export",
        nargs=2,
        metavar=("FORMAT", "PATH"),
        help="also write the requests run (arrival, prompt, output) as FORMAT: vidur (its "
        "request CSV, to run the same load through vidur; docs/traces.md)",
    )


def add_law_flags(g: Any) -> None:
    """--profile, --step, --batch-time, --latency and --config (exactly one law is given)."""
    g.add_argument(
        "--profile",
        help="a named profile of --config (step_profiles, batch_profiles, latency_profiles)",
    )
    g.add_argument(
        "--step",
        help="continuous: c0=S,c_tok=S,c_ctx=S (s, s/token, s/token), or Dai et al.'s staircase "
        "staircase:c0=S,stair=S,tokens=N[,c_ctx=S] (c0 + stair x ceil(tokens in the step / N))",
    )
    g.add_argument("--batch-time", help="Eq. (18): k1=S,k2=S,k3=S,k4=S (s, s, s/token, s/token)")
    g.add_argument("--latency", help="one request: a=S_PER_TOKEN,b0=S (S = a N + b0)")
    g.add_argument(
        "--config", default=DEFAULT_CONFIG, help=f"config for --profile (default {DEFAULT_CONFIG})"
    )


def predictor_from(args: argparse.Namespace, needed: bool, *, formers: bool = True) -> Any:
    """The --predictor of `args` (None when not given); `needed`: refuse its absence (the message
    names --batching's predicting formers only when the command has `formers`)."""
    if args.predictor is None:
        if needed:
            raise InputError(
                f"--predictor SPEC is needed by {predicting_names(formers=formers)} ({KNOWN})"
            )
        return None
    return flagged("--predictor", parse_predictor, args.predictor)


def flagged(flag: str, parse: Any, *a: Any) -> Any:
    """`parse(*a)`, its InputError naming `flag` (unless it already does)."""
    try:
        return parse(*a)
    except InputError as err:
        text = str(err)
        raise InputError(text if text.startswith(flag) else f"{flag}: {text}") from None


def workload_from(args: argparse.Namespace, predictor: Any) -> Workload:
    """The workload of the workload flags (:func:`add_workload_flags`) at --rate (1/s if none)."""
    kw = {"predictor": predictor} if predictor is not None else {}
    rate = args.rate if args.rate is not None else 1.0
    if args.tokens is not None:
        law = flagged("--tokens", parse_law, args.tokens, ".")
        prompt = (
            flagged("--prompt-tokens", parse_law, args.prompt_tokens, ".")
            if args.prompt_tokens
            else None
        )
        return PoissonWorkload(law, rate, prompt=prompt, **kw)
    what = path_kind(args.trace)
    if what:
        raise InputError(f"--trace: {args.trace!r} {what}; allowed: a regular file")
    if args.replay:
        return _replay(args, kw)
    return TraceWorkload.from_csv(
        args.trace,
        rate,
        trace_format=args.trace_format,
        prompt_column=args.prompt_column,
        output_column=args.output_column,
        timestamp_column=args.timestamp_column,  # read only by a learned predictor's features
        where="--trace",  # token counts in [0, MAX_TOKENS]: a message names the flag, column, row
        **kw,
    )


def _replay(args: argparse.Namespace, kw: dict[str, Any]) -> Workload:
    """The --trace replayed at its own timestamps (at --rate when given), described by its
    format's own column names; a replay whose rate lies outside (0, MAX_RATE_PER_S] (its rows
    squeezed into a tiny span) is refused naming --trace."""
    columns = TraceColumns(args.timestamp_column, args.prompt_column, args.output_column)
    fmt = args.trace_format
    if fmt == "auto":
        fmt = detect_format(args.trace, columns, where="--trace")
    rows = read_trace(args.trace, columns, format=fmt, where="--trace")
    if isinstance(kw.get("predictor"), Column):  # each row's own prediction, from its column
        kw = {**kw, "row_pred": column_predictions(args.trace, kw["predictor"], fmt, "--trace")}
    names = ",".join(format_columns(fmt, columns))
    source = f"{Path(args.trace).name}:{names}" + ("" if fmt == "csv" else f" ({fmt})")
    w = flagged(
        "--trace",
        lambda: ReplayWorkload(
            rows.arrival_s, rows.prompt_tokens, rows.output_tokens, 1.0, source=source,
            time_of_day_s=rows.time_of_day_s, blocks=rows.blocks, **kw,
        ),
    )  # fmt: skip
    if args.rate is not None:
        return at_rate(w, args.rate, "--rate")
    if not w.rate_per_s <= MAX_RATE_PER_S:
        raise InputError(
            f"--trace {args.trace}: its {w.total} rows arrive within "
            f"{float(rows.arrival_s[-1] - rows.arrival_s[0]):.3g} s, a rate of "
            f"{w.rate_per_s:.3g}/s; allowed: at most {MAX_RATE_PER_S:g}/s (give --rate)"
        )
    return w


def at_rate(workload: Workload, rate_per_s: float, flag: str) -> Workload:
    """`workload` at `rate_per_s` (requests/s, from `flag`), or an InputError naming the flag when
    that rate lies outside (0, MAX_RATE_PER_S] or the workload cannot be scaled to it."""
    if not (0 < rate_per_s <= MAX_RATE_PER_S):
        raise InputError(
            f"{flag}: it asks for {rate_per_s:.6g} requests/s; allowed: a rate in "
            f"(0, {MAX_RATE_PER_S:g}] (the highest sustainable rate may be unbounded: give --rate)"
        )
    return flagged(flag, workload.at_rate, rate_per_s)


def smallest_request(workload: Workload) -> float:
    """The fewest KV tokens one request of `workload` holds (prompt + output, output >= 1)."""
    if isinstance(workload, PoissonWorkload):
        lo_out = max(1.0, float(workload.output.support[0]))
        lo_prompt = float(workload.prompt.support[0]) if workload.prompt is not None else 0.0
        return lo_out + lo_prompt
    rows = workload.prompt_tokens + workload.output_tokens  # type: ignore[attr-defined]
    return float(rows.min())


def check_outputs(
    outputs: Sequence[tuple[str, str | None]], read: Sequence[tuple[str, str | None]] = ()
) -> None:
    """Refuse one file given for two outputs (``--csv X --export vidur X``: one would overwrite
    the other), or an output that is a file the command reads; (flag, path) pairs, paths
    compared resolved (links, ``..``)."""
    import os

    inputs = {os.path.realpath(p): f for f, p in read if p}
    seen: dict[str, str] = {}
    for flag, path in outputs:
        if not path:
            continue
        key = os.path.realpath(path)
        if key in inputs:
            raise InputError(
                f"{flag} {path}: the file {inputs[key]} reads; give the output its own file"
            )
        if key in seen:
            raise InputError(
                f"{flag} {path}: also the output of {seen[key]}; give each output its own file"
            )
        seen[key] = flag


def latency_from(args: argparse.Namespace, batching: str) -> tuple[Latency, dict[str, Any] | None]:
    """The time law of the law flags (:func:`add_law_flags`) for batch former `batching`, and the
    profile's fit.json (None for a law given on the command line)."""
    if args.step:
        return parse_step_law(args.step), None
    if args.batch_time:
        return parse_batch_time(args.batch_time), None
    if args.latency:
        return parse_linear_latency(args.latency), None
    import yaml

    cfg_path = Path(args.config)
    if not cfg_path.is_file():
        raise InputError(f"--config: {args.config!r} does not exist (--profile NAME reads it)")
    try:
        config = yaml.safe_load(cfg_path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise InputError(f"--config {args.config}: not a YAML file ({first})") from None
    if not isinstance(config, dict):
        raise InputError(
            f"--config {args.config}: must be a YAML mapping of sections, got a "
            f"{type(config).__name__}"
        )
    # fit.json files live under the project root: the folder above config/ (else here)
    here = cfg_path.resolve().parent
    root = here.parent if here.name == "config" else Path.cwd()
    # a profile with a missing key, a number out of range, a bad fit.json: named with the file
    return named_latency(config, args.profile, batching, root, where=f"--config {args.config}")


def kv_tokens_from(
    text: str | None, memory_fraction: float, fit: dict[str, Any] | None
) -> int | None:
    """--kv-tokens N, auto (from the profile's model and GPU at `memory_fraction`) or none."""
    if text is None or text == "none":
        return None
    if text == "auto":
        if fit is None:
            raise InputError("--kv-tokens auto needs --profile NAME (its model and GPU); or give N")
        n = kv_tokens_of_fit(fit, memory_fraction=memory_fraction)
        if n < 1:
            raise InputError(
                f"--kv-memory-fraction {memory_fraction:g}: the weights already fill that "
                "share of the GPU's memory, so the KV cache gets no token; give a larger fraction "
                "or --kv-tokens N"
            )
        return n
    try:
        return integer(text, "--kv-tokens", lo=1, hi=MAX_KV_TOKENS, unit="tokens")
    except InputError:
        raise InputError(
            f"--kv-tokens must be an integer in [1, {MAX_KV_TOKENS:g}] tokens, auto or none, "
            f"got {text!r}"
        ) from None


def check_export(export: list[str] | None) -> None:
    """Refuse a bad ``--export FORMAT PATH`` before any simulation."""
    if export is None:
        return
    from llmqueue.io import check_output_path

    fmt, path = export
    if fmt not in EXPORT_FORMATS:
        raise InputError(f"--export: format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    check_output_path(path, "--export")


def export_workload(workload: Workload, export: list[str], *, seed: Any, requests: int) -> None:
    """Write the first `requests` requests `workload` generates with `seed` (the ones a run with
    that seed simulates, whole tokens) in the ``--export`` format."""
    from llmqueue.sim.engine import DEFAULT_CHUNK
    from llmqueue.traces import DAY_S, TraceRows, write_vidur

    fmt, path = export
    if fmt != "vidur":  # pragma: no cover - check_export refused it
        raise InputError(f"--export: format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    parts: list[Any] = []
    left = requests
    for ch in workload.chunks(seed, DEFAULT_CHUNK, True):  # the engine's chunks: its draws
        parts.append(ch)
        left -= ch.arrival_s.size
        if left <= 0:
            break
    import numpy as np

    arr = np.concatenate([c.arrival_s for c in parts])[:requests]
    prompt = np.concatenate([c.prompt for c in parts])[:requests]
    out = np.concatenate([c.output for c in parts])[:requests]
    rows = TraceRows(arr - arr[0], np.mod(arr, DAY_S), prompt, out, source=workload.describe())
    write_vidur(rows, path)
