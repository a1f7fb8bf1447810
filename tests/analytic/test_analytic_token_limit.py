"""Closed forms and exact solutions of Sec. III: Eq. (1)-(13)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.analytic.impatience import (
    de_kok_tijms,
    exact_mg1d,
    exact_token_limit,
    md1d,
    mm1d,
)
from llmqueue.analytic.mg1 import pk_wait, token_limit_curve, token_limit_point
from llmqueue.analytic.tradeoff import argmax_on_grid, expected_utility, objective_patient
from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency, service_moments
from llmqueue.latency_fits import fit_linear_latency
from llmqueue.limits import MAX_TOKENS
from llmqueue.tokens import (
    ClippedLaw,
    DeterministicLaw,
    EmpiricalLaw,
    ExponentialLaw,
    LogNormalLaw,
    UniformLaw,
)

UNIT = LinearLatency(1.0, 0.0)
TABLE1 = LinearLatency(0.022992527173913042, 0.18608695652173957)
LN = LogNormalLaw(7, 0.7)


# ---- Eq. (1): Pollaczek-Khinchine ---------------------------------------------------------
@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9, 0.99])
def test_pk_equals_mm1(rho):
    # exponential service with mean 1: W_q = rho / (mu - lambda)
    p = token_limit_point(ExponentialLaw(1.0), UNIT, rho, math.inf)
    assert p["wq"] == pytest.approx(rho / (1 - rho))


@pytest.mark.parametrize("rho", [0.1, 0.5, 0.9])
def test_pk_equals_md1(rho):
    d = 3.0
    p = token_limit_point(DeterministicLaw(d), UNIT, rho / d, math.inf)
    assert p["wq"] == pytest.approx(rho * d / (2 * (1 - rho)))


def test_pk_unstable_raises_and_curve_flags():
    with pytest.raises(UnstableError, match="rho"):
        pk_wait(1.0, 1.0, 2.0)
    c = token_limit_curve(LN, TABLE1, 0.04, [500, 3000])
    assert list(c.unstable) == [False, True]
    assert math.isnan(c.wq_s[1]) and c.wq_s[0] > 0


def test_paper_numbers_with_table1_fit():
    fit = fit_linear_latency([128, 256, 512, 1024], [2.91, 5.88, 12.63, 23.47])
    assert fit.slope == pytest.approx(0.02299, abs=2e-5)
    assert fit.intercept == pytest.approx(0.186, abs=1e-3)
    c = token_limit_curve(LN, TABLE1, 1 / 40, [1600, 3000])
    assert c.wq_s[0] == pytest.approx(24.7, abs=0.05)  # docs/equations.md
    assert 1 - c.wq_s[0] / c.wq_s[1] == pytest.approx(0.608, abs=0.001)


def test_back_solved_law_hits_paper_numbers():
    c = token_limit_curve(LN, LinearLatency(0.02203, 0.78), 1 / 40, [1600, 3000])
    assert c.wq_s[0] == pytest.approx(23.00, abs=0.01)
    assert 100 * (1 - c.wq_s[0] / c.wq_s[1]) == pytest.approx(58.93, abs=0.01)


@given(st.floats(0.001, 0.03), st.floats(0.0, 2.0), st.floats(0.005, 0.04))
@settings(max_examples=50, deadline=None)
def test_wq_increases_with_the_limit(a, b0, rate):
    lat = LinearLatency(a, b0) if a > 0 or b0 > 0 else UNIT
    c = token_limit_curve(LN, lat, rate, np.arange(100, 3001, 100.0))
    ok = ~c.unstable
    assert np.all(np.diff(c.wq_s[ok]) >= -1e-9)
    assert np.all(np.diff(c.rho) >= -1e-12)


def test_service_moments_match_curve():
    es, es2 = service_moments(LN, TABLE1, 1600)
    c = token_limit_curve(LN, TABLE1, 0.01, [1600])
    assert es == pytest.approx(c.mean_service_s[0]) and es2 == pytest.approx(c.second_moment_s2[0])


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_bad_rate_and_limit(bad):
    with pytest.raises(InputError, match="rate"):
        token_limit_curve(LN, TABLE1, bad, [1000])
    with pytest.raises(InputError, match="limit"):
        token_limit_curve(LN, TABLE1, 0.01, [bad])


# ---- Eq. (6)-(9) and the exact M/G/1+D ----------------------------------------------------
@pytest.mark.parametrize("rho, tau", [(0.3, 0.5), (0.8, 2.0), (1.0, 3.0), (1.6, 1.5)])
def test_exact_solver_equals_mm1d_closed_form(rho, tau):
    exact = exact_token_limit(ExponentialLaw(1.0), UNIT, rho, tau, step_s=0.01, max_rel_error=1e-7)
    closed = mm1d(rho, 1.0, tau)
    assert exact.loss == pytest.approx(closed.loss, rel=1e-6, abs=1e-10)
    assert exact.wqs_s == pytest.approx(closed.wqs_s, rel=1e-6)
    # the M/M/1+D loss of docs/equations.md
    theta = 1.0 - rho
    e = math.exp(-theta * tau)
    assert closed.loss == pytest.approx(
        (1 - rho) * rho * e / (1 - rho**2 * e) if rho != 1 else 1 / (2 + tau), rel=1e-6
    )


@pytest.mark.parametrize(
    "rate, d, tau", [(0.5, 1.0, 1.7), (0.9, 1.0, 3.3), (1.3, 1.0, 2.5), (0.04, 20.0, 60.0)]
)
def test_exact_solver_equals_md1d_closed_form(rate, d, tau):
    exact = exact_token_limit(DeterministicLaw(d), UNIT, rate, tau, step_s=0.01, max_rel_error=1e-7)
    closed = md1d(rate, d, tau)
    assert exact.loss == pytest.approx(closed.loss, rel=1e-6)
    assert exact.wqs_s == pytest.approx(closed.wqs_s, rel=1e-6)
    assert closed.loss >= 0


@pytest.mark.parametrize("law", [LN, UniformLaw(0, 2000), ExponentialLaw(800.0)])
def test_tau_to_zero_gives_rho_over_one_plus_rho(law):
    rate = 0.05
    res = exact_token_limit(law, TABLE1, rate, 1e-3, limit=1500, step_s=1e-5)
    rho = rate * (TABLE1.a_s_per_token * law.clipped_moment(1500, 1) + TABLE1.b0_s)
    assert res.loss == pytest.approx(rho / (1 + rho), rel=1e-3)


def test_tau_to_infinity_gives_mg1():
    rate = 1 / 40
    res = exact_token_limit(LN, TABLE1, rate, 3000.0, limit=1600, step_s=0.5, max_rel_error=1e-5)
    pk = token_limit_point(LN, TABLE1, rate, 1600)["wq"]
    assert res.loss < 1e-6
    assert res.wqs_s == pytest.approx(pk, rel=2e-3)


def test_paper_impatient_numbers_exact():
    # docs/equations.md: pi(1300) ~ 0.121, pi(3000) ~ 0.284 (57.4% drop) with the Table I fit
    p13 = exact_token_limit(LN, TABLE1, 1 / 25, 60, 1300)
    p30 = exact_token_limit(LN, TABLE1, 1 / 25, 60, 3000)
    assert p13.loss == pytest.approx(0.121, abs=0.001)
    assert p30.loss == pytest.approx(0.284, abs=0.001)
    assert 1 - p13.loss / p30.loss == pytest.approx(0.574, abs=0.002)
    assert p13.error_estimate < 1e-5
    # the interpolation lands slightly below the exact values
    approx, c2 = de_kok_tijms(LN, TABLE1, 1 / 25, 60, 1300)
    assert 0 < c2 < 1 and approx.loss < p13.loss
    assert approx.loss == pytest.approx(p13.loss, rel=0.05)


def test_eq9_mean_wait_of_everyone():
    r = exact_token_limit(LN, TABLE1, 1 / 25, 60, 1300)
    assert r.w_all_s == pytest.approx(60 * r.loss + (1 - r.loss) * r.wqs_s)


def test_interpolation_exponential_tokens_reading_runs():
    a, _ = de_kok_tijms(LN, TABLE1, 1 / 25, 60, 1300, exp_reading="exponential_tokens")
    b, _ = de_kok_tijms(LN, TABLE1, 1 / 25, 60, 1300)
    assert 0 < a.loss < 1 and a.loss != b.loss


def test_interpolation_rejects_c2_above_one():
    with pytest.raises(InputError, match="c\\^2"):
        de_kok_tijms(LogNormalLaw(5, 1.6), UNIT, 0.001, 60)


def test_bad_patience():
    with pytest.raises(InputError, match="patience"):
        exact_token_limit(LN, TABLE1, 0.04, 0.0)
    with pytest.raises(InputError, match="patience"):
        mm1d(0.5, 1.0, -1)


def test_exact_solver_reports_small_error_for_jumpy_tails():
    # an atom at the limit (a*l + b0) and a deterministic part b0: still converges
    law = EmpiricalLaw.from_samples([100, 200, 200, 900])
    res = exact_token_limit(
        law, LinearLatency(0.02, 1.0), 0.1, 25.0, limit=500, step_s=0.05, max_rel_error=1e-6
    )
    assert 0 < res.loss < 1
    assert res.error_estimate < 1e-5


def test_exact_mg1d_generic_tail():
    # G(y) = E[min(S, y)] for S ~ Exp(1) in closed form
    res = exact_mg1d(
        lambda y: -np.expm1(-np.asarray(y)), 1.0, 0.7, 2.0, step_s=0.01, max_rel_error=1e-8
    )
    assert res.loss == pytest.approx(mm1d(0.7, 1.0, 2.0).loss, rel=1e-6)


# ---- Eq. (10)-(13) -------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", [0.5, 1.0, 2.0, 4.0])
@pytest.mark.parametrize("limit", [300.0, 1600.0, 5000.0])
def test_lognormal_utility_closed_form_matches_quadrature(gamma, limit):
    closed = expected_utility(LN, [limit], gamma)[0]
    quad = expected_utility(ClippedLaw(LN, MAX_TOKENS), [limit], gamma)[0]
    assert closed == pytest.approx(quad, rel=1e-6)


def test_utility_bounds_and_monotonicity():
    limits = np.arange(100, 4000, 100.0)
    eu = expected_utility(LN, limits, 1.0)
    assert np.all((eu > 0) & (eu <= 1)) and np.all(np.diff(eu) > 0)
    assert np.all(expected_utility(LN, limits, 3.0) <= eu + 1e-12)  # g = r^3 <= r


def test_patient_optimum_with_gamma_grid_matches_equations_md():
    limits = np.arange(100, 3001, 50.0)
    c = token_limit_curve(LN, TABLE1, 1 / 40, limits)
    best = {
        g: argmax_on_grid(
            limits, objective_patient(expected_utility(LN, limits, g), c.wq_s, 119 / 120)
        ).limit
        for g in (1.0, 4.0)
    }
    assert best[4.0] == 1600  # docs/equations.md: l* = 1600 near gamma = 4 with the Table I fit
    assert best[1.0] < 1600


def test_argmax_skips_unstable_points():
    o = argmax_on_grid([1, 2, 3], [0.1, math.nan, 0.05])
    assert o.limit == 1 and o.at_edge
    with pytest.raises(InputError):
        argmax_on_grid([1, 2], [math.nan, math.nan])
