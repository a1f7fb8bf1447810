"""The one random-number path of every simulator: PCG64 words turned into variates by ziggurats.

Each simulator draws 64-bit words from a NumPy ``Generator(PCG64(seed))`` in chunks
(:class:`WordStream`) and turns them into variates inside compiled code:

- a standard exponential from 32 bits and a standard normal from 32 bits, both by a 256-layer
  ziggurat (Marsaglia & Tsang 2000; the 32-bit variant NumPy's float32 samplers use, 23-bit
  mantissa): about 98% of draws take one table look-up;
- the rare rejections (about 2%) and their retries take words from a *spare* stream drawn from
  the same generator, refilled between chunks with several times more words than a chunk can
  need (:meth:`WordStream.spare`);
- a uniform on (0, 1) from 32 bits: ``(r + 0.5) * 2**-32``.

The same seed, chunk size and arguments give bit-identical results. Seeds are ints >= 0 or NumPy
``SeedSequence`` objects; :func:`child_seeds` derives independent children without mutating one.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np
from numba import njit

from llmqueue.errors import InputError

__all__ = [
    "WordStream",
    "check_seed",
    "child_seeds",
    "std_exp",
    "std_normal",
    "uniform32",
    "spare_uniform",
    "EXP_K",
    "EXP_W",
    "EXP_F",
    "NOR_K",
    "NOR_W",
    "NOR_F",
]

SPARE_MARGIN = 4096


def _ziggurat_tables(
    f: Any, f_inv: Any, r: float, tail_area: float, bits: int = 23, n: int = 256
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """k (uint32), w, f tables: index 0 is the base strip (with the tail), n-1 the bottom layer."""
    m = float(2**bits)
    v = r * f(r) + tail_area  # area of each layer
    k = np.zeros(n, dtype=np.uint32)
    w = np.zeros(n)
    ft = np.zeros(n)
    q = v / f(r)
    k[0] = np.uint32((r / q) * m)
    w[0] = q / m
    w[n - 1] = r / m
    ft[0] = 1.0
    ft[n - 1] = f(r)
    x, prev = r, r
    for i in range(n - 2, 0, -1):
        x = f_inv(v / x + f(x))
        k[i + 1] = np.uint32((x / prev) * m)
        prev = x
        ft[i] = f(x)
        w[i] = x / m
    k[1] = 0
    return k, w, ft


_NOR_R = 3.6541528853610087963519472518
_EXP_R = 7.69711747013104972
NOR_K, NOR_W, NOR_F = _ziggurat_tables(
    lambda x: math.exp(-0.5 * x * x),
    lambda y: math.sqrt(-2.0 * math.log(y)),
    _NOR_R,
    math.sqrt(math.pi / 2.0) * math.erfc(_NOR_R / math.sqrt(2.0)),
)
EXP_K, EXP_W, EXP_F = _ziggurat_tables(
    lambda x: math.exp(-x), lambda y: -math.log(y), _EXP_R, math.exp(-_EXP_R)
)

_U53 = 1.0 / 9007199254740992.0  # 2**-53
_U32 = 1.0 / 4294967296.0  # 2**-32


@njit(cache=True, nogil=True, inline="always")
def spare_word(spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Next 64-bit word of the spare stream (rejection paths only).

    The caller keeps at least SPARE_MARGIN words ahead; the wrap-around only guards memory safety.
    """
    if sp >= spare.size:
        sp = 0
    return spare[sp], sp + 1


@njit(cache=True, nogil=True, inline="always")
def spare_uniform(spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Uniform on (0, 1] with 53 bits, from the spare stream."""
    w, sp = spare_word(spare, sp)
    return ((w >> np.uint64(11)) + np.uint64(1)) * _U53, sp


@njit(cache=True, nogil=True, inline="always")
def uniform32(r32):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Uniform on (0, 1) from 32 random bits: (r + 1/2) / 2**32."""
    return (float(r32) + 0.5) * _U32


@njit(cache=True, nogil=True, inline="always")
def std_exp(r32, kt, wt, ft, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Standard exponential from 32 random bits (ziggurat); rejections draw from `spare`."""
    while True:
        ri = r32 >> np.uint32(1)
        idx = ri & np.uint32(0xFF)
        ri = ri >> np.uint32(8)
        x = ri * wt[idx]
        if ri < kt[idx]:
            return x, sp
        if idx == 0:  # tail beyond r: r + Exp(1) (memoryless)
            u, sp = spare_uniform(spare, sp)
            return _EXP_R - math.log(u), sp
        u, sp = spare_uniform(spare, sp)
        if (ft[idx - 1] - ft[idx]) * u + ft[idx] < math.exp(-x):
            return x, sp
        w, sp = spare_word(spare, sp)
        r32 = np.uint32(w & np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True, inline="always")
def std_normal(r32, kt, wt, ft, spare, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Standard normal from 32 random bits (ziggurat); rejections draw from `spare`."""
    while True:
        idx = r32 & np.uint32(0xFF)
        sign = (r32 >> np.uint32(8)) & np.uint32(1)
        rabs = r32 >> np.uint32(9)
        x = rabs * wt[idx]
        if sign:
            x = -x
        if rabs < kt[idx]:
            return x, sp
        if idx == 0:  # tail beyond r (Marsaglia 1964)
            while True:
                u1, sp = spare_uniform(spare, sp)
                u2, sp = spare_uniform(spare, sp)
                xx = -math.log(u1) / _NOR_R
                yy = -math.log(u2)
                if yy + yy > xx * xx:
                    return (-(_NOR_R + xx) if sign else _NOR_R + xx), sp
        u, sp = spare_uniform(spare, sp)
        if (ft[idx - 1] - ft[idx]) * u + ft[idx] < math.exp(-0.5 * x * x):
            return x, sp
        w, sp = spare_word(spare, sp)
        r32 = np.uint32(w & np.uint64(0xFFFFFFFF))


@njit(cache=True, nogil=True)
def fill_standard(kind, raw, spare, out, sp):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Test hook: the standard exponential (kind 0, low 32 bits of each word) or normal (kind 1,
    high 32 bits) draws, one per word of `raw`, the rejections reading `spare` from index `sp`
    on; returns the spare index after them."""
    for j in range(raw.size):
        r = raw[j]
        if kind == 0:
            out[j], sp = std_exp(
                np.uint32(r & np.uint64(0xFFFFFFFF)), EXP_K, EXP_W, EXP_F, spare, sp
            )
        else:
            out[j], sp = std_normal(np.uint32(r >> np.uint64(32)), NOR_K, NOR_W, NOR_F, spare, sp)
    return sp


def check_seed(seed: Any) -> None:
    """A seed is an int >= 0 or a NumPy SeedSequence (InputError otherwise)."""
    ok = isinstance(seed, np.random.SeedSequence) or (
        isinstance(seed, numbers.Integral) and not isinstance(seed, bool) and int(seed) >= 0
    )
    if not ok:
        raise InputError(f"seed must be an integer >= 0 or a numpy SeedSequence, got {seed!r}")


def child_seeds(seed: int | np.random.SeedSequence, n: int) -> list[np.random.SeedSequence]:
    """n independent child seeds; unlike SeedSequence.spawn it does not mutate `seed`."""
    check_seed(seed)
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    base = tuple(ss.spawn_key)
    return [
        np.random.SeedSequence(ss.entropy, spawn_key=base + (i,), pool_size=ss.pool_size)
        for i in range(n)
    ]


class WordStream:
    """64-bit words from ``Generator(PCG64(seed))``: main words per chunk and a spare stream.

    ``words(n)`` returns the next n main words; :meth:`spare` returns the spare buffer and the
    index to read from, refilled (with ``4 * need`` words) when fewer than ``need`` remain.
    """

    def __init__(self, seed: int | np.random.SeedSequence, need: int) -> None:
        check_seed(seed)
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.need = int(need) + SPARE_MARGIN
        self._spare = np.zeros(0, dtype=np.uint64)
        self._sp = 0

    def words(self, n: int) -> np.ndarray:
        return self.rng.bit_generator.random_raw(int(n))

    def spare(self) -> tuple[np.ndarray, int]:
        if self._spare.size - self._sp < self.need:
            self._spare = self.rng.bit_generator.random_raw(4 * self.need)
            self._sp = 0
        return self._spare, self._sp

    def used(self, sp: int) -> None:
        """Record the spare index a kernel returned."""
        self._sp = int(sp)
