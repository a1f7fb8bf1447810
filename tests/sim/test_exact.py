"""Exact mean waits by queue order (llmqueue.sim.exact): the one table the CLI and the studies
read, over trace rows and token laws, and where no formula applies."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from llmqueue.analytic.priority import pk_wait, priority_wait_empirical
from llmqueue.errors import InputError, UnstableError
from llmqueue.latency import LinearLatency
from llmqueue.policy import ORDERS, Policy, queue_order
from llmqueue.sim import exact
from llmqueue.sim.predictors import parse_predictor
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload, TraceWorkload
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[2]
TRACE = ROOT / "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"


def test_exact_wait_over_trace_rows_and_where_none_applies() -> None:
    w = TraceWorkload.from_csv(TRACE, 0.05)
    lat = LinearLatency(0.02, 0.1)
    n = w.output_tokens
    s = 0.02 * n + 0.1
    got = exact.exact_wait(w, Policy("none"), lat, seed=1)
    assert got is not None and "Pollaczek" in got.method
    assert math.isclose(got.wait_s, pk_wait(0.05, s.mean(), (s * s).mean()), rel_tol=1e-12)
    sjf = exact.exact_wait(w, Policy("none", order="sjf"), lat, seed=1)
    assert sjf is not None and sjf.wait_s < got.wait_s
    # a starvation guard changes nothing under FCFS, but SJF with a guard has no formula here
    guarded = exact.exact_wait(w, Policy("none", guard_s=5.0), lat, seed=1)
    assert guarded is not None and guarded.wait_s == got.wait_s
    for pol in (
        Policy("none", servers=2),
        Policy("none", order="sjf", guard_s=5.0),
        Policy("dynamic", bmax=4),
    ):
        assert exact.exact_wait(w, pol, lat, seed=1) is None
    replay = ReplayWorkload(np.arange(10.0), np.ones(10), np.ones(10))
    assert exact.exact_wait(replay, Policy("none"), lat, seed=1) is None
    assert exact.exact_wait(w.at_rate(5.0), Policy("none"), lat, seed=1) is None  # rho > 1


def test_exact_wait_for_token_laws() -> None:
    lat = LinearLatency(0.01, 0.0)
    # one size: SJF is FCFS (the atom is one class), Pollaczek-Khinchine with S = 1 s
    det = PoissonWorkload(parse_law("deterministic:value=100"), 0.5)
    sjf = exact.exact_wait(det, Policy("none", order="sjf"), lat, seed=1)
    assert sjf is not None and math.isclose(sjf.wait_s, pk_wait(0.5, 1.0, 1.0), rel_tol=1e-9)
    # the trace's law as a token law gives the same classes as the trace's rows
    rows = TraceWorkload.from_csv(TRACE, 0.4)
    law = PoissonWorkload(parse_law(f"trace:{TRACE}:GeneratedTokens"), 0.4)
    by_rows = exact.exact_wait(rows, Policy("none", order="sjf"), lat, seed=1)
    by_law = exact.exact_wait(law, Policy("none", order="sjf"), lat, seed=1)
    assert by_rows is not None and by_law is not None and by_law.se_s == 0.0
    assert math.isclose(by_rows.wait_s, by_law.wait_s, rel_tol=1e-9)
    # a classifier over a token law: one class per predicted class, exact (partial moments and
    # the error probabilities), equal to Cobham's formula over a large sample of the workload
    noisy = PoissonWorkload(
        parse_law("lognormal:mu=4,sigma=1"),
        0.05,
        predictor=parse_predictor("buckets:edges=30/50/90,pe=0.1"),
    )
    got = exact.exact_wait(noisy, Policy("none", order="spjf"), lat, seed=1)
    assert got is not None and got.se_s == 0.0 and "error probabilities" in got.method
    ch = next(noisy.chunks(7, 1 << 22, False))
    parts = [
        priority_wait_empirical(exact.service_times(lat, o), p, 0.05)
        for o, p in zip(np.array_split(ch.output, 16), np.array_split(ch.pred, 16), strict=True)
    ]
    se = float(np.std(parts, ddof=1) / math.sqrt(16))
    assert abs(float(np.mean(parts)) - got.wait_s) < 4 * se


def test_a_perfect_one_bit_classifier_is_mitzenmachers_threshold_formula() -> None:
    """Exponential sizes of mean 1, S = N, a bit that says N < T: the non-preemptive mean
    response 1 + lambda (1 - lambda + lambda e^-T) / ((1 - lambda)(1 - rho_T)), rho_T = lambda
    (1 - (1 + T) e^-T) ("Queues with small advice", Mitzenmacher 2021)."""
    lat = LinearLatency(1.0, 0.0)
    for lam, t in ((0.5, 1.28), (0.9, 2.1)):
        w = PoissonWorkload(
            parse_law("exponential:mean=1"), lam, predictor=parse_predictor(f"buckets:edges={t}")
        )
        got = exact.exact_wait(w, Policy("none", order="spjf"), lat, seed=1)
        rho_t = lam * (1 - (1 + t) * math.exp(-t))
        want = lam * (1 - lam + lam * math.exp(-t)) / ((1 - lam) * (1 - rho_t))
        assert got is not None and got.wait_s == pytest.approx(want, rel=1e-9)


def test_every_registered_order_has_a_row_formula_and_unknown_orders_raise() -> None:
    plain = [o for o in ORDERS if not queue_order(o).preemptive]
    assert all(exact.row_mean_wait(o, [1.0], [1], [1], 0.1) is not None for o in plain)
    # the preemptive orders have token-law formulas only (tests/sim/test_preemptive.py)
    assert all(
        exact.row_mean_wait(o, [1.0], [1], [1], 0.1) is None for o in ORDERS if o not in plain
    )
    rng = np.random.default_rng(0)
    n = rng.integers(1, 500, 2000).astype(float)
    s = 0.1 + 0.01 * n
    lam = 0.5 / s.mean()
    fcfs, _ = exact.row_mean_wait("fcfs", s, n, None, lam)
    assert fcfs == pk_wait(lam, float(s.mean()), float((s * s).mean()))
    sjf, _ = exact.row_mean_wait("sjf", s, n, None, lam)
    same, _ = exact.row_mean_wait("spjf", s, n, n, lam)  # a perfect prediction is SJF
    blind, _ = exact.row_mean_wait("spjf", s, n, np.ones_like(n), lam)  # one class is FCFS
    assert sjf < fcfs and math.isclose(same, sjf) and math.isclose(blind, fcfs)
    with pytest.raises(InputError, match="order must be one of fcfs, sjf, spjf, .*got 'lifo'"):
        exact.row_mean_wait("lifo", s, n, None, lam)
    with pytest.raises(InputError, match="predicted size"):
        exact.row_mean_wait("spjf", s, n, None, lam)
    with pytest.raises(UnstableError):
        exact.row_mean_wait("fcfs", s, n, None, 2.0 / s.mean())
