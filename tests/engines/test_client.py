"""The open-loop client's bookkeeping, against fake engines (no vLLM)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

import numpy as np
import pandas as pd
import pytest

from llmqueue.engines.client import RECORD_COLUMNS, check_complete, run_open_loop
from llmqueue.errors import InputError


class FakeClock:
    """A clock the fake engine advances: every await of the engine moves time by a known step,
    so the recorded times are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def table(planned: Sequence[float], prompt: Sequence[int], output: Sequence[int]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(len(planned))],
            "planned_s": planned,
            "prompt_tokens": prompt,
            "output_tokens": output,
        }
    )


def prompts_for(tab: pd.DataFrame) -> dict[str, list[int]]:
    return {r: [5] * int(n) for r, n in zip(tab["request_id"], tab["prompt_tokens"], strict=True)}


def test_times_of_a_sequential_fake_engine() -> None:
    """One request at a time, the engine takes `ttft` for the first token and `tpot` per later
    token, in virtual time: the client's times are exactly those."""
    clock = FakeClock()
    ttft, tpot = 0.5, 0.1
    seen: list[tuple[str, int, int]] = []

    async def stream(rid: str, prompt: Sequence[int], n: int) -> AsyncIterator[int]:
        seen.append((rid, len(prompt), n))
        clock.now += ttft
        yield 1
        for _ in range(n - 1):
            clock.now += tpot
            yield 1
        yield 0  # a final chunk with no token (as a finished output may be) changes nothing

    async def main() -> tuple[float, pd.DataFrame]:
        tab = table([0.0, 0.0], [3, 4], [1, 5])
        return await run_open_loop(tab, stream, prompts_for(tab), clock=clock)

    t0, rec = asyncio.run(main())
    assert t0 == 100.0
    assert list(rec.columns) == RECORD_COLUMNS
    assert seen == [("r0", 3, 1), ("r1", 4, 5)]
    r0, r1 = rec.iloc[0], rec.iloc[1]
    # r0 runs first (sent at 0); the fake engine never yields to the event loop, so r1's task
    # runs (and is sent) once r0's has finished
    assert r1["arrival_s"] == pytest.approx(0.5)
    assert r0["arrival_s"] == 0.0 and r0["first_token_s"] == pytest.approx(0.5)
    assert r0["finish_s"] == pytest.approx(0.5)
    assert r1["first_token_s"] - r1["arrival_s"] == pytest.approx(ttft)
    assert r1["finish_s"] - r1["first_token_s"] == pytest.approx(4 * tpot)
    assert rec["tokens_received"].tolist() == [1, 5]
    assert rec["chunks"].tolist() == [2, 6]
    check_complete(rec, "fake")


def test_open_loop_sends_at_planned_times_whatever_the_engine_does() -> None:
    """A slow engine does not hold later requests back: each one is sent at (or just after) its
    planned time on the real clock, and arrival <= first token <= finish."""

    async def stream(rid: str, prompt: Sequence[int], n: int) -> AsyncIterator[int]:
        await asyncio.sleep(0.05)  # much longer than the gaps between arrivals
        for _ in range(n):
            await asyncio.sleep(0.001)
            yield 1

    planned = [0.0, 0.005, 0.01, 0.015, 0.02]

    async def main() -> tuple[float, pd.DataFrame]:
        tab = table(planned, [2] * 5, [3] * 5)
        return await run_open_loop(tab, stream, prompts_for(tab))

    _, rec = asyncio.run(main())
    late = rec["arrival_s"] - rec["planned_s"]
    assert (late >= -1e-9).all()
    # all were sent before the first one finished: open loop
    assert rec["arrival_s"].max() < rec["finish_s"].min()
    assert (rec["arrival_s"] <= rec["first_token_s"]).all()
    assert (rec["first_token_s"] <= rec["finish_s"]).all()
    assert np.allclose(rec["planned_s"], planned)


def test_engine_error_propagates_and_cancels_the_rest() -> None:
    cancelled: list[str] = []

    async def stream(rid: str, prompt: Sequence[int], n: int) -> AsyncIterator[int]:
        try:
            if rid == "r1":
                raise RuntimeError("engine died")
            await asyncio.sleep(10)
            yield 1
        except asyncio.CancelledError:
            cancelled.append(rid)
            raise

    async def main() -> None:
        tab = table([0.0, 0.001, 0.002], [1, 1, 1], [1, 1, 1])
        await run_open_loop(tab, stream, prompts_for(tab))

    with pytest.raises(RuntimeError, match="engine died"):
        asyncio.run(main())
    assert "r0" in cancelled


def test_short_output_is_caught() -> None:
    async def stream(rid: str, prompt: Sequence[int], n: int) -> AsyncIterator[int]:
        yield max(n - 1, 0)

    async def main() -> pd.DataFrame:
        tab = table([0.0], [2], [4])
        return (await run_open_loop(tab, stream, prompts_for(tab)))[1]

    rec = asyncio.run(main())
    with pytest.raises(InputError, match="r0: 3 of 4"):
        check_complete(rec, "run")


@pytest.mark.parametrize(
    ("planned", "prompts", "match"),
    [
        ([0.1, 0.05], None, "non-decreasing"),
        ([-1.0, 0.0], None, "non-decreasing"),
        ([0.0, 0.1], {"r0": [1, 2]}, "no prompt"),
    ],
)
def test_bad_tables_are_refused_before_sending(planned, prompts, match) -> None:  # type: ignore[no-untyped-def]
    sent: list[str] = []

    async def stream(rid: str, prompt: Sequence[int], n: int) -> AsyncIterator[int]:
        sent.append(rid)
        yield n

    tab = table(planned, [2, 2], [1, 1])
    with pytest.raises(InputError, match=match):
        asyncio.run(
            run_open_loop(tab, stream, prompts if prompts is not None else prompts_for(tab))
        )
    assert sent == []
