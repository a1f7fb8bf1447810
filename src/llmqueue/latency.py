"""Latency laws: how long the server takes for one request or one batch.

- :class:`LinearLatency`: one request at a time, S = a*N + b0 (Eq. 3-5; a in s/token, b0 in s).
- :class:`BatchLatency`: a batch of b requests, T_b = t1(b) + t2(b)*L_b with
  t1(b) = k1*b + k2 (first token, s) and t2(b) = k3*b + k4 (each later token, s/token), Eq. (18).
  N and L_b count the tokens after the first (docs/equations.md): no "- 1" anywhere.
- :class:`StepLaw`: one iteration of a continuous-batching server,
  step = c0 + c_tok*(decode_seqs + prefill_tokens) + c_ctx*context_tokens (s): linear layers scale
  with the tokens an iteration processes, attention with the KV cache it reads.
- :class:`ShapedStepLaw`: a step law with the engine's shape, step = g(decode_seqs) +
  c_pre*prefill_tokens + c_ctx*context_tokens, g piecewise linear in the number of decoding
  sequences (knots from a dense small-batch calibration grid), prefill tokens priced apart;
  :func:`~llmqueue.latency_fits.fit_shaped_step_law` fits it (non-negative least squares on hat
  functions).
- :class:`SplitStepLaw`: a shaped law that prices decode-only iterations and iterations with a
  prefill apart: g(decode_seqs) + c_ctx*context_tokens for the first, g(0) + c_pre*(decode_seqs +
  prefill_tokens) + c_ctx_pre*context_tokens + c_attn*prefill_tokens*context_tokens for the second
  (the prefill's attention over the context it reads); :func:`~llmqueue.latency_fits.fit_split_step_law`
  fits it.
- the fits of these laws to measurements are :mod:`llmqueue.latency_fits`'s.

Named config profiles (a law by name, from config values or a fit.json) are resolved by
:mod:`llmqueue.profiles`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from llmqueue.errors import InputError
from llmqueue.lazy import lazy_module
from llmqueue.limits import MAX_TIME_S
from llmqueue.tokens import TokenLaw

# SciPy is imported on first use, so that parsing law specs and profiles (the Snakefile's
# config check, on every run) does not pay its import time.
stats = lazy_module("scipy.stats")

__all__ = [
    "LinearLatency",
    "BatchLatency",
    "StepLaw",
    "ShapedStepLaw",
    "SplitStepLaw",
    "PackedStepLaw",
    "parse_step_law",
    "batch_law_from_step",
    "parse_linear_latency",
    "parse_batch_time",
    "service_moments",
]


def _check_solved_from(name: str, verdict: str, solved_from: tuple[str, ...]) -> None:
    """A back-solved profile names the claims it was solved from, and only such a profile does."""
    if not isinstance(solved_from, tuple) or not all(isinstance(c, str) for c in solved_from):
        raise InputError(
            f"profile {name!r}: solved_from must be a tuple of claim ids, got {solved_from!r}"
        )
    if (verdict == "back_solved") != bool(solved_from):
        raise InputError(
            f"profile {name!r}: verdict back_solved needs solved_from (the claim ids a parameter "
            f"was solved from), and solved_from needs verdict back_solved; got verdict "
            f"{verdict!r}, solved_from {list(solved_from)}"
        )


def _check_times(what: str, law: Any, keys: tuple[str, ...]) -> None:
    """Each field of `law` named in `keys` is a time in [0, MAX_TIME_S] (s, s/token, ...);
    InputError naming `what` (the kind of law), the law's name and the field."""
    for key in keys:
        v = getattr(law, key)
        if not (math.isfinite(v) and 0 <= v <= MAX_TIME_S):
            raise InputError(
                f"{what} {law.name!r}: {key} must lie in [0, {MAX_TIME_S:g}] (a time), got {v}"
            )


@dataclass(frozen=True)
class LinearLatency:
    """Single-request service time S = a*N + b0 (Eq. 3); a s/token, b0 s.

    ``verdict`` is ``"independent"`` for a profile fitted from data or set a priori, and
    ``"back_solved"`` for one solved from claims; ``solved_from`` names those claim ids (only
    they get the verdict ``back_solved``, :class:`llmqueue.claims.ClaimBook`).
    """

    a_s_per_token: float
    b0_s: float
    name: str = "custom"
    source: str = "given"
    verdict: str = "independent"
    solved_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_solved_from(self.name, self.verdict, self.solved_from)
        if not (math.isfinite(self.a_s_per_token) and 0 <= self.a_s_per_token <= MAX_TIME_S):
            raise InputError(
                f"latency profile {self.name!r}: a must lie in [0, {MAX_TIME_S:g}] s/token, got "
                f"{self.a_s_per_token}"
            )
        if not (math.isfinite(self.b0_s) and 0 <= self.b0_s <= MAX_TIME_S):
            raise InputError(
                f"latency profile {self.name!r}: b0 must lie in [0, {MAX_TIME_S:g}] s, got {self.b0_s}"
            )
        if self.a_s_per_token == 0 and self.b0_s == 0:
            raise InputError(f"latency profile {self.name!r}: a and b0 cannot both be 0")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def service_moments(
    law: TokenLaw, latency: LinearLatency, limit: float = math.inf
) -> tuple[float, float]:
    """(E[S], E[S^2]) in (s, s^2) for S = a*min(N, l) + b0, Eq. (3)-(5)."""
    m1 = float(law.clipped_moment(limit, 1))
    m2 = float(law.clipped_moment(limit, 2))
    a, b0 = latency.a_s_per_token, latency.b0_s
    return a * m1 + b0, a * a * m2 + 2 * a * b0 * m1 + b0 * b0


@dataclass(frozen=True)
class BatchLatency:
    """Batch time T_b = (k1*b + k2) + (k3*b + k4)*L_b, Eq. (18). Units: s and s/token.

    ``verdict`` and ``solved_from`` as for :class:`LinearLatency`."""

    k1: float
    k2: float
    k3: float
    k4: float
    name: str = "custom"
    source: str = "given"
    verdict: str = "independent"
    solved_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_solved_from(self.name, self.verdict, self.solved_from)
        _check_times("batch latency profile", self, ("k1", "k2", "k3", "k4"))
        if self.k3 == 0 and self.k4 == 0:
            raise InputError(f"batch latency profile {self.name!r}: k3 and k4 cannot both be 0")

    def t1(self, b: ArrayLike) -> Any:
        """First-token time t1(b) = k1*b + k2 (s)."""
        return self.k1 * np.asarray(b, dtype=float) + self.k2

    def t2(self, b: ArrayLike) -> Any:
        """Per-token decode time t2(b) = k3*b + k4 (s/token)."""
        return self.k3 * np.asarray(b, dtype=float) + self.k4

    def batch_time(self, b: ArrayLike, max_tokens: ArrayLike) -> Any:
        """T_b for batch size b whose longest reply has L_b = max_tokens tokens (after the first)."""
        return self.t1(b) + self.t2(b) * np.asarray(max_tokens, dtype=float)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StepLaw:
    """Iteration time of a continuous-batching server (seconds).

    ``step(decode_seqs, prefill_tokens, context_tokens) = c0 + c_tok*(decode_seqs + prefill_tokens)
    + c_ctx*context_tokens``: `decode_seqs` sequences each get one token, `prefill_tokens` prompt
    tokens are prefilled, and attention reads `context_tokens` tokens of KV cache in all (the sum of
    the running sequences' contexts). c0 in s, c_tok in s/token, c_ctx in s per cached token read.
    ``verdict`` names where the numbers come from (predicted, measured, measured-kernels, given).
    """

    c0_s: float
    c_tok_s: float
    c_ctx_s: float
    name: str = "custom"
    source: str = "given"
    verdict: str = "independent"

    def __post_init__(self) -> None:
        _check_times("step law", self, ("c0_s", "c_tok_s", "c_ctx_s"))
        if self.c0_s == 0 and self.c_tok_s == 0:
            raise InputError(f"step law {self.name!r}: c0 and c_tok cannot both be 0")

    def step(
        self, decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike
    ) -> Any:
        """Seconds for one iteration."""
        d = np.asarray(decode_seqs, dtype=float)
        p = np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(context_tokens, dtype=float)
        return self.c0_s + self.c_tok_s * (d + p) + self.c_ctx_s * c

    def scaled(self, factor: float, name: str | None = None) -> StepLaw:
        """The same law on a machine `factor` times as slow (every iteration's time x factor;
        `factor` > 0, dimensionless): a speed measured elsewhere put on a fitted shape."""
        f = float(factor)
        if not (math.isfinite(f) and f > 0):
            raise InputError(f"step law {self.name!r}: a speed factor must be > 0, got {factor}")
        return replace(self, name=name or f"{self.name} x {f:.4g}", **self._scaled_times(f))

    def _scaled_times(self, f: float) -> dict[str, Any]:
        """Every time field of the law multiplied by f (for :meth:`scaled`)."""
        return {"c0_s": self.c0_s * f, "c_tok_s": self.c_tok_s * f, "c_ctx_s": self.c_ctx_s * f}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ShapedStepLaw(StepLaw):
    """A step law that follows an engine's measured iteration times across batch sizes (s).

    ``step(d, p, c) = g(d) + c_pre*p + c_ctx*c``: g(d), the fixed and per-sequence part of an
    iteration that decodes d sequences, is piecewise linear through ``(knots[k], values_s[k])``
    (decoding-sequence counts, the first 0; g(0) is the fixed cost of an iteration that only
    prefills) and continues beyond the last knot with slope ``c_tok_s`` (s per sequence); prefill
    tokens cost ``c_pre_s`` each (s/token), the KV cache read ``c_ctx_s`` per cached token. The
    linear :class:`StepLaw` is the case of two knots with g(d) = c0 + c_tok*d and c_pre = c_tok.
    ``c0_s`` is g(0). Why: on a CPU engine the decode step is not linear in the batch (19.8 ms at
    1 sequence, 23.6 at 2, 20.0 at 3-4 were measured), and a single c_tok prices a prefill token
    and a decoding sequence alike.
    """

    c_pre_s: float = 0.0
    knots: tuple[int, ...] = ()
    values_s: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        k, v = self.knots, self.values_s
        if len(k) < 2 or len(k) != len(v):
            raise InputError(
                f"shaped step law {self.name!r}: knots and values_s must have the same length >= 2"
            )
        if k[0] != 0 or any(int(x) != x or x < 0 for x in k) or list(k) != sorted(set(k)):
            raise InputError(
                f"shaped step law {self.name!r}: knots are increasing whole sequence counts from 0, "
                f"got {list(k)}"
            )
        if k[-1] > 1 << 16:
            raise InputError(f"shaped step law {self.name!r}: knots above 65536 sequences")
        for key, x in (("c_pre_s", self.c_pre_s), *(("values_s", y) for y in v)):
            if not (math.isfinite(x) and 0 <= x <= MAX_TIME_S):
                raise InputError(
                    f"shaped step law {self.name!r}: {key} must lie in [0, {MAX_TIME_S:g}] s, got {x}"
                )
        if v[0] != self.c0_s:
            raise InputError(f"shaped step law {self.name!r}: c0_s must equal g(0) = values_s[0]")

    def decode_part(self, decode_seqs: ArrayLike) -> Any:
        """g(d) (s): interpolated between the knots, extended beyond the last with c_tok."""
        d = np.asarray(decode_seqs, dtype=float)
        last = float(self.knots[-1])
        inside = np.interp(d, np.asarray(self.knots, dtype=float), np.asarray(self.values_s))
        return np.where(d > last, self.values_s[-1] + self.c_tok_s * (d - last), inside)

    def table(self) -> np.ndarray:
        """g(0), g(1), ..., g(last knot): the dense table the compiled engine reads."""
        return np.asarray(self.decode_part(np.arange(int(self.knots[-1]) + 1)), dtype=float)

    def step(
        self, decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike
    ) -> Any:
        p = np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(context_tokens, dtype=float)
        return self.decode_part(decode_seqs) + self.c_pre_s * p + self.c_ctx_s * c

    def _scaled_times(self, f: float) -> dict[str, Any]:
        """As :meth:`StepLaw._scaled_times`, the knot values and the prefill price too."""
        return {
            **super()._scaled_times(f),
            "c0_s": self.values_s[0] * f,
            "c_pre_s": self.c_pre_s * f,
            "values_s": tuple(v * f for v in self.values_s),
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["knots"] = list(self.knots)
        d["values_s"] = list(self.values_s)
        return d


@dataclass(frozen=True)
class StaircaseStepLaw(StepLaw):
    """Dai, Li and Peng's staircase iteration time (arXiv 2504.07347, Sec. 2): an iteration of
    n = decode_seqs + prefill_tokens tokens takes ``c0_s + stair_s * ceil(n / stair_tokens)``
    (+ ``c_ctx_s`` per cached token read, 0 in their fit): a GPU kernel's time steps up each time
    the batch's tokens pass a multiple of the tile width (their CodeLlama-34B fit: c0 = 11.28 ms,
    stair = 35.47 ms, 128 tokens). ``c_tok_s`` is the staircase's mean slope, stair_s /
    stair_tokens (what a capacity estimate reads); :meth:`of` sets it. An empty iteration costs c0.
    """

    stair_s: float = 0.0
    stair_tokens: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_times("staircase step law", self, ("stair_s",))
        k = self.stair_tokens
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1 << 20:
            raise InputError(
                f"staircase step law {self.name!r}: stair_tokens must be a whole number of tokens "
                f"in [1, {1 << 20}], got {k!r}"
            )
        if not math.isclose(self.c_tok_s, self.stair_s / k, rel_tol=1e-12, abs_tol=1e-300):
            raise InputError(
                f"staircase step law {self.name!r}: c_tok_s must be stair_s / stair_tokens = "
                f"{self.stair_s / k:g} s/token (build it with StaircaseStepLaw.of)"
            )

    @classmethod
    def of(
        cls,
        c0_s: float,
        stair_s: float,
        stair_tokens: int,
        c_ctx_s: float = 0.0,
        name: str = "staircase",
        source: str = "given",
    ) -> StaircaseStepLaw:
        """The law c0 + stair * ceil(n / stair_tokens) + c_ctx * context (s, s, tokens, s/token)."""
        k = int(stair_tokens) if float(stair_tokens) == int(stair_tokens) else stair_tokens
        return cls(
            float(c0_s), float(stair_s) / float(k), float(c_ctx_s), name, source,
            stair_s=float(stair_s), stair_tokens=k,  # type: ignore[arg-type]
        )  # fmt: skip

    def step(
        self, decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike
    ) -> Any:
        n = np.asarray(decode_seqs, dtype=float) + np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(context_tokens, dtype=float)
        return self.c0_s + self.stair_s * np.ceil(n / self.stair_tokens) + self.c_ctx_s * c

    def _scaled_times(self, f: float) -> dict[str, Any]:
        return {**super()._scaled_times(f), "stair_s": self.stair_s * f}


@dataclass(frozen=True)
class SplitStepLaw(ShapedStepLaw):
    """A shaped step law that prices decode-only iterations and iterations with a prefill apart (s).

    ``step(d, p, c)``:

    - decode-only (p = 0): g(d) + c_ctx*c, as :class:`ShapedStepLaw` (g through the knots, slope
      ``c_tok_s`` beyond the last; ``c_ctx_s`` s per cached token read by the decodes);
    - with a prefill (p > 0): g(0) + c_pre*(d + p) + c_ctx_pre*c + c_attn*p*c. g(0) = ``c0_s`` is
      the fixed cost of an iteration that prefills; the d decoding sequences are priced as
      prefill tokens (``c_pre_s`` s/token: the forward pass runs over the d + p tokens together,
      so the small-batch decode shape g does not apply); ``c_ctx_pre_s`` s per context token of
      the iteration (decode and prefill contexts together); ``c_attn_s`` s per (prefill token x
      context token): the prefill's attention over the context it reads, quadratic in a prompt
      prefilled whole (one prompt of P tokens alone: p = c = P, the term c_attn*P^2). Beside
      other prompts p*c over-counts the pairs (k prompts of P tokens: k^2 P^2 for k P^2), so a
      simulated queue that admits more prompts at once the longer it grows prices its iterations
      ever higher; the attention term is an option (0 by default), not the validated form.

    Why: with one decode curve for both kinds of iteration, the iterations of one decode beside a
    long prompt pulled g(1) down, and the deep model's calibration priced its own 1-sequence
    decode steps 13-19% low at every context (:mod:`llmqueue.studies.validation.law_form`
    compares the forms). With c_ctx_pre = c_ctx, c_attn = 0, g linear and c_pre = c_tok it is the
    linear :class:`StepLaw`.
    """

    c_ctx_pre_s: float = 0.0
    c_attn_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_times("split step law", self, ("c_ctx_pre_s", "c_attn_s"))
        if self.c0_s == 0 and self.c_pre_s == 0:
            raise InputError(
                f"split step law {self.name!r}: g(0) and c_pre cannot both be 0 (an iteration "
                "with a prefill would take no time)"
            )

    def step(
        self, decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike
    ) -> Any:
        d = np.asarray(decode_seqs, dtype=float)
        p = np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(context_tokens, dtype=float)
        decode_only = self.decode_part(d) + self.c_ctx_s * c
        mixed = self.c0_s + self.c_pre_s * (d + p) + self.c_ctx_pre_s * c + self.c_attn_s * p * c
        return np.where(p > 0, mixed, decode_only)

    def _scaled_times(self, f: float) -> dict[str, Any]:
        """As :meth:`ShapedStepLaw._scaled_times`, the prefill iterations' context and attention
        prices too."""
        return {
            **super()._scaled_times(f),
            "c_ctx_pre_s": self.c_ctx_pre_s * f,
            "c_attn_s": self.c_attn_s * f,
        }


def batch_law_from_step(
    step: StepLaw, mean_prompt_tokens: float, mean_context_tokens: float, name: str = ""
) -> BatchLatency:
    """Eq. (18) coefficients of a static batch priced by step law `step`, so that static batches
    and continuous batching stand on one hardware law: t1(b) = c0 + (c_tok + c_ctx) P b (one
    prefill iteration of b prompts of P tokens), t2(b) = c0 + (c_tok + c_ctx C) b (one decode step
    of b sequences at a mean context of C tokens), i.e. k1 = (c_tok + c_ctx) P, k2 = c0,
    k3 = c_tok + c_ctx C, k4 = c0. Eq. (18) has no prompt term, so a batch law fitted at 64 input
    tokens would price a 1,155-token prompt as a 64-token one; this one does not."""
    p, c = float(mean_prompt_tokens), float(mean_context_tokens)
    if not (p >= 0 and c >= 0 and math.isfinite(p) and math.isfinite(c)):
        raise InputError(f"batch_law_from_step: prompt and context must be >= 0, got {p}, {c}")
    if float(getattr(step, "c_qk_s", 0.0)) > 0:
        raise InputError(
            f"batch_law_from_step: step law {step.name!r} prices tokens x context (a packed law), "
            "which Eq. (18) cannot express"
        )
    return BatchLatency(
        (step.c_tok_s + step.c_ctx_s) * p,
        step.c0_s,
        step.c_tok_s + step.c_ctx_s * c,
        step.c0_s,
        name=name or f"{step.name} as Eq. (18)",
        source=(
            f"step law {step.name} ({step.source}) written as Eq. (18) at prompt {p:.0f} and "
            f"decode context {c:.0f} tokens"
        ),
        verdict=step.verdict
        if step.verdict in ("predicted", "measured", "measured-kernels")
        else "independent",
    )


def parse_step_law(text: str) -> StepLaw:
    """Parse ``c0=S,c_tok=S,c_ctx=S`` (CLI ``--step``; s, s/token, s/token) into a StepLaw, or
    ``staircase:c0=S,stair=S,tokens=N[,c_ctx=S]`` into a :class:`StaircaseStepLaw`."""
    if text.strip().startswith("staircase:"):
        return _parse_staircase(text)
    keys = ("c0", "c_tok", "c_ctx")
    vals: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, val = item.partition("=")
        if not eq or key.strip() not in keys:
            raise InputError(f"--step {text!r}: expected c0=S,c_tok=S,c_ctx=S")
        try:
            vals[key.strip()] = float(val)
        except ValueError:
            raise InputError(f"--step {text!r}: {key.strip()}={val!r} is not a number") from None
    if set(vals) != set(keys):
        raise InputError(f"--step {text!r}: expected all of c0=S,c_tok=S,c_ctx=S")
    try:
        return StepLaw(vals["c0"], vals["c_tok"], vals["c_ctx"], name="cli", source="--step")
    except InputError as err:
        raise InputError(f"--step {text!r}: {_reason(err)}") from None


def _parse_staircase(text: str) -> StaircaseStepLaw:
    form = "staircase:c0=S,stair=S,tokens=N[,c_ctx=S]"
    vals: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.strip()[len("staircase:") :].split(","))):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or key not in ("c0", "stair", "tokens", "c_ctx") or key in vals:
            raise InputError(f"--step {text!r}: expected {form}")
        try:
            vals[key] = float(val)
        except ValueError:
            raise InputError(f"--step {text!r}: {key}={val!r} is not a number") from None
    if not {"c0", "stair", "tokens"} <= set(vals):
        raise InputError(f"--step {text!r}: expected {form}")
    tokens = vals["tokens"]
    if not (math.isfinite(tokens) and tokens == int(tokens) and 1 <= tokens <= 1 << 20):
        raise InputError(f"--step {text!r}: tokens must be a whole number in [1, {1 << 20}]")
    try:
        return StaircaseStepLaw.of(
            vals["c0"], vals["stair"], int(tokens), vals.get("c_ctx", 0.0), "cli", "--step"
        )
    except InputError as err:
        raise InputError(f"--step {text!r}: {_reason(err)}") from None


def parse_linear_latency(text: str) -> LinearLatency:
    """Parse ``a=0.023,b0=0.19`` (CLI form) into a LinearLatency."""
    vals: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, val = item.partition("=")
        if not eq or key.strip() not in ("a", "b0"):
            raise InputError(f"--latency {text!r}: expected a=SECONDS_PER_TOKEN,b0=SECONDS")
        try:
            vals[key.strip()] = float(val)
        except ValueError:
            raise InputError(f"--latency {text!r}: {key.strip()}={val!r} is not a number") from None
    if set(vals) != {"a", "b0"}:
        raise InputError(f"--latency {text!r}: expected a=SECONDS_PER_TOKEN,b0=SECONDS (both)")
    try:
        return LinearLatency(vals["a"], vals["b0"], name="cli", source="--latency")
    except InputError as err:
        raise InputError(f"--latency {text!r}: {_reason(err)}") from None


def parse_batch_time(text: str, flag: str = "--batch-time") -> BatchLatency:
    """Parse ``k1=..,k2=..,k3=..,k4=..`` (s, s, s/token, s/token) into a BatchLatency (Eq. 18);
    errors name `flag` (the CLI's ``--batch-time``, or ``llmqueue batching``'s ``--profile``)."""
    form = "k1=S,k2=S,k3=S_PER_TOKEN,k4=S_PER_TOKEN (all >= 0)"
    vals: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq or key not in ("k1", "k2", "k3", "k4"):
            raise InputError(f"{flag} {text!r}: expected {form}")
        try:
            vals[key] = float(val)
        except ValueError:
            raise InputError(f"{flag} {text!r}: {key}={val!r} is not a number") from None
    if set(vals) != {"k1", "k2", "k3", "k4"}:
        raise InputError(f"{flag} {text!r}: give all four of k1, k2, k3, k4 (>= 0)")
    try:
        return BatchLatency(vals["k1"], vals["k2"], vals["k3"], vals["k4"], name="cli", source=flag)
    except InputError as err:
        raise InputError(f"{flag} {text!r}: {_reason(err)}") from None


def _reason(err: InputError) -> str:
    """The message of a law's InputError without the law's own name (a flag names it instead)."""
    text = str(err)
    return text.split(": ", 1)[1] if ": " in text else text


# ---- the packed step law ----------------------------------------------------------------------
# The step law of an engine whose attention runs over the whole step packed as one sequence
# (:class:`PackedStepLaw`), and its fit.
#
# Hugging Face transformers' continuous batching with ``sdpa`` or ``paged|eager`` attention on a CPU
# (``integrations/sdpa_attention.py`` with a paged cache) packs every request of a step into one
# query of Sigma q tokens against one key set of Sigma (past + q) tokens under a dense
# block-diagonal mask: the attention's work is proportional to (decode_seqs + prefill_tokens) x
# context_tokens, the pairs across requests included, where a per-request kernel (vLLM's) does
# Sigma q_i k_i. The law adds that product to :class:`llmqueue.latency.StepLaw`:
#
#     step(d, p, c) = c0 + c_tok (d + p) + c_ctx c + c_qk (d + p) c        (s)
#
# with d decoding sequences, p prefill tokens and c the context tokens the step's attention reads
# (the step log's ``context_tokens``: each request's cached tokens after the step). A decode-only
# iteration of b sequences at context C is then c0 + c_tok b + (c_ctx + c_qk b) C: the linear law's
# form with a context price that grows with the batch, which is how the compiled engine prices runs
# of decode-only iterations (:mod:`llmqueue.sim.timelaw`, flag ``PACKED``). c_qk is in s per
# (token x cached token).


@dataclass(frozen=True)
class PackedStepLaw(StepLaw):
    """:class:`llmqueue.latency.StepLaw` plus ``c_qk_s`` x (decode_seqs + prefill_tokens) x
    context_tokens (the comment above; s per token-pair, >= 0)."""

    c_qk_s: float = 0.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_times("packed step law", self, ("c_qk_s",))

    def step(
        self, decode_seqs: ArrayLike, prefill_tokens: ArrayLike, context_tokens: ArrayLike
    ) -> Any:
        """Seconds for one iteration: the linear law's plus the packed attention's."""
        n = np.asarray(decode_seqs, dtype=float) + np.asarray(prefill_tokens, dtype=float)
        c = np.asarray(context_tokens, dtype=float)
        return super().step(decode_seqs, prefill_tokens, context_tokens) + self.c_qk_s * n * c

    def _scaled_times(self, f: float) -> dict[str, Any]:
        return {**super()._scaled_times(f), "c_qk_s": self.c_qk_s * f}
