"""Open-loop client: sends a request table at its planned times and times every request.

The engine is any ``stream(request_id, prompt_token_ids, max_tokens)`` that returns an async
iterator yielding, per output chunk, the number of new tokens it carries (a table with a
``priority`` column calls ``stream(request_id, prompt_token_ids, max_tokens, priority)``, vLLM's
request priority: smaller is served first under ``scheduling_policy="priority"``) (vLLM's streaming
``generate`` in :mod:`llmqueue.engines.engine`; a fake one in the tests). Requests are sent
open-loop: each one at ``t0 + planned_s`` whatever the earlier ones are doing, each in its own
task. Per request the client records (seconds from ``t0``, all on one clock):

- ``arrival_s``: when the request was handed to the engine (the planned time plus the client's
  own lateness, which ``planned_s`` keeps for comparison);
- ``first_token_s``: when the first chunk with a token came back;
- ``finish_s``: when the last chunk came back (the stream ended);
- ``tokens_received``, ``chunks``: what came back.

TTFT = first_token_s - arrival_s and JCT = finish_s - arrival_s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from llmqueue.errors import InputError

__all__ = ["RECORD_COLUMNS", "StreamFn", "run_open_loop", "check_complete"]

StreamFn = Callable[[str, Sequence[int], int], AsyncIterator[int]]

RECORD_COLUMNS = [
    "request_id",
    "planned_s",
    "arrival_s",
    "first_token_s",
    "finish_s",
    "prompt_tokens",
    "output_tokens",
    "tokens_received",
    "chunks",
]


async def _one(
    stream: Callable[..., AsyncIterator[int]],
    request_id: str,
    prompt: Sequence[int],
    max_tokens: int,
    clock: Callable[[], float],
    t0: float,
    priority: int | None = None,
) -> dict[str, Any]:
    sent = clock()
    first: float | None = None
    last = sent
    received = chunks = 0
    args: tuple[Any, ...] = (request_id, prompt, max_tokens)
    if priority is not None:
        args += (int(priority),)
    async for k in stream(*args):
        now = clock()
        chunks += 1
        if k > 0:
            received += int(k)
            last = now
            if first is None:
                first = now
    return {
        "request_id": request_id,
        "arrival_s": sent - t0,
        "first_token_s": (first if first is not None else float("nan")) - t0,
        "finish_s": last - t0,
        "tokens_received": received,
        "chunks": chunks,
    }


async def run_open_loop(
    table: pd.DataFrame,
    stream: Callable[..., AsyncIterator[int]],
    prompts: Mapping[str, Sequence[int]],
    clock: Callable[[], float] = time.monotonic,
) -> tuple[float, pd.DataFrame]:
    """Send every row of `table` (columns request_id, planned_s, prompt_tokens, output_tokens;
    planned_s non-decreasing) at ``t0 + planned_s`` and wait for all of them.

    `prompts` maps each request id to its prompt token ids (made before the run, so that the
    sending loop does no work). Returns ``t0`` (on `clock`) and one row per request, columns
    :data:`RECORD_COLUMNS`, in table order. An engine error cancels the other requests and
    propagates.
    """
    need = {"request_id", "planned_s", "prompt_tokens", "output_tokens"}
    if not need <= set(table.columns):
        raise InputError(f"request table lacks columns {sorted(need - set(table.columns))}")
    planned = table["planned_s"].to_numpy(dtype=float)
    if len(planned) and (planned[0] < 0 or (planned[1:] < planned[:-1]).any()):
        raise InputError("request table: planned_s must be >= 0 and non-decreasing")
    for rid, n in zip(table["request_id"], table["prompt_tokens"], strict=True):
        if rid not in prompts or len(prompts[rid]) != int(n):
            raise InputError(f"request {rid}: no prompt of {int(n)} token ids given")
    prio = [int(x) for x in table["priority"]] if "priority" in table else [None] * len(table)
    t0 = clock()
    tasks: list[asyncio.Task[dict[str, Any]]] = []
    try:
        for rid, at, n_out, pr in zip(
            table["request_id"], planned, table["output_tokens"], prio, strict=True
        ):
            delay = t0 + at - clock()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(
                asyncio.create_task(_one(stream, str(rid), prompts[rid], int(n_out), clock, t0, pr))
            )
        rows = await asyncio.gather(*tasks)
    finally:
        for t in tasks:
            if not t.done():
                t.cancel()
    out = pd.DataFrame(rows)
    out["planned_s"] = planned
    out["prompt_tokens"] = table["prompt_tokens"].to_numpy()
    out["output_tokens"] = table["output_tokens"].to_numpy()
    return t0, out[RECORD_COLUMNS]


def check_complete(records: pd.DataFrame, where: str) -> None:
    """Every request got exactly the tokens it asked for (``ignore_eos`` runs): else InputError."""
    bad = records[records["tokens_received"] != records["output_tokens"]]
    if len(bad):
        r = bad.iloc[0]
        raise InputError(
            f"{where}: {len(bad)} request(s) got a different number of tokens than asked, e.g. "
            f"{r['request_id']}: {int(r['tokens_received'])} of {int(r['output_tokens'])}"
        )
    if records["first_token_s"].isna().any():
        raise InputError(f"{where}: a request finished without any token")
