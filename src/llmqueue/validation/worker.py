"""vLLM CPU worker that times every forward pass (runs inside vLLM's model worker process).

Passed to vLLM by name, ``worker_cls="llmqueue.validation.worker.TimingWorker"`` (vLLM's
documented way to use a custom worker class); it runs the model exactly as vLLM's own
``vllm.v1.worker.cpu_worker.CPUWorker`` does and only adds, per iteration that scheduled any
token, one row of :data:`llmqueue.validation.steplog.MODEL_LOG_COLUMNS` appended to the CSV file
named by the environment variable ``LLMQUEUE_MODEL_LOG`` (nothing is recorded when it is unset):
from the worker receiving the iteration (``execute_model``) to its sampled tokens
(``sample_tokens``, or the end of ``execute_model`` when that already returns the output), the
wall-clock time and the worker thread's CPU time in between. Two clock reads and one short line
per iteration of about 20 ms.

This module imports vLLM at import time: only the engine imports it, never the main environment.
"""

from __future__ import annotations

import os
import time
from typing import Any

from vllm.v1.worker.cpu_worker import CPUWorker

from llmqueue.validation.steplog import (
    MODEL_LOG_COLUMNS,
    MODEL_LOG_ENV,
    StepLogWriter,
    model_row,
)

__all__ = ["TimingWorker"]


class TimingWorker(CPUWorker):  # type: ignore[misc]
    """vLLM's CPU worker plus a per-forward-pass record (see :mod:`llmqueue.validation.steplog`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get(MODEL_LOG_ENV)
        self._model_log = StepLogWriter(path, MODEL_LOG_COLUMNS) if path else None
        self._open: tuple[float, float, int, int] | None = None

    def execute_model(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        tokens = int(scheduler_output.total_num_scheduled_tokens)
        start = (time.monotonic(), time.thread_time())
        out = super().execute_model(scheduler_output, *args, **kwargs)
        if self._model_log is None or tokens == 0:
            return out
        self._open = (*start, tokens, len(scheduler_output.num_scheduled_tokens))
        if out is not None:  # the output came with the forward pass: no sample_tokens call
            self._close()
        return out

    def sample_tokens(self, *args: Any, **kwargs: Any) -> Any:
        out = super().sample_tokens(*args, **kwargs)
        if self._open is not None:
            self._close()
        return out

    def _close(self) -> None:
        assert self._open is not None and self._model_log is not None
        t0, c0, tokens, requests = self._open
        self._open = None
        self._model_log.write(
            model_row(t0, time.monotonic(), time.thread_time() - c0, tokens, requests)
        )
