"""Output-length predictors: what a server believes about a request's output tokens on arrival.

A predictor maps what a server knows when a request arrives to a predicted output length
(tokens). The serving engine orders (``spjf``) and bins (``multibin``) by it; it never changes
how long a request really runs. Spec strings (config and CLI ``--predictor``):

- ``oracle``: the true output length;
- ``noisy:sigma=S``: the true length times exp(S*Z), Z standard normal (a log-normal error;
  S -> infinity tends to a size-blind order);
- ``buckets:edges=E1/E2/...,pe=P`` (or ``acc=A`` with pe = (1 - A)/2): a k-class classifier
  with class edges E1 < E2 < ... (tokens; k = len(edges) + 1): the true class with probability
  1 - 2P (1 - P at the two end classes), each neighbouring class with probability P (the error
  model of the Multi-Bin paper, arXiv 2412.04504); the prediction is the predicted class's
  representative length (the midpoint of its edges; the last class: its lower edge plus the
  width of the class below).

Compiled predictors draw their noise from the high 32 bits of one word per request
(:mod:`llmqueue.sim.rng`); the predictor sees the true length only to add its error, as the
error models of the companion papers do. Learned predictors (trained on trace features) are
Python objects with a ``predict(features)`` method (the SSJF study).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.sim.rng import NOR_F, NOR_K, NOR_W, std_normal, uniform32

__all__ = [
    "Predictor",
    "Oracle",
    "Noisy",
    "Buckets",
    "parse_predictor",
    "predict_chunk",
    "ORACLE",
    "NOISY",
    "BUCKETS",
]

ORACLE, NOISY, BUCKETS = 0, 1, 2


@dataclass(frozen=True)
class Predictor:
    """Base of the compiled predictors: an integer kind, parameters and class edges."""

    @property
    def spec(self) -> str:
        return "oracle"

    @property
    def kind(self) -> int:
        return ORACLE

    def params(self) -> np.ndarray:
        return np.zeros(2)

    def edges(self) -> np.ndarray:
        return np.zeros(1)

    def values(self) -> np.ndarray:
        return np.zeros(1)

    def predict(self, output: np.ndarray, seed: int | np.random.SeedSequence) -> np.ndarray:
        """Predictions for true lengths `output` (tests and tables; the engine uses the same
        compiled path per chunk)."""
        from llmqueue.sim.rng import WordStream

        ws = WordStream(seed, 64)
        raw = ws.words(output.size)
        spare, sp = ws.spare()
        out = np.empty(output.size)
        predict_chunk(
            self.kind,
            self.params(),
            self.edges(),
            self.values(),
            np.asarray(output, dtype=float),
            raw,
            spare,
            sp,
            out,
        )
        return out


@dataclass(frozen=True)
class Oracle(Predictor):
    """The true output length."""


@dataclass(frozen=True)
class Noisy(Predictor):
    sigma: float = 1.0
    spec: str = ""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sigma) and self.sigma >= 0):
            raise InputError(
                f"predictor noisy: sigma must be a finite number >= 0, got {self.sigma}"
            )
        if not self.spec:
            object.__setattr__(self, "spec", f"noisy:sigma={self.sigma:g}")

    @property
    def kind(self) -> int:
        return NOISY

    def params(self) -> np.ndarray:
        return np.array([self.sigma, 0.0])


@dataclass(frozen=True)
class Buckets(Predictor):
    """A k-class classifier with neighbour-class errors (probability pe each way)."""

    class_edges: tuple[float, ...] = (42.0, 141.0, 294.0, 503.0)
    pe: float = 0.0
    reps: tuple[float, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        e = self.class_edges
        if (
            len(e) < 1
            or any(not math.isfinite(x) or x <= 0 for x in e)
            or list(e) != sorted(set(e))
        ):
            raise InputError(
                f"predictor buckets: edges must be increasing positive token counts, got {list(e)}"
            )
        if not (0.0 <= self.pe <= 0.5):
            raise InputError(f"predictor buckets: pe must be in [0, 0.5], got {self.pe}")
        lo = [0.0, *e]
        hi = [*e, e[-1] + (e[-1] - (e[-2] if len(e) > 1 else 0.0))]
        object.__setattr__(self, "reps", tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True)))

    @property
    def spec(self) -> str:
        edges = "/".join(f"{x:g}" for x in self.class_edges)
        return f"buckets:edges={edges},pe={self.pe:g}"

    @property
    def kind(self) -> int:
        return BUCKETS

    def params(self) -> np.ndarray:
        return np.array([self.pe, 0.0])

    def edges(self) -> np.ndarray:
        return np.asarray(self.class_edges, dtype=float)

    def values(self) -> np.ndarray:
        return np.asarray(self.reps, dtype=float)


def _kv(spec: str, body: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in body.split(","))):
        k, eq, v = item.partition("=")
        if not eq:
            raise InputError(f"predictor {spec!r}: expected KEY=VALUE, got {item!r}")
        out[k.strip()] = v.strip()
    return out


def _num(spec: str, key: str, val: str) -> float:
    try:
        return float(val)
    except ValueError:
        raise InputError(f"predictor {spec!r}: {key}={val!r} is not a number") from None


def parse_predictor(spec: str) -> Predictor:
    """``oracle``, ``noisy:sigma=S`` or ``buckets:edges=E1/E2/..,pe=P`` (or ``acc=A``)."""
    name, _, body = spec.strip().partition(":")
    kv = _kv(spec, body)
    if name == "oracle":
        if kv:
            raise InputError(f"predictor {spec!r}: oracle takes no parameters")
        return Oracle()
    if name == "noisy":
        if set(kv) != {"sigma"}:
            raise InputError(f"predictor {spec!r}: expected noisy:sigma=S (S >= 0)")
        return Noisy(_num(spec, "sigma", kv["sigma"]))
    if name == "buckets":
        if (
            "edges" not in kv
            or not set(kv) <= {"edges", "pe", "acc"}
            or ("pe" in kv and "acc" in kv)
        ):
            raise InputError(
                f"predictor {spec!r}: expected buckets:edges=E1/E2/...,pe=P (or acc=A)"
            )
        edges = tuple(_num(spec, "edges", x) for x in kv["edges"].split("/"))
        if "acc" in kv:
            acc = _num(spec, "acc", kv["acc"])
            if not 0.0 <= acc <= 1.0:
                raise InputError(f"predictor {spec!r}: acc must be in [0, 1]")
            pe = (1.0 - acc) / 2.0
        else:
            pe = _num(spec, "pe", kv.get("pe", "0"))
        return Buckets(edges, pe)
    raise InputError(
        f"predictor {spec!r}: unknown; known: oracle, noisy:sigma=S, buckets:edges=E1/E2/..,pe=P"
    )


@njit(cache=True, nogil=True)
def predict_chunk(kind, prm, edges, values, output, raw, spare, sp, out):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Predictions for output[:] into out[:], noise from the high 32 bits of raw[:]; returns
    the spare index."""
    n = output.size
    k = edges.size + 1
    for j in range(n):
        x = output[j]
        if kind == 0:
            out[j] = x
        elif kind == 1:
            z, sp = std_normal(np.uint32(raw[j] >> np.uint64(32)), NOR_K, NOR_W, NOR_F, spare, sp)
            out[j] = x * math.exp(prm[0] * z)
        else:
            c = np.searchsorted(edges, x, side="right")
            u = uniform32(np.uint32(raw[j] >> np.uint64(32)))
            pe = prm[0]
            if u < pe:
                c = c - 1 if c > 0 else c
            elif u < 2.0 * pe:
                c = c + 1 if c < k - 1 else c
            out[j] = values[c]
    return sp
