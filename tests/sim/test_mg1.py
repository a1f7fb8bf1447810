"""Statistical and contract tests of the M/G/1 (+D) simulator, llmqueue.sim.mg1.

Statistical tests compare a simulated mean with an exact value over several fixed seeds (chosen
before any run, never changed to make a test pass). Tolerance: 4 sigma, sigma being the
batch-means standard error of the run itself (ci95 / t_{0.975, batches-1}).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency, service_moments
from llmqueue.sim.laws import encode_law, sample_law_chunk
from llmqueue.sim.mg1 import simulate_mg1, simulate_mg1_replications
from llmqueue.sim.recorder import NBINS, bit_view, hist_index, histogram_quantiles
from llmqueue.sim.result import SimResult
from llmqueue.sim.rng import _EXP_R, _NOR_R, WordStream, fill_standard
from llmqueue.sim.stats import Estimate, batch_means
from llmqueue.tokens import DeterministicLaw, ExponentialLaw, LogNormalLaw, parse_law

SEEDS = [11, 22, 33, 44]
BATCHES = 40
T975 = float(stats.t.ppf(0.975, BATCHES - 1))
UNIT = LinearLatency(1.0, 0.0)  # S = N seconds
TABLE1 = LinearLatency(0.023, 0.186)  # the Table I latency of the benchmark (a s/token, b0 s)


def within_4sigma(est: Estimate, exact: float, extra: float = 0.0) -> bool:
    sigma = est.ci95 / T975
    return abs(est.mean - exact) <= 4.0 * sigma + extra


def check(est: Estimate, exact: float, what: str) -> None:
    assert math.isfinite(est.ci95) and est.ci95 > 0, what
    z = (est.mean - exact) / (est.ci95 / T975)
    assert within_4sigma(est, exact), (
        f"{what}: sim {est.mean:.6g} +- {est.ci95:.3g}, exact {exact:.6g}, z = {z:.2f}"
    )


def mm1d_exact(lam: float, mu: float, tau: float) -> tuple[float, float, float]:
    """M/M/1+D: (pi, W_qs, E[W]) from H(x) = (1 - rho e^{-theta x}) / (1 - rho), theta = mu - lam."""
    rho, th = lam / mu, mu - lam
    e = math.exp(-th * tau)
    pi = (1 - rho) * rho * e / (1 - rho * rho * e)
    h_tau = (1 - rho * e) / (1 - rho)
    int_h = (tau - rho * (1 - e) / th) / (1 - rho)
    wqs = tau - int_h / h_tau
    return pi, wqs, tau * pi + (1 - pi) * wqs


def md1d_exact(lam: float, d: float, tau: float) -> tuple[float, float, float]:
    """M/D/1+D from the closed-form H of docs/equations.md: H(x) = sum_k (lam(kD-x))^k/k! e^{lam(x-kD)}."""

    def h(x: float) -> float:
        return sum(
            (lam * (k * d - x)) ** k / math.factorial(k) * math.exp(lam * (x - k * d))
            for k in range(int(math.floor(x / d)) + 1)
        )

    rho = lam * d
    h_tau = h(tau)
    pts = [k * d for k in range(1, int(tau / d) + 1) if k * d < tau]
    int_h = integrate.quad(h, 0.0, tau, points=pts or None, limit=200, epsabs=1e-12)[0]
    pi = (1 - (1 - rho) * h_tau) / (1 + rho * h_tau)
    wqs = tau - int_h / h_tau
    return pi, wqs, tau * pi + (1 - pi) * wqs


# ---------------------------------------------------------------------------------------------
# random-number generators inside the kernel
@pytest.mark.parametrize("kind", [0, 1])
def test_ziggurat_samplers_match_their_laws(kind: int) -> None:
    rng = np.random.Generator(np.random.PCG64(2024))
    n = 2_000_000
    raw = rng.bit_generator.random_raw(n)
    spare = rng.bit_generator.random_raw(n // 4)
    out = np.empty(n)
    used = fill_standard(kind, raw, spare, out, 0)
    assert 0 < used < n // 10  # rejections are rare
    law = stats.expon if kind == 0 else stats.norm
    assert stats.kstest(out, law.cdf).pvalue > 1e-4
    # chi-square over 200 equiprobable bins: sensitive to a wrong ziggurat layer
    edges = law.ppf(np.linspace(0, 1, 201))
    counts = np.histogram(out, bins=edges)[0]
    assert stats.chisquare(counts).pvalue > 1e-4
    # the tail beyond the base strip's r, drawn by the separate tail algorithm
    r = _EXP_R if kind == 0 else _NOR_R
    p_tail = math.exp(-r) if kind == 0 else 2 * stats.norm.sf(r)
    k_tail = int(np.sum(np.abs(out) > r))
    assert abs(k_tail - n * p_tail) <= 4.5 * math.sqrt(n * p_tail)


# ---------------------------------------------------------------------------------------------
# patient users: Eq. (1) against exact values
@pytest.mark.parametrize("seed", SEEDS)
def test_mm1_mean_wait(seed: int) -> None:
    mu, lam = 1.0, 0.8
    r = simulate_mg1(ExponentialLaw(1.0 / mu), UNIT, rate_per_s=lam, requests=2_000_000, seed=seed)
    rho = lam / mu
    check(r.wait, rho / (mu - lam), "M/M/1 W_q")
    assert r.served_wait is None and r.loss is None
    assert r.requests == 2_000_000


@pytest.mark.parametrize("seed", SEEDS)
def test_md1_mean_wait(seed: int) -> None:
    # S = a*N + b0 = 0.5*2 + 0.2 = 1.2 s, deterministic
    lat = LinearLatency(0.5, 0.2)
    d, lam = 1.2, 0.7 / 1.2
    r = simulate_mg1(DeterministicLaw(2.0), lat, rate_per_s=lam, requests=1_000_000, seed=seed)
    rho = lam * d
    check(r.wait, rho * d / (2 * (1 - rho)), "M/D/1 W_q")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "spec,limit",
    [
        ("lognormal:mu=7,sigma=0.7", 1600.0),  # fast path (ziggurat + vectorised exp), Table I case
        ("lognormal:mu=7,sigma=0.7", 400.0),
        ("lognormal:mu=12,sigma=2.8", 1e6),  # near the bound of a token law (mu + sigma^2 <= 20.7)
        ("exponential:mean=500", 1000.0),  # fast path (in-kernel exponential)
        ("uniform:low=0,high=2000", 1200.0),  # generic path (law.sample per chunk)
        ("lognormal:mu=7,sigma=0.7,cap=3000", math.inf),  # generic path, ClippedLaw
        ("weibull:shape=0.6,scale=300", 4000.0),  # laws by their quantile function
        ("pareto:alpha=1.8,xm=100,cap=8000", math.inf),  # infinite variance but for the cap
        ("quantiles:tests/data/laws/quantiles.csv", math.inf),
    ],
)
def test_pollaczek_khinchine_clipped(spec: str, limit: float, seed: int) -> None:
    law = parse_law(spec)
    es, es2 = service_moments(law, TABLE1, limit)
    lam = 0.75 / es
    r = simulate_mg1(law, TABLE1, rate_per_s=lam, limit=limit, requests=1_000_000, seed=seed)
    check(r.wait, lam * es2 / (2 * (1 - lam * es)), f"PK {spec} l={limit}")


def test_mm1_wait_quantiles() -> None:
    """P(W > t) = rho e^{-(mu - lam) t}: the p-quantile is ln(rho / (1 - p)) / (mu - lam).

    Tolerances: 4x the relative standard deviation of each quantile measured over 20 other seeds
    (100-119) at this run length: sd 0.8%, 1.0%, 1.6% for p50, p95, p99.
    """
    mu, lam = 1.0, 0.8
    rho, th = lam / mu, mu - lam
    tol = {0.5: 0.035, 0.95: 0.045, 0.99: 0.065}
    for seed in SEEDS:
        r = simulate_mg1(ExponentialLaw(1.0), UNIT, rate_per_s=lam, requests=2_000_000, seed=seed)
        for p, got in [(0.5, r.wait.p50), (0.95, r.wait.p95), (0.99, r.wait.p99)]:
            exact = math.log(rho / (1 - p)) / th
            assert abs(got / exact - 1) <= tol[p], (seed, p, got, exact)


def test_max_wait_recorded() -> None:
    r = simulate_mg1(ExponentialLaw(1.0), UNIT, rate_per_s=0.8, requests=200_000, seed=1)
    assert r.wait.p99 < r.wait.max < 200.0
    json.dumps(r.to_json(), allow_nan=False)


# ---------------------------------------------------------------------------------------------
# impatient users: Eq. (6)-(9) against exact M/M/1+D and M/D/1+D
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("lam,tau", [(0.7, 2.0), (1.5, 2.0), (0.95, 5.0)])
def test_mm1_patience(lam: float, tau: float, seed: int) -> None:
    pi, wqs, ew = mm1d_exact(lam, 1.0, tau)
    r = simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=lam, patience_s=tau, requests=1_000_000, seed=seed
    )
    check(r.loss, pi, f"M/M/1+D pi lam={lam}")
    check(r.served_wait, wqs, f"M/M/1+D W_qs lam={lam}")
    check(r.wait, ew, f"M/M/1+D E[W] lam={lam}")
    # Eq. (9) holds exactly for the pooled estimates
    assert r.wait.mean == pytest.approx(
        tau * r.loss.mean + (1 - r.loss.mean) * r.served_wait.mean, rel=1e-9
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("lam", [0.9, 1.3])
def test_md1_patience(lam: float, seed: int) -> None:
    tau = 2.5
    pi, wqs, ew = md1d_exact(lam, 1.0, tau)
    r = simulate_mg1(
        DeterministicLaw(1.0), UNIT, rate_per_s=lam, patience_s=tau, requests=1_000_000, seed=seed
    )
    check(r.loss, pi, f"M/D/1+D pi lam={lam}")
    check(r.served_wait, wqs, f"M/D/1+D W_qs lam={lam}")
    check(r.wait, ew, f"M/D/1+D E[W] lam={lam}")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("rho", [0.5, 2.0])
def test_patience_to_zero(rho: float, seed: int) -> None:
    """tau -> 0: a user is served only if the server is idle, pi = rho / (1 + rho) (Erlang loss)."""
    r = simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=rho, patience_s=1e-9, requests=1_000_000, seed=seed
    )
    check(r.loss, rho / (1 + rho), f"tau->0 pi rho={rho}")
    assert r.served_wait.mean <= 1e-9


def test_long_patience_is_mg1() -> None:
    """tau -> inf with rho < 1 gives the M/G/1 result."""
    law = LogNormalLaw(7, 0.7)
    es, es2 = service_moments(law, TABLE1, 1600)
    lam = 0.6 / es
    for seed in SEEDS:
        r = simulate_mg1(
            law, TABLE1, rate_per_s=lam, limit=1600, patience_s=1e6, requests=500_000, seed=seed
        )
        assert r.loss.mean == 0.0
        check(r.wait, lam * es2 / (2 * (1 - lam * es)), "tau->inf PK")


def test_patience_quantiles_capped_at_tau() -> None:
    tau = 2.0
    r = simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=1.5, patience_s=tau, requests=500_000, seed=5
    )
    assert r.loss.mean > 0.05
    assert r.wait.p99 == tau and r.wait.p95 == tau  # lost users' atom at tau
    assert 0 <= r.served_wait.p50 <= r.served_wait.p95 <= r.served_wait.p99 <= tau


# ---------------------------------------------------------------------------------------------
# determinism, replications
def test_same_seed_same_result() -> None:
    law = LogNormalLaw(7, 0.7)
    kw = dict(limit=1600.0, requests=300_000, warmup=1000)
    a = simulate_mg1(law, TABLE1, rate_per_s=0.02, seed=123, **kw)
    b = simulate_mg1(law, TABLE1, rate_per_s=0.02, seed=123, **kw)
    c = simulate_mg1(law, TABLE1, rate_per_s=0.02, seed=np.random.SeedSequence(123), **kw)
    d = simulate_mg1(law, TABLE1, rate_per_s=0.02, seed=124, **kw)
    assert a == b == c
    assert a.to_json() == b.to_json()
    assert a.wait.mean != d.wait.mean
    # generic path too
    u = parse_law("uniform:low=0,high=2000")
    assert simulate_mg1(u, TABLE1, rate_per_s=0.02, seed=9, requests=50_000) == simulate_mg1(
        u, TABLE1, rate_per_s=0.02, seed=9, requests=50_000
    )


def test_replications_independent_and_reproducible() -> None:
    kw = dict(replications=6, requests=500_000, seed=77)
    one = simulate_mg1_replications(ExponentialLaw(1.0), UNIT, rate_per_s=0.8, workers=1, **kw)
    two = simulate_mg1_replications(ExponentialLaw(1.0), UNIT, rate_per_s=0.8, workers=2, **kw)
    assert one == two
    means = [r.wait.mean for r in one]
    assert len(set(means)) == len(means)
    # replication i is simulate_mg1 with the i-th child seed
    child = np.random.SeedSequence(77).spawn(6)[3]
    assert one[3] == simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=0.8, requests=500_000, seed=child
    )
    # a SeedSequence argument is not consumed
    ss = np.random.SeedSequence(5)
    kw2 = dict(replications=2, requests=10_000, warmup=0, seed=ss)
    assert simulate_mg1_replications(
        ExponentialLaw(1.0), UNIT, rate_per_s=0.8, **kw2
    ) == simulate_mg1_replications(ExponentialLaw(1.0), UNIT, rate_per_s=0.8, **kw2)
    # independent replications: their spread matches the within-run CIs, their mean the exact
    m = np.array(means)
    se = m.std(ddof=1) / math.sqrt(m.size)
    assert abs(m.mean() - 4.0) <= 4 * max(
        se, np.mean([r.wait.ci95 for r in one]) / T975 / math.sqrt(6)
    )


def test_result_to_json() -> None:
    r = simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=1.2, patience_s=3.0, requests=10_000, warmup=0, seed=1
    )
    d = r.to_json()
    assert isinstance(r, SimResult)
    assert set(d["wait"]) == {"mean", "ci95", "p50", "p90", "p95", "p99", "max"}
    assert set(d["served_wait"]) == set(d["wait"]) and set(d["loss"]) == {"mean", "ci95"}
    assert d["throughput_per_s"] == pytest.approx(1.2 * (1 - d["loss"]["mean"]))
    json.dumps(d, allow_nan=False)


# ---------------------------------------------------------------------------------------------
# errors
def test_unstable_patient_queue_raises() -> None:
    with pytest.raises(UnstableError, match=r"rho.*1\.05.*rate_per_s = 1\.05"):
        simulate_mg1(ExponentialLaw(1.0), UNIT, rate_per_s=1.05, requests=1000, seed=1)
    with pytest.raises(InputError, match="rho"):  # UnstableError is an InputError
        simulate_mg1(DeterministicLaw(1.0), UNIT, rate_per_s=1.0, requests=1000, seed=1)
    # a limit makes it stable
    es, _ = service_moments(LogNormalLaw(7, 0.7), TABLE1, math.inf)
    with pytest.raises(UnstableError):
        simulate_mg1(LogNormalLaw(7, 0.7), TABLE1, rate_per_s=1.1 / es, requests=1000, seed=1)
    es_l, _ = service_moments(LogNormalLaw(7, 0.7), TABLE1, 500)
    assert 1.1 / es * es_l < 1
    simulate_mg1(
        LogNormalLaw(7, 0.7),
        TABLE1,
        rate_per_s=1.1 / es,
        limit=500,
        requests=1000,
        warmup=0,
        seed=1,
    )
    # patience: any rho is fine
    r = simulate_mg1(
        ExponentialLaw(1.0), UNIT, rate_per_s=5.0, patience_s=1.0, requests=1000, warmup=0, seed=1
    )
    assert 0 < r.loss.mean < 1


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"rate_per_s": 0.0}, "rate_per_s"),
        ({"rate_per_s": -1.0}, "rate_per_s"),
        ({"rate_per_s": math.nan}, "rate_per_s"),
        ({"rate_per_s": math.inf}, "rate_per_s"),
        ({"rate_per_s": "0.5"}, "rate_per_s"),
        ({"limit": 0}, "limit"),
        ({"limit": -10.0}, "limit"),
        ({"limit": math.nan}, "limit"),
        ({"patience_s": 0.0}, "patience_s"),
        ({"patience_s": -1.0}, "patience_s"),
        ({"patience_s": math.inf}, "patience_s"),
        ({"requests": 399}, "requests"),
        ({"requests": 1000.0}, "requests"),
        ({"batches": 1}, "batches"),
        ({"warmup": -1}, "warmup"),
        ({"chunk": 0}, "chunk"),
        ({"seed": None}, "seed"),
        ({"seed": -3}, "seed"),
        ({"law": "lognormal:mu=7,sigma=0.7"}, "law"),
        ({"latency": (0.023, 0.186)}, "latency"),
    ],
)
def test_bad_arguments(kwargs: dict, name: str) -> None:
    args = dict(
        law=ExponentialLaw(1.0), latency=UNIT, rate_per_s=0.5, requests=1000, batches=40, seed=1
    )
    args.update(kwargs)
    with pytest.raises(InputError, match=name):
        simulate_mg1(args.pop("law"), args.pop("latency"), **args)


def test_bad_replication_arguments() -> None:
    for kw, name in [
        ({"replications": 0}, "replications"),
        ({"workers": 0, "replications": 2}, "workers"),
    ]:
        with pytest.raises(InputError, match=name):
            simulate_mg1_replications(
                ExponentialLaw(1.0), UNIT, rate_per_s=0.5, requests=1000, seed=1, **kw
            )


# ---------------------------------------------------------------------------------------------
# properties
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rho=st.floats(0.05, 3.0),
    tau=st.one_of(st.none(), st.floats(0.01, 50.0)),
    limit=st.one_of(st.just(math.inf), st.floats(10.0, 5000.0)),
    seed=st.integers(0, 2**32 - 1),
    chunk=st.sampled_from([7, 1000, 1 << 16]),
)
def test_invariants(rho: float, tau: float | None, limit: float, seed: int, chunk: int) -> None:
    law = LogNormalLaw(6.5, 0.8)
    es, _ = service_moments(law, TABLE1, limit)
    lam = rho / es
    if tau is None and rho >= 0.95:
        tau = 10.0 * es
    r = simulate_mg1(
        law,
        TABLE1,
        rate_per_s=lam,
        limit=limit,
        patience_s=tau,
        requests=4000,
        warmup=500,
        batches=20,
        seed=seed,
        chunk=chunk,
    )
    assert r.wait.mean >= 0.0
    assert r.wait.p50 <= r.wait.p90 <= r.wait.p95 <= r.wait.p99 <= r.wait.max
    if tau is not None:
        assert 0.0 <= r.loss.mean <= 1.0
        assert r.wait.mean <= tau and r.wait.p99 <= tau
        if r.loss.mean < 1.0:
            assert r.served_wait.mean <= tau and r.served_wait.p99 <= tau
    else:
        assert r.loss is None and r.served_wait is None


def test_wait_increases_with_limit() -> None:
    """Same seed, larger limit: every service time is larger, so every wait is (Lindley)."""
    law = LogNormalLaw(7, 0.7)
    es, _ = service_moments(law, TABLE1, 3000)
    lam = 0.8 / es
    w = [
        simulate_mg1(law, TABLE1, rate_per_s=lam, limit=lim, requests=100_000, seed=3).wait.mean
        for lim in (400, 800, 1600, 3000)
    ]
    assert w == sorted(w) and w[0] < w[-1]


# ---------------------------------------------------------------------------------------------
# bookkeeping against a plain-Python reference fed the very same random numbers
def reference_mg1(law, lat, lam, *, limit, tau, requests, warmup, batches, seed, chunk):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Plain-Python Lindley recursion replaying simulate_mg1's draws (generic token path)."""
    total = warmup + requests
    code = encode_law(law)
    ws = WordStream(seed, int(min(chunk, total) * (code.spare_per_draw + 0.1)) + 1)
    gaps, toks = [], []
    start = 0
    while start < total:
        n = min(chunk, total - start)
        raw = ws.words(n)
        spare, sp = ws.spare()
        tok = np.empty(n)
        sp = sample_law_chunk(code, raw, spare, sp, tok)
        e = np.empty(n)
        sp = fill_standard(0, raw, spare, e, sp)
        ws.used(sp)
        toks.append(tok)
        gaps.append(e / lam)
        start += n
    gap, tok = np.concatenate(gaps), np.concatenate(toks)
    bounds = [k * requests // batches for k in range(batches + 1)]
    s_all, s_srv = np.zeros(batches), np.zeros(batches)
    c_srv, c_lost = np.zeros(batches), np.zeros(batches)
    hist = np.zeros(NBINS)
    fb, ib = bit_view()
    v = 0.0
    for g in range(total):
        s = lat.a_s_per_token * min(tok[g], limit) + lat.b0_s
        m = g - warmup
        k = next(i for i in range(batches) if bounds[i] <= m < bounds[i + 1]) if m >= 0 else -1
        if v <= tau:
            if k >= 0:
                s_all[k] += v
                s_srv[k] += v
                c_srv[k] += 1
                hist[hist_index(fb, ib, v)] += 1
            v += s
        elif k >= 0:
            s_all[k] += tau
            c_lost[k] += 1
        v = max(0.0, v - gap[g])
    return s_all, s_srv, c_srv, c_lost, hist


@pytest.mark.parametrize("tau", [None, 150.0])
@pytest.mark.parametrize("chunk", [997, 1 << 16])
def test_bookkeeping_matches_python_reference(tau: float | None, chunk: int) -> None:
    law = parse_law("uniform:low=0,high=3000")
    lat, lam, limit = TABLE1, 1 / 36.0, 2000.0
    kw = dict(requests=6007, warmup=1234, batches=7, seed=99, chunk=chunk)
    r = simulate_mg1(law, lat, rate_per_s=lam, limit=limit, patience_s=tau, **kw)
    s_all, s_srv, c_srv, c_lost, hist = reference_mg1(
        law, lat, lam, limit=limit, tau=math.inf if tau is None else tau, **kw
    )
    assert c_lost.sum() > 0 if tau is not None else c_lost.sum() == 0
    exp_all = batch_means(s_all, c_srv + c_lost)
    assert r.wait.mean == pytest.approx(exp_all.mean, rel=1e-12)
    assert r.wait.ci95 == pytest.approx(exp_all.ci95, rel=1e-9)
    qs = (0.5, 0.9, 0.95, 0.99)
    if tau is not None:
        exp_srv = batch_means(s_srv, c_srv)
        assert r.served_wait.mean == pytest.approx(exp_srv.mean, rel=1e-12)
        exp_loss = batch_means(c_lost, c_srv + c_lost)
        assert r.loss.mean == pytest.approx(exp_loss.mean, rel=1e-12)
        assert r.loss.ci95 == pytest.approx(exp_loss.ci95, rel=1e-9)
        q_srv = histogram_quantiles(hist, qs)
        got = [r.served_wait.p50, r.served_wait.p90, r.served_wait.p95, r.served_wait.p99]
        assert got == pytest.approx(list(np.minimum(q_srv, tau)), rel=1e-12)
    atom = None if tau is None else (tau, int(c_lost.sum()))
    q_all = histogram_quantiles(hist, qs, extra_atom=atom)
    if tau is not None:
        q_all = np.minimum(q_all, tau)
    got = [r.wait.p50, r.wait.p90, r.wait.p95, r.wait.p99]
    assert got == pytest.approx(list(q_all), rel=1e-12)
