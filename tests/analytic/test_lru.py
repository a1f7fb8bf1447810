"""llmqueue.analytic.lru: the exact LRU replay and Che's approximation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmqueue.analytic.lru import (
    che_characteristic_time,
    che_hit_ratio,
    lru_request_hits,
    zipf_popularity,
)
from llmqueue.errors import InputError


def test_lru_hits_a_leading_run_and_evicts_the_least_recent() -> None:
    reqs = [["a", "b"], ["a", "c"], ["a", "b"], ["d", "e"], ["a", "b"]]
    # capacity 3, least recent first: [a b] -> b a; [a c] hits a -> b c a; [a b] hits a b ->
    # c b a; [d e] hits nothing -> c b a e d, evicting c b -> a e d; [a b] hits a only
    hits = lru_request_hits(reqs, 3)
    assert hits.tolist() == [0, 1, 2, 0, 1]


def test_lru_of_unbounded_capacity_hits_every_repeat() -> None:
    reqs = [[1, 2, 3], [1, 2], [1, 2, 3, 4], [5], [1]]
    assert lru_request_hits(reqs, 100).tolist() == [0, 2, 3, 0, 1]
    with pytest.raises(InputError, match="capacity"):
        lru_request_hits(reqs, 0)


def test_che_time_solves_its_equation_and_the_ratio_is_monotone() -> None:
    p = zipf_popularity(500, 0.9)
    for c in (10, 100, 400):
        t = che_characteristic_time(p, c, one_timers=0.5)
        assert math.isclose(float(np.sum(-np.expm1(-p * t))) + 0.5 * t, c, rel_tol=1e-9)
    ratios = [che_hit_ratio(p, c) for c in (10, 50, 200, 499)]
    assert ratios == sorted(ratios) and 0 < ratios[0] < ratios[-1] < 1
    assert che_hit_ratio(p, 500) == 1.0  # every item fits


def test_che_uniform_popularity_has_the_closed_form() -> None:
    """Equal popularity 1/N: T = -N ln(1 - C/N), hit ratio C/N."""
    n, c = 1000, 250
    p = np.full(n, 1.0 / n)
    assert math.isclose(che_characteristic_time(p, c), -n * math.log(1 - c / n), rel_tol=1e-9)
    assert math.isclose(che_hit_ratio(p, c), c / n, rel_tol=1e-9)


def test_bad_popularity_is_refused() -> None:
    with pytest.raises(InputError, match="popularity"):
        che_hit_ratio(np.array([0.5, 0.6]), 1)
    with pytest.raises(InputError, match="zipf"):
        zipf_popularity(0, 1.0)
