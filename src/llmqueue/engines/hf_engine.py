"""Hugging Face transformers' continuous batching as a measured serving engine (the second real
engine beside vLLM's CPU build).

transformers (5.23, ``generation/continuous_batching``) serves a model with
``model.init_continuous_batching(generation_config, continuous_batching_config)``: a manager whose
background thread runs one loop per engine step, ``ContinuousBatchProcessor.prepare_next_batch``
(take the queued arrivals, schedule the step, offload requests whose KV cannot grow) then the
forward pass then ``update_batch`` (append the sampled tokens, finish requests, deliver outputs).
Requests arrive with ``add_request`` at any time; outputs come back through
``register_result_handler`` on the client's asyncio loop. What its FIFO scheduler does, in
the order of the code (``scheduler.py``): decoding requests first in admission order, then
requests part way through their prompt, then the waiting queue in arrival order; each request
takes min(its remaining prompt, the step's remaining token budget ``max_batch_tokens``) tokens
(prompts are chunked, and no rule asks the whole prompt to fit), a decode takes 1; at most
``max_requests_per_batch`` requests a step; KV pages (``page_size`` tokens) are allocated as the
tokens are scheduled, never reserved for the output; a waiting request whose chunk does not fit is
skipped and later arrivals may pass it; a running request that cannot grow is *starved* and the
newest starved ones are soft reset (their KV freed, their prompt + output re-queued at the back of
the waiting queue: recompute, as vLLM's), after which no waiting request is admitted until a
request finishes; when the free share of the KV falls under ``safety_margin`` (0.15 for FIFO) a
step takes no more prompt chunks once something is scheduled.

This module records each step in the vLLM runs' step-log format (:mod:`llmqueue.engines.steplog`,
``time.monotonic`` clock) by wrapping ``prepare_next_batch`` (the step's planning starts, its
requests and their token counts) and ``update_batch`` (the step's output is in), and gives the
open-loop client (:mod:`llmqueue.engines.client`) its ``stream``: so the calibration, capacity
and load phases and the run folder are those of the vLLM runs. transformers and torch are imported
only when an engine opens (environment ``envs/transformers-cpu.txt``); the settings, the step rows
and the error for a missing package are plain Python, tested without them.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from llmqueue.engines.engine import FIFO_SCHEDULING, request_tokens
from llmqueue.engines.environment import require_engine
from llmqueue.engines.steplog import ScheduledRequest, StepLogWriter, step_row
from llmqueue.errors import InputError
from llmqueue.limits import section_keys

__all__ = [
    "SCHEDULER_TYPES",
    "FIFO_SAFETY_MARGIN",
    "HFEngineSettings",
    "scheduled_request",
    "StepRecorder",
    "HFEngine",
    "open_hf_engine",
]

SCHEDULER_TYPES = ("fifo", "prefill_first")
# the free share of the KV under which transformers' FIFO scheduler takes no more prompt chunks
# once a step has something scheduled (``FIFOScheduler(safety_margin=0.15)`` in 5.23; the started
# manager's own value is read back into settings.json)
FIFO_SAFETY_MARGIN = 0.15
ATTENTION = ("sdpa", "paged|eager")
_WHERE = "validation.transformers.engine"


@dataclass(frozen=True)
class HFEngineSettings:
    """Engine knobs (config ``validation.transformers.engine``): the KV cache in ``num_blocks``
    pages of ``page_size`` tokens, the step's token budget ``max_batch_tokens``, the request cap
    ``max_requests_per_batch``, the scheduler (``fifo`` or ``prefill_first``), the attention
    implementation, the model's torch threads, the longest request (prompt + output, tokens)
    and the sampling seed."""

    num_blocks: int
    page_size: int
    max_batch_tokens: int
    max_requests_per_batch: int
    scheduler_type: str
    attn_implementation: str
    threads: int
    max_model_len: int
    seed: int

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> HFEngineSettings:
        """Checked settings; one-line :class:`InputError` naming the key and its allowed range."""
        names = [f.name for f in fields(cls)]
        section_keys(section, _WHERE, names)
        s = cls(**{n: section[n] for n in names})
        for key in ("num_blocks", "page_size", "max_batch_tokens", "max_requests_per_batch",
                    "threads", "max_model_len", "seed"):  # fmt: skip
            v = getattr(s, key)
            lo = 0 if key == "seed" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise InputError(f"{_WHERE}.{key} must be an integer >= {lo}, got {v!r}")
        if s.scheduler_type not in SCHEDULER_TYPES:
            raise InputError(
                f"{_WHERE}.scheduler_type must be one of {list(SCHEDULER_TYPES)}, got {s.scheduler_type!r}"
            )
        if s.attn_implementation not in ATTENTION:
            raise InputError(
                f"{_WHERE}.attn_implementation must be one of {list(ATTENTION)}, got {s.attn_implementation!r}"
            )
        if s.num_blocks * s.page_size < s.max_model_len:
            raise InputError(
                f"{_WHERE}: num_blocks x page_size = {s.num_blocks * s.page_size} tokens cannot hold "
                f"one request of max_model_len = {s.max_model_len}"
            )
        return s

    @property
    def max_num_seqs(self) -> int:
        """The request cap under vLLM's name (the single run's harness reads either engine's)."""
        return self.max_requests_per_batch

    @property
    def max_num_batched_tokens(self) -> int:
        """The step's token budget under vLLM's name."""
        return self.max_batch_tokens

    @property
    def scheduling_policy(self) -> str:
        """The queue order: both schedulers serve waiting requests in arrival order."""
        return FIFO_SCHEDULING

    @property
    def enable_chunked_prefill(self) -> bool:
        """Prompts are always chunked to the step's token budget."""
        return True

    @property
    def kv_tokens(self) -> int:
        return self.num_blocks * self.page_size

    def check_batch(
        self, batch: int, prompt_tokens: int, output_tokens: int, where: str,
        engine: str = "the engine's",
    ) -> None:  # fmt: skip
        """A controlled batch (`batch` requests of `prompt_tokens` asking `output_tokens`) that
        this engine serves whole: each request within max_model_len and the batch's KV pages
        within the cache, with the FIFO scheduler's safety share of it free (0.15: a step takes
        no more prompt chunks below it), else an InputError naming `where` and `engine`."""
        n = request_tokens(prompt_tokens, output_tokens, self.max_model_len, where, engine)
        pages = batch * -(-n // self.page_size)
        room = int(self.num_blocks * (1.0 - FIFO_SAFETY_MARGIN))
        if pages > room:
            raise InputError(
                f"{where}: batch x ceil((prompt_tokens + output_tokens) / page_size) = {pages} "
                f"KV pages exceed {room} ({engine} num_blocks {self.num_blocks} less the FIFO "
                f"scheduler's safety share {FIFO_SAFETY_MARGIN}): the batch would be preempted"
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def scheduled_request(state: Any, query_length: int) -> ScheduledRequest:
    """One scheduled request of a transformers step as the step log counts it, from its
    ``RequestState`` after the step's tensors were prepared (``position_offset`` then counts
    the tokens the step leaves in the KV cache) and the step's ``query_length``.

    A soft-reset (recomputed) request carries its earlier output in ``initial_tokens`` beyond
    ``_true_initial_tokens``: those count as output, so its re-prefill is neither a decode
    nor a first token."""
    initial = len(state.initial_tokens)
    true_initial = int(getattr(state, "_true_initial_tokens", 0) or 0)
    earlier_output = initial - true_initial if true_initial else 0
    generated = len(state.generated_tokens)
    return ScheduledRequest(
        request_id=str(state.request_id),
        scheduled=int(query_length),
        computed_after=int(state.position_offset),
        known_tokens=initial + generated,
        output_tokens=earlier_output + generated,
    )


class StepRecorder:
    """Writes one step-log row per engine step (:func:`llmqueue.engines.steplog.step_row`).

    Call :meth:`planning` as the step's planning starts (the active request ids then),
    :meth:`planned` once it is planned (the scheduled requests as ``(state, query_length)``
    pairs, the active and waiting requests after planning, the KV's used share), and
    :meth:`done` when the step's output is in (the active ids then). A request active before
    the planning and not after it was preempted by the planning (finishing happens only in the
    update); one active after the planning and not after the update finished."""

    def __init__(self, writer: Any, clock: Callable[[], float] = time.monotonic) -> None:
        self._writer = writer
        self._clock = clock
        self._step = 0
        self._t_sched = 0.0
        self._t_planned = 0.0
        self._active_before: set[str] = set()
        self._pending: dict[str, Any] | None = None
        self._finished: set[str] = set()

    def planning(self, active_ids: Iterable[str]) -> None:
        self._t_sched = self._clock()
        self._active_before = set(active_ids)

    def planned(
        self,
        scheduled: Sequence[tuple[Any, int]],
        active_ids: Iterable[str],
        waiting: int,
        kv_usage: float,
    ) -> None:
        self._t_planned = self._clock()
        active = set(active_ids)
        preempted = sorted(self._active_before - active)
        self._step += 1
        self._pending = {
            "requests": [scheduled_request(s, q) for s, q in scheduled],
            "running": len(active), "waiting": int(waiting), "preempted": preempted,
            "kv_usage": float(kv_usage), "active": active,
        }  # fmt: skip

    def now(self) -> float:
        return self._clock()

    def done(self, active_ids: Iterable[str], t_done: float | None = None) -> None:
        """The step's output is in (at `t_done`, the clock now when None; the wrapper stamps it
        before ``update_batch`` delivers the tokens, which an in-process client may otherwise
        see first); `active_ids` after the update."""
        p = self._pending
        if p is None:
            return
        self._pending = None
        row = step_row(
            self._step, self._t_sched, self._t_planned,
            self._clock() if t_done is None else float(t_done), p["requests"],
            p["running"], p["waiting"], len(p["preempted"]), p["kv_usage"],
            preempted_ids=p["preempted"], finished_ids=sorted(self._finished),
        )  # fmt: skip
        self._writer.write(row)
        # vLLM reports a step's finished ids at the next step: the same here
        self._finished = p["active"] - set(active_ids)


_PATCH_LOCK = threading.Lock()
_RECORDER = "_llmqueue_recorder"  # the attribute of a batch processor holding its StepRecorder


def _install_hooks() -> None:
    """Wrap ``ContinuousBatchProcessor.prepare_next_batch`` and ``update_batch`` once per process;
    the wrappers feed the :class:`StepRecorder` a processor holds (none: the step is not recorded)."""
    from transformers.generation.continuous_batching import continuous_api as api

    cls = api.ContinuousBatchProcessor
    with _PATCH_LOCK:
        if getattr(cls, "_llmqueue_hooked", False):
            return
        prepare, update = cls.prepare_next_batch, cls.update_batch

        def prepare_next_batch(self: Any) -> bool:
            rec = getattr(self, _RECORDER, None)
            if rec is not None:
                rec.planning(self.scheduler.active_requests)
            ok = prepare(self)
            if ok and rec is not None:
                io = self.inputs_and_outputs
                reqs = [(fs.state, int(fs.query_length)) for fs in io.requests_in_batch]
                used = 1.0 - float(self.cache.compute_free_capacity())
                rec.planned(reqs, self.scheduler.active_requests,
                            len(self.scheduler.waiting_requests), used)  # fmt: skip
            return bool(ok)

        def update_batch(self: Any) -> None:
            rec = getattr(self, _RECORDER, None)
            t_done = rec.now() if rec is not None else 0.0  # the forward's output is in
            update(self)
            if rec is not None:
                rec.done(self.scheduler.active_requests, t_done)

        setattr(cls, "prepare_next_batch", prepare_next_batch)  # noqa: B010
        setattr(cls, "update_batch", update_batch)  # noqa: B010
        setattr(cls, "_llmqueue_hooked", True)  # noqa: B010


class HFEngine:
    """A started transformers continuous-batching manager with its step recorder; ``stream`` is
    the open-loop client's engine (:data:`llmqueue.engines.client.StreamFn`)."""

    def __init__(self, manager: Any, settings: HFEngineSettings, writer: StepLogWriter,
                 model: Any) -> None:  # fmt: skip
        self.manager = manager
        self.settings = settings
        self._writer = writer
        self._model = model
        self._closed = False

    async def stream(
        self, request_id: str, prompt: Sequence[int], max_tokens: int, priority: int = 0
    ) -> AsyncIterator[int]:
        """Add the request now and yield, per output, the number of new tokens it carries
        (exactly `max_tokens` in all: EOS off). `priority` is refused (FIFO engine)."""
        if priority:
            raise InputError("the transformers engine has no request priorities (scheduler fifo)")
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self.manager.register_result_handler(str(request_id), queue.put_nowait)
        self.manager.add_request(
            list(prompt), request_id=str(request_id), max_new_tokens=int(max_tokens),
            streaming=True, eos_token_id=-1,
        )  # fmt: skip
        seen = 0
        while True:
            out = await queue.get()
            if getattr(out, "error", None):
                raise RuntimeError(f"transformers failed request {request_id}: {out.error}")
            n = len(out.generated_tokens)
            if n > seen:
                yield n - seen
                seen = n
            if out.is_finished():
                return

    def read_settings(self) -> dict[str, Any]:
        """The serving-relevant settings, read back from the started manager, under the vLLM
        runs' key names where they mean the same (``max_num_seqs`` = the request cap,
        ``max_num_batched_tokens`` = the token budget, ``block_size`` = the page)."""
        bp = self.manager.batch_processor
        cache = bp.cache
        sched = bp.scheduler
        blocks = int(cache.num_blocks)
        page = int(self.settings.page_size)
        return {
            "engine": "transformers",
            "max_num_seqs": int(sched.max_requests_per_batch),  # the cap the scheduler applies
            "max_num_batched_tokens": int(bp.max_batch_tokens),
            "enable_chunked_prefill": True,
            "reserve_full_prompt_on_admission": False,
            "scheduling_policy": FIFO_SCHEDULING,
            "scheduler_cls": type(sched).__name__,
            "safety_margin": float(getattr(sched, "safety_margin", 0.0) or 0.0),
            "num_kv_blocks": blocks,
            "block_size": page,
            "kv_tokens": blocks * page,
            "enable_prefix_caching": False,
            "preemption_mode": "recompute",
            "max_model_len": int(self.settings.max_model_len),
            "dtype": str(self._model.dtype).removeprefix("torch."),
            "attn_implementation": str(self._model.config._attn_implementation),
            "torch_threads": int(self.settings.threads),
        }  # fmt: skip

    def close(self) -> None:
        """Stop the manager (its thread ends once the queued requests are done) once."""
        if self._closed:
            return
        self._closed = True
        try:
            self.manager.stop(block=True, timeout=60)
        finally:
            bp = getattr(self.manager, "batch_processor", None)
            if bp is not None and hasattr(bp, _RECORDER):
                delattr(bp, _RECORDER)
            self._writer.close()


def open_hf_engine(
    model_dir: str | os.PathLike[str],
    dtype: str,
    settings: HFEngineSettings,
    step_log: str | os.PathLike[str],
) -> HFEngine:
    """Load the model folder (:func:`llmqueue.engines.model.make_model`) in `dtype` on the CPU,
    start its continuous-batching manager with `settings` (prefix sharing and CPU offload off:
    random prompts share no prefix, and a preempted request recomputes) and record every step
    into `step_log`."""
    require_engine("measure", engine="transformers")
    import torch
    from transformers import ContinuousBatchingConfig, GenerationConfig, LlamaForCausalLM

    from llmqueue.engines.model import resolve_dtype

    torch.set_num_threads(int(settings.threads))
    torch.manual_seed(int(settings.seed))
    model = LlamaForCausalLM.from_pretrained(
        os.fspath(model_dir), dtype=getattr(torch, resolve_dtype(dtype)),
        attn_implementation=settings.attn_implementation,
    ).eval()  # fmt: skip
    _install_hooks()
    gen = GenerationConfig(do_sample=False, eos_token_id=-1, max_new_tokens=1)
    cb_settings: dict[str, Any] = dict(
        page_size=settings.page_size, num_blocks=settings.num_blocks,
        max_batch_tokens=settings.max_batch_tokens,
        max_requests_per_batch=settings.max_requests_per_batch,
        scheduler_type=settings.scheduler_type, allow_block_sharing=False,
        auto_switch_to_flash=False, cpu_offload_space=0.0, seed=settings.seed,
    )  # fmt: skip
    cb = ContinuousBatchingConfig(**cb_settings)
    manager = model.init_continuous_batching(generation_config=gen, continuous_batching_config=cb)
    manager.warmup()  # creates the cache and the batch processor before the thread starts
    writer = StepLogWriter(step_log)
    setattr(manager.batch_processor, _RECORDER, StepRecorder(writer))
    manager.start()
    return HFEngine(manager, settings, writer, model)
