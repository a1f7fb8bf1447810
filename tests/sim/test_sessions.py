"""The session generator (llmqueue.sim.sessions): its block ids name content (a turn's ids extend
the previous turn's, sessions share exactly their system prompt's full blocks), and in a pool
that never evicts each turn finds exactly what content naming promises."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.sim.block_pool import replay_hits
from llmqueue.sim.sessions import SessionSpec, session_table, session_workload
from llmqueue.tokens import parse_law


def _spec(**kw: object) -> SessionSpec:
    base = dict(
        rate_per_s=0.5, sessions=30, system_prompts=3, system_tokens=40, zipf_alpha=1.0,
        turns=parse_law("uniform:low=1,high=5"), message=parse_law("uniform:low=1,high=30"),
        answer=parse_law("uniform:low=1,high=40"), think_s=5.0, block_tokens=8,
    )  # fmt: skip
    base.update(kw)
    return SessionSpec(**base)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    system_tokens=st.integers(0, 50),
    block=st.sampled_from([1, 4, 8, 16]),
    prompts=st.integers(1, 4),
)
def test_ids_name_content(seed: int, system_tokens: int, block: int, prompts: int) -> None:
    spec = _spec(system_tokens=system_tokens, block_tokens=block, system_prompts=prompts)
    arr, prompt, out, blocks, sess = session_table(spec, seed=seed)
    assert np.all(np.diff(arr) >= 0) and arr[0] == 0.0
    blocks.check_prompts(prompt)
    sys_blocks = system_tokens // block
    lists = [blocks.of(i).tolist() for i in range(blocks.n)]
    for i in range(len(lists)):
        assert len(lists[i]) == int(prompt[i]) // block  # every full prompt block has an id
    by_session: dict[int, list[int]] = {}
    for i, j in enumerate(sess):
        by_session.setdefault(int(j), []).append(i)
    for turns in by_session.values():  # a turn's ids extend the previous turn's
        for a, b in zip(turns, turns[1:], strict=False):
            assert lists[b][: len(lists[a])] == lists[a]
            assert prompt[b] > prompt[a] + out[a]
    firsts = [turns[0] for turns in by_session.values()]
    for x in firsts:
        for y in firsts:
            if x >= y:
                continue
            common = 0
            while (
                common < min(len(lists[x]), len(lists[y])) and lists[x][common] == lists[y][common]
            ):
                common += 1
            same_system = lists[x][:1] == lists[y][:1] and sys_blocks > 0
            want = min(sys_blocks, len(lists[x]), len(lists[y])) if same_system else 0
            assert common == want


def test_a_pool_that_never_evicts_finds_each_turns_previous_prompt() -> None:
    """Requests replayed one at a time into a pool larger than all of them: a request hits the
    longest run of leading ids any earlier request's prompt had (its previous turn's prompt, its
    system prompt), at most (prompt - 1) // block; its previous answer was never a prompt, so it
    is not among the hits."""
    spec = _spec(sessions=60)
    arr, prompt, out, blocks, _ = session_table(spec, seed=7)
    dense, u = blocks.dense()
    b = spec.block_tokens
    hits = replay_hits(
        dense.offsets, dense.ids, u, prompt, prompt + out - 1, block_tokens=b, capacity_blocks=10**5
    )
    seen: set[tuple[int, ...]] = set()
    for i in range(dense.n):
        ids = tuple(dense.of(i).tolist())
        k = 0
        while k < len(ids) and ids[: k + 1] in seen:
            k += 1
        assert hits[i] == min(k, (int(prompt[i]) - 1) // b)
        seen.update(ids[: j + 1] for j in range(len(ids)))
    assert hits.sum() > 0


def test_session_workload_and_its_refusals() -> None:
    w = session_workload(_spec(), seed=3)
    assert w.blocks is not None and w.blocks.n == w.output_tokens.size
    for key, val in [("rate_per_s", 0.0), ("sessions", 0), ("zipf_alpha", -1.0), ("think_s", -1.0),
                     ("block_tokens", 0), ("system_tokens", -1), ("sessions", True)]:  # fmt: skip
        with pytest.raises(InputError, match=key):
            _spec(**{key: val})


def test_sessions_through_the_engine_with_prefix_caching() -> None:
    """The engine with prefix caching on a session table (FCFS, a pool that holds every session):
    the share of prompt tokens it finds cached, over the requests first admitted within the
    measured window (arrivals 0 .. the last), is positive and at most what a lone replay of the
    same requests in arrival order finds (at an admission only earlier arrivals' prompts can be
    cached)."""
    from llmqueue.latency import StepLaw
    from llmqueue.policy import Policy
    from llmqueue.sim.engine import run

    spec = _spec(sessions=400, rate_per_s=4.0, think_s=0.5)
    w = session_workload(spec, seed=11)
    n = w.output_tokens.size
    pol = Policy(
        "continuous", kv_tokens=200_000, admission="on_demand", block_size=8, prefix_caching=True
    )
    res = run(
        w, pol, StepLaw(0.01, 1e-3, 0.0), requests=n, warmup=0, batches=2, seed=1, per_request=True
    )
    arr, prompt, out, blocks, _ = session_table(spec, seed=11)
    dense, u = blocks.dense()
    most = replay_hits(
        dense.offsets, dense.ids, u, prompt, prompt + out - 1, block_tokens=8, capacity_blocks=10**6
    )
    inside = res.per_request[:, 5] <= arr[-1]
    bound = float((most[inside] * 8).sum() / prompt[inside].sum())
    assert (
        0.0 < res.prefix_hit_share <= bound * (1 + 1e-12)
    )  # equal when nothing is lost to overlap
