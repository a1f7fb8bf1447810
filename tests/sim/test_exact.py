"""Exact mean waits by queue order (llmqueue.sim.exact): the one table the CLI and the studies
read, over trace rows and token laws, and where no formula applies."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from llmqueue.analytic.priority import pk_wait
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
    # a classifier over a token law (no continuous conditional law, so no quadrature): a Monte
    # Carlo evaluation, said so, with its error
    noisy = PoissonWorkload(
        parse_law("lognormal:mu=4,sigma=1"),
        0.05,
        predictor=parse_predictor("buckets:edges=50,pe=0.1"),
    )
    est = [
        exact.exact_wait(noisy, Policy("none", order="spjf"), lat, seed=k, samples=400_000)
        for k in (1, 2)
    ]
    assert all(e is not None and "Monte Carlo" in e.method and e.se_s > 0 for e in est)
    a, b = est  # two independent evaluations agree within their errors
    assert abs(a.wait_s - b.wait_s) < 4 * math.hypot(a.se_s, b.se_s)  # type: ignore[union-attr]


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
