"""The staircase step law (llmqueue.latency.StaircaseStepLaw; Dai, Li and Peng, arXiv 2504.07347).

- the law and its command-line form, and every bad value refused in one line naming ``--step``;
- the compiled engine prices iterations as the law does: single iterations and runs of
  decode-only iterations against the law, a request alone by hand (and the plain-Python
  reference engine request by request: tests/sim/test_engine_reference.py);
- their Theorem 2: under saturation a work-conserving token budget of b_max tokens per iteration
  serves b_max / t(b_max) tokens per second, so with l + o - 1 tokens of work per request
  (prompt l, output o: the prefill pass makes the first token) the highest rate is
  b_max / (t(b_max) (l + o - 1)), within the saturated run's resolution.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.latency import StaircaseStepLaw, parse_step_law
from llmqueue.policy import Policy
from llmqueue.sim.capacity import saturated_rate
from llmqueue.sim.engine import run
from llmqueue.sim.timelaw import (
    STAIR,
    decode_run_time,
    iterations_until,
    step_coefficients,
    step_time,
)
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload
from llmqueue.tokens import parse_law

# their CodeLlama-34B fit (TP 1): c = 11.28 ms, a = 35.47 ms per 128 tokens
DAI = StaircaseStepLaw.of(0.01128, 0.03547, 128)


def test_the_law_and_its_command_line_form() -> None:
    assert DAI.step(0, 0, 0) == pytest.approx(0.01128)
    assert DAI.step([1, 128, 129, 512], 0, 0) == pytest.approx(
        [0.04675, 0.04675, 0.08222, 0.01128 + 4 * 0.03547]
    )
    assert DAI.step(100, 28, 0) == DAI.step(128, 0, 0)  # prefill and decode tokens alike
    assert DAI.c_tok_s == pytest.approx(0.03547 / 128)
    cli = parse_step_law("staircase:c0=0.01128,stair=0.03547,tokens=128")
    assert isinstance(cli, StaircaseStepLaw) and cli.step(300, 0, 0) == DAI.step(300, 0, 0)
    assert parse_step_law("staircase:c0=0,stair=1,tokens=4,c_ctx=1e-6").step(4, 0, 10) == (
        pytest.approx(1.00001)
    )
    assert DAI.scaled(2.0).step(129, 0, 0) == pytest.approx(2 * DAI.step(129, 0, 0))


@pytest.mark.parametrize(
    "text",
    [
        "staircase:c0=0.01,stair=0.03",
        "staircase:c0=0.01,stair=0.03,tokens=12.5",
        "staircase:c0=0.01,stair=0.03,tokens=0",
        "staircase:c0=0.01,stair=-1,tokens=128",
        "staircase:c0=0.01,stair=x,tokens=128",
        "staircase:c0=0.01,stair=0.03,tokens=128,width=3",
        "staircase:c0=0.01,c0=0.02,stair=0.03,tokens=128",
        "staircase:c0=0,stair=0,tokens=128",
    ],
)
def test_bad_staircases_are_refused_naming_the_flag(text: str) -> None:
    with pytest.raises(InputError, match="--step") as err:
        parse_step_law(text)
    assert "\n" not in str(err.value)


def test_a_request_alone_takes_the_laws_iterations() -> None:
    """Prompt 300, output 3, no token budget: one prefill iteration of 300 tokens (3 stairs),
    which makes the first token, then two decode iterations of one token (1 stair each)."""
    n = 20  # the first alone, then 19 more far apart
    prompt, out = np.full(n, 1.0), np.full(n, 1.0)
    prompt[0], out[0] = 300.0, 3.0
    w = ReplayWorkload(100.0 * np.arange(n), prompt, out)
    res = run(
        w, Policy("continuous"), DAI, requests=n, warmup=0, batches=2, seed=1, per_request=True
    )
    want = DAI.step(300, 0, 0) + 2 * DAI.step(1, 0, 0)
    assert res.per_request[0, 7] == pytest.approx(want, rel=1e-12)


def test_dais_maximal_rate() -> None:
    law, prompt, b_max = (
        parse_law("deterministic:value=101"),
        parse_law("deterministic:value=100"),
        512,
    )
    w = PoissonWorkload(law, 1.0, prompt=prompt)
    cap = saturated_rate(
        w, Policy("continuous", max_batched_tokens=b_max), DAI, requests=40_000, seed=3
    )
    want = b_max / (DAI.step(b_max, 0, 0) * (100 + 101 - 1))
    assert math.isclose(want, 16.715, rel_tol=1e-3)  # 3.343 tokens per ms over 200 tokens
    assert cap.rate_per_s == pytest.approx(want, rel=1e-3)  # 16.7148 in a run of 40,000


@settings(max_examples=60, deadline=None)
@given(d=st.integers(0, 600), p=st.integers(0, 600), c=st.integers(0, 5000))
def test_the_compiled_step_is_the_laws_step(d: int, p: int, c: int) -> None:
    law = StaircaseStepLaw.of(0.011, 0.004, 16, c_ctx_s=1.3e-5)
    coef = step_coefficients(law, None)
    assert coef[3] == STAIR
    assert step_time(coef, float(d), float(p), float(c)) == pytest.approx(float(law.step(d, p, c)))


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 300), ctx=st.integers(1, 4000), m=st.integers(1, 200))
def test_a_run_of_decode_iterations_is_the_sum_of_its_steps(b: int, ctx: int, m: int) -> None:
    law = StaircaseStepLaw.of(0.011, 0.004, 16, c_ctx_s=1.3e-5)
    coef = step_coefficients(law, None)
    want = float(law.step(b, 0, ctx + np.arange(m) * b).sum())
    assert decode_run_time(coef, float(b), float(ctx), float(m)) == pytest.approx(want, rel=1e-12)
    span = 0.5 * want
    n = iterations_until(coef, float(b), float(ctx), span, np.int64(m))
    assert decode_run_time(coef, float(b), float(ctx), float(n)) >= span
    if n > 1:
        assert decode_run_time(coef, float(b), float(ctx), float(n - 1)) < span
