"""The paper's batch queue (Sec. IV, dynamic batching) on vLLM: a scheduler rule that admits
waiting requests only when nothing is running, up to b_max = ``max_num_seqs``.

Where the rule hooks into vLLM 0.32's V1 scheduler (``vllm/v1/core/sched/scheduler.py``, class
``Scheduler``): :meth:`Scheduler.schedule` first gives every running request its tokens, then,
only if nothing was preempted, admits from the waiting queue in a loop whose first test is

    num_running = len(self.running) + self.num_waiting_for_streaming_input
    if num_running >= self.max_num_active_reqs:
        break

``max_num_active_reqs`` is set once in ``Scheduler.__init__`` (to ``max_num_seqs``, or more with
streaming input sessions, which these runs do not use) and read nowhere else in the package (the
invariant ``len(self.running) <= self.max_num_running_reqs`` is checked against the other
attribute, ``max_num_running_reqs``). :class:`BatchQueueMixin` overrides ``schedule`` and, before
calling vLLM's, sets ``max_num_active_reqs`` to b_max when no request is running and to 0
otherwise: the admission loop then admits a whole batch (up to b_max requests, in queue order, as
long as the token budget and the KV cache take them) at the first iteration after the previous
batch has ended, and nothing at any other iteration. Nothing else of vLLM's scheduling changes:
running requests keep their order and their token budget, KV blocks, preemption, the first token
at the end of the prompt's iteration and a request's end at its last token are vLLM's own; a
batch's members leave as they finish (vLLM does not pad), so the batch lasts until its longest
member ends, as Eq. (26)'s elastic batches do. Overriding ``schedule`` (and not, say, replacing
``self.waiting`` by an empty queue) leaves preemption alone: a preempted request still goes back
to the front of the real waiting queue.

For the whole batch to be admitted in one iteration, chunked prefill is off and the token budget
holds b_max whole prompts (``llmqueue.engines.groups`` checks both); otherwise the admission
would stop at the budget and the rest would wait for the next batch.

The rule itself, :func:`admission_limit`, is a pure function; the mixin has no vLLM import, so it is
unit tested on a fake scheduler (tests/engines/test_matrix.py), and
:class:`llmqueue.engines.probe.BatchQueueScheduler` puts it on vLLM's recording scheduler.
"""

from __future__ import annotations

from typing import Any

__all__ = ["admission_limit", "BatchQueueMixin", "check_batch_queue"]


def admission_limit(running: int, b_max: int) -> int:
    """The cap vLLM's admission loop compares ``len(running)`` with: b_max when nothing runs (a
    new batch of up to b_max requests may start), else 0 (no admission while a batch runs)."""
    if b_max < 1:
        raise ValueError(f"b_max must be >= 1, got {b_max}")
    return int(b_max) if running == 0 else 0


class BatchQueueMixin:
    """Put before a vLLM ``Scheduler`` subclass in the bases: admissions only between batches
    (module docstring). b_max is the scheduler's ``max_num_running_reqs`` (``max_num_seqs``)."""

    max_num_active_reqs: int
    max_num_running_reqs: int
    running: list[Any]

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        self.max_num_active_reqs = admission_limit(len(self.running), self.max_num_running_reqs)
        return super().schedule(*args, **kwargs)  # type: ignore[misc]


def check_batch_queue(
    admitted: list[list[str]], finished_before: list[set[str]], b_max: int
) -> list[str]:
    """Check the batch-queue rule on a recorded sequence of iterations; returns the violations.

    `admitted[i]`: request ids first scheduled (admitted, or resumed after a preemption) at
    iteration i; `finished_before[i]`: ids that had finished before iteration i started. A batch
    is the set admitted at one iteration; an iteration may admit only when every member of every
    earlier batch has finished, and at most b_max at once."""
    problems: list[str] = []
    open_batch: set[str] = set()
    for i, (adm, done) in enumerate(zip(admitted, finished_before, strict=True)):
        open_batch -= done
        if adm:
            if open_batch:
                problems.append(
                    f"iteration {i}: admitted {len(adm)} while {len(open_batch)} of the previous "
                    "batch still ran"
                )
            if len(adm) > b_max:
                problems.append(f"iteration {i}: admitted {len(adm)} > b_max {b_max}")
            open_batch |= set(adm)
    return problems
