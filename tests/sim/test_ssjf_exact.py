"""SSJF study: the serving engine with no batching against exact queueing results (issue 14).

Requests: Poisson arrivals, (prompt, output) lengths drawn from the rows of the Azure conversation
trace, SSJF's cost model S = 0.1 s + 0.02 s x n. The trace's rows *are* the length law, so the
exact values below are exact, not estimates:

- SJF: Cobham's non-preemptive priority formula with one class per true length;
- SSJF with a learned predictor (a scikit-learn classifier trained on the first 70% of the
  trace, scored on the other 30%, whose rows the requests are drawn from): classes by the
  predicted class, loads by the true lengths (Mitzenmacher's SPJF analysis);
- SSJF with a k-class predictor of accuracy 0.8 (noise drawn per request): the same formula on
  the joint law of (length, prediction), sampled from the workload itself with another seed;
- a prediction independent of the size: FCFS's mean wait (Pollaczek-Khinchine).

Tolerance: within 2% of the exact value *and* within 2 x the 95% half-width (about 4 sigma);
run lengths make the half-width about 1% of the mean so both checks bite. The tails: at load
0.9 SJF's p99 and largest wait exceed FCFS's, and SSJF's starvation guard bounds them: while a
request has waited longer than the guard, only requests older than it start.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmqueue.analytic.priority import pk_wait, priority_wait_empirical
from llmqueue.latency import LinearLatency
from llmqueue.policy import Policy
from llmqueue.predictor.features import split_index
from llmqueue.predictor.training import train_length_model
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Learned, parse_predictor
from llmqueue.sim.workload import TraceWorkload
from llmqueue.traces import read_trace

TRACE = "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
COST = LinearLatency(0.02, 0.1, name="ssjf cost model")  # 0.1 s + 0.02 s per output token
LOAD = 0.7


@pytest.fixture(scope="module")
def rows():  # type: ignore[no-untyped-def]
    return read_trace(TRACE)


def _service(out: np.ndarray) -> np.ndarray:
    return COST.b0_s + COST.a_s_per_token * out


def _agrees(mean: float, ci95: float, exact: float, rel: float = 0.02) -> None:
    assert ci95 < 0.6 * rel * exact, f"interval too wide to test: +-{ci95:.4g} for {exact:.4g}"
    assert abs(mean - exact) <= rel * exact, (mean, exact)
    assert abs(mean - exact) <= 2.0 * ci95, (mean, ci95, exact)


def _wait(w: TraceWorkload, order: str, requests: int, seed: int) -> tuple[float, float]:
    res = run(w, Policy("none", order=order), COST, requests=requests, warmup=20_000, seed=seed)
    assert not res.unstable
    return res.wait.mean, res.wait.ci95


def test_sjf_mean_wait_is_cobham_by_true_length(rows) -> None:  # type: ignore[no-untyped-def]
    s = _service(rows.output_tokens)
    rate = LOAD / s.mean()
    w = TraceWorkload(rows.prompt_tokens, rows.output_tokens, rate)
    mean, ci = _wait(w, "sjf", 2_000_000, seed=141)
    _agrees(mean, ci, priority_wait_empirical(s, rows.output_tokens, rate))


def test_ssjf_learned_mean_wait_is_cobham_by_predicted_class(rows) -> None:  # type: ignore[no-untyped-def]
    model = train_length_model(rows, "classifier", train_fraction=0.7, max_iter=10)
    k = split_index(rows.n, 0.7)
    keys = model.predict_trace(rows)[k:]  # the held-out rows, never trained on
    test = rows.take(k)
    s = _service(test.output_tokens)
    rate = LOAD / s.mean()
    w = TraceWorkload(
        test.prompt_tokens, test.output_tokens, rate, Learned("test", model), row_pred=keys
    )
    mean, ci = _wait(w, "spjf", 2_000_000, seed=142)
    exact = priority_wait_empirical(s, keys, rate)
    _agrees(mean, ci, exact)
    # a predictor that carries information lies between SJF and FCFS
    fcfs = pk_wait(rate, float(s.mean()), float((s * s).mean()))
    assert priority_wait_empirical(s, test.output_tokens, rate) < exact < fcfs


def test_ssjf_buckets_mean_wait_is_cobham_on_the_joint_law(rows) -> None:  # type: ignore[no-untyped-def]
    s = _service(rows.output_tokens)
    rate = LOAD / s.mean()
    pred = parse_predictor("buckets:k=5,acc=0.8")
    w = TraceWorkload(rows.prompt_tokens, rows.output_tokens, rate, pred)
    mean, ci = _wait(w, "spjf", 2_000_000, seed=143)
    sample = next(w.chunks(99, 2_000_000, False))  # the joint law of (length, prediction)
    _agrees(mean, ci, priority_wait_empirical(_service(sample.output), sample.pred, rate))


def test_prediction_independent_of_size_gives_fcfs_mean_wait(rows) -> None:  # type: ignore[no-untyped-def]
    s = _service(rows.output_tokens)
    rate = LOAD / s.mean()
    coin = parse_predictor("buckets:k=2,pe=0.5")  # a fair coin between two classes
    w = TraceWorkload(rows.prompt_tokens, rows.output_tokens, rate, coin)
    mean, ci = _wait(w, "spjf", 3_000_000, seed=144)
    _agrees(mean, ci, pk_wait(rate, float(s.mean()), float((s * s).mean())))


def test_sjf_tail_is_worse_than_fcfs_and_the_guard_bounds_it(rows) -> None:  # type: ignore[no-untyped-def]
    s = _service(rows.output_tokens)
    rate = 0.9 / s.mean()
    w = TraceWorkload(rows.prompt_tokens, rows.output_tokens, rate)
    guard_s = 100.0
    out = {}
    for name, pol in {
        "fcfs": Policy("none"),
        "sjf": Policy("none", order="sjf"),
        "guard": Policy("none", order="sjf", guard_s=guard_s),
    }.items():
        res = run(w, pol, COST, requests=200_000, warmup=10_000, seed=145, per_request=True)
        assert not res.unstable
        out[name] = res
    fcfs, sjf, guard = out["fcfs"].wait, out["sjf"].wait, out["guard"].wait
    assert sjf.mean < fcfs.mean  # SJF wins on the mean ...
    assert sjf.p99 > fcfs.p99  # ... and loses on the tail
    assert sjf.max > 3.0 * fcfs.max
    # the guard bounds the tail: far below SJF's largest wait, near FCFS's
    assert guard.max < 0.25 * sjf.max
    assert guard.max < 1.5 * fcfs.max
    # and it does what it says: once a request has waited longer than the guard, every request
    # that starts before it arrived before it (served by age)
    tab = out["guard"].per_request
    arr, start = tab[:, 1], tab[:, 5]
    ok = np.isfinite(start)
    arr, start = arr[ok], start[ok]
    by_start = np.argsort(start, kind="stable")
    late = np.flatnonzero(start - arr > guard_s)
    assert late.size > 100  # the guard fires at this load
    st_sorted = start[by_start]
    for r in late:
        lo = np.searchsorted(st_sorted, arr[r] + guard_s, side="right")
        hi = np.searchsorted(st_sorted, start[r], side="left")
        between = by_start[lo:hi]
        assert np.all(arr[between] <= arr[r]), r
    assert math.isfinite(guard.p99)
