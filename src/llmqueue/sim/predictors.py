"""Output-length predictors: what a server believes about a request's output tokens on arrival.

A predictor maps what a server knows when a request arrives to a predicted output length
(tokens). The serving engine orders (``spjf``) and bins (``multibin``) by it; it never changes
how long a request really runs. Spec strings (config and CLI ``--predictor``), parsed by
:func:`parse_predictor`:

- ``oracle``: the true output length;
- ``noisy:sigma=S``: the true length times exp(S*Z), Z standard normal (a log-normal error;
  S -> infinity tends to a size-blind order);
- ``exp``: exponential with the true length as its mean, y = x E, E ~ Exp(1) (the exponential
  predictor of Mitzenmacher's analysis of SPJF, "Scheduling with predictions and the price of
  misprediction", ITCS 2020, and of Mitzenmacher and Shahout's Table 1, arXiv 2503.07545);
- ``uniform:a=A``: uniform on [(1 - A) x, (1 + A) x], 0 <= A <= 1 (a bounded relative error);
- ``buckets:k=K,acc=A`` (or ``pe=P``): a K-class classifier (K >= 2): the true class with
  probability 1 - 2P (1 - P at the two end classes), each neighbouring class with probability P,
  ``acc=A`` meaning P = (1 - A)/2 (the error model of the Multi-Bin paper, arXiv 2412.04504).
  Class edges: SSJF's output-length thresholds 42, 141, 294, 503 tokens for K = 5 (arXiv
  2404.08509), otherwise the equal-probability quantiles of the workload's length law or trace
  (set when the workload is built, :meth:`Predictor.resolved`). ``buckets:edges=E1/E2/..,pe=P``
  names the edges (tokens) itself. The prediction is the predicted class's representative
  length: the midpoint of its edges (the last class: its lower edge plus half the width of the
  class below);
- ``column:NAME``: each trace row's own prediction, read from the trace's column NAME (a CSV
  trace; e.g. another system's published predictions beside the lengths), so it works with
  :class:`~llmqueue.sim.workload.TraceWorkload` and :class:`~llmqueue.sim.workload.ReplayWorkload`
  only;
- ``learned:PATH``: a scikit-learn model trained on trace features (:mod:`llmqueue.predictor`,
  ``llmqueue predictor train``). It needs trace rows (prompt tokens, timestamps, the outputs of
  requests finished earlier), so it works with :class:`~llmqueue.sim.workload.TraceWorkload` and
  :class:`~llmqueue.sim.workload.ReplayWorkload` only, which compute one prediction per row.

Compiled predictors draw their noise from the high 32 bits of one word per request
(:mod:`llmqueue.sim.rng`); they see the true length only to add their error, as the error
models of the companion papers do. The learned one never sees it (:mod:`llmqueue.predictor`).
Every predictor is scored the same way by :func:`llmqueue.predictor.scoring.score_predictions`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numba import njit

from llmqueue.errors import InputError
from llmqueue.predictor.features import HeldOutTrace
from llmqueue.predictor.scoring import SSJF_EDGES
from llmqueue.sim.rng import NOR_F, NOR_K, NOR_W, std_normal, uniform32
from llmqueue.traces import TraceRows

__all__ = [
    "Predictor",
    "Oracle",
    "Noisy",
    "Exponential",
    "Uniform",
    "Buckets",
    "Learned",
    "Column",
    "parse_predictor",
    "predict_chunk",
    "ORACLE",
    "NOISY",
    "BUCKETS",
    "LEARNED",
    "EXP",
    "UNIFORM",
    "KNOWN",
    "row_predictions",
]

ORACLE, NOISY, BUCKETS, LEARNED, EXP, UNIFORM, COLUMN = 0, 1, 2, 3, 4, 5, 6

Quantile = Callable[[np.ndarray], np.ndarray]
Conditional = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Predictor:
    """Base of the compiled predictors: an integer kind, parameters and class edges."""

    @property
    def spec(self) -> str:
        return "oracle"

    @property
    def kind(self) -> int:
        return ORACLE

    @property
    def needs_rows(self) -> bool:
        """True for a predictor computed from trace rows (``learned``), not from the length."""
        return False

    def resolved(self, quantile: Quantile) -> Predictor:
        """This predictor with anything that depends on the length law filled in; `quantile`
        maps probabilities to the law's (or trace's) output-length quantiles (tokens)."""
        return self

    def params(self) -> np.ndarray:
        return np.zeros(2)

    def edges(self) -> np.ndarray:
        return np.zeros(1)

    def values(self) -> np.ndarray:
        return np.zeros(1)

    def conditional(self) -> tuple[Conditional, Conditional] | None:
        """(cdf, ppf) of the prediction given the true length, each called as f(y or v, x)
        (arrays, broadcast; tokens and probabilities), for a prediction with a continuous law
        (the exact SPJF mean, :func:`llmqueue.analytic.priority.spjf_wait`); None otherwise."""
        return None

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

    def conditional(self) -> tuple[Conditional, Conditional] | None:
        if self.sigma == 0:
            return None  # the oracle: an atom at the true length
        from scipy.special import ndtr, ndtri

        sig = self.sigma

        def cdf(y: np.ndarray, x: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore"):
                return ndtr(np.log(np.asarray(y) / np.asarray(x)) / sig)

        def ppf(v: np.ndarray, x: np.ndarray) -> np.ndarray:
            return np.asarray(x) * np.exp(sig * ndtri(v))

        return cdf, ppf


@dataclass(frozen=True)
class Exponential(Predictor):
    """``exp``: y = x E with E ~ Exp(1), an exponential prediction whose mean is the true length
    (module docstring)."""

    @property
    def spec(self) -> str:
        return "exp"

    @property
    def kind(self) -> int:
        return EXP

    def conditional(self) -> tuple[Conditional, Conditional] | None:
        def cdf(y: np.ndarray, x: np.ndarray) -> np.ndarray:
            return -np.expm1(-np.maximum(np.asarray(y), 0.0) / np.asarray(x))

        def ppf(v: np.ndarray, x: np.ndarray) -> np.ndarray:
            return -np.asarray(x) * np.log1p(-np.asarray(v))

        return cdf, ppf


@dataclass(frozen=True)
class Uniform(Predictor):
    """``uniform:a=A``: y uniform on [(1 - a) x, (1 + a) x], a in [0, 1] (module docstring)."""

    a: float = 0.5

    def __post_init__(self) -> None:
        if not (math.isfinite(self.a) and 0.0 <= self.a <= 1.0):
            raise InputError(f"predictor uniform: a must be in [0, 1], got {self.a}")

    @property
    def spec(self) -> str:
        return f"uniform:a={self.a:g}"

    @property
    def kind(self) -> int:
        return UNIFORM

    def params(self) -> np.ndarray:
        return np.array([self.a, 0.0])

    def conditional(self) -> tuple[Conditional, Conditional] | None:
        if self.a == 0:
            return None  # the oracle
        a = self.a

        def cdf(y: np.ndarray, x: np.ndarray) -> np.ndarray:
            return np.clip((np.asarray(y) / np.asarray(x) - (1.0 - a)) / (2.0 * a), 0.0, 1.0)

        def ppf(v: np.ndarray, x: np.ndarray) -> np.ndarray:
            return np.asarray(x) * (1.0 - a + 2.0 * a * np.asarray(v))

        return cdf, ppf


@dataclass(frozen=True)
class Buckets(Predictor):
    """A k-class classifier with neighbour-class errors (probability pe each way).

    ``class_edges`` (tokens, increasing); or ``class_edges = ()`` with ``classes = k``: edges at
    the equal-probability quantiles of the workload's lengths, filled in by :meth:`resolved`."""

    class_edges: tuple[float, ...] = SSJF_EDGES
    pe: float = 0.0
    reps: tuple[float, ...] = field(default=(), repr=False)
    classes: int | None = None

    def __post_init__(self) -> None:
        if not (0.0 <= self.pe <= 0.5):
            raise InputError(f"predictor buckets: pe must be in [0, 0.5], got {self.pe}")
        e = tuple(float(x) for x in self.class_edges)
        if not e:
            k = self.classes
            if not (isinstance(k, int) and not isinstance(k, bool) and k >= 2):
                raise InputError(
                    f"predictor buckets: k must be an integer >= 2 classes, got {self.classes!r}"
                )
            return
        if any(not math.isfinite(x) or x <= 0 for x in e) or list(e) != sorted(set(e)):
            raise InputError(
                f"predictor buckets: edges must be increasing positive token counts, got {list(e)}"
            )
        object.__setattr__(self, "class_edges", e)
        object.__setattr__(self, "classes", len(e) + 1)
        lo = [0.0, *e]
        hi = [*e, e[-1] + (e[-1] - (e[-2] if len(e) > 1 else 0.0))]
        object.__setattr__(self, "reps", tuple((a + b) / 2 for a, b in zip(lo, hi, strict=True)))

    @property
    def is_resolved(self) -> bool:
        return bool(self.class_edges)

    def resolved(self, quantile: Quantile) -> Predictor:
        if self.is_resolved:
            return self
        k = int(self.classes or 0)
        q = np.asarray(quantile(np.arange(1, k) / k), dtype=float)
        edges = tuple(float(x) for x in q)
        if list(edges) != sorted(set(edges)) or edges[0] <= 0:
            raise InputError(
                f"predictor buckets:k={k}: the length law's equal-probability quantiles "
                f"{[round(x, 3) for x in edges]} are not distinct positive token counts "
                "(too many ties); give fewer classes or buckets:edges=E1/E2/.."
            )
        return Buckets(edges, self.pe)

    def _require_edges(self) -> None:
        if not self.is_resolved:
            raise InputError(
                f"predictor buckets:k={self.classes}: its class edges are the workload's length "
                "quantiles; build a workload with it (or give buckets:edges=E1/E2/..)"
            )

    @property
    def spec(self) -> str:
        if not self.is_resolved:
            return f"buckets:k={self.classes},pe={self.pe:g}"
        edges = "/".join(f"{x:g}" for x in self.class_edges)
        return f"buckets:edges={edges},pe={self.pe:g}"

    @property
    def kind(self) -> int:
        return BUCKETS

    def params(self) -> np.ndarray:
        return np.array([self.pe, 0.0])

    def edges(self) -> np.ndarray:
        self._require_edges()
        return np.asarray(self.class_edges, dtype=float)

    def values(self) -> np.ndarray:
        self._require_edges()
        return np.asarray(self.reps, dtype=float)


@dataclass(frozen=True, eq=False)
class Learned(Predictor):
    """``learned:PATH``: a saved :class:`llmqueue.predictor.model.LengthModel`, loaded (and its
    format version checked) when the predictor is made. Predictions come per trace row from
    :meth:`predict_rows`; there is no compiled path (a workload drawn from token laws has no
    features, :class:`~llmqueue.sim.workload.PoissonWorkload` refuses it)."""

    path: str = ""
    model: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.model is None:
            from llmqueue.predictor.model import load_model

            object.__setattr__(self, "model", load_model(self.path, where="--predictor"))

    @property
    def spec(self) -> str:
        return f"learned:{self.path}"

    @property
    def kind(self) -> int:
        return LEARNED

    @property
    def needs_rows(self) -> bool:
        return True

    def predict(self, output: np.ndarray, seed: int | np.random.SeedSequence) -> np.ndarray:
        raise InputError(
            f"--predictor {self.spec}: a learned predictor works from trace rows "
            "(TraceWorkload / ReplayWorkload, --trace), not from output lengths alone"
        )

    def predict_rows(
        self,
        arrival_s: np.ndarray,
        time_of_day_s: np.ndarray,
        prompt_tokens: np.ndarray,
        output_tokens: np.ndarray,
        finish_s: np.ndarray | None = None,
    ) -> np.ndarray:
        """One prediction (tokens) per trace row, rows in arrival order; the outputs serve only
        as the history of requests finished before each arrival (:mod:`llmqueue.predictor`)."""
        rows = TraceRows(arrival_s, time_of_day_s, prompt_tokens, output_tokens, finish_s)
        return np.asarray(self.model.predict_trace(rows), dtype=float)


@dataclass(frozen=True)
class Column(Predictor):
    """``column:NAME``: the prediction each trace row carries in its column NAME (tokens), read
    with the trace (:meth:`llmqueue.sim.workload.TraceWorkload.from_csv`, the CLI's replay);
    no compiled path."""

    column: str = ""

    def __post_init__(self) -> None:
        if not self.column.strip():
            raise InputError("predictor column: expected column:NAME (a column of the trace)")

    @property
    def spec(self) -> str:
        return f"column:{self.column}"

    @property
    def kind(self) -> int:
        return COLUMN

    @property
    def needs_rows(self) -> bool:
        return True

    def predict(self, output: np.ndarray, seed: int | np.random.SeedSequence) -> np.ndarray:
        raise InputError(
            f"--predictor {self.spec}: predictions come from the trace's column "
            f"{self.column!r} (--trace PATH), not from output lengths"
        )


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


KNOWN = (
    "oracle, noisy:sigma=S, exp, uniform:a=A, buckets:k=K,acc=A (or edges=E1/E2/..,pe=P), "
    "column:NAME, learned:PATH"
)


def parse_predictor(spec: str) -> Predictor:
    """``oracle``, ``noisy:sigma=S``, ``exp``, ``uniform:a=A``, ``buckets:k=K,acc=A`` (or
    ``pe=P``; or ``edges=E1/E2/..`` for K), ``learned:PATH`` (module docstring); InputError names
    the bad part and what is allowed."""
    name, _, body = spec.strip().partition(":")
    if name == "column":
        return Column(body.strip())
    if name == "learned":
        path = body.strip()
        if not path:
            raise InputError(f"--predictor {spec!r}: expected learned:PATH (a saved model)")
        if not Path(path).is_file():
            raise InputError(
                f"--predictor {spec!r}: model file {path!r} does not exist "
                "(make one with `llmqueue predictor train`)"
            )
        return Learned(path)
    kv = _kv(spec, body)
    if name == "oracle":
        if kv:
            raise InputError(f"predictor {spec!r}: oracle takes no parameters")
        return Oracle()
    if name == "noisy":
        if set(kv) != {"sigma"}:
            raise InputError(f"predictor {spec!r}: expected noisy:sigma=S (S >= 0)")
        return Noisy(_num(spec, "sigma", kv["sigma"]))
    if name == "exp":
        if kv:
            raise InputError(f"predictor {spec!r}: exp takes no parameters")
        return Exponential()
    if name == "uniform":
        if set(kv) != {"a"}:
            raise InputError(f"predictor {spec!r}: expected uniform:a=A (A in [0, 1])")
        return Uniform(_num(spec, "a", kv["a"]))
    if name == "buckets":
        if (
            ("edges" in kv) == ("k" in kv)
            or not set(kv) <= {"edges", "k", "pe", "acc"}
            or ("pe" in kv and "acc" in kv)
        ):
            raise InputError(
                f"predictor {spec!r}: expected buckets:k=K,acc=A (K >= 2 classes, A in [0, 1]) "
                "or buckets:edges=E1/E2/..,pe=P (P in [0, 0.5])"
            )
        if "acc" in kv:
            acc = _num(spec, "acc", kv["acc"])
            if not 0.0 <= acc <= 1.0:
                raise InputError(f"predictor {spec!r}: acc must be in [0, 1]")
            pe = (1.0 - acc) / 2.0
        else:
            pe = _num(spec, "pe", kv.get("pe", "0"))
        if "k" in kv:
            k = _num(spec, "k", kv["k"])
            if not (k == int(k) and k >= 2):
                raise InputError(f"predictor {spec!r}: k must be an integer >= 2 classes")
            if int(k) == len(SSJF_EDGES) + 1:
                return Buckets(SSJF_EDGES, pe)
            return Buckets((), pe, classes=int(k))
        edges = tuple(_num(spec, "edges", x) for x in kv["edges"].split("/"))
        return Buckets(edges, pe)
    raise InputError(f"predictor {spec!r}: unknown; known: {KNOWN}")


@njit(cache=True, nogil=True)
def predict_chunk(kind, prm, edges, values, output, raw, spare, sp, out):  # type: ignore[no-untyped-def]  # noqa: ANN001
    """Predictions for output[:] into out[:], noise from the high 32 bits of raw[:]; returns
    the spare index. An unknown kind (or ``LEARNED``, which has no compiled path) is an error."""
    n = output.size
    k = edges.size + 1
    for j in range(n):
        x = output[j]
        if kind == ORACLE:
            out[j] = x
        elif kind == NOISY:
            z, sp = std_normal(np.uint32(raw[j] >> np.uint64(32)), NOR_K, NOR_W, NOR_F, spare, sp)
            out[j] = x * math.exp(prm[0] * z)
        elif kind == EXP:
            out[j] = -x * math.log(uniform32(np.uint32(raw[j] >> np.uint64(32))))
        elif kind == UNIFORM:
            u = uniform32(np.uint32(raw[j] >> np.uint64(32)))
            out[j] = x * (1.0 - prm[0] + 2.0 * prm[0] * u)
        elif kind == BUCKETS:
            c = np.searchsorted(edges, x, side="right")
            u = uniform32(np.uint32(raw[j] >> np.uint64(32)))
            pe = prm[0]
            if u < pe:
                c = c - 1 if c > 0 else c
            elif u < 2.0 * pe:
                c = c + 1 if c < k - 1 else c
            out[j] = values[c]
        else:
            raise ValueError("predict_chunk: unknown predictor kind")
    return sp


def row_predictions(
    predictor: Predictor, trace: HeldOutTrace, seed: int | np.random.SeedSequence
) -> np.ndarray:
    """One prediction per held-out row of `trace`: a learned model reads the whole trace
    (history before each arrival) and keeps the held-out rows; a compiled predictor draws its
    error per row (its class edges from the held-out outputs' quantiles)."""
    test = trace.test
    if isinstance(predictor, Learned):
        return np.asarray(predictor.model.predict_trace(trace.rows), dtype=float)[trace.split :]
    pred = predictor.resolved(lambda q: np.quantile(test.output_tokens, q))
    return pred.predict(test.output_tokens, seed)
