"""Replicas behind a router (llmqueue.sim.router) against exact queueing results.

- ``random`` routing of Poisson arrivals to c replicas without batching is c independent M/G/1
  queues at rate lambda / c (Pollaczek-Khinchine), for a heavy-tailed law, and for continuous
  batching with max_batch 1 and a constant step (S = N x step);
- ``round_robin`` with exponential service is E_c/M/1 per replica (sigma = A*(mu (1 - sigma)));
- the central queue with exponential service is M/M/c (Erlang C);
- ``jsq`` lies between the central queue and ``random`` at every load (a sandwich), and so do
  ``least_work`` and ``power_of_d``, which lies above ``jsq``;
- given the routing decisions, each replica is the one-server engine on its own arrivals: a
  routed run split by replica and replayed replica by replica gives every request the same
  start, first token and finish (every router, static and continuous formers);
- one replica behind any router is the central queue, request for request;
- the routed loops against the plain-Python reference (tests/reference_engine.py), event by
  event: every request's start, first token, finish and replica, for every router, static and
  continuous formers, queue orders, KV budgets, blocks and chunked prefill.

Tolerances as tests/sim/test_engine_exact.py: within 2% of the exact value *and* within 2 x the
simulation's 95% half-width, with run lengths that make the half-width about 1% of the mean.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import RefPolicy, RefRouter, Req, run_continuous, run_static_routed

from llmqueue.analytic.multiserver import (
    erlang_c,
    gim1_sigma,
    mmc_wait,
    random_routing_wait,
    round_robin_mm_wait,
)
from llmqueue.analytic.priority import pk_wait
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency, StepLaw, service_moments
from llmqueue.policy import ROUTER_RECORDS, ROUTERS, Policy, order_names
from llmqueue.policy_text import parse_policy, policy_spec
from llmqueue.sim.engine import run
from llmqueue.sim.exact import exact_wait
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload, TraceWorkload
from llmqueue.tokens import parse_law

HEAVY = parse_law("lognormal:mu=5,sigma=1,cap=2048")
COST = LinearLatency(0.02, 0.1)
EXP = parse_law("exponential:mean=100")
EXP_COST = LinearLatency(0.01, 0.0)  # S ~ Exp(mean 1 s)
TRACE = "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
C = 4


def _agrees(sim_mean: float, ci95: float, exact: float, rel: float = 0.02) -> None:
    assert ci95 < 0.6 * rel * exact, f"interval too wide to test: +-{ci95:.4g} for {exact:.4g}"
    assert abs(sim_mean - exact) <= rel * exact, (sim_mean, exact)
    assert abs(sim_mean - exact) <= 2.0 * ci95, (sim_mean, ci95, exact)


def _wait(workload, policy, latency, requests, seed):  # type: ignore[no-untyped-def]
    res = run(workload, policy, latency, requests=requests, seed=seed)
    assert not res.unstable
    return res.wait.mean, res.wait.ci95


# ---- closed forms -------------------------------------------------------------------------------
def test_erlang_c_known_values() -> None:
    # one server: C = rho; two servers, a = 1: C = 1/3 (a^2/2/(1 - 1/2) = 1 over 1 + 1 + 1)
    assert erlang_c(1, 0.3) == pytest.approx(0.3, rel=1e-12)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-12)
    assert mmc_wait(0.5, 1.0, 1) == pytest.approx(1.0, rel=1e-12)  # M/M/1: rho / (mu - lambda)
    # a large pool does not overflow and waits less than one server at the same load
    assert 0 < mmc_wait(400.0, 1.0, 500) < mmc_wait(0.8, 1.0, 1)


def test_round_robin_one_replica_is_mm1_and_sigma_is_the_root() -> None:
    assert round_robin_mm_wait(0.5, 1.0, 1) == pytest.approx(1.0, rel=1e-9)
    lam, mu, c = 3.0, 1.0, 4
    s = gim1_sigma(lam, mu, c)
    assert s == pytest.approx((lam / (lam + mu * (1 - s))) ** c, rel=1e-12)
    # deterministic-like arrivals wait less than Poisson ones at the same per-replica load
    assert round_robin_mm_wait(lam, mu, c) < random_routing_wait(lam, 1.0, 2.0, c)


def test_closed_forms_refuse_an_overloaded_queue() -> None:
    for call in (
        lambda: mmc_wait(4.0, 1.0, 4),
        lambda: round_robin_mm_wait(5.0, 1.0, 4),
        lambda: random_routing_wait(4.0, 1.0, 2.0, 4),
    ):
        with pytest.raises(InputError, match="< 1"):
            call()


# ---- the engine against them --------------------------------------------------------------------
def test_random_routing_is_independent_mg1_queues() -> None:
    m1, m2 = service_moments(HEAVY, COST)
    rate = 0.75 * C / m1
    w = PoissonWorkload(HEAVY, rate)
    mean, ci = _wait(w, Policy("none", replicas=C, router="random"), COST, 6_000_000, seed=21)
    _agrees(mean, ci, random_routing_wait(rate, m1, m2, C))
    found = exact_wait(w, Policy("none", replicas=C, router="random"), COST, seed=0)
    assert found is not None and found.wait_s == pytest.approx(pk_wait(rate / C, m1, m2))


def test_random_routing_continuous_one_at_a_time_is_mg1() -> None:
    step = 0.004
    w = TraceWorkload.from_csv(TRACE, rate_per_s=1.0)
    n = w.output_tokens
    m1, m2 = step * n.mean(), step**2 * (n**2).mean()
    rate = 0.75 * C / m1
    pol = Policy("continuous", bmax=1, replicas=C, router="random")
    mean, ci = _wait(w.at_rate(rate), pol, StepLaw(step, 0.0, 0.0), 3_000_000, seed=22)
    _agrees(mean, ci, random_routing_wait(rate, m1, m2, C))


def test_round_robin_with_exponential_service_is_ec_m_1() -> None:
    rate = 0.8 * C
    pol = Policy("none", replicas=C, router="round_robin")
    mean, ci = _wait(PoissonWorkload(EXP, rate), pol, EXP_COST, 4_000_000, seed=23)
    _agrees(mean, ci, round_robin_mm_wait(rate, 1.0, C))


def test_central_queue_with_exponential_service_is_mmc() -> None:
    rate = 0.8 * C
    pol = Policy("none", servers=C)
    mean, ci = _wait(PoissonWorkload(EXP, rate), pol, EXP_COST, 8_000_000, seed=24)
    _agrees(mean, ci, mmc_wait(rate, 1.0, C))
    found = exact_wait(PoissonWorkload(EXP, rate), pol, EXP_COST, seed=0)
    assert found is not None and "Erlang C" in found.method


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.9])
def test_state_routers_lie_between_the_central_queue_and_random(rho: float) -> None:
    rate = rho * C
    w = PoissonWorkload(EXP, rate, predictor=Noisy(0.5))
    lo, hi = mmc_wait(rate, 1.0, C), random_routing_wait(rate, 1.0, 2.0, C)
    got = {}
    for router in ("jsq", "least_work", "power_of_d"):
        pol = Policy("none", replicas=C, router=router)
        mean, ci = _wait(w, pol, EXP_COST, 1_000_000, seed=25)
        assert lo - 2 * ci <= mean <= hi + 2 * ci, (router, lo, mean, hi)
        got[router] = (mean, ci)
    # JSQ is strictly worse than one shared queue (a replica can idle while another has a
    # queue) and strictly better than random routing; two choices sit above full information
    jsq, ci = got["jsq"]
    assert lo + 2 * ci < jsq < hi - 2 * ci
    pod, ci_pod = got["power_of_d"]
    assert pod > jsq - 2 * math.hypot(ci, ci_pod)


# ---- the routed loops against the one-server engine ---------------------------------------------
def _table(seed: int, n: int, rate: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    return arr, rng.integers(0, 200, n).astype(float), rng.integers(1, 120, n).astype(float)


def _per_request(workload, policy, latency, seed):  # type: ignore[no-untyped-def]
    n = workload.total
    res = run(workload, policy, latency, requests=n, warmup=0, batches=2, seed=seed,
              per_request=True)  # fmt: skip
    return res, res.per_request


CASES = [
    ("none", "round_robin", None),
    ("none", "random", None),
    ("none", "jsq", None),
    ("dynamic", "least_work", 4),
    ("elastic", "power_of_d", None),
    ("continuous", "jsq", 8),
    ("continuous", "least_work", None),
    ("continuous", "least_kv", 8),
    ("continuous", "power_of_d", 4),
    ("continuous", "random", 8),
]


@pytest.mark.parametrize(("kind", "router", "bmax"), CASES)
@pytest.mark.parametrize("order", ["fcfs", "spjf"])
def test_each_replica_is_the_one_server_engine_on_its_arrivals(
    kind: str, router: str, bmax: int | None, order: str
) -> None:
    arr, prompt, out = _table(31, 600, 12.0 if kind == "continuous" else 6.0)
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    if kind == "continuous":
        law: object = StepLaw(0.02, 2e-4, 2e-6)
        extra = dict(kv_tokens=3200, admission="on_demand", block_size=16)
    else:
        law = LinearLatency(0.01, 0.05)
        extra = {}
    kw = dict(order=order, guard_s=5.0 if order == "spjf" else None, **extra)
    if kind != "none":
        kw["bmax"] = bmax
    pol = Policy(kind, replicas=3, router=router, **kw)
    res, tab = _per_request(w, pol, law, seed=5)
    assert np.all(np.isfinite(tab[:, 5:8]))
    replica = tab[:, 8].astype(int)
    assert set(replica) == {0, 1, 2}
    for r in range(3):
        rows = tab[replica == r]
        sub = ReplayWorkload(rows[:, 1], rows[:, 2], rows[:, 3], row_pred=rows[:, 4])
        _, one = _per_request(sub, Policy(kind, **kw), law, seed=5)
        shift = rows[0, 1]
        np.testing.assert_allclose(one[:, 5:8] + shift, rows[:, 5:8], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("router", [r for r in ROUTERS if r != "central"])
def test_one_replica_behind_any_router_is_the_central_queue(router: str) -> None:
    arr, prompt, out = _table(32, 400, 10.0)
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    law = StepLaw(0.02, 2e-4, 2e-6)
    kw = dict(bmax=8, kv_tokens=4000, admission="on_demand")
    d = {"router_d": 1} if router == "power_of_d" else {}
    _, routed = _per_request(w, Policy("continuous", replicas=1, router=router, **d, **kw), law, 3)
    _, central = _per_request(w, Policy("continuous", **kw), law, 3)
    np.testing.assert_array_equal(routed, central)


def test_round_robin_sends_arrivals_in_turn_and_random_evenly() -> None:
    arr, prompt, out = _table(33, 3000, 20.0)
    w = ReplayWorkload(arr, prompt, out)
    law = LinearLatency(0.001, 0.01)
    _, tab = _per_request(w, Policy("none", replicas=4, router="round_robin"), law, 1)
    assert np.array_equal(tab[:, 8], np.arange(3000) % 4)
    _, tab = _per_request(w, Policy("none", replicas=4, router="random"), law, 1)
    counts = np.bincount(tab[:, 8].astype(int), minlength=4)
    # binomial(3000, 1/4): sd 23.7; 5 sd either side
    assert np.all(np.abs(counts - 750) < 5 * math.sqrt(3000 * 0.25 * 0.75))


def test_routers_share_the_arrivals_and_reproduce_by_seed() -> None:
    w = PoissonWorkload(EXP, 3.0, prompt=parse_law("uniform:low=10,high=400"))
    law = StepLaw(0.02, 2e-4, 2e-6)
    tabs = {}
    for router in ("random", "jsq"):
        pol = Policy("continuous", bmax=16, replicas=4, router=router)
        a = run(w, pol, law, requests=2000, warmup=0, seed=9, per_request=True)
        b = run(w, pol, law, requests=2000, warmup=0, seed=9, per_request=True)
        np.testing.assert_array_equal(a.per_request, b.per_request)
        tabs[router] = a.per_request
    # common random numbers: the same requests arrive whatever the router
    np.testing.assert_array_equal(tabs["random"][:, :5], tabs["jsq"][:, :5])
    assert not np.array_equal(tabs["random"][:, 8], tabs["jsq"][:, 8])


def test_policy_refuses_routers_where_they_do_not_apply() -> None:
    with pytest.raises(InputError, match="applies to none, dynamic, elastic, continuous"):
        Policy("fixed", K=4, replicas=2, router="jsq")
    with pytest.raises(InputError, match="least_kv needs continuous"):
        Policy("dynamic", replicas=2, router="least_kv")
    with pytest.raises(InputError, match="d must be at most replicas"):
        Policy("none", replicas=2, router="power_of_d", router_d=3)
    with pytest.raises(InputError, match="one number"):
        Policy("none", servers=2, replicas=3)
    with pytest.raises(InputError, match="router must be one of"):
        Policy("none", replicas=2, router="nearest")
    with pytest.raises(InputError, match="batch_timeout_s"):
        Policy("dynamic", replicas=2, router="jsq", batch_timeout_s=1.0)
    p = parse_policy("continuous:max_batch=8,replicas=4,router=power_of_d,d=3")
    assert (p.replicas, p.servers, p.router, p.router_d) == (4, 4, "power_of_d", 3)
    assert parse_policy(policy_spec(p)) == p


# ---- the routed loops against the plain-Python reference, event by event -------------------------
def _router_word(seed: int) -> int:
    """The router's first SplitMix64 state: a child of the run's seed (llmqueue.sim.router)."""
    return int(np.random.SeedSequence(seed, spawn_key=(0,)).generate_state(1, np.uint64)[0])


def _compare(tab: np.ndarray, reqs: list[Req]) -> None:
    want = np.array([[r.start, r.first, r.finish] for r in reqs])
    assert np.array_equal(np.isnan(tab[:, 5:8]), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(tab[:, 5:8][ok], want[ok], rtol=1e-9, atol=1e-9)
    served = [r.server for r in reqs if not math.isnan(r.finish)]
    np.testing.assert_array_equal(tab[~np.isnan(tab[:, 7]), 8], served)


ROUTED = [r for r in ROUTERS if r != "central"]
# the routers of the static formers (least_kv compares KV: continuous batching only)
STATIC_ROUTED = [r.name for r in ROUTER_RECORDS if r.name in ROUTED and "none" in r.formers]


@pytest.mark.parametrize("router", STATIC_ROUTED)
def test_every_router_matches_reference_on_one_table(router: str) -> None:
    """Each router of the registry (a new one too) against the reference on one fixed table:
    three replicas without batching, every request's start, finish and replica."""
    arr, prompt, out = _table(35, 120, 6.0)
    k = (0.01, 0.05, 0.002, 0.01)
    pol = Policy("none", replicas=3, router=router)
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    _, tab = _per_request(w, pol, BatchLatency(*k), 7)
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    _compare(tab, run_static_routed(reqs, RefPolicy("none", servers=3), k,
                                    RefRouter(router, 3, _router_word(7), 2)))  # fmt: skip


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    router=st.sampled_from(STATIC_ROUTED),
    kind=st.sampled_from(["none", "dynamic", "elastic"]),
    order=st.sampled_from(order_names(preemptive=False)),
    replicas=st.integers(1, 4),
    bmax=st.sampled_from([None, 3]),
    rate=st.floats(1.0, 12.0),
)
def test_static_routed_matches_reference(seed, router, kind, order, replicas, bmax, rate):  # type: ignore[no-untyped-def]
    arr, prompt, out = _table(seed, 80, rate)
    k = (0.01, 0.05, 0.002, 0.01)
    d = min(2, replicas)
    pol = Policy(
        kind,
        bmax=None if kind == "none" else bmax,
        order=order,
        guard_s=2.0 if order != "fcfs" else None,
        replicas=replicas,
        router=router,
        router_d=d if router == "power_of_d" else 2,
    )
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    _, tab = _per_request(w, pol, BatchLatency(*k), seed)
    ref = RefPolicy(
        kind,
        bmax=math.inf if bmax is None else bmax,
        order=order,
        guard_s=2.0 if order != "fcfs" else math.inf,
        servers=replicas,
    )
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    rr = RefRouter(router, replicas, _router_word(seed), d)
    _compare(tab, run_static_routed(reqs, ref, k, rr))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    router=st.sampled_from(ROUTED),
    order=st.sampled_from(order_names(preemptive=False)),
    admission=st.sampled_from(["reserve", "on_demand"]),
    replicas=st.integers(1, 3),
    max_batch=st.sampled_from([None, 2, 8]),
    kv=st.sampled_from([None, 180, 360]),
    chunked=st.sampled_from([None, 32]),
    block=st.sampled_from([1, 4, 12]),
    rate=st.floats(2.0, 40.0),
)
def test_continuous_routed_matches_reference(  # type: ignore[no-untyped-def]
    seed, router, order, admission, replicas, max_batch, kv, chunked, block, rate
):
    rng = np.random.default_rng(seed)
    n = 90
    arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    prompt = rng.integers(0, 61, n).astype(float)
    out = rng.integers(1, 51, n).astype(float)
    c = (0.011, 0.00037, 0.000013)
    d = min(2, replicas)
    pol = Policy(
        "continuous",
        bmax=max_batch,
        order=order,
        guard_s=1.5 if order != "fcfs" else None,
        kv_tokens=kv,
        admission=admission,
        max_batched_tokens=chunked,
        block_size=block,
        replicas=replicas,
        router=router,
        router_d=d if router == "power_of_d" else 2,
    )
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    res, tab = _per_request(w, pol, StepLaw(*c), seed)
    ref = RefPolicy(
        "continuous",
        bmax=math.inf if max_batch is None else max_batch,
        order=order,
        guard_s=1.5 if order != "fcfs" else math.inf,
        servers=replicas,
        kv_tokens=math.inf if kv is None else kv,
        admission=admission,
        max_batched_tokens=math.inf if chunked is None else chunked,
        block_size=block,
    )
    reqs = [Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab]
    rr = RefRouter(router, replicas, _router_word(seed), d)
    _compare(tab, run_continuous(reqs, ref, c, rr))
    assert res.rejected == sum(1 for r in reqs if r.prompt + r.output > ref.kv_tokens)
