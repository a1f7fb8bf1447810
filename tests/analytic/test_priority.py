"""The SPRPT formula (llmqueue.analytic.priority.sprpt_response) against what it must equal.

- an exact prediction turns SPRPT into SRPT (Schrage and Miller), with or without b0;
- Mitzenmacher's exponential-size, exponential-prediction setting (ITCS 2020, Table II, and
  Mitzenmacher and Shahout's survey, arXiv 2503.07545, Table 1): his published simulation means
  of SPRPT at lambda = 0.5, 0.7, 0.9, printed to four decimals from long runs, within 0.1%;
- a prediction independent of nothing but noise still beats FCFS and loses to SRPT.
The engine against the formula is in tests/sim/test_preemptive.py.
"""

from __future__ import annotations

import pytest

from llmqueue.analytic.priority import pk_wait, sprpt_response, srpt_response
from llmqueue.errors import InputError
from llmqueue.sim.predictors import Exponential, Noisy, Uniform
from llmqueue.tokens import parse_law

EXACT = Uniform(1e-6).conditional()


@pytest.mark.parametrize(("a", "b0", "rate"), [(1.0, 0.0, 0.7), (0.02, 0.1, 0.8 / 4.1)])
def test_an_exact_prediction_is_srpt(a: float, b0: float, rate: float) -> None:
    law = parse_law("exponential:mean=200" if b0 else "exponential:mean=1")
    assert EXACT is not None
    got = sprpt_response(law, a, b0, rate, *EXACT)
    assert got == pytest.approx(srpt_response(law, a, b0, rate), rel=1e-4)


@pytest.mark.parametrize(("rate", "published"), [(0.5, 1.6588), (0.7, 2.3684), (0.9, 5.0973)])
def test_mitzenmacher_exponential_predictions(rate: float, published: float) -> None:
    cond = Exponential().conditional()
    assert cond is not None
    got = sprpt_response(parse_law("exponential:mean=1"), 1.0, 0.0, rate, *cond)
    assert got == pytest.approx(published, rel=1e-3)


def test_a_noisy_prediction_lies_between_srpt_and_fcfs() -> None:
    law = parse_law("weibull:shape=0.6,scale=150")
    rate = 0.8 / (0.02 * law.mean() + 0.1)
    cond = Noisy(1.0).conditional()
    assert cond is not None
    got = sprpt_response(law, 0.02, 0.1, rate, *cond)
    es = 0.02 * law.mean() + 0.1
    es2 = 0.02**2 * law.clipped_moment(float("inf"), 2) + 2 * 0.02 * 0.1 * law.mean() + 0.01
    assert srpt_response(law, 0.02, 0.1, rate) < got < es + pk_wait(rate, es, es2)


def test_it_needs_a_per_token_time() -> None:
    cond = Exponential().conditional()
    assert cond is not None
    with pytest.raises(InputError, match="a > 0"):
        sprpt_response(parse_law("exponential:mean=1"), 0.0, 1.0, 0.5, *cond)
