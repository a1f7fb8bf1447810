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

QUANTILES = "quantiles:tests/data/laws/quantiles.csv"  # with an atom at 200 tokens (mass 0.1)
SPECS = [
    "lognormal:mu=7,sigma=0.7",
    "uniform:low=0,high=2000",
    "truncnorm:mean=800,sd=20",
    "truncnorm:mean=300,sd=200,high=1000",
    "exponential:mean=300",
    "lognormal:mu=6,sigma=1.0,cap=4096",
    "weibull:shape=0.7,scale=300",
    "weibull:shape=2,scale=500",
    "pareto:alpha=1.5,xm=100,cap=4000",
    QUANTILES,
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


@pytest.mark.parametrize("limit", [50.0, 150.0, 300.0, 1e4, math.inf])
@pytest.mark.parametrize("k", [1, 2])
def test_laws_by_quantile_function_have_exact_moments(limit, k):
    """E[min(N, l)^k] = integral over (0, 1) of min(Q(u), l)^k du, Q the quantile function."""
    for spec in ("weibull:shape=0.7,scale=300", "pareto:alpha=2.5,xm=100", QUANTILES):
        law = parse_law(spec)
        pts = [0.2, 0.5, 0.6, 0.9, 0.99, 0.9999]
        val = integrate.quad(
            lambda u, law=law: min(float(law.ppf(u)), limit) ** k, 0.0, 1.0, points=pts, limit=400
        )[0]
        assert law.clipped_moment(limit, k) == pytest.approx(val, rel=1e-6), spec


def test_weibull_of_shape_one_is_exponential_and_pareto_has_its_closed_forms():
    w, e = parse_law("weibull:shape=1,scale=300"), parse_law("exponential:mean=300")
    for lim in (100.0, 700.0, math.inf):
        for k in (1, 2):
            assert w.clipped_moment(lim, k) == pytest.approx(e.clipped_moment(lim, k), rel=1e-12)
    p = parse_law("pareto:alpha=3,xm=100")
    assert p.mean() == pytest.approx(150.0) and p.var() == pytest.approx(100.0**2 * 3 / 4)
    assert p.clipped_moment(80.0, 2) == 80.0**2 and p.cdf(99.0) == 0.0
    heavy = parse_law("pareto:alpha=1.2,xm=100,cap=5000")
    assert heavy.clipped_moment(math.inf, 2) < 5000.0**2


def test_quantile_table_atoms_and_inverse():
    law = parse_law(QUANTILES)
    assert law.cdf(200.0) == pytest.approx(0.6) and law.prob_below(200.0) == pytest.approx(0.5)
    assert law.ppf(0.55) == 200.0 and law.cdf(law.ppf(0.3)) == pytest.approx(0.3)
    assert law.support == (1.0, 2048.0) and law.cdf(0.5) == 0.0 and law.cdf(3000.0) == 1.0


@pytest.mark.parametrize(
    "spec", ["weibull:shape=0.7,scale=300", "pareto:alpha=2.5,xm=100,cap=3000", QUANTILES]
)
def test_the_compiled_sampler_draws_the_new_laws(spec):
    """Kolmogorov-Smirnov of the compiled sampler (what every simulator draws) against the cdf;
    the atoms (the cap, the table's flat piece) by their mass."""
    from llmqueue.sim.laws import sample_law

    law = parse_law(spec)
    x = sample_law(law, 200_000, 5)
    hi = law.support[1]
    cont = x[(x != 200.0) & (x != hi)] if spec == QUANTILES else x[x < hi]
    assert x.min() >= law.support[0] and x.max() <= hi
    if spec == QUANTILES:  # the atom at 200 (mass 0.1): a binomial count within 4.5 sigma
        assert abs(np.mean(x == 200.0) - 0.1) < 4.5 * math.sqrt(0.09 / x.size)
        cdf = lambda t: (law.cdf(t) - 0.1 * (t >= 200.0)) / 0.9  # noqa: E731
    else:
        m = float(law.cdf(np.nextafter(hi, 0)))
        cdf = lambda t: law.cdf(t) / m  # noqa: E731
    assert stats.kstest(cont, cdf).pvalue > 1e-3


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
        ("weibull:shape=0,scale=300", "shape must lie"),
        ("weibull:shape=0.7", "missing"),
        ("pareto:alpha=1.5,xm=100", "alpha must be > 2"),
        ("pareto:alpha=3,xm=-1", "xm must be > 0"),
        ("quantiles:", "expected quantiles:PATH"),
        ("quantiles:missing.csv", "does not exist"),
        ("quantiles:tests/data", "not a regular file"),
    ],
)
def test_malformed_specs_give_clear_errors(spec, words):
    with pytest.raises(InputError, match=words):
        parse_law(spec)


@pytest.mark.parametrize(
    "rows, words",
    [
        ("probability,tokens\n0,1\n0.5,3\n", "from 0 to 1"),
        ("probability,tokens\n0,1\n0.5,3\n0.5,4\n1,5\n", "must increase"),
        ("probability,tokens\n0,5\n1,3\n", "must not decrease"),
        ("p,tokens\n0,5\n1,3\n", "no column 'probability'"),
        ("probability,tokens\n0,x\n1,3\n", "not numbers"),
        ("probability,tokens\n0,1,9\n1,3\n", "row"),
    ],
)
def test_quantile_table_errors_name_the_problem(tmp_path, rows, words):
    f = tmp_path / "q.csv"
    f.write_text(rows)
    with pytest.raises(InputError, match=words):
        parse_law(f"quantiles:{f}")


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
