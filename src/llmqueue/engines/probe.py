"""vLLM scheduler that records every iteration (runs inside vLLM's engine-core process).

Passed to vLLM by name, ``scheduler_cls="llmqueue.engines.probe.RecordingScheduler"`` (vLLM's
documented way to use a custom scheduler class); it schedules exactly as vLLM's own
``vllm.v1.core.sched.scheduler.Scheduler`` does and only adds, per iteration that scheduled any
token, one row of :data:`llmqueue.engines.steplog.STEP_COLUMNS` appended to the CSV file named
by the environment variable ``LLMQUEUE_STEP_LOG`` (nothing is recorded when it is unset), and,
once at start, the limits it enforces (KV blocks free, token budget, admission rules) to
``<that file>.core.json``.

``BatchQueueScheduler`` (``scheduler_cls="llmqueue.engines.probe.BatchQueueScheduler"``) is the
same recording scheduler with the paper's batch-queue admission rule
(:class:`llmqueue.engines.admission.BatchQueueMixin`: waiting requests are admitted only when
nothing runs, up to ``max_num_seqs``).

This module imports vLLM at import time: only the engine imports it, never the main environment.
"""

from __future__ import annotations

import os
import time
from typing import Any

from vllm.v1.core.sched.scheduler import Scheduler

from llmqueue.engines.admission import BatchQueueMixin
from llmqueue.engines.steplog import (
    STEP_LOG_ENV,
    ScheduledRequest,
    StepLogWriter,
    core_facts_path,
    step_row,
    write_core_facts,
)

__all__ = ["RecordingScheduler", "BatchQueueScheduler"]


class RecordingScheduler(Scheduler):  # type: ignore[misc]
    """vLLM's scheduler plus a per-iteration record (see :mod:`llmqueue.engines.steplog`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        path = os.environ.get(STEP_LOG_ENV)
        self._steplog = StepLogWriter(path) if path else None
        self._pending: dict[str, Any] | None = None
        self._carry_finished: set[str] = set()  # finished ids reported by steps with no tokens
        self._step = 0
        if path:
            write_core_facts(core_facts_path(path), self.core_facts())

    def core_facts(self) -> dict[str, Any]:
        """What this scheduler enforces, read from its own state before any request (the block
        pool keeps one null block aside, so fewer blocks than allocated are free)."""
        pool = self.kv_cache_manager.block_pool
        return {
            "kv_blocks_free_at_start": int(pool.get_num_free_blocks()),
            "kv_blocks_total": int(getattr(pool, "num_gpu_blocks", -1)),
            "block_size": int(self.block_size),
            "max_num_running_reqs": int(self.max_num_running_reqs),
            "max_num_active_reqs": int(
                getattr(self, "max_num_active_reqs", None) or self.max_num_running_reqs
            ),
            "max_num_scheduled_tokens": int(self.max_num_scheduled_tokens),
            "watermark_blocks": int(getattr(self.kv_cache_manager, "watermark_blocks", 0)),
            "reserve_full_prompt_on_admission": bool(
                getattr(self, "scheduler_reserve_full_isl", False)
            ),
            "long_prefill_token_threshold": int(self.scheduler_config.long_prefill_token_threshold),
            "policy": str(getattr(self.policy, "value", self.policy)),
            "scheduler_class": f"{type(self).__module__}.{type(self).__qualname__}",
            "admission_rule": self.admission_rule,
        }

    admission_rule = "vllm"  # vLLM's own: admit while running < max_num_seqs, budget and KV allow

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.monotonic()
        out = super().schedule(*args, **kwargs)
        t1 = time.monotonic()
        finished = set(getattr(out, "finished_req_ids", None) or ())
        if self._steplog is None or out.total_num_scheduled_tokens == 0:
            self._pending = None
            self._carry_finished |= finished
            return out
        finished |= self._carry_finished
        self._carry_finished = set()
        reqs = []
        for rid, n in out.num_scheduled_tokens.items():
            r = self.requests[rid]
            # schedule() has already advanced num_computed_tokens by the scheduled tokens.
            reqs.append(
                ScheduledRequest(
                    request_id=str(rid),
                    scheduled=int(n),
                    computed_after=int(r.num_computed_tokens),
                    known_tokens=int(r.num_tokens),
                    output_tokens=int(r.num_output_tokens),
                )
            )
        self._step += 1
        self._pending = {
            "step": self._step,
            "t_sched_s": t0,
            "t_planned_s": t1,
            "requests": reqs,
            "running": len(self.running),
            "waiting": len(self.waiting),
            "preempted": len(out.preempted_req_ids or ()),
            "kv_usage": float(self.get_kv_cache_usage()),
            "preempted_ids": tuple(out.preempted_req_ids or ()),
            "finished_ids": tuple(finished),
        }
        return out

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        result = super().update_from_output(scheduler_output, model_runner_output)
        pending, self._pending = self._pending, None
        if pending is not None and self._steplog is not None:
            self._steplog.write(step_row(t_done_s=time.monotonic(), **pending))
        return result

    def shutdown(self) -> None:
        if self._steplog is not None:
            self._steplog.close()
        super().shutdown()


class BatchQueueScheduler(BatchQueueMixin, RecordingScheduler):
    """The recording scheduler with the paper's batch queue: admissions only when nothing runs
    (see :mod:`llmqueue.engines.admission` for the hook and why it is there)."""

    admission_rule = "batch_queue"  # admit only when nothing runs, up to max_num_seqs (b_max)
