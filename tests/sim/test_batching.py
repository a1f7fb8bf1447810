"""The batching simulation against the exact chains and Eq. (25); determinism; bad inputs."""

import math

import numpy as np
import pytest
from scipy import stats

from llmqueue.analytic import batch_chain as bc
from llmqueue.analytic import bulk
from llmqueue.analytic.batch_time import mean_batch_time
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency
from llmqueue.policy import Policy
from llmqueue.sim.batching import simulate
from llmqueue.tokens import parse_law

PROFILE = BatchLatency(0.01, 0.77, 5e-4, 0.02153)  # table1_consistent
LAW = parse_law("uniform:low=0,high=1000")
POLICIES = {
    "dynamic": Policy("dynamic"),
    "dynamic_bmax": Policy("dynamic", bmax=8),
    "fixed": Policy("fixed", K=8),
    "elastic": Policy("elastic"),
}
LOADS = (0.05, 0.15, 0.25)  # requests/s; stable for the four policies (K = 8 capacity 0.34/s)
SEEDS = (101, 202, 303)
BATCHES = 20
T_QUANT = stats.t.ppf(0.975, BATCHES - 1)


@pytest.fixture(scope="module")
def exact():
    out = {}
    for name, pol in POLICIES.items():
        model = bc.model_for(pol, PROFILE, LAW)
        for lam in LOADS:
            out[name, lam] = bc.solve(model, lam, pol)
    return out


@pytest.mark.parametrize("name", list(POLICIES))
@pytest.mark.parametrize("lam", LOADS)
def test_simulation_within_4_sigma_of_exact_chain(exact, name, lam):
    ref = exact[name, lam]
    for seed in SEEDS:
        res = simulate(
            POLICIES[name],
            LAW,
            PROFILE,
            rate_per_s=lam,
            requests=60_000,
            warmup=2_000,
            batches=BATCHES,
            seed=np.random.SeedSequence(seed),
        )
        for est, val in ((res.wait, ref.wait), (res.response, ref.response)):
            sigma = est.ci95 / T_QUANT
            # 4 sigma of the simulation plus the chain's discretization error (<= 1e-3 relative)
            assert abs(est.mean - val) <= 4 * sigma + 1e-3 * val, (name, lam, seed, est, val)


@pytest.mark.parametrize("K", [4, 8])
def test_eq25_equals_fixed_time_simulation(K):
    law = parse_law("lognormal:mu=7,sigma=0.7")
    prof = BatchLatency(0.0, 0.0, 3.1e-4, 2.48e-3)
    lam = 0.3 if K == 4 else 0.43
    T = mean_batch_time(prof, law, K)
    w = bulk.mdk1_wait(lam, T, K)
    for seed in (7, 8, 9):
        res = simulate(
            Policy("fixed", K=K),
            law,
            prof,
            rate_per_s=lam,
            requests=100_000,
            warmup=2_000,
            batches=BATCHES,
            seed=seed,
            fixed_time=True,
        )
        assert abs(res.wait.mean - w) <= 4 * res.wait.ci95 / T_QUANT
        assert res.response.mean == pytest.approx(res.wait.mean + T, rel=1e-9)


def test_bmax_infinite_equals_dynamic():
    a = simulate(Policy("dynamic"), LAW, PROFILE, rate_per_s=0.3, requests=20_000, seed=5)
    b = simulate(
        Policy("dynamic", bmax=10**9), LAW, PROFILE, rate_per_s=0.3, requests=20_000, seed=5
    )
    c = simulate(
        Policy("dynamic", bmax=10**6), LAW, PROFILE, rate_per_s=0.3, requests=20_000, seed=5
    )
    assert a == b == c


def test_same_seed_same_numbers_and_seeds_differ():
    pol = Policy("elastic", bmax=16)
    a = simulate(
        pol,
        LAW,
        PROFILE,
        rate_per_s=0.3,
        requests=20_000,
        seed=np.random.SeedSequence(1, spawn_key=(3,)),
    )
    b = simulate(
        pol,
        LAW,
        PROFILE,
        rate_per_s=0.3,
        requests=20_000,
        seed=np.random.SeedSequence(1, spawn_key=(3,)),
    )
    c = simulate(
        pol,
        LAW,
        PROFILE,
        rate_per_s=0.3,
        requests=20_000,
        seed=np.random.SeedSequence(1, spawn_key=(4,)),
    )
    assert a == b
    assert a.wait.mean != c.wait.mean


def test_quantiles_ordered_and_elastic_not_slower_per_batch_than_padded_bound():
    res = simulate(Policy("elastic"), LAW, PROFILE, rate_per_s=0.2, requests=20_000, seed=3)
    w, r = res.wait, res.response
    assert w.p50 <= w.p90 <= w.p95 <= w.p99 <= w.max
    assert r.p50 <= r.p90 <= r.p95 <= r.p99 <= r.max
    assert r.mean > w.mean > 0
    assert math.isfinite(r.p99)
    # the first token of every member comes at t1(b) after the batch start
    assert res.ttft.mean == pytest.approx(
        w.mean + PROFILE.k2 + PROFILE.k1 * res.mean_batch, rel=0.05
    )


@pytest.mark.parametrize(
    "kw",
    [
        dict(kind="fixed", K=0),
        dict(kind="fixed", K=2.5),
        dict(kind="dynamic", bmax=0),
        dict(kind="dynamic", bmax=-3),
        dict(kind="elastic", K=4),
        dict(kind="sjf"),
        dict(kind="fixed", K=4, bmax=8),
    ],
)
def test_bad_policies(kw):
    with pytest.raises(InputError):
        Policy(**kw)


def test_bad_simulation_inputs():
    with pytest.raises(InputError, match="rate"):
        simulate(Policy("dynamic"), LAW, PROFILE, rate_per_s=0.0, requests=1000, seed=1)
    with pytest.raises(InputError, match="requests"):
        simulate(Policy("dynamic"), LAW, PROFILE, rate_per_s=0.1, requests=10, seed=1)
    with pytest.raises(InputError, match="fixed-T"):
        simulate(
            Policy("elastic"), LAW, PROFILE, rate_per_s=0.1, requests=1000, seed=1, fixed_time=True
        )
