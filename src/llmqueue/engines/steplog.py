"""Per-iteration record of a serving engine: what one scheduler step ran and when.

One row per engine iteration that scheduled any token (the columns of :data:`STEP_COLUMNS`):

- ``t_sched_s``: clock (``time.monotonic``, seconds, the same clock in every process of the
  machine) when the scheduler started planning the iteration; ``t_done_s`` when the engine had
  the iteration's output (after the model ran and the scheduler took its tokens);
- ``decode_seqs``: scheduled requests that each advance one generated token (their whole prompt
  and earlier output already in the KV cache); ``prefill_tokens``: every other scheduled token
  (prompt chunks, and recomputation of a preempted request's prompt and output);
- ``context_tokens``: the KV tokens the iteration's attention reads, summed over the scheduled
  requests: each request's cached tokens after the step (a decode of a sequence holding c tokens
  counts c + 1; a prefill chunk from k to k + n counts k + n). This is the ``context_tokens`` of
  :class:`llmqueue.latency.StepLaw`;
- ``running`` / ``waiting``: queue lengths after the step was planned; ``preempted``: requests
  preempted while planning it; ``kv_usage``: fraction of KV blocks in use; ``first_token_ids``:
  requests whose prompt completes in this step (they get their first token from it), joined
  with ``|``;
- (runs of the validation matrix, :data:`STEP_LOG_COLUMNS`) ``admitted_ids``: requests that start
  from an empty cache in this step (admitted, or resumed after a preemption); ``preempted_ids``:
  requests preempted while planning it; ``finished_ids``: requests that finished since the
  previous step was planned (vLLM's ``SchedulerOutput.finished_req_ids``); all joined with ``|``.

The rows are computed by :func:`step_row` from plain numbers, so the bookkeeping is tested
without an engine; :mod:`llmqueue.engines.probe` feeds it from vLLM's scheduler.

The model worker's own record (:data:`MODEL_LOG_COLUMNS`, written by
:class:`llmqueue.engines.worker.TimingWorker` to the file named by ``LLMQUEUE_MODEL_LOG``): one
row per iteration, ``t_start_s`` / ``t_end_s`` (the same ``time.monotonic`` clock) from the
worker receiving the iteration (``execute_model``) to its sampled tokens (the end of
``sample_tokens``); ``wait_s`` the part of that in which the worker waited between the two calls
(its reply to the engine core, the core's step between them and the core's sample request: 0
when the output came with ``execute_model``), so the model's own compute is
``t_end_s - t_start_s - wait_s``; ``cpu_s`` the worker thread's CPU time over the whole span (it
spins while it waits); ``tokens`` and ``requests`` the iteration's scheduled tokens and requests.
Set against the scheduler's ``t_sched_s`` / ``t_done_s`` it separates the model's time from the
engine's (planning, messages between processes).
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "STEP_COLUMNS",
    "STEP_EXTRA_COLUMNS",
    "STEP_LOG_COLUMNS",
    "STEP_LOG_ENV",
    "ScheduledRequest",
    "step_row",
    "StepLogWriter",
    "MODEL_LOG_ENV",
    "MODEL_LOG_COLUMNS",
    "model_row",
    "ForwardTimer",
    "core_facts_path",
    "write_core_facts",
]

# The engine-core process finds the file to append its rows to in this environment variable.
STEP_LOG_ENV = "LLMQUEUE_STEP_LOG"
# ... and the model worker the file for its forward passes (llmqueue.engines.worker).
MODEL_LOG_ENV = "LLMQUEUE_MODEL_LOG"
MODEL_LOG_COLUMNS = ["t_start_s", "t_end_s", "wait_s", "cpu_s", "tokens", "requests"]

STEP_COLUMNS = [
    "step",
    "t_sched_s",
    "t_planned_s",
    "t_done_s",
    "scheduled_reqs",
    "decode_seqs",
    "prefill_reqs",
    "prefill_tokens",
    "context_tokens",
    "decode_context_tokens",
    "running",
    "waiting",
    "preempted",
    "kv_usage",
    "first_token_ids",
]

# written by the matrix runs' probe after STEP_COLUMNS (the committed FCFS run predates them)
STEP_EXTRA_COLUMNS = ["admitted_ids", "preempted_ids", "finished_ids"]
STEP_LOG_COLUMNS = [*STEP_COLUMNS, *STEP_EXTRA_COLUMNS]


@dataclass(frozen=True)
class ScheduledRequest:
    """One request as a scheduler step leaves it (token counts; no timing).

    `scheduled`: tokens computed for it in this step; `computed_after`: its tokens in the KV cache
    once the step has run; `known_tokens`: prompt plus output tokens it has so far (before the
    step's new token); `output_tokens`: output tokens it has so far.
    """

    request_id: str
    scheduled: int
    computed_after: int
    known_tokens: int
    output_tokens: int

    @property
    def is_decode(self) -> bool:
        """One new token on top of a cache holding all earlier tokens (prompt and output)."""
        return (
            self.scheduled == 1
            and self.output_tokens > 0
            and self.computed_after - self.scheduled == self.known_tokens - 1
        )

    @property
    def starts_from_empty(self) -> bool:
        """Its first chunk from an empty cache: admitted now, or resumed after a preemption."""
        return self.computed_after == self.scheduled

    @property
    def completes_prompt(self) -> bool:
        """A first-time prefill chunk that reaches the end of the prompt: the step samples the
        request's first output token."""
        return self.output_tokens == 0 and self.computed_after >= self.known_tokens


def step_row(
    step: int,
    t_sched_s: float,
    t_planned_s: float,
    t_done_s: float,
    requests: Iterable[ScheduledRequest],
    running: int,
    waiting: int,
    preempted: int,
    kv_usage: float,
    preempted_ids: Iterable[str] = (),
    finished_ids: Iterable[str] = (),
) -> dict[str, Any]:
    """The :data:`STEP_LOG_COLUMNS` row of one iteration from its scheduled requests (and the
    ids vLLM reports preempted while planning it and finished before it)."""
    reqs = list(requests)
    decode = [r for r in reqs if r.is_decode]
    prefill = [r for r in reqs if not r.is_decode]
    return {
        "step": int(step),
        "t_sched_s": float(t_sched_s),
        "t_planned_s": float(t_planned_s),
        "t_done_s": float(t_done_s),
        "scheduled_reqs": len(reqs),
        "decode_seqs": len(decode),
        "prefill_reqs": len(prefill),
        "prefill_tokens": sum(r.scheduled for r in prefill),
        "context_tokens": sum(r.computed_after for r in reqs),
        "decode_context_tokens": sum(r.computed_after for r in decode),
        "running": int(running),
        "waiting": int(waiting),
        "preempted": int(preempted),
        "kv_usage": float(kv_usage),
        "first_token_ids": "|".join(r.request_id for r in reqs if r.completes_prompt),
        "admitted_ids": "|".join(r.request_id for r in reqs if r.starts_from_empty),
        "preempted_ids": "|".join(sorted(str(x) for x in preempted_ids)),
        "finished_ids": "|".join(sorted(str(x) for x in finished_ids)),
    }


def model_row(
    t_start_s: float, t_end_s: float, wait_s: float, cpu_s: float, tokens: int, requests: int
) -> dict[str, Any]:
    """The :data:`MODEL_LOG_COLUMNS` row of one iteration in the worker (seconds; counts)."""
    if not t_end_s >= t_start_s:
        raise ValueError(f"model row: t_end_s {t_end_s} before t_start_s {t_start_s}")
    if not 0 <= wait_s <= t_end_s - t_start_s:
        raise ValueError(
            f"model row: wait_s {wait_s} must lie in [0, t_end_s - t_start_s = {t_end_s - t_start_s}]"
        )
    if cpu_s < 0 or tokens < 0 or requests < 0:
        raise ValueError(
            f"model row: cpu_s, tokens and requests must be >= 0, got {cpu_s}, {tokens}, {requests}"
        )
    return {
        "t_start_s": float(t_start_s),
        "t_end_s": float(t_end_s),
        "wait_s": float(wait_s),
        "cpu_s": float(cpu_s),
        "tokens": int(tokens),
        "requests": int(requests),
    }


class ForwardTimer:
    """Pairs a worker's ``execute_model`` and ``sample_tokens`` calls into :func:`model_row` rows
    written to `writer` (any object with ``write(row)``); `clock` and `cpu_clock` give seconds
    (``time.monotonic`` and ``time.thread_time`` in the worker). Call :meth:`begin` as
    ``execute_model`` starts, :meth:`executed` as it returns, :meth:`sampling` as
    ``sample_tokens`` starts and :meth:`sampled` as it returns; an iteration with no scheduled
    token is not recorded."""

    def __init__(
        self, writer: Any, clock: Callable[[], float], cpu_clock: Callable[[], float]
    ) -> None:
        self._writer = writer
        self._clock = clock
        self._cpu = cpu_clock
        self._open = False
        self._t0 = self._c0 = self._exec_end = self._wait = 0.0
        self._tokens = self._requests = 0

    def begin(self, tokens: int, requests: int) -> None:
        self._open = tokens > 0
        self._t0, self._c0 = self._clock(), self._cpu()
        self._tokens, self._requests = int(tokens), int(requests)
        self._wait = 0.0

    def executed(self, has_output: bool) -> None:
        if not self._open:
            return
        self._exec_end = self._clock()
        if has_output:  # the output came with the forward pass: no sample_tokens call follows
            self._write()

    def sampling(self) -> None:
        if self._open:
            self._wait = self._clock() - self._exec_end

    def sampled(self) -> None:
        if self._open:
            self._write()

    def _write(self) -> None:
        self._open = False
        self._writer.write(
            model_row(self._t0, self._clock(), self._wait, self._cpu() - self._c0,
                      self._tokens, self._requests)
        )  # fmt: skip


class StepLogWriter:
    """Appends rows to a CSV file, one flushed line per iteration (`columns`: the scheduler's
    :data:`STEP_LOG_COLUMNS` by default, the worker's :data:`MODEL_LOG_COLUMNS`).

    The header is written when the file is new or empty; a row is flushed at once, so the rows
    of an engine process that is killed are all on disk except, at worst, the last.
    """

    def __init__(
        self, path: str | os.PathLike[str], columns: Sequence[str] = tuple(STEP_LOG_COLUMNS)
    ) -> None:
        self.path = os.fspath(path)
        self.columns = list(columns)
        new = not os.path.exists(self.path) or os.path.getsize(self.path) == 0
        self._fh: IO[str] = open(self.path, "a", newline="", buffering=1)  # noqa: SIM115
        self._writer = csv.DictWriter(self._fh, fieldnames=self.columns, lineterminator="\n")
        if new:
            self._writer.writeheader()

    def write(self, row: Mapping[str, Any]) -> None:
        self._writer.writerow({k: _fmt(row[k]) for k in self.columns})

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


def _fmt(v: Any) -> Any:
    return f"{v:.6f}" if isinstance(v, float) else v


def core_facts_path(step_log: str | os.PathLike[str]) -> str:
    """Where the engine core writes its scheduler's limits, beside the step log."""
    return os.fspath(step_log) + ".core.json"


def write_core_facts(path: str | os.PathLike[str], facts: Mapping[str, Any]) -> None:
    from llmqueue.io import atomic_path

    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(dict(facts), indent=2, sort_keys=True) + "\n")
