"""The packed step law (llmqueue.latency.PackedStepLaw: attention over the step's tokens x its
context, as transformers' continuous batching computes it on a CPU): its formula, its fit, and
the compiled engine's pricing of single iterations and of runs of decode-only iterations
(llmqueue.sim.timelaw) against the law itself."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.latency import PackedStepLaw, StepLaw, batch_law_from_step
from llmqueue.latency_fits import fit_packed_step_law
from llmqueue.sim.timelaw import (
    PACKED,
    decode_run_time,
    iterations_until,
    step_coefficients,
    step_time,
)

LAW = PackedStepLaw(0.012, 0.0009, 2e-5, "hf", c_qk_s=4e-7)


def test_the_formula_and_its_linear_case() -> None:
    assert LAW.step(3, 40, 500) == pytest.approx(0.012 + 0.0009 * 43 + 2e-5 * 500 + 4e-7 * 43 * 500)
    lin = StepLaw(0.012, 0.0009, 2e-5)
    zero = PackedStepLaw(0.012, 0.0009, 2e-5)
    d, p, c = np.array([1, 8, 0]), np.array([0, 0, 256]), np.array([40, 900, 1800])
    np.testing.assert_allclose(zero.step(d, p, c), lin.step(d, p, c))
    assert LAW.scaled(2.0).step(3, 40, 500) == pytest.approx(2 * LAW.step(3, 40, 500))
    with pytest.raises(InputError, match="c_qk_s"):
        PackedStepLaw(0.012, 0.0009, 2e-5, c_qk_s=-1e-9)
    with pytest.raises(InputError, match="packed"):
        batch_law_from_step(LAW, 64, 300)


def test_the_fit_recovers_the_law_from_its_own_iterations() -> None:
    rng = np.random.default_rng(1)
    d = rng.integers(0, 48, 400).astype(float)
    p = np.where(rng.random(400) < 0.3, rng.integers(1, 256, 400), 0).astype(float)
    d[(d == 0) & (p == 0)] = 1
    c = d * rng.integers(16, 600, 400) + p
    y = LAW.step(d, p, c) * np.exp(rng.normal(0, 0.01, 400))
    fit = fit_packed_step_law(d, p, c, y)
    assert isinstance(fit, PackedStepLaw)
    assert fit.c_qk_s == pytest.approx(LAW.c_qk_s, rel=0.1)
    assert fit.c_tok_s == pytest.approx(LAW.c_tok_s, rel=0.1)
    assert np.median(np.abs(fit.step(d, p, c) / y - 1)) < 0.02
    with pytest.raises(InputError, match=">= 5 iterations"):
        fit_packed_step_law(d[:3], p[:3], c[:3], y[:3])


@settings(max_examples=60, deadline=None)
@given(
    d=st.integers(0, 64), p=st.integers(0, 256), c=st.integers(0, 5000),
)  # fmt: skip
def test_the_compiled_step_is_the_laws_step(d: int, p: int, c: int) -> None:
    coef = step_coefficients(LAW, None)
    assert coef[3] == PACKED and coef.size == 5
    assert step_time(coef, float(d), float(p), float(c)) == pytest.approx(float(LAW.step(d, p, c)))


@settings(max_examples=60, deadline=None)
@given(b=st.integers(1, 64), ctx=st.integers(1, 4000), m=st.integers(1, 200))
def test_a_run_of_decode_iterations_is_the_sum_of_its_steps(b: int, ctx: int, m: int) -> None:
    """m decode-only iterations of b sequences, the context growing by b per iteration (the
    engine's fast path), against the law iteration by iteration; and the fewest iterations that
    reach a time span."""
    coef = step_coefficients(LAW, None)
    k = np.arange(m)
    want = float(LAW.step(b, 0, ctx + k * b).sum())
    assert decode_run_time(coef, float(b), float(ctx), float(m)) == pytest.approx(want, rel=1e-12)
    span = 0.5 * want
    n = iterations_until(coef, float(b), float(ctx), span, np.int64(m))
    assert decode_run_time(coef, float(b), float(ctx), float(n)) >= span
    if n > 1:
        assert decode_run_time(coef, float(b), float(ctx), float(n - 1)) < span
