"""The compiled serving engine against the plain-Python reference (tests/reference_engine.py):
the same start, first-token and finish time for every request of random small request tables,
for every queue order x batch former x admission rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import (
    RefPolicy,
    Req,
    compare_times,
    random_table,
    run_continuous,
    run_multibin,
    run_preemptive,
    run_static,
)

from llmqueue.errors import InputError
from llmqueue.latency import (
    BatchLatency,
    PackedStepLaw,
    ShapedStepLaw,
    StaircaseStepLaw,
    StepLaw,
)
from llmqueue.policy import Policy, order_names, queue_order
from llmqueue.policy_text import parse_policy
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.workload import ReplayWorkload

# every order of the registry, from its records: a new one is checked here by being added
ORDERS = order_names(preemptive=False)
PREEMPTIVE = order_names(preemptive=True)


def _table(seed: int, n: int, rate: float, max_prompt: int, max_out: int) -> tuple[np.ndarray, ...]:
    return random_table(seed, n, rate, max_prompt, max_out)


def _engine(arr, prompt, out, policy, law, seed):  # type: ignore[no-untyped-def]
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    res = run(w, policy, law, requests=arr.size, warmup=0, batches=2, seed=seed, per_request=True)
    return res, res.per_request


def _ref_reqs(tab: np.ndarray) -> list[Req]:
    return [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]


_compare = compare_times


@pytest.mark.parametrize("order", ORDERS)
def test_every_order_matches_reference_on_one_table(order: str) -> None:
    """Each non-preemptive order of the registry (a new one too) against the reference on one
    fixed table: dynamic batching of at most 3 on two servers, with the starvation guard for a
    keyed order."""
    arr, prompt, out = _table(41, 120, 4.0, 50, 40)
    k = (0.01, 0.05, 0.002, 0.01)
    guard = None if queue_order(order).by_arrival else 2.0
    pol = Policy("dynamic", bmax=3, order=order, guard_s=guard, servers=2)
    _, tab = _engine(arr, prompt, out, pol, BatchLatency(*k), 41)
    ref = RefPolicy("dynamic", bmax=3, order=order, guard_s=guard or math.inf, servers=2)
    _compare(tab, run_static(_ref_reqs(tab), ref, k))


@pytest.mark.parametrize("order", PREEMPTIVE)
def test_every_preemptive_order_matches_reference_on_one_table(order: str) -> None:
    """Each preemptive order of the registry against the reference on one fixed table."""
    arr, prompt, out = _table(43, 120, 3.0, 50, 40)
    k = (0.01, 0.05, 0.002, 0.01)
    _, tab = _engine(arr, prompt, out, Policy("none", order=order), BatchLatency(*k), 43)
    _compare(tab, run_preemptive(_ref_reqs(tab), order, k))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    kind=st.sampled_from(["none", "dynamic", "fixed", "elastic"]),
    order=st.sampled_from(ORDERS),
    servers=st.integers(1, 3),
    guard=st.sampled_from([None, 2.0]),
    rate=st.floats(0.5, 6.0),
)
def test_static_formers_match_reference(seed, kind, order, servers, guard, rate):  # type: ignore[no-untyped-def]
    arr, prompt, out = _table(seed, 60, rate, 50, 40)
    k = (0.01, 0.05, 0.002, 0.01)
    bmax = 4 if kind in ("dynamic", "elastic") and seed % 2 else None
    pol = Policy(
        kind,
        bmax=bmax,
        K=3 if kind == "fixed" else None,
        order=order,
        guard_s=guard,
        servers=servers,
    )
    _, tab = _engine(arr, prompt, out, pol, BatchLatency(*k), seed)
    ref = RefPolicy(
        kind,
        bmax=math.inf if bmax is None else bmax,
        K=3,
        order=order,
        guard_s=math.inf if guard is None else guard,
        servers=servers,
    )
    _compare(tab, run_static(_ref_reqs(tab), ref, k))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    order=st.sampled_from(PREEMPTIVE),
    rate=st.floats(0.5, 6.0),
    limit=st.sampled_from([None, 0.3, 0.8]),
)
def test_preemptive_orders_match_reference(seed, order, rate, limit):  # type: ignore[no-untyped-def]
    arr, prompt, out = _table(seed, 80, rate, 50, 40)
    k = (0.01, 0.05, 0.002, 0.01)
    pol = Policy("none", order=order, preempt_limit=limit)
    _, tab = _engine(arr, prompt, out, pol, BatchLatency(*k), seed)
    _compare(tab, run_preemptive(_ref_reqs(tab), order, k, math.inf if limit is None else limit))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    order=st.sampled_from(ORDERS),
    admission=st.sampled_from(["reserve", "on_demand"]),
    servers=st.integers(1, 2),
    max_batch=st.sampled_from([None, 1, 3, 8]),
    kv=st.sampled_from([None, 120, 300]),
    chunked=st.sampled_from([None, 16, 64]),
    guard=st.sampled_from([None, 1.5]),
    rate=st.floats(1.0, 30.0),
    block=st.sampled_from([1, 1, 4, 12, 30]),  # each divides every kv above
)
def test_continuous_matches_reference(  # type: ignore[no-untyped-def]
    seed, order, admission, servers, max_batch, kv, chunked, guard, rate, block
):
    arr, prompt, out = _table(seed, 80, rate, 60, 50)
    c = (0.011, 0.00037, 0.000013)
    pol = Policy(
        "continuous",
        bmax=max_batch,
        order=order,
        guard_s=guard,
        servers=servers,
        kv_tokens=kv,
        admission=admission,
        max_batched_tokens=chunked,
        block_size=block,
    )
    res, tab = _engine(arr, prompt, out, pol, StepLaw(*c), seed)
    ref = RefPolicy(
        "continuous",
        bmax=math.inf if max_batch is None else max_batch,
        order=order,
        guard_s=math.inf if guard is None else guard,
        servers=servers,
        kv_tokens=math.inf if kv is None else kv,
        admission=admission,
        max_batched_tokens=math.inf if chunked is None else chunked,
        block_size=block,
    )
    reqs = run_continuous(_ref_reqs(tab), ref, c)
    _compare(tab, reqs)
    rejected = sum(1 for r in reqs if r.prompt + r.output > ref.kv_tokens)
    assert res.rejected == rejected


def test_on_demand_preempts_and_reference_agrees() -> None:
    """A tight KV budget forces preemptions; both implementations agree on every request."""
    arr, prompt, out = _table(7, 120, 40.0, 40, 60)
    c = (0.01, 0.0004, 0.00001)
    pol = Policy("continuous", bmax=16, kv_tokens=150, admission="on_demand")
    res, tab = _engine(arr, prompt, out, pol, StepLaw(*c), 7)
    ref = RefPolicy("continuous", bmax=16, kv_tokens=150, admission="on_demand")
    _compare(tab, run_continuous(_ref_reqs(tab), ref, c))
    assert res.preemptions > 0


@pytest.mark.parametrize("block", [8, 16, 50])
def test_paged_kv_preempts_and_reference_agrees(block: int) -> None:
    """KV in blocks (vLLM's paged cache) under a tight budget: decode-only runs that cross
    block boundaries at different phases, preemptions, chunked prefill; both agree."""
    arr, prompt, out = _table(11, 150, 30.0, 60, 90)
    c = (0.01, 0.0004, 0.00001)
    kw = dict(bmax=16, kv_tokens=400, admission="on_demand", max_batched_tokens=64)
    pol = Policy("continuous", block_size=block, **kw)  # type: ignore[arg-type]
    res, tab = _engine(arr, prompt, out, pol, StepLaw(*c), 11)
    ref = RefPolicy("continuous", block_size=block, **kw)  # type: ignore[arg-type]
    _compare(tab, run_continuous(_ref_reqs(tab), ref, c))
    assert res.preemptions > 0
    # the blocks matter here: token-granular KV serves the same table differently
    _, fine = _engine(arr, prompt, out, Policy("continuous", **kw), StepLaw(*c), 11)  # type: ignore[arg-type]
    assert not np.allclose(tab[:, 7], fine[:, 7], equal_nan=True)


def test_policy_block_size_is_checked() -> None:
    with pytest.raises(InputError, match="whole number of blocks"):
        Policy("continuous", kv_tokens=100, block_size=32)
    with pytest.raises(InputError, match="block_size"):
        Policy("continuous", block_size=0)
    with pytest.raises(InputError, match="continuous batching only"):
        Policy("dynamic", block_size=16)
    assert parse_policy("continuous:kv_tokens=4096,block_size=32").block_size == 32


@pytest.mark.parametrize("kind", ["dynamic", "elastic"])
def test_per_request_table_columns(kind: str) -> None:
    arr, prompt, out = _table(3, 30, 2.0, 10, 10)
    _, tab = _engine(arr, prompt, out, Policy(kind), BatchLatency(0.0, 0.1, 0.0, 0.01), 3)
    assert tab.shape == (30, 9)
    np.testing.assert_array_equal(tab[:, 0], np.arange(30))
    np.testing.assert_allclose(tab[:, 1], arr)
    assert np.all(tab[:, 5] >= tab[:, 1]) and np.all(tab[:, 7] >= tab[:, 6])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    bins=st.integers(1, 4),
    batch=st.integers(1, 5),
    servers=st.integers(1, 3),
    flush=st.sampled_from([None, 0.7, 3.0]),
    rate=st.floats(0.5, 8.0),
)
def test_multibin_matches_reference(seed, bins, batch, servers, flush, rate):  # type: ignore[no-untyped-def]
    arr, prompt, out = _table(seed, 70, rate, 20, 40)
    k = (0.0, 0.05, 0.0, 0.02)
    edges = tuple(float(e) for e in np.linspace(0, 40, bins + 1)[1:-1]) or None
    pol = Policy("multibin", K=batch, bins=bins, bin_edges=edges, servers=servers, flush_s=flush)
    _, tab = _engine(arr, prompt, out, pol, BatchLatency(*k), seed)
    reqs = run_multibin(
        _ref_reqs(tab),
        batch,
        list(edges or ()),
        k,
        servers,
        math.inf if flush is None else flush,
    )
    _compare(tab, reqs)


# ---- the validation matrix's engine options: a shaped step law, chunked prefill off, the batch
# queue (each against the reference, event by event) ---------------------------------------------
def _shaped() -> ShapedStepLaw:
    """A step law that bends at small batches (as a CPU engine's does), prefill priced apart."""
    return ShapedStepLaw(
        0.011, 0.0004, 0.000013, "bent", c_pre_s=0.0006,
        knots=(0, 1, 2, 3, 4, 8), values_s=(0.011, 0.0135, 0.0161, 0.0139, 0.0141, 0.0158),
    )  # fmt: skip


def _packed() -> PackedStepLaw:
    """Attention over the step's tokens x its context (transformers' packed sdpa on a CPU)."""
    return PackedStepLaw(0.011, 0.00037, 0.000013, "packed", c_qk_s=2e-7)


def _staircase() -> StaircaseStepLaw:
    """Dai, Li and Peng's staircase on a narrow tile (16 tokens), with a context price."""
    return StaircaseStepLaw.of(0.011, 0.004, 16, c_ctx_s=0.000013)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    order=st.sampled_from(ORDERS),
    max_batch=st.sampled_from([None, 2, 6, 12]),
    kv=st.sampled_from([None, 240, 600]),
    tokens=st.sampled_from([None, 48, 96]),
    whole=st.booleans(),
    batch_queue=st.booleans(),
    law_kind=st.sampled_from(["linear", "shaped", "packed", "staircase"]),
    dong=st.booleans(),
    rate=st.floats(1.0, 30.0),
    block=st.sampled_from([1, 8, 12]),
)
def test_matrix_options_match_reference(  # type: ignore[no-untyped-def]
    seed, order, max_batch, kv, tokens, whole, batch_queue, law_kind, dong, rate, block
):
    """Shaped, packed or staircase law, Dong's KV count, whole-prompt admission (chunked prefill off) and the batch queue,
    alone and together, with on-demand paged KV: every request's start, first token and finish
    agree."""
    if whole and tokens is None:
        tokens = 64
    arr, prompt, out = _table(seed, 70, rate, 60, 40)
    law = {
        "shaped": _shaped(),
        "packed": _packed(),
        "staircase": _staircase(),
        "linear": StepLaw(0.011, 0.00037, 0.000013),
    }[law_kind]
    kw = dict(kv_tokens=kv, admission="on_demand", max_batched_tokens=tokens, block_size=block)
    kw["kv_accounting"] = "dong" if dong else "vllm"
    pol = Policy(
        "continuous", bmax=max_batch, order=order, chunked_prefill=not whole,
        batch_queue=batch_queue, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    _, tab = _engine(arr, prompt, out, pol, law, seed)
    ref = RefPolicy(
        "continuous", bmax=math.inf if max_batch is None else max_batch, order=order,
        kv_tokens=math.inf if kv is None else kv, admission="on_demand",
        max_batched_tokens=math.inf if tokens is None else tokens, block_size=block,
        chunked_prefill=not whole, batch_queue=batch_queue, kv_extra=1.0 if dong else 0.0,
    )  # fmt: skip
    step = law.step if law_kind != "linear" else (law.c0_s, law.c_tok_s, law.c_ctx_s)
    _compare(tab, run_continuous(_ref_reqs(tab), ref, step))  # type: ignore[arg-type]


def test_the_options_change_the_schedule() -> None:
    """Each option matters on a busy table (so the agreement above is not vacuous)."""
    arr, prompt, out = _table(3, 150, 25.0, 60, 40)
    base = dict(bmax=8, kv_tokens=600, admission="on_demand", max_batched_tokens=64, block_size=8)
    law = StepLaw(0.011, 0.00037, 0.000013)
    _, ref = _engine(arr, prompt, out, Policy("continuous", **base), law, 3)  # type: ignore[arg-type]
    for kw, lw in (
        (dict(chunked_prefill=False), law),
        (dict(batch_queue=True), law),
        ({}, _shaped()),
        ({}, _packed()),
        ({}, _staircase()),
    ):
        _, got = _engine(arr, prompt, out, Policy("continuous", **base, **kw), lw, 3)  # type: ignore[arg-type]
        assert not np.allclose(got[:, 7], ref[:, 7]), kw
    # Dong's count: one more token per sequence (token-granular blocks and a KV that binds)
    one = {**base, "block_size": 1, "kv_tokens": 300}
    _, vllm = _engine(arr, prompt, out, Policy("continuous", **one), law, 3)  # type: ignore[arg-type]
    dong = Policy("continuous", **one, kv_accounting="dong")  # type: ignore[arg-type]
    _, got = _engine(arr, prompt, out, dong, law, 3)
    assert not np.allclose(got[:, 7], vllm[:, 7])


def test_batch_queue_is_the_papers_elastic_batching() -> None:
    """With iteration time c0 alone (no per-token or context cost) and one-token prompts, the batch
    queue on the iteration-level engine is Eq. (26)'s elastic batching with t1(b) = t2(b) = c0
    (k = (0, c0, 0, c0); N = the tokens after the first): the same start and finish for every
    request, and the same first token."""
    arr, _, out = _table(5, 300, 3.0, 1, 30)
    prompt = np.ones_like(out)
    c0 = 0.02
    pol = Policy("continuous", bmax=6, batch_queue=True, max_batched_tokens=4096,
                 chunked_prefill=False)  # fmt: skip
    _, cont = _engine(arr, prompt, out, pol, StepLaw(c0, 0.0, 0.0), 5)
    w = ReplayWorkload(arr, prompt, out - 1.0)
    ela = run(w, Policy("elastic", bmax=6), BatchLatency(0.0, c0, 0.0, c0), requests=arr.size,
              warmup=0, batches=2, seed=5, per_request=True).per_request  # fmt: skip
    np.testing.assert_allclose(cont[:, 5], ela[:, 5], rtol=1e-12, atol=1e-12)  # start
    np.testing.assert_allclose(cont[:, 7], ela[:, 7], rtol=1e-9, atol=1e-9)  # finish
    np.testing.assert_allclose(cont[:, 6], ela[:, 5] + c0, rtol=1e-9, atol=1e-9)  # first token


def test_chunked_prefill_off_needs_a_budget() -> None:
    with pytest.raises(InputError, match="max_batched_tokens"):
        Policy("continuous", chunked_prefill=False)
    with pytest.raises(InputError, match="continuous batching only"):
        Policy("dynamic", batch_queue=True)
    p = parse_policy(
        "continuous:max_batch=8,max_batched_tokens=512,chunked_prefill=false,batch_queue=true"
    )
    assert (p.chunked_prefill, p.batch_queue) == (False, True)
    assert "whole-prompts" in p.label() and "batch-queue" in p.label()
    from llmqueue.policy_text import policy_spec

    assert parse_policy(policy_spec(p)) == p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    order=st.sampled_from(PREEMPTIVE),
    admission=st.sampled_from(["reserve", "on_demand"]),
    max_batch=st.sampled_from([None, 1, 3, 8]),
    kv=st.sampled_from([None, 120, 300]),
    chunked=st.sampled_from([None, 16, 64]),
    rate=st.floats(1.0, 30.0),
    block=st.sampled_from([1, 4, 12]),
    limit=st.sampled_from([None, None, 0.3, 0.8]),
    servers=st.sampled_from([1, 1, 2]),
)
def test_preemptive_continuous_matches_reference(  # type: ignore[no-untyped-def]
    seed, order, admission, max_batch, kv, chunked, rate, block, limit, servers
):
    """Preemptive orders under continuous batching: the running request with the largest key is
    evicted (recompute) for a waiting one with a smaller key that has no seat or KV, except one
    past TRAIL's limit; every request's start, first token and finish agree."""
    arr, prompt, out = _table(seed, 80, rate, 60, 50)
    c = (0.011, 0.00037, 0.000013)
    kw = dict(kv_tokens=kv, admission=admission, max_batched_tokens=chunked, block_size=block)
    pol = Policy(
        "continuous", bmax=max_batch, order=order, preempt_limit=limit, servers=servers, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    _, tab = _engine(arr, prompt, out, pol, StepLaw(*c), seed)
    ref = RefPolicy(
        "continuous", bmax=math.inf if max_batch is None else max_batch, order=order,
        kv_tokens=math.inf if kv is None else kv, admission=admission,
        max_batched_tokens=math.inf if chunked is None else chunked, block_size=block,
        preempt_limit=math.inf if limit is None else limit, servers=servers,
    )  # fmt: skip
    _compare(tab, run_continuous(_ref_reqs(tab), ref, c))


def test_the_reference_refuses_an_order_former_or_router_it_has_no_rule_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An order, batch former or router the reference engine has no rule for is refused, never
    served by another one's rule (a forgotten branch fails the comparison instead of passing)."""
    from reference_engine import RefRouter

    import llmqueue.policy as P

    # a registered order whose key the reference does not know, and one it does
    monkeypatch.setattr(P, "ORDER_KEYS", (*P.ORDER_KEYS, "predicted_total"))
    toy = P.QueueOrder("toy", "predicted_total", True, False, None)
    alias = P.QueueOrder("alias", "predicted_size", True, False, None)
    monkeypatch.setattr(P, "QUEUE_ORDERS", (*P.QUEUE_ORDERS, toy, alias))
    with pytest.raises(NotImplementedError, match="no key 'predicted_total' \\(order 'toy'\\)"):
        RefPolicy("none", order="toy")
    assert RefPolicy("none", order="alias").order == "alias"
    with pytest.raises(InputError, match="order must be one of"):
        RefPolicy("none", order="lifo")
    with pytest.raises(NotImplementedError, match="order 'spjf' does not preempt"):
        run_preemptive([], "spjf", (0.0, 0.1, 0.0, 0.01))
    with pytest.raises(NotImplementedError, match="no batch former 'toy'"):
        RefPolicy("toy")
    # a registered router without a choice here, and a name outside the registry
    monkeypatch.setattr(P, "ROUTER_RECORDS", (*P.ROUTER_RECORDS, P.Router("nearest", "requests")))
    with pytest.raises(NotImplementedError, match="no router 'nearest'"):
        RefRouter("nearest", 2, 1)
    with pytest.raises(InputError, match="router must be one of"):
        RefRouter("closest", 2, 1)
