"""vLLM CPU worker that times every iteration's forward pass (runs inside vLLM's worker process).

Passed to vLLM by name, ``worker_cls="llmqueue.engines.worker.TimingWorker"`` (vLLM's
documented way to use a custom worker class; the CPU platform keeps a class given by name); it
runs the model exactly as vLLM's own ``vllm.v1.worker.cpu_worker.CPUWorker`` does and only adds,
per iteration that scheduled any token, one row of
:data:`llmqueue.engines.steplog.MODEL_LOG_COLUMNS` appended to the CSV file named by the
environment variable ``LLMQUEUE_MODEL_LOG`` (nothing is recorded when it is unset): the span
from ``execute_model`` (the forward pass) to the end of ``sample_tokens`` (the sampling, which
vLLM 0.32 asks for in a second call when ``execute_model`` returns nothing) and the wait between
the two calls (:class:`llmqueue.engines.steplog.ForwardTimer`). A few clock reads and one
short line per iteration of about 20 ms.

This module imports vLLM at import time: only the engine imports it, never the main environment.
"""

from __future__ import annotations

import os
import time
from typing import Any

from vllm.v1.worker.cpu_worker import CPUWorker

from llmqueue.engines.steplog import (
    MODEL_LOG_COLUMNS,
    MODEL_LOG_ENV,
    ForwardTimer,
    StepLogWriter,
)

__all__ = ["TimingWorker"]


class TimingWorker(CPUWorker):  # type: ignore[misc]
    """vLLM's CPU worker plus a per-iteration record (see :mod:`llmqueue.engines.steplog`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get(MODEL_LOG_ENV)
        self._timer = (
            ForwardTimer(StepLogWriter(path, MODEL_LOG_COLUMNS), time.monotonic, time.thread_time)
            if path
            else None
        )

    def execute_model(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        if self._timer is None:
            return super().execute_model(scheduler_output, *args, **kwargs)
        self._timer.begin(
            int(scheduler_output.total_num_scheduled_tokens),
            len(scheduler_output.num_scheduled_tokens),
        )
        out = super().execute_model(scheduler_output, *args, **kwargs)
        self._timer.executed(out is not None)
        return out

    def sample_tokens(self, *args: Any, **kwargs: Any) -> Any:
        if self._timer is None:
            return super().sample_tokens(*args, **kwargs)
        self._timer.sampling()
        out = super().sample_tokens(*args, **kwargs)
        self._timer.sampled()
        return out
