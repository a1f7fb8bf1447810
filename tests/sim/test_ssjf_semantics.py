"""The serving semantics of SSJF's simulator as options of the engine (llmqueue.policy):
``batch_timeout_s`` (FCFS waits to fill a batch), ``guard_factor`` (the starvation guard's
run-time trigger) and the former ``rebatch`` (a batch runs until its shortest member ends, the
others go back to the queue).

Each is checked three ways: small examples worked by hand (below each test, the schedule);
the exact results that still hold (timeout 0 is no timeout, a guard that never fires is the
plain order, re-batching one request at a time is the one-at-a-time server, a closed form of the
timeout with instant service, a burst served with no cap); and the compiled engine against the
plain-Python reference (tests/reference_engine.py) event by event on random request tables.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import RefPolicy, Req, run_rebatch, run_static

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency
from llmqueue.policy import Policy, order_names
from llmqueue.policy_text import parse_policy, policy_spec
from llmqueue.sim.engine import run
from llmqueue.sim.exact import exact_wait
from llmqueue.sim.predictors import Noisy, parse_predictor
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.tokens import parse_law

COST = BatchLatency(0.0, 0.1, 0.0, 0.02, name="SSJF's cost: 0.1 s + 0.02 s per token")


def _finish(arr, out, policy, pred=None, law=COST):  # type: ignore[no-untyped-def]
    """Finish times (s) of a small table served alone (a tail of far-off one-token requests
    fills the engine's minimum run length without touching the first ones)."""
    n = len(arr)
    pad = max(20 - n, 1)
    a = np.concatenate([np.asarray(arr, float), 1e6 + np.arange(pad, dtype=float)])
    o = np.concatenate([np.asarray(out, float), np.ones(pad)])
    p = None if pred is None else np.concatenate([np.asarray(pred, float), np.ones(pad)])
    w = ReplayWorkload(a, np.zeros(a.size), o, predictor=parse_predictor("oracle"), row_pred=p)
    res = run(w, policy, law, requests=a.size, warmup=0, batches=2, seed=1, per_request=True)
    return res.per_request[:n, 7], res.per_request[:n, 5]


# four jobs: A at 0 runs 2 s (95 tokens), B at 1 runs 3 s, C at 2 runs 1 s, D at 3 runs 2 s
ARR4, OUT4 = [0.0, 1.0, 2.0, 3.0], [95.0, 145.0, 45.0, 95.0]


# ---- the batch timeout ----------------------------------------------------------------------------
def test_dynamic_timeout_by_hand() -> None:
    # no timeout: A alone 0-2; B, C 2-5 (the longer); D 5-7
    fin, _ = _finish(ARR4, OUT4, Policy("dynamic", bmax=2))
    np.testing.assert_allclose(fin, [2, 5, 5, 7])
    # 10 s: A waits for B (full at 1): 1-4; C and D wait at 4, a full batch: 4-6
    fin, start = _finish(ARR4, OUT4, Policy("dynamic", bmax=2, batch_timeout_s=10))
    np.testing.assert_allclose(start, [1, 1, 4, 4])
    np.testing.assert_allclose(fin, [4, 4, 6, 6])
    # 0.5 s: A waits 0.5 s in vain and runs alone 0.5-2.5; B, C 2.5-5.5; D waits again: 6-8
    fin, _ = _finish(ARR4, OUT4, Policy("dynamic", bmax=2, batch_timeout_s=0.5))
    np.testing.assert_allclose(fin, [2.5, 5.5, 5.5, 8])
    # an arrival exactly at the end of the wait joins: 1 s lets B (at 1) in
    fin, _ = _finish(ARR4, OUT4, Policy("dynamic", bmax=2, batch_timeout_s=1))
    np.testing.assert_allclose(fin[:2], [4, 4])


def test_rebatch_timeout_by_hand() -> None:
    # A waits for B: 1-3 (A's 2 s); A leaves at 3, B (1 s left) goes back to the head; C, D
    # arrived: B, C 3-4 (1 s each); D alone waits the whole 10 s: 14-16
    fin, start = _finish(ARR4, OUT4, Policy("rebatch", bmax=2, batch_timeout_s=10))
    np.testing.assert_allclose(fin, [3, 4, 4, 16])
    np.testing.assert_allclose(start, [1, 1, 3, 14])


def test_timeout_zero_is_no_timeout() -> None:
    arr, prompt, out = _table(5, 400, 3.0)
    for kind in ("dynamic", "elastic", "rebatch"):
        for order in ("fcfs", "sjf"):
            base = _engine(arr, prompt, out, Policy(kind, bmax=3, order=order))
            zero = _engine(arr, prompt, out, Policy(kind, bmax=3, order=order, batch_timeout_s=0))
            np.testing.assert_array_equal(base, zero)
            some = _engine(arr, prompt, out, Policy(kind, bmax=3, order=order, batch_timeout_s=2))
            assert not np.array_equal(base, some)  # and the option does something


@pytest.mark.parametrize("kind", ["dynamic", "rebatch"])
def test_timeout_with_instant_service_is_its_closed_form(kind: str) -> None:
    """Batches of at most 2, instant service, Poisson(lam) arrivals: a batch starts at an
    arrival and waits min(X, tau) for the next (X ~ Exp(lam)); it pairs with probability
    p = 1 - exp(-lam tau). Mean wait = E[min(X, tau)] / E[members] = p / (lam (1 + p))."""
    lam, tau = 2.0, 0.6
    p = 1.0 - math.exp(-lam * tau)
    exact = p / (lam * (1.0 + p))
    w = PoissonWorkload(parse_law("deterministic:value=10"), lam)
    pol = Policy(kind, bmax=2, batch_timeout_s=tau)
    law = BatchLatency(0.0, 0.0, 0.0, 1e-9)  # 10 tokens: 10 ns, instant beside the waits
    for seed in (1, 2, 3):
        res = run(w, pol, law, requests=200_000, warmup=1000, seed=seed)
        assert abs(res.wait.mean - exact) <= 2.0 * res.wait.ci95 + 1e-9, (res.wait.mean, exact)
        assert res.wait.ci95 < 0.02 * exact


# ---- the guard's run-time trigger -------------------------------------------------------------------
def test_guard_factor_by_hand() -> None:
    # X (5 s) runs 0-5; S (0.5 s) arrives at 0.5; R1..R7 (0.3 s) at 1, 2, ..., 7.
    # SJF: R1 5-5.3, R2 5.3-5.6, R3 ... R6 6.5-6.8, then S 6.8-7.3 (before R7, which arrives at 7)
    arr = [0.0, 0.5, 1, 2, 3, 4, 5, 6, 7]
    out = [245.0, 20.0, *[10.0] * 7]
    plain, _ = _finish(arr, out, Policy("none", order="sjf", guard_s=100))
    assert plain[1] == pytest.approx(7.3)
    # 10x its run time: at 5.3 S has waited 4.8 s (< 5 s), at 5.6 5.1 s: S goes next, 5.6-6.1
    guarded, start = _finish(arr, out, Policy("none", order="sjf", guard_s=100, guard_factor=10))
    assert start[1] == pytest.approx(5.6) and guarded[1] == pytest.approx(6.1)
    # the guard's age trigger alone at 5 s does the same here; at 6 s S waits until 6.8 (at 6.5
    # it has waited exactly 6 s, not more)
    np.testing.assert_allclose(
        _finish(arr, out, Policy("none", order="sjf", guard_s=5))[0], guarded
    )
    assert _finish(arr, out, Policy("none", order="sjf", guard_s=6))[1][1] == pytest.approx(6.8)


def test_guard_that_never_fires_is_the_plain_order() -> None:
    arr, prompt, out = _table(9, 400, 3.0)
    for kind in ("none", "dynamic", "rebatch"):
        bmax = None if kind == "none" else 3
        plain = _engine(arr, prompt, out, Policy(kind, bmax=bmax, order="sjf"))
        never = Policy(kind, bmax=bmax, order="sjf", guard_s=1e9, guard_factor=1e9)
        np.testing.assert_array_equal(plain, _engine(arr, prompt, out, never))
        fires = Policy(kind, bmax=bmax, order="sjf", guard_s=1e9, guard_factor=2.0)
        assert not np.array_equal(plain, _engine(arr, prompt, out, fires))


def test_guard_factor_never_firing_matches_cobham() -> None:
    """SJF with no batching and a guard that never fires is SJF: Cobham's mean wait."""
    w = PoissonWorkload(parse_law("lognormal:mu=4.5,sigma=0.8,cap=1000"), 1.0)
    law = LinearLatency(0.02, 0.1)
    rate = 0.75 / (0.1 + 0.02 * w.output.mean())
    w = PoissonWorkload(w.output, rate)
    exact = exact_wait(w, Policy("none", order="sjf"), law, seed=1)
    assert exact is not None
    pol = Policy("none", order="sjf", guard_s=1e9, guard_factor=1e9)
    for seed in (1, 2):
        res = run(w, pol, law, requests=300_000, warmup=20_000, seed=seed)
        assert abs(res.wait.mean - exact.wait_s) <= 2.0 * res.wait.ci95, (res.wait.mean, exact)


# ---- re-batching at the shortest member's end ----------------------------------------------------------
def test_rebatch_by_hand() -> None:
    # FCFS: A alone 0-2; B, C 2-3 (C's 1 s): C leaves, B (2 s left) back to the head; B, D 3-5
    fin, start = _finish(ARR4, OUT4, Policy("rebatch", bmax=2))
    np.testing.assert_allclose(fin, [2, 5, 3, 5])
    np.testing.assert_allclose(start, [0, 2, 2, 3])


def test_rebatch_sjf_orders_by_the_run_time_left() -> None:
    # A (5 s) and B (1 s) at 0; D and E (4.5 s) at 0.5. B, A 0-1: B leaves, A has 4 s left,
    # less than D's and E's 4.5: A, D 1-5 (A leaves; D 0.5 s left); D, E 5-5.5; E alone 5.5-9.5
    arr, out = [0.0, 0.0, 0.5, 0.5], [245.0, 45.0, 220.0, 220.0]
    fin, _ = _finish(arr, out, Policy("rebatch", bmax=2, order="sjf"))
    np.testing.assert_allclose(fin, [5, 1, 5.5, 9.5])
    # by a prediction (10, 1, 5, 5 tokens) the key stays: D, E 1-5.5 and A (4 s left) 5.5-9.5
    fin, _ = _finish(arr, out, Policy("rebatch", bmax=2, order="spjf"), pred=[10, 1, 5, 5])
    np.testing.assert_allclose(fin, [9.5, 1, 5.5, 5.5])


def test_rebatch_put_back_goes_behind_its_key() -> None:
    # equal predictions: A (5 s), B (1 s) at 0; C, D (1 s) at 0.5. A, B 0-1; A (4 s left) goes
    # back behind C and D: C, D 1-2; A 2-6
    arr, out = [0.0, 0.0, 0.5, 0.5], [245.0, 45.0, 45.0, 45.0]
    fin, _ = _finish(arr, out, Policy("rebatch", bmax=2, order="spjf"), pred=[1, 1, 1, 1])
    np.testing.assert_allclose(fin, [6, 1, 2, 2])


@pytest.mark.parametrize("order", order_names(preemptive=False))
def test_rebatch_one_at_a_time_is_the_one_at_a_time_server(order: str) -> None:
    arr, prompt, out = _table(3, 500, 4.0)
    guard = 3.0 if order != "fcfs" else None
    none = _engine(arr, prompt, out, Policy("none", order=order, guard_s=guard, guard_factor=4.0))
    one = _engine(arr, prompt, out, Policy("rebatch", bmax=1, order=order, guard_s=guard,
                                           guard_factor=4.0))  # fmt: skip
    np.testing.assert_allclose(one[:, 5], none[:, 5], rtol=1e-12)  # start
    np.testing.assert_allclose(one[:, 7], none[:, 7], rtol=1e-12)  # finish


def test_rebatch_one_at_a_time_matches_pollaczek_khinchine() -> None:
    w = PoissonWorkload(parse_law("lognormal:mu=4.5,sigma=0.8,cap=1000"), 1.0)
    law = LinearLatency(0.02, 0.1)
    w = PoissonWorkload(w.output, 0.8 / (0.1 + 0.02 * w.output.mean()))
    exact = exact_wait(w, Policy("none"), law, seed=1)
    assert exact is not None
    for seed in (4, 5):
        res = run(w, Policy("rebatch", bmax=1), law, requests=300_000, warmup=20_000, seed=seed)
        assert abs(res.wait.mean - exact.wait_s) <= 2.0 * res.wait.ci95, (res.wait.mean, exact)


def test_rebatch_of_equal_jobs_is_dynamic_batching() -> None:
    """Equal run times: every member of a batch finishes at its end, as a padded batch."""
    rng = np.random.default_rng(2)
    arr = np.cumsum(rng.exponential(1 / 1.5, 400))
    out = np.full(400, 40.0)
    for order in ("fcfs", "sjf"):
        a = _engine(arr, np.zeros(400), out, Policy("rebatch", bmax=3, order=order), COST)
        b = _engine(arr, np.zeros(400), out, Policy("dynamic", bmax=3, order=order), COST)
        np.testing.assert_allclose(a[:, [5, 7]], b[:, [5, 7]], rtol=1e-12)


def test_rebatch_burst_with_no_cap_finishes_each_at_its_run_time() -> None:
    n = 50
    out = np.random.default_rng(4).integers(1, 500, n).astype(float)
    fin, start = _finish(np.zeros(n), out, Policy("rebatch", order="sjf"))
    np.testing.assert_allclose(fin, 0.1 + 0.02 * out, rtol=1e-12)
    assert np.all(start == 0)


# ---- the compiled engine against the reference, event by event ------------------------------------------
def _table(seed: int, n: int, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    if seed % 3 == 0:
        arr = np.floor(arr)  # SSJF's whole-second arrivals: many at the same moment
    return arr, rng.integers(0, 50, n).astype(float), rng.integers(1, 41, n).astype(float)


EQ18 = BatchLatency(0.01, 0.05, 0.002, 0.01, name="an Eq. 18 law whose batch size matters")


def _engine(arr, prompt, out, policy, law=EQ18):  # type: ignore[no-untyped-def]
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    res = run(w, policy, law, requests=arr.size, warmup=0, batches=2, seed=3, per_request=True)
    return res.per_request


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    kind=st.sampled_from(["none", "dynamic", "elastic", "rebatch"]),
    order=st.sampled_from(order_names(preemptive=False)),
    servers=st.integers(1, 2),
    bmax=st.sampled_from([None, 1, 2, 3]),
    timeout=st.sampled_from([None, 0.0, 0.7, 3.0]),
    guard=st.sampled_from([None, 2.0]),
    factor=st.sampled_from([None, 1.5, 4.0]),
    rate=st.floats(0.5, 6.0),
    cost=st.booleans(),
)
def test_options_match_reference(  # type: ignore[no-untyped-def]
    seed, kind, order, servers, bmax, timeout, guard, factor, rate, cost
):
    arr, prompt, out = _table(seed, 60, rate)
    k = (0.0, 0.1, 0.0, 0.02) if cost else (0.01, 0.05, 0.002, 0.01)
    bmax = None if kind == "none" else bmax
    timeout = timeout if servers == 1 and kind != "none" else None
    factor = factor if guard is not None else None
    pol = Policy(kind, bmax=bmax, order=order, guard_s=guard, guard_factor=factor,
                 servers=servers, batch_timeout_s=timeout)  # fmt: skip
    tab = _engine(arr, prompt, out, pol, BatchLatency(*k))
    ref = RefPolicy(
        kind,
        bmax=math.inf if bmax is None else bmax,
        order=order,
        guard_s=math.inf if guard is None else guard,
        servers=servers,
        batch_timeout_s=timeout,
        guard_factor=math.inf if factor is None else factor,
    )
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    reqs = (run_rebatch if kind == "rebatch" else run_static)(reqs, ref, k)
    want = np.array([[r.start, r.first, r.finish] for r in reqs])
    got = tab[:, 5:8]
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-9, atol=1e-9)


def test_rebatch_grows_its_rows_and_buffers() -> None:
    """A queue past the pool's first 1024 slots and batches wider than the first buffer."""
    rng = np.random.default_rng(8)
    n = 1200
    arr = np.sort(rng.uniform(0, 2, n))
    out = rng.integers(1, 100, n).astype(float)
    pol = Policy("rebatch", bmax=66, order="sjf", guard_s=50.0, guard_factor=3.0)
    w = ReplayWorkload(arr, np.zeros(n), out, predictor=Noisy(0.8))
    res = run(w, pol, COST, requests=n, warmup=0, batches=2, seed=3, per_request=True)
    tab = res.per_request
    assert res.max_queue > 1024  # past the pool's first slots
    assert np.unique(tab[:, 5], return_counts=True)[1].max() > 64  # a batch past the buffer
    ref = RefPolicy("rebatch", bmax=66, order="sjf", guard_s=50.0, guard_factor=3.0)
    reqs = run_rebatch(
        [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab], ref, (0, 0.1, 0, 0.02)
    )
    np.testing.assert_allclose(tab[:, 7], [r.finish for r in reqs], rtol=1e-9)


# ---- the policy's checks ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(kind="none", batch_timeout_s=1.0), "batch_timeout_s applies to dynamic, elastic"),
        (dict(kind="continuous", batch_timeout_s=1.0), "batch_timeout_s applies"),
        (dict(kind="dynamic", batch_timeout_s=-1.0), "batch_timeout_s must be a finite time >= 0"),
        (dict(kind="dynamic", batch_timeout_s=math.inf), "batch_timeout_s must be a finite"),
        (dict(kind="dynamic", batch_timeout_s=1.0, servers=2), "batch_timeout_s needs one server"),
        (dict(kind="none", order="sjf", guard_factor=10.0), "give guard_s too"),
        (dict(kind="none", order="sjf", guard_s=1.0, guard_factor=0.0), "guard_factor must be"),
        (dict(kind="continuous", guard_s=1.0, guard_factor=2.0), "guard_factor applies to none"),
        (dict(kind="rebatch", K=2), "rebatch batching takes b_max, not K"),
        (dict(kind="rebatch", bmax=0), "b_max must be an integer >= 1"),
    ],
)
def test_bad_options_name_the_key(kwargs, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match=match):
        Policy(**kwargs)


def test_spec_strings_round_trip() -> None:
    for spec in (
        "rebatch:bmax=2,batch_timeout_s=10",
        "rebatch:bmax=2,order=spjf,guard_s=100,guard_factor=10",
        "dynamic:bmax=2,batch_timeout_s=0",
        "none:order=sjf,guard_s=100,guard_factor=10",
    ):
        p = parse_policy(spec)
        assert parse_policy(policy_spec(p)) == p
    p = parse_policy("rebatch:bmax=2,order=sjf,guard_s=100,guard_factor=10,batch_timeout_s=5")
    assert p.label() == "rebatch b_max=2 sjf timeout=5s guard=100s guard=10x"
    with pytest.raises(InputError, match="guard_factor='x' is not a number"):
        parse_policy("none:order=sjf,guard_s=1,guard_factor=x")
    # the defaults leave every existing policy as it was
    assert Policy("dynamic", bmax=4).label() == "dynamic b_max=4"
    assert policy_spec(Policy("none", order="sjf", guard_s=100)) == "none:order=sjf,guard_s=100"


def test_rebatch_refuses_a_batch_time_table() -> None:
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="rebatch runs each request for its own run time"):
        run(w, Policy("rebatch", bmax=2), COST, requests=1000, warmup=0, seed=1,
            batch_time_table=np.array([0.0, 1.0, 1.0]))  # fmt: skip
