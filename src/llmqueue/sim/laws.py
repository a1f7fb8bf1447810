"""Token laws inside compiled code: one integer encoding and one sampler for every simulator.

:func:`encode_law` turns a :class:`llmqueue.tokens.TokenLaw` into a :class:`LawCode` (a small
integer kind, four float parameters, a cap, and the atoms of an empirical law); :func:`draw`
samples it from 32 random bits (:mod:`llmqueue.sim.rng`), rejections reading the spare stream.

====  ============  ==========================================================================
kind  law           draw (tokens)
====  ============  ==========================================================================
0     lognormal     exp(mu + sigma Z), Z normal (ziggurat)
1     uniform       low + (high - low) U, U uniform on (0, 1) with 32 bits
2     truncnorm     mean + sd Z, redrawn (spare words) until it lies in [low, high]
3     exponential   mean E, E standard exponential (ziggurat)
4     deterministic value
5     empirical     the atom whose cumulative probability first exceeds U (a trace's rows)
6     weibull       scale (-ln U)^(1/shape)
7     pareto        xm U^(-1/alpha)
8     quantiles     the table's quantile function at U, linear between its rows
====  ============  ==========================================================================

Every kind then takes ``min(x, cap)`` (``cap`` = inf unless the law is ``cap=L``-clipped).
Values are real (the paper's laws are continuous); the serving engine rounds where it needs
whole tokens.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.sim.rng import (
    EXP_F,
    EXP_K,
    EXP_W,
    NOR_F,
    NOR_K,
    NOR_W,
    spare_word,
    std_exp,
    std_normal,
    uniform32,
)
from llmqueue.tokens import (
    ClippedLaw,
    DeterministicLaw,
    EmpiricalLaw,
    ExponentialLaw,
    LogNormalLaw,
    ParetoLaw,
    QuantileTableLaw,
    TokenLaw,
    TruncNormLaw,
    UniformLaw,
    WeibullLaw,
)

__all__ = [
    "LawCode",
    "encode_law",
    "draw",
    "sample_law",
    "sample_law_chunk",
    "LOGNORMAL",
    "UNIFORM",
    "TRUNCNORM",
    "EXPONENTIAL",
    "DETERMINISTIC",
    "EMPIRICAL",
    "WEIBULL",
    "PARETO",
    "QUANTILES",
]

LOGNORMAL, UNIFORM, TRUNCNORM, EXPONENTIAL, DETERMINISTIC, EMPIRICAL, WEIBULL, PARETO, QUANTILES = (
    range(9)
)


class LawCode(NamedTuple):
    """A token law as compiled code reads it; ``spare_per_draw`` sizes the spare stream."""

    kind: int
    prm: np.ndarray  # float64[4]
    cap: float
    values: np.ndarray  # empirical atoms (float64), else one zero
    cum: np.ndarray  # their cumulative probabilities (last = 1), else one zero
    spare_per_draw: float


def encode_law(law: TokenLaw) -> LawCode:
    """The :class:`LawCode` of a token law (InputError for a law that cannot be simulated)."""
    cap = math.inf
    if isinstance(law, ClippedLaw):
        cap = float(law.cap)
        law = law.base
    empty = np.zeros(1)
    prm = np.zeros(4)
    spare = 0.1  # ziggurat rejections: ~2% of draws take 2-3 spare words
    if isinstance(law, LogNormalLaw):
        prm[:2] = law.mu, law.sigma
        return LawCode(LOGNORMAL, prm, cap, empty, empty, spare)
    if isinstance(law, UniformLaw):
        prm[:2] = law.low, law.high
        return LawCode(UNIFORM, prm, cap, empty, empty, 0.0)
    if isinstance(law, TruncNormLaw):
        _, _, z = law._ab
        if z < 1e-3:
            raise InputError(
                f"token law {law.spec!r}: truncation keeps {z:.2e} of the mass; too little to simulate"
            )
        prm[:] = law.mean_param, law.sd, law.low, law.high
        return LawCode(TRUNCNORM, prm, cap, empty, empty, 2.0 / z + spare)
    if isinstance(law, ExponentialLaw):
        prm[0] = law.mean_tokens
        return LawCode(EXPONENTIAL, prm, cap, empty, empty, spare)
    if isinstance(law, DeterministicLaw):
        prm[0] = law.value
        return LawCode(DETERMINISTIC, prm, cap, empty, empty, 0.0)
    if isinstance(law, EmpiricalLaw):
        cum = np.cumsum(np.asarray(law.probs, dtype=float))
        return LawCode(EMPIRICAL, prm, cap, np.asarray(law.values, dtype=float), cum / cum[-1], 0.0)
    if isinstance(law, WeibullLaw):
        prm[:2] = law.shape, law.scale
        return LawCode(WEIBULL, prm, cap, empty, empty, 0.0)
    if isinstance(law, ParetoLaw):
        prm[:2] = law.alpha, law.xm
        return LawCode(PARETO, prm, cap, empty, empty, 0.0)
    if isinstance(law, QuantileTableLaw):
        q, x = (np.asarray(v, dtype=float) for v in (law.probs, law.tokens))
        return LawCode(QUANTILES, prm, cap, x, q, 0.0)
    raise InputError(f"token law {law.spec!r} cannot be simulated")


@njit(cache=True, nogil=True, inline="always")
def draw(kind, prm, cap, vals, cum, r32, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """One draw of the encoded law from 32 random bits; returns (tokens, spare index)."""
    if kind == 0:
        z, sp = std_normal(r32, NOR_K, NOR_W, NOR_F, spare, sp)
        x = math.exp(prm[0] + prm[1] * z)
    elif kind == 1:
        x = prm[0] + (prm[1] - prm[0]) * uniform32(r32)
    elif kind == 2:
        while True:
            z, sp = std_normal(r32, NOR_K, NOR_W, NOR_F, spare, sp)
            x = prm[0] + prm[1] * z
            if prm[2] <= x <= prm[3]:
                break
            w, sp = spare_word(spare, sp)
            r32 = np.uint32(w & np.uint64(0xFFFFFFFF))
    elif kind == 3:
        e, sp = std_exp(r32, EXP_K, EXP_W, EXP_F, spare, sp)
        x = prm[0] * e
    elif kind == 4:
        x = prm[0]
    elif kind == 5:
        i = np.searchsorted(cum, uniform32(r32), side="right")
        if i >= vals.size:
            i = vals.size - 1
        x = vals[i]
    elif kind == 6:
        x = prm[1] * (-math.log(uniform32(r32))) ** (1.0 / prm[0])
    elif kind == 7:
        x = prm[1] * uniform32(r32) ** (-1.0 / prm[0])
    elif kind == 8:
        u = uniform32(r32)
        i = np.searchsorted(cum, u, side="right")  # cum[i - 1] <= u < cum[i]
        x = vals[i - 1] + (u - cum[i - 1]) / (cum[i] - cum[i - 1]) * (vals[i] - vals[i - 1])
    else:
        raise ValueError("draw: unknown token-law kind")
    return (x if x < cap else cap), sp


@njit(cache=True, nogil=True)
def _sample(kind, prm, cap, vals, cum, raw, spare, sp, out):  # type: ignore[no-untyped-def]  # noqa: ANN001
    for j in range(raw.size):
        out[j], sp = draw(kind, prm, cap, vals, cum, np.uint32(raw[j] >> np.uint64(32)), spare, sp)
    return sp


def sample_law(law: TokenLaw, n: int, seed: int | np.random.SeedSequence) -> np.ndarray:
    """n draws of `law` through the compiled sampler (the high 32 bits of each word): the values
    every simulator sees, for tests and for checking the sampler against the law's cdf."""
    from llmqueue.sim.rng import WordStream

    code = encode_law(law)
    ws = WordStream(seed, int(n * (code.spare_per_draw + 0.5)) + 64)
    raw = ws.words(n)
    spare, sp = ws.spare()
    out = np.empty(int(n))
    sp = _sample(code.kind, code.prm, code.cap, code.values, code.cum, raw, spare, sp, out)
    ws.used(sp)
    return out


def sample_law_chunk(
    code: LawCode, raw: np.ndarray, spare: np.ndarray, sp: int, out: np.ndarray
) -> int:
    """Fill `out` with one draw per word of `raw` (high 32 bits); returns the spare index."""
    return int(_sample(code.kind, code.prm, code.cap, code.values, code.cum, raw, spare, sp, out))
