"""Preemptive-resume orders (llmqueue.sim.preemptive) against exact M/G/1 results.

- ``psjf``: the preemptive-resume priority formula with one class per size; ``srpt``: Schrage
  and Miller's; ``pspjf``: the priority formula with classes by prediction (Mitzenmacher 2020),
  ``sprpt``: the SOAP formula with the rank predicted size - age, both for the exponential
  predictor; all in :mod:`llmqueue.analytic.priority`, by quadrature;
- with a single size nobody is ever preempted, so every order is FCFS request by request;
- a two-request table whose times are known by hand.

Tolerances as in test_engine_exact: the relative error within 2% and the exact value within 2x
the simulation's 95% half-width, with runs long enough that the half-width is near 1%.
"""

from __future__ import annotations

import numpy as np
import pytest

from llmqueue.analytic.priority import (
    psjf_response,
    pspjf_response,
    sprpt_response,
    srpt_response,
)
from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency, StepLaw
from llmqueue.policy import Policy, order_names
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Exponential, Uniform
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.tokens import parse_law

COST = LinearLatency(0.02, 0.1)  # SSJF's cost model: 0.1 s + 0.02 s per output token
LOAD = 0.8


def _agrees(sim_mean: float, ci95: float, exact: float, rel: float = 0.02) -> None:
    assert ci95 < 0.6 * rel * exact, f"interval too wide to test: +-{ci95:.4g} for {exact:.4g}"
    assert abs(sim_mean - exact) <= rel * exact, (sim_mean, exact)
    assert abs(sim_mean - exact) <= 2.0 * ci95, (sim_mean, ci95, exact)


def _rate(spec: str) -> float:
    return LOAD / (COST.a_s_per_token * parse_law(spec).mean() + COST.b0_s)


@pytest.mark.parametrize(
    ("spec", "order", "seed"),
    [
        ("exponential:mean=200", "psjf", 21),
        ("exponential:mean=200", "srpt", 22),
        ("weibull:shape=0.6,scale=150", "psjf", 23),
        ("weibull:shape=0.6,scale=150", "srpt", 24),
    ],
)
def test_psjf_and_srpt_are_their_formulas(spec: str, order: str, seed: int) -> None:
    law, rate = parse_law(spec), _rate(spec)
    res = run(
        PoissonWorkload(law, rate), Policy("none", order=order), COST, requests=2_000_000, seed=seed
    )
    assert res.response is not None and not res.unstable
    formula = psjf_response if order == "psjf" else srpt_response
    _agrees(res.response.mean, res.response.ci95, formula(law, 0.02, 0.1, rate))
    # the wait is the time not served: response less the mean service time, on average
    # (the run's sample mean service time differs from the law's by about 0.003 s)
    assert res.wait.mean == pytest.approx(res.response.mean - (0.02 * law.mean() + 0.1), abs=0.01)


def test_pspjf_is_the_priority_formula_by_prediction() -> None:
    spec = "exponential:mean=200"
    law, rate, pred = parse_law(spec), _rate(spec), Exponential()
    res = run(
        PoissonWorkload(law, rate, predictor=pred), Policy("none", order="pspjf"), COST,
        requests=2_000_000, seed=25,
    )  # fmt: skip
    assert res.response is not None
    exact = pspjf_response(law, 0.02, 0.1, rate, *pred.conditional())  # type: ignore[misc]
    _agrees(res.response.mean, res.response.ci95, exact)
    # an exact prediction is PSJF; SRPT is the best of all orders
    near = pspjf_response(law, 0.02, 0.1, rate, *Uniform(1e-4).conditional())  # type: ignore[misc]
    assert near == pytest.approx(psjf_response(law, 0.02, 0.1, rate), rel=1e-4)
    assert srpt_response(law, 0.02, 0.1, rate) < psjf_response(law, 0.02, 0.1, rate) < exact


def test_sprpt_is_its_formula() -> None:
    spec = "exponential:mean=200"
    law, rate, pred = parse_law(spec), _rate(spec), Exponential()
    w = PoissonWorkload(law, rate, predictor=pred)
    res = run(w, Policy("none", order="sprpt"), COST, requests=2_000_000, seed=26)
    assert res.response is not None
    exact = sprpt_response(law, 0.02, 0.1, rate, *pred.conditional())  # type: ignore[misc]
    _agrees(res.response.mean, res.response.ci95, exact)
    assert srpt_response(law, 0.02, 0.1, rate) < exact


@pytest.mark.parametrize("order", order_names(preemptive=True))
def test_one_size_never_preempts(order: str) -> None:
    arr = np.cumsum(np.random.default_rng(4).exponential(1.0, 2000))
    out = np.full(arr.size, 40.0)
    w = ReplayWorkload(arr, np.zeros(arr.size), out)
    kw = {"requests": arr.size, "warmup": 0, "batches": 2, "seed": 1, "per_request": True}
    pre = run(w, Policy("none", order=order), COST, **kw).per_request
    fcfs = run(w, Policy("none"), COST, **kw).per_request
    np.testing.assert_array_equal(pre[:, 5], fcfs[:, 5])  # starts
    np.testing.assert_allclose(pre[:, 7], fcfs[:, 7], rtol=1e-12)  # finishes


@pytest.mark.parametrize(("order", "preempts"), [("psjf", True), ("srpt", False)])
def test_two_requests_by_hand(order: str, preempts: bool) -> None:
    """A 100-token request (2.1 s) at 0 and a 60-token one (1.3 s) at 1 s: PSJF preempts (1.3 <
    2.1); SRPT does not (the first has 1.1 s left)."""
    arr = np.concatenate([[0.0, 1.0], 100.0 + np.arange(18.0) * 10.0])  # 18 more, far apart
    out = np.concatenate([[100.0, 60.0], np.full(18, 10.0)])
    w = ReplayWorkload(arr, np.zeros(20), out)
    kw = {"requests": 20, "warmup": 0, "batches": 2, "seed": 1, "per_request": True}
    res = run(w, Policy("none", order=order), COST, **kw)  # type: ignore[arg-type]
    start, finish = res.per_request[:2, 5], res.per_request[:2, 7]
    if preempts:
        np.testing.assert_allclose(finish, [3.4, 2.3])
    else:
        np.testing.assert_allclose(finish, [2.1, 3.4])
    np.testing.assert_allclose(start, [0.0, 1.0 if preempts else 2.1])


@pytest.mark.parametrize(
    "kw",
    [
        {"kind": "dynamic", "order": "srpt"},
        {"kind": "continuous", "order": "psjf", "replicas": 2, "router": "jsq"},
        {"kind": "continuous", "order": "srpt", "batch_queue": True},
        {"kind": "fixed", "K": 4, "order": "srpt"},
        {"kind": "none", "order": "srpt", "servers": 2},
        {"kind": "none", "order": "pspjf", "guard_s": 5.0},
    ],
)
def test_preemptive_orders_refuse_other_settings(kw: dict[str, object]) -> None:
    with pytest.raises(InputError, match="preempts"):
        Policy(**kw)  # type: ignore[arg-type]


def test_the_formulas_need_a_law_without_atoms() -> None:
    with pytest.raises(InputError, match="without atoms"):
        srpt_response(parse_law("exponential:mean=200,cap=300"), 0.02, 0.1, 0.5)
    with pytest.raises(InputError, match="atom"):
        psjf_response(parse_law("deterministic:value=200"), 0.02, 0.1, 0.5)


def test_exact_wait_reports_the_preemptive_formulas() -> None:
    from llmqueue.sim.exact import exact_wait
    from llmqueue.sim.predictors import Oracle

    law = parse_law("exponential:mean=200")
    rate = _rate("exponential:mean=200")
    es = 0.02 * 200 + 0.1

    def exact(order: str, pred: object = None) -> float | None:
        w = PoissonWorkload(law, rate, predictor=pred or Oracle())  # type: ignore[arg-type]
        got = exact_wait(w, Policy("none", order=order), COST, seed=1)
        return None if got is None else got.wait_s

    assert exact("srpt") == pytest.approx(srpt_response(law, 0.02, 0.1, rate) - es)
    assert (
        exact("psjf") == exact("pspjf") == pytest.approx(psjf_response(law, 0.02, 0.1, rate) - es)
    )
    assert exact("sprpt") == exact("srpt")  # an exact prediction
    assert exact("sprpt", Exponential()) == pytest.approx(
        sprpt_response(law, 0.02, 0.1, rate, *Exponential().conditional()) - es  # type: ignore[misc]
    )
    w = PoissonWorkload(law, rate)
    assert exact_wait(w, Policy("none", order="srpt", preempt_limit=0.5), COST, seed=1) is None
    assert exact("pspjf", Exponential()) == pytest.approx(
        pspjf_response(law, 0.02, 0.1, rate, *Exponential().conditional()) - es  # type: ignore[misc]
    )


def test_a_tiny_preemption_limit_is_the_non_preemptive_order() -> None:
    """TRAIL's limit c -> 0: a request, once started, is never preempted, and the waiting ones
    (never served) are keyed by their predicted size: SPRPT becomes SPJF request by request."""
    w = PoissonWorkload(
        parse_law("exponential:mean=200"), _rate("exponential:mean=200"), predictor=Exponential()
    )
    kw = {"requests": 20_000, "warmup": 0, "batches": 2, "seed": 5, "per_request": True}
    trail = run(w, Policy("none", order="sprpt", preempt_limit=1e-12), COST, **kw).per_request  # type: ignore[arg-type]
    spjf = run(w, Policy("none", order="spjf"), COST, **kw).per_request  # type: ignore[arg-type]
    free = run(w, Policy("none", order="sprpt"), COST, **kw).per_request  # type: ignore[arg-type]
    n = 19_000  # requests every run has finished (the tables end where each run stopped)
    np.testing.assert_allclose(trail[:n, 7], spjf[:n, 7], rtol=1e-9)
    assert not np.allclose(free[:n, 7], spjf[:n, 7])  # without the limit SPRPT preempts
    with pytest.raises(InputError, match="preempt_limit applies to a preemptive order"):
        Policy("none", order="spjf", preempt_limit=0.5)
    with pytest.raises(InputError, match="fraction in"):
        Policy("none", order="sprpt", preempt_limit=1.5)


# ---- under continuous batching ---------------------------------------------------------------
def test_continuous_one_seat_is_preemptive_resume_by_tokens() -> None:
    """One seat (max_batch 1), a step of c0 alone and one-token prompts: an evicted request
    recomputes its prompt and output so far in one step that also makes its next token, so the
    server is preemptive-resume at token granularity; PSJF and SRPT then meet their M/G/1
    formulas (S = c0 N) within the tolerance, the discrete tokens shifting the mean by well
    under a percent at 100 tokens a request."""
    step, law = 0.01, parse_law("exponential:mean=100")
    rate = LOAD / (step * law.mean())
    w = PoissonWorkload(law, rate, prompt=parse_law("deterministic:value=1"))
    for order, formula, seed in (("psjf", psjf_response, 31), ("srpt", srpt_response, 32)):
        res = run(
            w, Policy("continuous", bmax=1, order=order), StepLaw(step, 0.0, 0.0),
            requests=2_000_000, seed=seed,
        )  # fmt: skip
        assert res.response is not None and res.preemptions > 0
        _agrees(res.response.mean, res.response.ci95, formula(law, step, 0.0, rate))


def test_continuous_with_room_for_everyone_never_evicts() -> None:
    """No seat or KV limit: every arrival is admitted at the next boundary, so a preemptive order
    serves as FCFS does, request by request."""
    arr = np.cumsum(np.random.default_rng(9).exponential(0.05, 3000))
    rng = np.random.default_rng(10)
    prompt, out = rng.integers(1, 200, arr.size).astype(float), rng.integers(1, 300, arr.size)
    w = ReplayWorkload(arr, prompt, out.astype(float))
    kw = {"requests": arr.size, "warmup": 0, "batches": 2, "seed": 1, "per_request": True}
    law = StepLaw(0.01, 0.0003, 1e-6)
    fcfs = run(w, Policy("continuous"), law, **kw)
    for order in ("psjf", "srpt"):
        got = run(w, Policy("continuous", order=order), law, **kw)
        assert got.preemptions == 0
        np.testing.assert_array_equal(got.per_request[:, 7], fcfs.per_request[:, 7])


def test_continuous_eviction_changes_the_schedule() -> None:
    """With three seats the orders evict and finish the short requests sooner than SJF does."""
    law, step = parse_law("exponential:mean=100"), StepLaw(0.01, 0.0, 0.0)
    w = PoissonWorkload(law, 2.4, prompt=parse_law("deterministic:value=1"))
    kw = {"requests": 200_000, "seed": 5}
    sjf = run(w, Policy("continuous", bmax=3, order="sjf"), step, **kw)  # type: ignore[arg-type]
    srpt = run(w, Policy("continuous", bmax=3, order="srpt"), step, **kw)  # type: ignore[arg-type]
    assert srpt.preemptions > 0 and sjf.preemptions == 0
    assert srpt.response.mean < sjf.response.mean  # type: ignore[union-attr]


def test_continuous_trail_limit_protects_the_long_served() -> None:
    """TRAIL's limit under continuous batching: a tiny limit protects every request that has
    made a token, so evictions fall to those still in their first prefill; the limit 1 leaves
    SRPT as it is (a request with all its tokens has left)."""
    law, step = parse_law("exponential:mean=100"), StepLaw(0.01, 0.0, 0.0)
    w = PoissonWorkload(law, 2.4, prompt=parse_law("deterministic:value=1"))
    kw = {"requests": 100_000, "seed": 6}
    free = run(w, Policy("continuous", bmax=3, order="srpt"), step, **kw)  # type: ignore[arg-type]
    one = run(w, Policy("continuous", bmax=3, order="srpt", preempt_limit=1.0), step, **kw)  # type: ignore[arg-type]
    tiny = Policy("continuous", bmax=3, order="srpt", preempt_limit=1e-9)
    held = run(w, tiny, step, **kw)  # type: ignore[arg-type]
    assert one.response.mean == free.response.mean  # type: ignore[union-attr]
    assert held.preemptions < free.preemptions
