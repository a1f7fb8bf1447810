"""The batching study's config read into typed settings (shared by the config checks and the
rules): the exact chains' sizes, the sweep's curves and its token law.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmqueue.errors import InputError
from llmqueue.schema import with_defaults
from llmqueue.tokens import ClippedLaw, TokenLaw, parse_law

__all__ = ["ChainSettings", "SweepSpec", "sweep_law"]


# ---- settings ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChainSettings:
    """The exact chain's token-law grid (normal-score cell width h), truncation and escape
    tolerances (config ``batching.chain``)."""

    grid_h: float
    tol: float
    escape_tol: float

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ChainSettings:
        """Config ``batching.chain``, possibly partial (the schema's defaults fill the rest)."""
        cfg = with_defaults(cfg, "batching.chain")
        return cls(float(cfg["grid_h"]), float(cfg["tol"]), float(cfg["escape_tol"]))


CURVE_KINDS = ("dynamic_vs_elastic", "fixed_batch", "bmax")


@dataclass(frozen=True)
class SweepSpec:
    """What one lambda sweep computes (one per figure panel; from config ``batching.fig5`` /
    ``fig6`` and the rule that runs it).

    curves: ``dynamic_vs_elastic`` (Fig. 5: dynamic with the bound (16) from Eq. (20) when the
    law is U(0, m2) and from a fit over `bound_fit_range`, elastic with its fitted bound),
    ``fixed_batch`` (Fig. 6a: each K of `fixed_K` with random and with fixed batch times) or
    ``bmax`` (Fig. 6b: dynamic with each b_max of `bmax`, None = inf, then elastic).
    rates: fractions (start, stop, step) of the best mu_b over b <= `b_range`.
    stream: the first seed key of every point of the sweep (distinct per figure).
    tail_cap_tokens: caps an unbounded token law (a context limit), None = uncapped.
    """

    curves: str
    tokens: str
    b_range: int
    rates: tuple[float, float, float]
    stream: int
    fixed_K: tuple[int, ...] = ()
    bmax: tuple[int | None, ...] = ()
    bound_fit_range: tuple[int, int] | None = None
    tail_cap_tokens: float | None = None

    def __post_init__(self) -> None:
        if self.curves not in CURVE_KINDS:
            raise InputError(f"sweep curves must be one of {CURVE_KINDS}, got {self.curves!r}")
        if self.curves == "fixed_batch" and not self.fixed_K:
            raise InputError("a fixed_batch sweep needs its batch sizes fixed_K")
        if self.curves == "bmax" and not self.bmax:
            raise InputError("a bmax sweep needs its b_max values (None = inf)")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SweepSpec:
        """From the small per-job dict a rule passes (lists become tuples)."""
        kw = dict(d)
        r = kw.pop("rates")
        kw["rates"] = (float(r["start"]), float(r["stop"]), float(r["step"]))
        kw["fixed_K"] = tuple(int(k) for k in kw.get("fixed_K") or ())
        kw["bmax"] = tuple(None if b is None else int(b) for b in kw.get("bmax") or ())
        if kw.get("bound_fit_range") is not None:
            lo, hi = kw["bound_fit_range"]
            kw["bound_fit_range"] = (int(lo), int(hi))
        return cls(**kw)


def sweep_law(spec: str, tail_cap_tokens: float | None = None, base_dir: str = ".") -> TokenLaw:
    """The token law of a sweep: `spec`, capped at `tail_cap_tokens` when given and the law is
    unbounded (the cap is a context limit for heavy tails; a bounded law is left as it is)."""
    law = parse_law(spec, base_dir)
    if tail_cap_tokens is not None and not math.isfinite(law.support[1]):
        return ClippedLaw(law, float(tail_cap_tokens))
    return law
