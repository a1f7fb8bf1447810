"""Inoue's bound (16), Eq. (25) and the exact batch chains."""

import numpy as np
import pytest

from llmqueue.analytic import batch_chain as bc
from llmqueue.analytic import bulk, inoue
from llmqueue.errors import InputError, UnstableError
from llmqueue.policy import Policy


def test_inoue_phi1_against_exact_chain():
    exact = bc.solve(bc.FixedTimeModel(lambda b: 0.5 * b + 5.0), 1.0, Policy("dynamic"))
    assert inoue.phi1(1.0, 0.5, 5.0) == pytest.approx(15.8333, abs=1e-4)
    assert exact.response == pytest.approx(15.8332, abs=1e-4)


@pytest.mark.parametrize(
    "lam,alpha,tau0",
    [
        (0.5, 0.1, 1.0),
        (1.0, 0.5, 5.0),
        (0.05, 0.5, 20.0),
        (0.9, 0.3, 0.2),
        (0.02, 0.51, 22.3),
        (2.0, 0.2, 0.5),
    ],
)
def test_inoue_bound_dominates_exact_chain(lam, alpha, tau0):
    exact = bc.solve(bc.FixedTimeModel(lambda b: alpha * b + tau0), lam, Policy("dynamic"))
    eps = 1e-9 + 10 * exact.leak
    assert inoue.bound(lam, alpha, tau0) >= exact.response * (1 - eps)


def test_public_phi0_variant_is_not_a_bound():
    exact = bc.solve(bc.FixedTimeModel(lambda b: 0.1 * b + 1.0), 0.5, Policy("dynamic")).response
    assert exact == pytest.approx(1.402, abs=1e-3)
    assert inoue.phi0_public_variant(0.5, 0.1, 1.0) == pytest.approx(1.351, abs=1e-3)
    assert inoue.phi0_public_variant(0.5, 0.1, 1.0) < exact <= inoue.bound(0.5, 0.1, 1.0)


def test_inoue_stability():
    with pytest.raises(UnstableError, match="alpha_b"):
        inoue.bound(2.0, 0.5, 1.0)
    with pytest.raises(InputError):
        inoue.bound(-1.0, 0.5, 1.0)


@pytest.mark.parametrize("lam,T", [(0.05, 10.0), (0.09, 10.0), (1.0, 0.5)])
def test_eq25_k1_is_md1(lam, T):
    assert bulk.mdk1_wait(lam, T, 1) == pytest.approx(lam * T * T / (2 * (1 - lam * T)), rel=1e-14)


def test_eq25_known_value():
    assert bulk.mdk1_wait(0.43, 10.0, 8) == pytest.approx(8.279, abs=5e-4)


@pytest.mark.parametrize("K", [2, 4, 8, 16, 32, 64])
@pytest.mark.parametrize("load", [0.1, 0.5, 0.95, 0.999])
def test_eq25_roots(K, load):
    a = load * K
    z = bulk.roots_in_disc(a, K)
    assert z.size == K - 1
    assert np.all(np.abs(z) < 1)
    assert np.max(np.abs(z**K - np.exp(a * (z - 1)))) < 1e-10
    assert np.unique(np.round(z, 8)).size == K - 1  # distinct


@pytest.mark.parametrize("K", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("lam", [0.1, 0.5, 0.75])
def test_eq25_equals_fixed_time_chain(K, lam):
    T = 1.0 + 0.2 * K
    if lam * T >= K:
        pytest.skip("unstable")
    chain = bc.solve(bc.FixedTimeModel(lambda b: T), lam, Policy("fixed", K=K))
    assert chain.wait == pytest.approx(bulk.mdk1_wait(lam, T, K), rel=1e-9)
    assert chain.response == pytest.approx(chain.wait + T, rel=1e-12)


def test_eq25_unstable_and_bad_inputs():
    with pytest.raises(UnstableError, match="K = 8"):
        bulk.mdk1_wait(1.0, 10.0, 8)
    for K in (0, -2, 1.5):
        with pytest.raises(InputError, match="K"):
            bulk.mdk1_wait(0.1, 1.0, K)


def test_chain_reports_instability_not_a_number():
    model = bc.FixedTimeModel(lambda b: 1.0 * b + 2.0)  # lambda*alpha_b = 1.2 > 1
    with pytest.raises(UnstableError):
        bc.solve(model, 1.2, Policy("dynamic"))
    with pytest.raises(UnstableError, match="b_max"):
        bc.solve(model, 1.2, Policy("dynamic", bmax=4))


def test_chain_bmax_large_equals_unbounded():
    model = bc.FixedTimeModel(lambda b: 0.3 * b + 2.0)
    a = bc.solve(model, 1.5, Policy("dynamic"))
    b = bc.solve(model, 1.5, Policy("dynamic", bmax=10_000))
    assert a.wait == pytest.approx(b.wait, rel=1e-12)
    assert a.response == pytest.approx(b.response, rel=1e-12)
