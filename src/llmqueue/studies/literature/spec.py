"""The settings of the literature study (config section ``literature``) as typed specs.

A setting is a one-at-a-time M/G/1 server whose time unit is the mean service time: sizes from a
token law, S = N (``a`` = 1 s per token, no constant), and a predictor. The one-bit setting of
Mitzenmacher's "Queues with small advice" (2021) puts the bit's threshold where its analysis
puts the best one for exponential sizes of mean 1: T* solving lambda = (T - 1) / (e^-T + T - 1)
(:func:`optimal_threshold`), a perfect classifier ``buckets:edges=T*,pe=0``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmqueue.errors import InputError
from llmqueue.policy import ORDERS
from llmqueue.sim.settings import SimSettings

__all__ = ["ONE_BIT", "Setting", "LiteratureSpec", "optimal_threshold", "reference_points"]

ONE_BIT = "one_bit_optimal"  # the predictor name of the one-bit setting (module docstring)


def optimal_threshold(rate_per_s: float) -> float:
    """T* (tokens = time units) with rate = (T - 1) / (e^-T + T - 1): the threshold of the best
    one-bit advice for exponential sizes of mean 1 (Mitzenmacher, "Queues with small advice",
    2021); 0 < rate < 1. Bisection to 1e-12."""
    lam = float(rate_per_s)
    if not (0.0 < lam < 1.0):
        raise InputError(f"the one-bit threshold needs a load in (0, 1), got {rate_per_s!r}")

    def gap(t: float) -> float:
        return (t - 1.0) / (math.exp(-t) + t - 1.0) - lam

    lo, hi = 1.0 + 1e-12, 200.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2.0
        lo, hi = (lo, mid) if gap(mid) > 0 else (mid, hi)
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class Setting:
    """One published setting: its `tokens` law (sizes, time units) and `predictor` spec
    (:func:`llmqueue.sim.predictors.parse_predictor`, or :data:`ONE_BIT`)."""

    name: str
    tokens: str
    predictor: str

    def predictor_at(self, rate_per_s: float) -> str:
        """The predictor spec at `rate_per_s` (the one-bit threshold depends on the load)."""
        if self.predictor == ONE_BIT:
            return f"buckets:edges={optimal_threshold(rate_per_s)!r},pe=0"
        return self.predictor


@dataclass(frozen=True)
class LiteratureSpec:
    """Config section ``literature``: the settings by name, one simulation's length, and the
    loads of the figure's exact curves."""

    settings: Mapping[str, Setting]
    simulation: SimSettings
    curve_rates: tuple[float, ...]

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> LiteratureSpec:
        settings = {
            str(k): Setting(str(k), str(v["tokens"]), str(v["predictor"]))
            for k, v in dict(cfg["settings"]).items()
        }
        rates = tuple(float(x) for x in cfg["curves"]["rates"])
        return cls(
            settings, SimSettings.from_config(cfg["simulation"], "literature.simulation"), rates
        )


def reference_points(
    reference: Sequence[Mapping[Any, Any]], settings: Mapping[str, Setting]
) -> list[tuple[str, str, float]]:
    """The distinct (setting, order, rate) the reference rows name, in file order; rows without
    a setting (not expressed) are skipped. InputError for an unknown setting or order, or a
    rate outside (0, 1)."""
    out: dict[tuple[str, str, float], None] = {}
    for row in reference:
        name = row.get("setting")
        if not isinstance(name, str) or not name:
            continue
        where = f"src/llmqueue/studies/literature/reference_claims.csv row {row['id']}"
        if name not in settings:
            raise InputError(f"{where}: setting {name!r} is not in literature.settings")
        order = str(row["order"])
        if order not in ORDERS:
            raise InputError(f"{where}: order must be one of {', '.join(ORDERS)}, got {order!r}")
        rate = float(row["rate_per_s"])
        if not 0.0 < rate < 1.0:
            raise InputError(f"{where}: rate_per_s must lie in (0, 1), got {rate}")
        out[(name, order, rate)] = None
    return list(out)
