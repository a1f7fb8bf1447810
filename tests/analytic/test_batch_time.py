"""Batch-time formulas (Eq. 18-24, 26) against Monte Carlo and against each other."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.analytic import batch_time as bt
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency
from llmqueue.tokens import parse_law


def eq26_reply_times(prof, lengths):
    """Reply time of each member after the batch start under elastic batching, Eq. (26) (s): the
    members leave shortest first; the i-th shortest replies at
    t1(b) + sum_{j<=i} t2(b - j + 1) (n_(j) - n_(j-1)). A plain reference for the tests."""
    n = np.asarray(lengths, dtype=float)
    order = np.argsort(n, kind="stable")
    steps = np.diff(np.concatenate([[0.0], n[order]]))
    remaining = n.size - np.arange(n.size)  # b, b-1, ..., 1 members still running
    out = np.empty(n.size)
    out[order] = prof.t1(n.size) + np.cumsum(prof.t2(remaining) * steps)
    return out


PROFILE = BatchLatency(0.01, 0.77, 5e-4, 0.02153)


def _mc_max(law, b, n, seed):
    rng = np.random.default_rng(seed)
    x = law.sample(rng, n * b).reshape(n, b).max(axis=1)
    return x.mean(), x.std(ddof=1) / math.sqrt(n)


@pytest.mark.parametrize("b", [1, 2, 8, 32])
@pytest.mark.parametrize("seed", [1, 2])
def test_eq19_uniform_max_matches_monte_carlo(b, seed):
    law = parse_law("uniform:low=0,high=2000")
    assert law.expected_max(b) == pytest.approx(2000 * b / (b + 1), rel=1e-14)
    m, se = _mc_max(law, b, 20000, seed)
    assert abs(m - law.expected_max(b)) < 4 * se


@pytest.mark.parametrize("b", [1, 4, 16, 49])
@pytest.mark.parametrize("seed", [3, 4])
def test_eq23_truncnorm_max_matches_monte_carlo(b, seed):
    law = parse_law("truncnorm:mean=800,sd=20")
    m, se = _mc_max(law, b, 20000, seed)
    assert abs(m - law.expected_max(b)) < 4 * se


def test_eq23_equals_the_order_statistic_integral():
    """Eq. (23) (high - integral of F^b) against the largest order statistic's own integral."""
    law = parse_law("truncnorm:mean=300,sd=200")  # heavy truncation at 0
    for b in (1, 3, 10):
        assert law.expected_max(b) == pytest.approx(law.order_stat_means(b)[-1], rel=1e-8)


@pytest.mark.parametrize(
    "spec", ["lognormal:mu=7,sigma=0.7,cap=2000", "exponential:mean=500,cap=800"]
)
def test_clipped_max_is_the_max_of_clipped_draws(spec):
    """A capped law's E[L_b] (the generic tail integral) is E[min(max, cap)] = min of a sum."""
    law = parse_law(spec)
    for b, seed in ((1, 8), (4, 9), (16, 10)):
        m, se = _mc_max(law, b, 40000, seed)
        assert abs(m - law.expected_max(b)) < 4 * se + 1e-9
        assert law.expected_max(b) <= law.cap


@pytest.mark.parametrize("spec", ["lognormal:mu=7,sigma=0.7", "lognormal:mu=7,sigma=0.7,cap=4096"])
def test_lognormal_max_matches_monte_carlo(spec):
    law = parse_law(spec)
    for b, seed in ((1, 5), (8, 6), (32, 7)):
        m, se = _mc_max(law, b, 40000, seed)
        assert abs(m - law.expected_max(b)) < 4 * se


def test_eq20_linear_bound_and_eq24():
    law = parse_law("uniform:low=0,high=1000")
    a, t0 = bt.uniform_linear_bound(PROFILE, 1000)
    assert (a, t0) == pytest.approx((0.01 + 0.5, 0.77 + 21.53))
    for b in (1, 5, 40):
        assert bt.mean_batch_time(PROFILE, law, b) <= a * b + t0 + 1e-12
        assert bt.throughput(PROFILE, law, b) == pytest.approx(
            b / bt.mean_batch_time(PROFILE, law, b)
        )


def test_fig3b_shapes():
    """mu_b rises for U(0,2000) and TN(800,20); interior max for LogNormal(7,0.7) (paper_k8)."""
    p = BatchLatency(0, 0, 3.1e-4, 2.48e-3)
    mus = {
        s: [bt.throughput(p, parse_law(s), b) for b in range(1, 65)]
        for s in ("uniform:low=0,high=2000", "truncnorm:mean=800,sd=20", "lognormal:mu=7,sigma=0.7")
    }
    assert np.all(np.diff(mus["uniform:low=0,high=2000"]) > 0)
    assert np.all(np.diff(mus["truncnorm:mean=800,sd=20"]) > 0)
    arg = int(np.argmax(mus["lognormal:mu=7,sigma=0.7"])) + 1
    assert 1 < arg < 64


def test_elastic_identity_equals_eq26_order_statistics():
    law = parse_law("lognormal:mu=6,sigma=0.5")
    for b in (1, 2, 5):
        os_means = law.order_stat_means(b)
        steps = np.diff(np.concatenate([[0.0], os_means]))
        eq26 = PROFILE.t1(b) + sum(PROFILE.t2(b - i) * steps[i] for i in range(b))
        assert bt.elastic_mean_batch_time(PROFILE, law, b) == pytest.approx(eq26, rel=1e-6)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 5000, allow_nan=False), min_size=1, max_size=40),
    st.floats(0, 1),
    st.floats(0, 5),
    st.floats(0, 1e-3),
    st.floats(1e-4, 0.05),
)
def test_elastic_reply_never_later_than_padded(lengths, k1, k2, k3, k4):
    """Properties of Eq. (26) per batch (the reference the batch-stats test below relies on)."""
    prof = BatchLatency(k1, k2, k3, k4)
    n = np.array(lengths)
    c = eq26_reply_times(prof, n)
    padded = prof.batch_time(n.size, n.max())
    assert np.all(c <= padded * (1 + 1e-12) + 1e-12)
    # the last reply ends the batch: t1 + k4 max + k3 sum (Eq. 26 summed)
    assert c.max() == pytest.approx(
        prof.t1(n.size) + k4 * n.max() + k3 * n.sum(), rel=1e-9, abs=1e-9
    )
    # shorter replies never come back later
    order = np.argsort(n, kind="stable")
    assert np.all(np.diff(c[order]) >= -1e-9)


@pytest.mark.parametrize("elastic", [False, True])
def test_batch_stats_match_monte_carlo(elastic):
    law = parse_law("lognormal:mu=6.5,sigma=0.6")
    dl = bt.discretize(law)
    rng = np.random.default_rng(11)
    b, n = 6, 200000
    x = law.sample(rng, n * b).reshape(n, b)
    if elastic:
        d = PROFILE.t1(b) + PROFILE.k4 * x.max(1) + PROFILE.k3 * x.sum(1)
        resp = np.array([eq26_reply_times(PROFILE, row).sum() for row in x[:20000]])
    else:
        d = PROFILE.batch_time(b, x.max(1))
        resp = b * d
    s = bt.batch_stats(PROFILE, dl, b, elastic)
    for val, sample in ((s.mean_d, d), (s.mean_d2, d**2), (s.response_sum, resp)):
        assert abs(val - sample.mean()) < 4 * sample.std(ddof=1) / math.sqrt(sample.size)


def test_bad_batch_sizes():
    law = parse_law("uniform:low=0,high=10")
    for b in (0, -1, 2.5):
        with pytest.raises(InputError, match="batch size"):
            law.expected_max(b)
        with pytest.raises(InputError, match="batch size"):
            bt.mean_batch_time(PROFILE, law, b)
    with pytest.raises(InputError):
        BatchLatency(0, 1, -1e-4, 0.01)
