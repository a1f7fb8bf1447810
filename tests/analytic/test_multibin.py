"""Multi-Bin Batching (arXiv 2412.04504; issue 15): the closed forms of
llmqueue.analytic.multibin, the engine's multibin former against them, and the study's tables.

Exact checks first: Theorem 4.2 against the general formula, k = 1 against fixed batching (the
same per-request times, the same closed form), a flush timeout that never fires against none.
Statistical checks use the run lengths below, chosen from the spread over seeds (the saturated
rate's relative sd is about 0.3% at 30,000 requests, so 150,000 give a 4-sigma band of ~0.55%,
inside the 1% the issue asks for); each test has one fixed seed, never picked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.analytic import bulk
from llmqueue.analytic import multibin as mb
from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency
from llmqueue.policy import Policy
from llmqueue.sim.capacity import THEOREM_4_2, max_rate, saturated_rate
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Buckets, Noisy
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.studies.multibin import spec as spec_mod
from llmqueue.studies.multibin.claims import claims_rows
from llmqueue.studies.multibin.tables import llm_capacity_table, llm_latency_table, synthetic_table
from llmqueue.tokens import DeterministicLaw, EmpiricalLaw, LogNormalLaw, UniformLaw

ROOT = Path(__file__).resolve().parents[2]
SAT_REQUESTS = 150_000
REL_TOL = 0.01  # the "within 1%"


# ---- closed forms ---------------------------------------------------------------------------
def test_uniform_expected_max_is_the_laws_own() -> None:
    for b, lo, hi in [(1, 0.0, 1.0), (8, 1.0, 20.0), (128, 3.0, 7.5)]:
        assert mb.uniform_expected_max(b, lo, hi) == pytest.approx(
            UniformLaw(lo, hi).expected_max(b), rel=1e-14
        )


@pytest.mark.parametrize(
    ("b", "k", "lo", "hi"), [(128, 1, 1, 20), (8, 4, 0, 500), (3, 7, 10, 11), (50, 2, 0, 1)]
)
def test_theorem_4_2_equals_the_exact_form_for_any_law(
    b: int, k: int, lo: float, hi: float
) -> None:
    """Theorem 4.2 and capacity(): B / sum_j p_j E[max_B | bin j] with E[max] per bin from the
    token law; plus its two ends: k = 1 is B/E[max of B], k -> inf is B/m."""
    th = mb.theorem_4_2(b, k, lo, hi)
    cap = mb.capacity(UniformLaw(lo, hi), LinearLatency(1.0, 0.0), b, bins=k)
    assert cap.rate_per_s == pytest.approx(th, rel=1e-12)
    assert cap.bin_probs == pytest.approx([1 / k] * k, rel=1e-12)
    assert mb.theorem_4_2(b, 1, lo, hi) == pytest.approx(b / mb.uniform_expected_max(b, lo, hi))
    assert mb.theorem_4_2(b, 10**9, lo, hi) == pytest.approx(2 * b / (lo + hi), rel=1e-8)
    assert mb.theorem_4_2(b, k + 1, lo, hi) > th or b == 1


def test_equal_probability_edges_lemma_4_1() -> None:
    np.testing.assert_allclose(
        mb.equal_probability_edges(UniformLaw(1, 20), 4), [5.75, 10.5, 15.25], rtol=1e-14
    )
    law = LogNormalLaw(5.0, 0.8)
    e = mb.equal_probability_edges(law, 5)
    np.testing.assert_allclose(law.cdf(e), [0.2, 0.4, 0.6, 0.8], rtol=1e-10)
    assert mb.equal_probability_edges(law, 1).size == 0


@pytest.mark.parametrize(
    "law",
    [
        UniformLaw(2.0, 30.0),
        LogNormalLaw(4.0, 0.7),
        EmpiricalLaw.from_samples([1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 89, 89]),
    ],
    ids=["uniform", "lognormal", "empirical"],
)
def test_bin_laws_partition_the_law(law) -> None:  # type: ignore[no-untyped-def]
    """The bins' probabilities sum to 1 and their conditional means average to E[N]."""
    parts = mb.bin_laws(law, mb.equal_probability_edges(law, 4))
    probs = [p for p, _ in parts]
    assert sum(probs) == pytest.approx(1.0, abs=1e-12)
    mean = sum(p * lw.mean() for p, lw in parts if lw is not None)
    assert mean == pytest.approx(law.mean(), rel=1e-7)
    # one bin of everything is the law itself
    ((p1, only),) = mb.bin_laws(law, [])
    assert p1 == pytest.approx(1.0) and only.expected_max(8) == pytest.approx(
        law.expected_max(8), rel=1e-7
    )


def test_neighbour_errors() -> None:
    m = mb.neighbour_error_matrix(5, 0.2)
    np.testing.assert_allclose(m.sum(axis=1), 1.0)
    assert m[0, 0] == pytest.approx(0.8) and m[2, 2] == pytest.approx(0.6) and m[2, 1] == 0.2
    law, lat = UniformLaw(0, 100), LinearLatency(1.0, 0.0)
    # two bins each sending half their requests to the other: both hold the whole law
    assert mb.capacity(law, lat, 8, bins=2, pe=0.5).rate_per_s == pytest.approx(
        mb.capacity(law, lat, 8, bins=1).rate_per_s, rel=1e-9
    )
    rates = [mb.capacity(law, lat, 8, bins=4, pe=pe).rate_per_s for pe in (0, 0.05, 0.2, 0.5)]
    assert all(a > b for a, b in zip(rates, rates[1:], strict=False))
    with pytest.raises(InputError):
        mb.neighbour_error_matrix(3, 0.6)


def test_lemma_5_1_bound_and_inputs() -> None:
    assert mb.latency_lower_bound(10.0, 8, 4, 2.0) == pytest.approx(10.0 + 7 * 4 / 4.0)
    with pytest.raises(InputError):
        mb.latency_lower_bound(10.0, 8, 4, 0.0)
    with pytest.raises(InputError):
        mb.capacity(UniformLaw(0, 1), LinearLatency(1.0, 0.0), 4, bins=2, edges=[0.5])


# ---- the engine against the closed forms ---------------------------------------------------------
@pytest.mark.parametrize(
    ("b", "k", "lo", "hi", "c", "lat"),
    [
        (16, 3, 0.0, 100.0, 1, LinearLatency(0.02, 0.5)),
        (64, 4, 10.0, 50.0, 2, BatchLatency(0.001, 0.2, 0.0001, 0.01)),
        (5, 7, 2.0, 9.0, 3, LinearLatency(1.0, 0.0)),
        (32, 2, 100.0, 1000.0, 1, LinearLatency(0.01, 0.0)),
    ],
)
def test_simulated_highest_rate_equals_theorem_4_2(b, k, lo, hi, c, lat) -> None:  # type: ignore[no-untyped-def]
    w = PoissonWorkload(UniformLaw(lo, hi), 1.0)
    pol = Policy("multibin", K=b, bins=k, servers=c)
    cap = max_rate(w, pol, lat)
    assert cap.method == THEOREM_4_2
    t1, t2 = mb.batch_coefficients(lat, b)
    mean_len = mb.uniform_mean_batch_length(b, k, lo, hi)
    assert cap.rate_per_s == pytest.approx(c * b / (t1 + t2 * mean_len), rel=1e-12)
    if t1 == 0 and t2 == 1:
        assert cap.rate_per_s == pytest.approx(c * mb.theorem_4_2(b, k, lo, hi), rel=1e-12)
    sim = saturated_rate(w, pol, lat, requests=SAT_REQUESTS, seed=11)
    assert sim.method == "simulation"
    assert sim.rate_per_s == pytest.approx(cap.rate_per_s, rel=REL_TOL)


def test_simulated_rate_with_prediction_errors_matches_the_exact_form() -> None:
    law, lat = UniformLaw(0.0, 60.0), LinearLatency(0.05, 0.1)
    edges = tuple(float(x) for x in mb.equal_probability_edges(law, 4))
    w = PoissonWorkload(law, 1.0, predictor=Buckets(edges, 0.2))
    pol = Policy("multibin", K=8, bins=4, bin_edges=edges, servers=2)
    exact = mb.capacity(law, lat, 8, edges=edges, servers=2, pe=0.2).rate_per_s
    cap = max_rate(w, pol, lat, requests=SAT_REQUESTS, seed=5)
    assert cap.method == "simulation"
    assert cap.rate_per_s == pytest.approx(exact, rel=REL_TOL)
    assert exact < mb.capacity(law, lat, 8, bins=4, servers=2).rate_per_s


def test_max_rate_says_which_method() -> None:
    lat = LinearLatency(0.03, 0.0)
    uni = PoissonWorkload(UniformLaw(1, 20), 1.0)
    edges = tuple(float(x) for x in mb.equal_probability_edges(UniformLaw(1, 20), 3))
    assert max_rate(uni, Policy("multibin", K=8, bins=3, bin_edges=edges), lat).method == (
        THEOREM_4_2
    )
    cases = [
        (uni, Policy("multibin", K=8, bins=3, bin_edges=(4.0, 9.0))),  # other edges
        (PoissonWorkload(UniformLaw(1, 20), 1.0, predictor=Noisy(0.3)), Policy("multibin", K=8)),
        (PoissonWorkload(LogNormalLaw(3.0, 0.5), 1.0), Policy("multibin", K=8, bins=3)),
    ]
    for w, pol in cases:
        cap = max_rate(w, pol, lat, requests=2000, seed=1)
        assert cap.method == "simulation" and "bins" in cap.note


def test_one_bin_is_fixed_batching() -> None:
    """k = 1 is fixed batching with K = B (Eq. 25's world): the same closed form, and the engine
    gives every request the same start and finish under both formers."""
    law, lat = UniformLaw(0.0, 40.0), BatchLatency(0.01, 0.3, 0.001, 0.02)
    w = PoissonWorkload(law, 1.0)
    for c in (1, 3):
        fixed = max_rate(w, Policy("fixed", K=6, servers=c), lat)
        one = max_rate(w, Policy("multibin", K=6, bins=1, servers=c), lat)
        assert fixed.method == "formula" and one.method == THEOREM_4_2
        assert one.rate_per_s == pytest.approx(fixed.rate_per_s, rel=1e-12)
        busy = w.at_rate(0.8 * fixed.rate_per_s)
        tabs = [
            run(busy, p, lat, requests=3000, warmup=0, batches=10, seed=7, per_request=True)
            for p in (Policy("fixed", K=6, servers=c), Policy("multibin", K=6, servers=c))
        ]
        a, b = (t.per_request[:, 5:8] for t in tabs)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-12)


def test_one_bin_with_equal_lengths_is_eq_25() -> None:
    """Equal lengths make every batch last T: k = 1 is then the M/D^K/1 queue of Eq. (25)."""
    lat = LinearLatency(0.1, 0.5)
    T, K, lam = 0.5 + 0.1 * 20, 4, 1.2  # a = lam T = 3 < K
    res = run(
        PoissonWorkload(DeterministicLaw(20.0), lam),
        Policy("multibin", K=K),
        lat,
        requests=200_000,
        warmup=5000,
        batches=20,
        seed=3,
    )
    want = bulk.mdk1_wait(lam, T, K)
    assert abs(res.wait.mean - want) <= 2 * res.wait.ci95, (res.wait.mean, want)


@pytest.mark.parametrize(("k", "c", "load"), [(1, 1, 0.8), (4, 1, 0.5), (8, 4, 0.9), (3, 2, 0.2)])
def test_mean_latency_stays_above_lemma_5_1(k: int, c: int, load: float) -> None:
    law, lat, b = UniformLaw(5.0, 50.0), LinearLatency(0.02, 0.1), 6
    cap = mb.capacity(law, lat, b, bins=k, servers=c)
    rate = load * cap.rate_per_s
    res = run(
        PoissonWorkload(law, rate),
        Policy("multibin", K=b, bins=k, servers=c),
        lat,
        requests=60_000,
        warmup=5000,
        batches=20,
        seed=13,
    )
    bound = mb.latency_lower_bound(cap.mean_batch_s, b, cap.bins, rate)
    assert res.response is not None and not res.unstable
    assert res.response.mean + 2 * res.response.ci95 >= bound
    assert res.mean_batch == b


def test_flush_timeout() -> None:
    """A timeout that never fires changes nothing; a short one at low load sends partly full
    bins (smaller batches, shorter waits than the bins' fill time)."""
    law, lat = UniformLaw(1.0, 30.0), LinearLatency(0.05, 0.2)
    w = PoissonWorkload(law, 0.5)
    kw = dict(requests=4000, warmup=500, batches=10, seed=2, per_request=True)
    base = run(w, Policy("multibin", K=8, bins=4), lat, **kw)  # type: ignore[arg-type]
    never = run(w, Policy("multibin", K=8, bins=4, flush_s=1e9), lat, **kw)  # type: ignore[arg-type]
    np.testing.assert_array_equal(base.per_request, never.per_request)
    short = run(w, Policy("multibin", K=8, bins=4, flush_s=5.0), lat, **kw)  # type: ignore[arg-type]
    assert short.mean_batch < 8 and base.mean_batch == 8
    assert short.response is not None and base.response is not None
    assert short.response.mean < base.response.mean


# ---- the study ---------------------------------------------------------------------------------
def test_a_partial_section_takes_the_schemas_defaults() -> None:
    """The rules read the section as the Snakefile fills it from the schema; the typed specs fill
    a partial section from the same schema (llmqueue.schema.with_defaults): an empty section
    gives the same settings either way, and a mistyped key is refused."""
    from llmqueue.schema import fill_defaults

    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["multibin"] = {}
    fill_defaults(cfg, ROOT / "workflow/schemas/config.schema.yaml")
    for part in ("synthetic", "llm", "vs_continuous"):
        assert cfg["multibin"][part] == spec_mod.section(part, {}), part
    assert all(v["admission"] for v in cfg["multibin"]["vs_continuous"]["continuous"])
    given = spec_mod.section("llm", {"batch": 4, "simulation": {"requests": 5000}})
    assert given["batch"] == 4 and given["servers"] == cfg["multibin"]["llm"]["servers"]
    assert given["simulation"]["warmup"] == cfg["multibin"]["llm"]["simulation"]["warmup"]
    with pytest.raises(InputError, match=r"^multibin\.llm: .*batchsize"):
        spec_mod.section("llm", {"batchsize": 8})


def test_shipped_config_parses() -> None:
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())["multibin"]
    syn = spec_mod.SyntheticSpec.from_config(cfg["synthetic"])
    assert syn.batch == 128 and syn.bins == (1, 2, 3, 4, 5)
    llm = spec_mod.LLMSpec.from_config(cfg["llm"])
    assert (llm.batch, llm.servers, llm.bins) == (8, 8, (1, 2, 4, 8, 16, 32))
    assert llm.time_per_token_s == 0.0366


def test_small_study_tables_and_claims() -> None:
    syn = spec_mod.SyntheticSpec.from_config(
        {"batch": 16, "bins": [1, 2], "capacity": {"requests": 20000, "replications": 2}}
    )
    tab = synthetic_table(syn, 1)
    np.testing.assert_allclose(
        tab["theorem_rate"], [mb.theorem_4_2(16, k, 1, 20) for k in (1, 2)], rtol=1e-12
    )
    assert (abs(tab["sim_rate"] / tab["theorem_rate"] - 1) < 0.03).all()
    llm_spec = spec_mod.LLMSpec.from_config(
        {
            "tokens": "uniform:low=1,high=100",
            "bins": [1, 2, 4],
            "error_probs": [0.25],
            "capacity": {"requests": 8000, "replications": 2},
            "loads": [0.5],
            "simulation": {"requests": 4000, "warmup": 400, "batches": 10},
        }
    )
    cap = llm_capacity_table(llm_spec, 1)
    assert list(cap["pe"]) == [0.0] * 3 + [0.25] * 3
    assert cap["exact_gain"].iloc[0] == 0 and (cap["exact_rate_per_s"] > 0).all()
    lat = llm_latency_table(llm_spec, 1)
    assert len(lat) == 3 and (lat["bound_jct_mean_s"] > 0).all()
    ref = pd.read_csv(
        ROOT / "src/llmqueue/studies/multibin/reference_claims.csv", dtype={"id": str}
    )
    tol = yaml.safe_load((ROOT / "config/config.yaml").read_text())["claims"]["tolerances"]
    rows = {r.id: r for r in claims_rows(ClaimBook(ref, tol), tab, cap, lat)}
    assert rows["11m"].verdict == "not_reproduced" and rows["11m"].ours == "not run"
    assert rows["11h"].paper == pytest.approx(mb.theorem_4_2(128, 1, 1, 20), rel=1e-5)
    assert "11a" in rows and "11c" in rows and "11d" not in rows and "11g" not in rows
    assert rows["11a"].verdict == "not_reproduced"  # another length law: never comparable
    assert rows["11n"].verdict == "reproduced" and rows["11o"].verdict == "reproduced"


def test_schema_and_checks_stop_bad_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import copy
    import sys

    monkeypatch.setitem(sys.modules, "rfc3987_syntax", None)  # as the Snakefile: not needed
    import jsonschema

    from llmqueue.studies.multibin.checks import check

    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    schema = yaml.safe_load((ROOT / "src/llmqueue/studies/multibin/schema.yaml").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.validate(cfg["multibin"])
    for path, value in [("llm.bogus", 1), ("llm.servers", 0), ("vs_continuous.loads", [1.5])]:
        bad = copy.deepcopy(cfg["multibin"])
        part, key = path.split(".")
        bad[part][key] = value
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(bad)
    check(cfg, ROOT)
    for part, key, value, msg in [
        ("synthetic", "tokens", "lognormal:mu=1,sigma=1", "uniform"),
        ("vs_continuous", "step_profile", "nope", "unknown step profile"),
        ("vs_continuous", "tokens", "lognormal:mu=5,sigma=1", "largest value"),
        ("llm", "tokens", "trace:no/such/file.csv:GeneratedTokens", "multibin.llm.tokens"),
    ]:
        bad = copy.deepcopy(cfg)
        bad["multibin"][part][key] = value
        with pytest.raises(InputError, match=msg):
            check(bad, ROOT)
    assert spec_mod.trace_files("trace:a/b.csv:Col:cap=9") == ["a/b.csv"]
    assert spec_mod.trace_files("uniform:low=1,high=2") == []


def test_bin_accuracy_of_perfect_reversed_and_blind_predictions() -> None:
    from llmqueue.studies.multibin.tables import bin_accuracy

    rng = np.random.default_rng(3)
    true = rng.lognormal(5, 1, 40_000)
    assert bin_accuracy(true, true, 4) == 1.0 and bin_accuracy(true, 2 * true + 7, 8) == 1.0
    assert bin_accuracy(true, -true, 2) == 0.0  # every request in the other half
    blind = bin_accuracy(true, rng.random(true.size), 4)
    assert abs(blind - 0.25) < 0.02  # a prediction independent of the length: 1/k
    assert bin_accuracy(true, rng.random(true.size), 1) == 1.0


def test_learned_bins_table_with_perfect_predictions_equals_true_bins() -> None:
    from llmqueue.sim.predictors import Noisy
    from llmqueue.studies.multibin.spec import LLMSpec
    from llmqueue.studies.multibin.tables import learned_capacity_table

    rng = np.random.default_rng(4)
    out = np.maximum(1.0, np.round(rng.lognormal(5, 0.9, 6_000)))
    prompt = np.round(rng.uniform(0, 500, out.size))
    spec = LLMSpec.from_config(
        {"bins": [1, 2, 4], "capacity": {"requests": 30_000, "replications": 3}}
    )
    df = learned_capacity_table(spec, prompt, out, out.copy(), Noisy(0.0), "perfect", seed=9)
    assert list(df["bins_by"].unique()) == ["true length", "perfect"]
    assert (df["bin_accuracy"] == 1.0).all()
    by = {b: g.set_index("bins") for b, g in df.groupby("bins_by")}
    for k in (1, 2, 4):  # two independent estimates of the same highest rate
        a, b = by["true length"].loc[k], by["perfect"].loc[k]
        assert abs(a["sim_rate_per_s"] - b["sim_rate_per_s"]) < 2 * math.hypot(
            a["sim_rate_ci95_per_s"], b["sim_rate_ci95_per_s"]
        )
    assert by["perfect"].loc[4, "sim_gain"] > 0.2  # bins pay (gain over k = 1)
