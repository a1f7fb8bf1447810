"""Controlled batches on the engine: a batch's request table and a phase of batches in turn.

A controlled batch (warm-up, calibration, the machine-speed run's cycles) is ``batch`` requests of
``prompt_tokens`` tokens each asking ``output_tokens`` tokens, all sent at once
(:class:`llmqueue.engines.calibration.CalibrationBatch`); a phase runs its batches one
after the other, each to the end, through :func:`llmqueue.engines.client.run_open_loop`.
Times in seconds (``time.monotonic``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from llmqueue.profiling.meta import loadavg

__all__ = ["batch_table", "run_batches"]


def batch_table(b: Any, run: str, gate: Any = None) -> Any:
    """The request table of one controlled batch: b.batch requests of b.prompt_tokens tokens
    asking b.output_tokens tokens, all sent at t = 0; with a `gate`
    (:class:`llmqueue.engines.groups.BatchQueueGate`) first one request ``<run>-gate`` of
    gate.prompt_tokens tokens asking 1 token at t = 0 and the batch at t = gate.lead_s."""
    import pandas as pd

    tab = pd.DataFrame(
        {
            "request_id": [f"{run}-{i:04d}" for i in range(b.batch)],
            "planned_s": [0.0 if gate is None else float(gate.lead_s)] * b.batch,
            "prompt_tokens": [b.prompt_tokens] * b.batch,
            "output_tokens": [b.output_tokens] * b.batch,
        }
    )
    if gate is None:
        return tab
    head = pd.DataFrame(
        {
            "request_id": [f"{run}-gate"],
            "planned_s": [0.0],
            "prompt_tokens": [int(gate.prompt_tokens)],
            "output_tokens": [1],
        }
    )
    return pd.concat([head, tab], ignore_index=True)


async def run_batches(
    stream: Any, name: str, items: list[Any], prompts_for: Callable[[Any, str], Any], label: str,
    gate: Any = None, *, log: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """Controlled batches one after the other (warm-up, calibration), each behind `gate` when one
    is given (:func:`batch_table`); `prompts_for(table, key)` gives each batch's prompt token ids;
    returns the phase's clock marks, load averages and the client's records of every batch."""
    import pandas as pd

    from llmqueue.engines.client import check_complete, run_open_loop

    t_a, load_a = time.monotonic(), loadavg()
    recs = []
    for k, b in enumerate(items):
        tab = batch_table(b, f"{name}{k:02d}", gate)
        _, rec = await run_open_loop(tab, stream, prompts_for(tab, f"{name}{k}"))
        check_complete(rec, f"{label}{name} batch {k}")
        recs.append(rec.assign(batch_index=k, batch=b.batch))
    log(f"{label}{name}: {len(items)} batches in {time.monotonic() - t_a:.1f} s")
    return {
        "t_start": t_a, "t_end": time.monotonic(), "load_before": load_a,
        "load_after": loadavg(), "records": pd.concat(recs, ignore_index=True),
    }  # fmt: skip
