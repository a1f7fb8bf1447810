"""Token laws: exact clipped moments and expected maxima against quadrature and Monte Carlo."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from llmqueue.errors import InputError
from llmqueue.tokens import (
    ClippedLaw,
    EmpiricalLaw,
    LogNormalLaw,
    TruncNormLaw,
    UniformLaw,
    parse_law,
)

SPECS = [
    "lognormal:mu=7,sigma=0.7",
    "uniform:low=0,high=2000",
    "truncnorm:mean=800,sd=20",
    "truncnorm:mean=300,sd=200,high=1000",
    "exponential:mean=300",
    "lognormal:mu=6,sigma=1.0,cap=4096",
]


def numeric_clipped(law, limit, k):
    """E[min(N,l)^k] = lo^k + int_lo^l k x^(k-1) P(N > x) dx (N >= lo >= 0)."""
    lo = law.support[0]
    hi = min(limit, law.support[1])
    pts = [p for p in (law.ppf(0.5), law.ppf(0.99)) if lo < p < hi]
    val = integrate.quad(
        lambda x: k * x ** (k - 1) * law.sf(x), lo, hi, points=pts or None, limit=400
    )[0]
    return lo**k + val


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("limit", [150.0, 800.0, 1600.0, 5000.0])
@pytest.mark.parametrize("k", [1, 2])
def test_clipped_moments_match_quadrature(spec, limit, k):
    law = parse_law(spec)
    assert law.clipped_moment(limit, k) == pytest.approx(numeric_clipped(law, limit, k), rel=1e-6)


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clipped_moments_match_monte_carlo(spec, seed):
    law = parse_law(spec)
    rng = np.random.default_rng(seed)
    x = np.minimum(law.sample(rng, 400_000), 1600.0)
    for k in (1, 2):
        v = x**k
        se = v.std() / math.sqrt(v.size)
        assert abs(v.mean() - law.clipped_moment(1600.0, k)) < 4.5 * se + 1e-9 * abs(v.mean())


@pytest.mark.parametrize(
    "spec",
    SPECS
    + ["trace:data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv:GeneratedTokens"],
)
@pytest.mark.parametrize("b", [1, 4, 16])
def test_expected_max_and_order_statistics_match_monte_carlo(spec, b, root):
    law = parse_law(spec, base_dir=root)
    rng = np.random.default_rng(100 + b)
    x = np.sort(law.sample(rng, (60_000, b)).reshape(60_000, b), axis=1)
    means, ses = x.mean(0), x.std(0) / math.sqrt(x.shape[0])
    assert law.expected_max(b) == pytest.approx(law.order_stat_means(b)[-1], rel=1e-7)
    assert np.all(np.abs(law.order_stat_means(b) - means) < 4.5 * ses + 1e-9)
    assert abs(law.expected_max(b) - means[-1]) < 4.5 * ses[-1] + 1e-9


def test_lognormal_paper_probabilities():
    law = parse_law("lognormal:mu=7,sigma=0.7")
    assert 100 * law.prob_below(1600) == pytest.approx(70.53, abs=0.005)
    assert 100 * law.prob_below(1300) == pytest.approx(59.60, abs=0.005)
    assert law.mean() == pytest.approx(math.exp(7 + 0.245))


def test_uniform_expected_max_is_eq19():
    law = UniformLaw(0, 1000)
    for b in (1, 2, 8, 64):
        assert law.expected_max(b) == pytest.approx(1000 * b / (b + 1))


def test_truncnorm_default_upper_end_is_twice_the_mean():
    law = TruncNormLaw(800, 20)
    assert law.support == (0.0, 1600.0)
    assert law.mean() == pytest.approx(800, rel=1e-9)


def test_empirical_law_exact_sums():
    law = EmpiricalLaw.from_samples([1, 2, 2, 5])
    assert law.mean() == pytest.approx(2.5)
    assert law.clipped_moment(2, 1) == pytest.approx((1 + 2 + 2 + 2) / 4)
    assert law.prob_below(2) == pytest.approx(0.25)
    assert law.cdf(2) == pytest.approx(0.75)
    # max of 2 draws: P(max <= x) = F(x)^2
    assert law.expected_max(2) == pytest.approx(
        1 * 0.25**2 + 2 * (0.75**2 - 0.25**2) + 5 * (1 - 0.75**2)
    )


def test_trace_law_reads_the_azure_trace(azure_trace):
    law = parse_law(f"trace:{azure_trace}:GeneratedTokens")
    assert law.mean() == pytest.approx(211, abs=1)
    assert law.support[1] == 1000


def test_cap_gives_min_of_n_and_cap():
    law = parse_law("lognormal:mu=7,sigma=0.7,cap=2000")
    assert isinstance(law, ClippedLaw)
    base = LogNormalLaw(7, 0.7)
    assert law.mean() == pytest.approx(base.clipped_moment(2000, 1))
    assert law.truncation_mass() == pytest.approx(base.sf(2000))
    assert law.cdf(2000) == 1.0


@given(st.floats(5.0, 8.0), st.floats(0.2, 1.5), st.floats(10.0, 5000.0), st.floats(10.0, 5000.0))
@settings(max_examples=60, deadline=None)
def test_clipped_mean_is_monotone_in_the_limit(mu, sigma, l1, l2):
    law = LogNormalLaw(mu, sigma)
    lo, hi = sorted((l1, l2))
    assert law.clipped_moment(lo, 1) <= law.clipped_moment(hi, 1) + 1e-9
    assert law.clipped_moment(hi, 1) <= lo + law.clipped_moment(math.inf, 1)
    assert law.clipped_moment(lo, 2) >= law.clipped_moment(lo, 1) ** 2 - 1e-6 * lo**2


@pytest.mark.parametrize(
    "spec, words",
    [
        ("lognormal", "malformed"),
        ("lognormal:mu=7", "missing"),
        ("lognormal:mu=7,sigma=-1", "sigma must be > 0"),
        ("lognormal:mu=7,sigma=x", "not a number"),
        ("lognormal:mu=7,sigma=0.7,foo=1", "unknown"),
        ("gamma:k=1", "unknown law"),
        ("uniform:low=5,high=1", "low < high"),
        ("truncnorm:mean=800,sd=0", "sd must be > 0"),
        ("lognormal:mu=7,sigma=0.7,cap=-5", "cap"),
        ("trace:missing.csv:GeneratedTokens", "does not exist"),
        ("trace:onlypath", "malformed"),
    ],
)
def test_malformed_specs_give_clear_errors(spec, words):
    with pytest.raises(InputError, match=words):
        parse_law(spec)


def test_trace_errors_name_file_and_column(azure_trace, tmp_path):
    with pytest.raises(InputError, match="no column 'Tokens'.*GeneratedTokens"):
        parse_law(f"trace:{azure_trace}:Tokens")
    bad = tmp_path / "bad.csv"
    bad.write_text("n\n1\nfoo\n")
    with pytest.raises(InputError, match="not numbers"):
        parse_law(f"trace:{bad}:n")
    neg = tmp_path / "neg.csv"
    neg.write_text("n\n1\n-3\n")
    with pytest.raises(InputError, match=">= 0"):
        parse_law(f"trace:{neg}:n")


def test_batch_size_must_be_positive_integer():
    with pytest.raises(InputError, match="batch size"):
        UniformLaw(0, 10).expected_max(0)


def test_lognormal_cdf_matches_scipy():
    law = LogNormalLaw(7, 0.7)
    x = np.array([10.0, 500.0, 1600.0, 9000.0])
    assert np.allclose(law.cdf(x), stats.lognorm(0.7, scale=math.exp(7)).cdf(x))
