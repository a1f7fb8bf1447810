"""The shaped step law (llmqueue.latency.ShapedStepLaw): what it checks, what it computes, that its
fit recovers a known shape from noisy iterations, and that the compiled engine reads it as the
Python law does (tests/sim/test_engine_reference.py checks whole schedules)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.latency import ShapedStepLaw, StepLaw
from llmqueue.latency_fits import fit_shaped_step_law
from llmqueue.sim.timelaw import step_coefficients

KNOTS = (0, 1, 2, 3, 4, 6, 8, 12)
G_MS = (17.0, 19.8, 23.6, 20.0, 20.0, 20.5, 21.0, 23.0)


def _law(**kw: object) -> ShapedStepLaw:
    base = dict(
        c0_s=0.017, c_tok_s=0.0005, c_ctx_s=4e-6, name="t", c_pre_s=0.0012, knots=KNOTS,
        values_s=tuple(g / 1e3 for g in G_MS),
    )  # fmt: skip
    base.update(kw)
    return ShapedStepLaw(**base)  # type: ignore[arg-type]


def test_decode_part_interpolates_and_extends() -> None:
    law = _law()
    assert law.decode_part(2) == pytest.approx(0.0236)
    assert law.decode_part(5) == pytest.approx(0.02025)  # between the knots 4 and 6
    assert law.decode_part(20) == pytest.approx(0.023 + 8 * 0.0005)  # beyond: slope c_tok
    assert law.step(2, 100, 1000) == pytest.approx(0.0236 + 0.12 + 0.004)
    t = law.table()
    assert t.size == 13 and t[3] == pytest.approx(0.02)


def test_linear_law_is_a_shaped_law_with_two_knots() -> None:
    lin = StepLaw(0.017, 0.001, 4e-6)
    sh = ShapedStepLaw(0.017, 0.001, 4e-6, c_pre_s=0.001, knots=(0, 64), values_s=(0.017, 0.081))
    d = np.arange(0, 100)
    np.testing.assert_allclose(sh.step(d, 3 * d, 50 * d), lin.step(d, 3 * d, 50 * d), rtol=1e-12)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(knots=(1, 2, 3, 4, 6, 8, 12, 16)), "from 0"),
        (dict(knots=(0, 2, 1, 3, 4, 6, 8, 12)), "increasing"),
        (dict(values_s=(0.017, 0.02)), "same length"),
        (dict(c_pre_s=float("nan")), "c_pre_s"),
        (dict(values_s=(0.017, -1.0, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02)), "values_s"),
        (dict(c0_s=0.018), "g\\(0\\)"),
    ],
)
def test_bad_shapes_are_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        _law(**kw)


def test_compiled_coefficients_hold_the_table() -> None:
    law = _law()
    c = step_coefficients(law, None)
    assert c[3] == 1.0 and c[4] == law.c_pre_s and int(c[5]) == 13
    np.testing.assert_array_equal(c[6:], law.table())
    lin = step_coefficients(StepLaw(0.017, 0.001, 4e-6), None)
    assert lin.tolist() == [0.017, 0.001, 4e-6]


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6))
def test_fit_recovers_a_known_shape(seed: int) -> None:
    """Iterations drawn like a calibration's (decodes of 0-12 sequences, some with prefill chunks of
    up to 64 tokens, contexts that vary apart from the batch), 1% noise (about 0.2 ms, the spread
    of a quiet engine's single-sequence steps): g, c_pre and c_ctx come back within a few percent
    (each g rests on about 60 iterations: its standard error is a fraction of a percent)."""
    rng = np.random.default_rng(seed)
    n = 800
    d = rng.integers(0, 13, n).astype(float)
    p = np.where(rng.random(n) < 0.3, rng.integers(1, 64, n), 0).astype(float)
    p[d == 0] = rng.integers(16, 64, int((d == 0).sum()))
    c = d * rng.integers(20, 400, n) + p
    truth = _law()
    y = truth.step(d, p, c) * (1 + rng.normal(0, 0.01, n))
    fit = fit_shaped_step_law(d, p, c, y)
    assert fit.knots == KNOTS
    np.testing.assert_allclose(fit.values_s, truth.values_s, rtol=0.04)
    assert fit.c_pre_s == pytest.approx(truth.c_pre_s, rel=0.05)
    assert fit.c_ctx_s == pytest.approx(truth.c_ctx_s, rel=0.2)


def test_fit_keeps_only_knots_with_data() -> None:
    """A knot of the grid with no iterations near it is dropped (g there rests on data)."""
    rng = np.random.default_rng(1)
    d = np.repeat([0.0, 1.0, 2.0, 8.0], 40)
    p = np.where(d == 0, rng.integers(16, 128, d.size), 0).astype(float)
    c = d * rng.integers(20, 300, d.size) + p
    y = _law().step(d, p, c)
    fit = fit_shaped_step_law(d, p, c, y)
    assert fit.knots == (0, 1, 2, 8)


def test_fit_needs_varied_iterations() -> None:
    with pytest.raises(InputError, match=">= 8 iterations"):
        fit_shaped_step_law([1, 2], [0, 0], [10, 20], [0.01, 0.02])


@settings(max_examples=30, deadline=None)
@given(
    factor=st.floats(0.1, 10.0),
    d=st.integers(0, 40),
    p=st.integers(0, 2000),
    c=st.integers(0, 50_000),
)
def test_a_scaled_law_prices_every_iteration_by_the_factor(
    factor: float, d: int, p: int, c: int
) -> None:
    for law in (_law(), StepLaw(0.017, 0.001, 4e-6, name="lin")):
        s = law.scaled(factor)
        assert type(s) is type(law)
        assert float(s.step(d, p, c)) == pytest.approx(factor * float(law.step(d, p, c)))


def test_a_speed_factor_must_be_positive() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(InputError, match="speed factor"):
            _law().scaled(bad)
