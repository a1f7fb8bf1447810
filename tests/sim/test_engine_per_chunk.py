"""Per-chunk admission (Hugging Face transformers' FIFO scheduler, ``admission=per_chunk``) in the
compiled serving engine against the plain-Python reference (tests/reference_engine.py): the same
start, first-token and finish time for every request of random tables, on one server, several
sharing the queue and replicas behind routers; with tight KV so that requests are passed over,
starved and reset; and each of its rules shown to change the schedule (the agreement is not
vacuous). The policy's checks name the bad key."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import RefPolicy, RefRouter, Req, compare_times, random_table, run_continuous

from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.policy import ROUTER_RECORDS, Policy
from llmqueue.policy_text import parse_policy, policy_spec
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.workload import ReplayWorkload

C = (0.011, 0.00037, 0.000013)


def _table(seed: int, n: int, rate: float, max_prompt: int, max_out: int) -> tuple[np.ndarray, ...]:
    return random_table(seed, n, rate, max_prompt, max_out, min_prompt=1)


def _engine(arr, prompt, out, policy, seed):  # type: ignore[no-untyped-def]
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    res = run(w, policy, StepLaw(*C), requests=arr.size, warmup=0, batches=2, seed=seed,
              per_request=True)  # fmt: skip
    return res, res.per_request


_compare = compare_times


def _ref(pol: Policy) -> RefPolicy:
    return RefPolicy(
        "continuous",
        bmax=math.inf if pol.bmax is None else pol.bmax,
        servers=pol.servers,
        kv_tokens=math.inf if pol.kv_tokens is None else pol.kv_tokens,
        admission="per_chunk",
        max_batched_tokens=math.inf if pol.max_batched_tokens is None else pol.max_batched_tokens,
        block_size=pol.block_size,
        kv_margin=pol.kv_margin,
    )


def _reqs(tab: np.ndarray) -> list[Req]:
    return [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    servers=st.integers(1, 2),
    max_batch=st.sampled_from([None, 1, 3, 8]),
    kv=st.sampled_from([None, 96, 120, 240, 480]),
    tokens=st.sampled_from([None, 16, 64]),
    margin=st.sampled_from([0.0, 0.15, 0.4]),
    rate=st.floats(1.0, 40.0),
    block=st.sampled_from([1, 4, 8, 12]),  # each divides every kv above
)
def test_per_chunk_matches_reference(  # type: ignore[no-untyped-def]
    seed, servers, max_batch, kv, tokens, margin, rate, block
):
    if max_batch is None:
        tokens = None  # the budget holds every decode: a cap with it
    arr, prompt, out = _table(seed, 80, rate, 60, 50)
    pol = Policy(
        "continuous", bmax=max_batch, servers=servers, kv_tokens=kv, admission="per_chunk",
        max_batched_tokens=tokens, block_size=block, kv_margin=margin,
    )  # fmt: skip
    res, tab = _engine(arr, prompt, out, pol, seed)
    reqs = run_continuous(_reqs(tab), _ref(pol), C)
    _compare(tab, reqs)
    assert res.rejected == sum(1 for r in reqs if r.prompt + r.output > _ref(pol).kv_tokens)


def _router_word(seed: int) -> int:
    """The router's first SplitMix64 state: a child of the run's seed (llmqueue.sim.router)."""
    return int(np.random.SeedSequence(seed, spawn_key=(0,)).generate_state(1, np.uint64)[0])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    router=st.sampled_from([r.name for r in ROUTER_RECORDS if r.name != "central"]),
    replicas=st.integers(2, 3),
    kv=st.sampled_from([120, 360]),
    block=st.sampled_from([1, 8]),
    rate=st.floats(2.0, 40.0),
)
def test_per_chunk_behind_routers_matches_reference(  # type: ignore[no-untyped-def]
    seed, router, replicas, kv, block, rate
):
    arr, prompt, out = _table(seed, 90, rate, 60, 50)
    pol = Policy(
        "continuous", bmax=6, kv_tokens=kv, admission="per_chunk", max_batched_tokens=32,
        block_size=block, kv_margin=0.15, replicas=replicas, router=router,
    )  # fmt: skip
    res, tab = _engine(arr, prompt, out, pol, seed)
    rr = RefRouter(router, replicas, _router_word(seed), 2)
    _compare(tab, run_continuous(_reqs(tab), _ref(pol), C, rr))


@pytest.mark.parametrize("block", [1, 8, 16])
def test_tight_kv_resets_requests_and_the_reference_agrees(block: int) -> None:
    """A KV budget a few requests fill: requests are passed over, starve and are reset (counted
    as preemptions), every one of them finishes, and both implementations agree."""
    arr, prompt, out = _table(11, 200, 30.0, 60, 90)
    pol = Policy("continuous", bmax=16, kv_tokens=320, admission="per_chunk",
                 max_batched_tokens=64, block_size=block, kv_margin=0.15)  # fmt: skip
    res, tab = _engine(arr, prompt, out, pol, 11)
    _compare(tab, run_continuous(_reqs(tab), _ref(pol), C))
    assert res.preemptions > 0
    assert not np.isnan(tab[:, 7]).any()


def test_each_rule_changes_the_schedule() -> None:
    """On a busy table with tight KV: per-chunk KV against vLLM's whole-prompt admission, and the
    safety margin against none, each serve it differently."""
    arr, prompt, out = _table(3, 200, 25.0, 60, 60)
    base = dict(bmax=12, kv_tokens=480, max_batched_tokens=64, block_size=8)
    _, per_chunk = _engine(arr, prompt, out, Policy("continuous", admission="per_chunk", **base), 3)  # type: ignore[arg-type]
    _, vllm = _engine(arr, prompt, out, Policy("continuous", admission="on_demand", **base), 3)  # type: ignore[arg-type]
    assert not np.allclose(per_chunk[:, 7], vllm[:, 7])
    _, margin = _engine(
        arr, prompt, out,
        Policy("continuous", admission="per_chunk", kv_margin=0.3, **base), 3,  # type: ignore[arg-type]
    )  # fmt: skip
    assert not np.allclose(per_chunk[:, 7], margin[:, 7])


def test_with_room_to_spare_per_chunk_is_on_demand() -> None:
    """When the KV never binds and the margin never acts, per-chunk admission serves a table as
    vLLM's on-demand admission does (decodes first, prompts chunked in FCFS order)."""
    arr, prompt, out = _table(5, 150, 8.0, 60, 40)
    base = dict(bmax=8, kv_tokens=100_000, max_batched_tokens=64, block_size=16)
    _, a = _engine(
        arr, prompt, out, Policy("continuous", admission="per_chunk", kv_margin=0.15, **base), 5
    )  # type: ignore[arg-type]
    _, b = _engine(arr, prompt, out, Policy("continuous", admission="on_demand", **base), 5)  # type: ignore[arg-type]
    np.testing.assert_allclose(a[:, 5:8], b[:, 5:8], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        (dict(admission="per_chunk", order="sjf", guard_s=1.0), "order fcfs, no guard_s"),
        (dict(admission="per_chunk", max_batched_tokens=64, chunked_prefill=False),
         "chunked_prefill true, batch_queue false"),
        (dict(admission="on_demand", kv_margin=0.1), "kv_margin applies to admission per_chunk"),
        (dict(admission="per_chunk", kv_margin=1.0), r"kv_margin must be a fraction in \[0, 1\)"),
        (dict(admission="per_chunk", kv_margin=-0.1), r"kv_margin must be a fraction"),
        (dict(admission="per_chunk", bmax=64, max_batched_tokens=32),
         "needs max_batched_tokens >= max_batch"),
        (dict(admission="per_chunk", max_batched_tokens=32), "needs max_batched_tokens >= max_batch"),
    ],
)  # fmt: skip
def test_per_chunk_settings_are_checked(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InputError, match=message):
        Policy("continuous", **kw)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="continuous batching only"):
        Policy("dynamic", kv_margin=0.1)


def test_the_spec_string_round_trips() -> None:
    p = parse_policy(
        "continuous:max_batch=64,kv_tokens=4096,block_size=32,admission=per_chunk,"
        "kv_margin=0.15,max_batched_tokens=256"
    )
    assert p.admission == "per_chunk" and p.kv_margin == 0.15
    assert parse_policy(policy_spec(p)) == p
    assert "margin=0.15" in p.label()
