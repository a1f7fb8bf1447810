"""Latency laws: how long the server takes for one request or one batch.

- :class:`LinearLatency`: one request at a time, S = a*N + b0 (Eq. 3-5; a in s/token, b0 in s).
- :class:`BatchLatency`: a batch of b requests, T_b = t1(b) + t2(b)*L_b with
  t1(b) = k1*b + k2 (first token, s) and t2(b) = k3*b + k4 (each later token, s/token), Eq. (18).
  N and L_b count the tokens after the first (equations.md): no "- 1" anywhere.
- :func:`fit_linear_latency`: least squares with R^2 and 95% confidence intervals.
- :func:`resolve_linear_profile`: turns a named config profile into a LinearLatency.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from llmqueue._lazy import lazy_module
from llmqueue.errors import InputError
from llmqueue.tokens import TokenLaw

# SciPy is imported on first use, so that parsing law specs and profiles (the Snakefile's
# config check, on every run) does not pay its import time.
stats = lazy_module("scipy.stats")

__all__ = [
    "fit_section",
    "FIT_DEPTHS",
    "LinearLatency",
    "BatchLatency",
    "LinearFit",
    "fit_linear_latency",
    "resolve_linear_profile",
    "parse_linear_latency",
    "service_moments",
]


@dataclass(frozen=True)
class LinearLatency:
    """Single-request service time S = a*N + b0 (Eq. 3); a s/token, b0 s.

    ``verdict`` is ``"independent"`` for a profile fitted from data or set a priori, and
    ``"back_solved"`` for one solved from the very claims it is then compared with.
    """

    a_s_per_token: float
    b0_s: float
    name: str = "custom"
    source: str = "given"
    verdict: str = "independent"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.a_s_per_token) and self.a_s_per_token >= 0):
            raise InputError(
                f"latency profile {self.name!r}: a must be >= 0 s/token, got {self.a_s_per_token}"
            )
        if not (math.isfinite(self.b0_s) and self.b0_s >= 0):
            raise InputError(f"latency profile {self.name!r}: b0 must be >= 0 s, got {self.b0_s}")
        if self.a_s_per_token == 0 and self.b0_s == 0:
            raise InputError(f"latency profile {self.name!r}: a and b0 cannot both be 0")

    def service_time(self, tokens: ArrayLike) -> Any:
        """S in seconds for token counts N."""
        return self.a_s_per_token * np.asarray(tokens, dtype=float) + self.b0_s

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
    """Batch time T_b = (k1*b + k2) + (k3*b + k4)*L_b, Eq. (18). Units: s and s/token."""

    k1: float
    k2: float
    k3: float
    k4: float
    name: str = "custom"
    source: str = "given"
    verdict: str = "independent"

    def __post_init__(self) -> None:
        for key in ("k1", "k2", "k3", "k4"):
            v = getattr(self, key)
            if not (math.isfinite(v) and v >= 0):
                raise InputError(
                    f"batch latency profile {self.name!r}: {key} must be >= 0 (a time), got {v}"
                )
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
class LinearFit:
    """Least-squares fit y = slope*x + intercept with R^2 and 95% confidence intervals."""

    slope: float
    intercept: float
    r2: float
    slope_ci95: tuple[float, float]
    intercept_ci95: tuple[float, float]
    n: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["slope_ci95"] = list(self.slope_ci95)
        d["intercept_ci95"] = list(self.intercept_ci95)
        return d


def fit_linear_latency(x: ArrayLike, y: ArrayLike) -> LinearFit:
    """Ordinary least squares of y on x (e.g. seconds on tokens, Fig. 2a; t1 on b, Fig. 2b)."""
    xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if xa.shape != ya.shape or xa.ndim != 1:
        raise InputError("fit needs two 1-D arrays of equal length")
    n = xa.size
    if n < 2 or np.ptp(xa) == 0:
        raise InputError(f"fit needs at least 2 distinct x values, got {n} points")
    res = stats.linregress(xa, ya)
    r2 = float(res.rvalue**2) if n > 2 else 1.0
    if n > 2:
        t = float(stats.t.ppf(0.975, n - 2))
        s_ci = (float(res.slope - t * res.stderr), float(res.slope + t * res.stderr))
        i_ci = (
            float(res.intercept - t * res.intercept_stderr),
            float(res.intercept + t * res.intercept_stderr),
        )
    else:
        s_ci = (math.nan, math.nan)
        i_ci = (math.nan, math.nan)
    return LinearFit(float(res.slope), float(res.intercept), r2, s_ci, i_ci, n)


FIT_DEPTHS = ("measured", "full")


def fit_section(
    fit: Mapping[str, Any], key: str, depth: str, where: str
) -> tuple[Mapping[str, Any], str]:
    """The ``key`` entry (``linear`` or ``batch``) of a parsed fit.json and the label to show.

    ``depth: measured`` (default) takes the law at the depth that was timed; ``depth: full`` takes
    the full-depth extrapolation of a fewer-layer (CPU) measurement, ``fit["full_depth"][key]``,
    which exists only when the sweep ran fewer layers and is usable only when the 1/2/4-layer
    depth check found time linear in layers (``full_depth.valid``). A full-depth source (a GPU,
    the roofline, the paper) is its own full depth. `where` names the config key in errors.
    """
    if depth not in FIT_DEPTHS:
        raise InputError(f"{where}.depth: must be one of {list(FIT_DEPTHS)}, got {depth!r}")
    label = str(fit.get("label", fit.get("source", "")))
    if depth == "full" and "full_depth" in fit:
        fd = fit["full_depth"]
        if not fd.get("valid"):
            raise InputError(
                f"{where}: depth full asked for, but {fit.get('source')}/{fit.get('model')} failed its "
                "depth check (time not linear in layers), so it has no full-depth extrapolation"
            )
        return fd[key], str(fd.get("label", label))
    if key not in fit:
        raise InputError(f"{where}: its fit.json has no {key!r} entry")
    return fit[key], label


def resolve_linear_profile(
    name: str, profile: Mapping[str, Any], fit: Mapping[str, Any] | None = None
) -> LinearLatency:
    """Build the LinearLatency a config profile names.

    A profile is either ``{kind: fixed, a_s_per_token, b0_s, verdict}`` or
    ``{kind: fit, source, model[, depth]}``, in which case `fit` is the parsed
    ``results/profiling/<source>/<model>/fit.json`` whose ``linear`` entry holds slope and
    intercept of S on N (``depth: full``: its full-depth extrapolation, see :func:`fit_section`).
    """
    kind = profile.get("kind")
    verdict = str(profile.get("verdict", "independent"))
    if kind == "fixed":
        return LinearLatency(
            float(profile["a_s_per_token"]),
            float(profile["b0_s"]),
            name,
            "config (fixed values)",
            verdict,
        )
    if kind == "fit":
        if fit is None or "linear" not in fit:
            raise InputError(f"latency profile {name!r} needs its fit.json with a 'linear' entry")
        depth = str(profile.get("depth", "measured"))
        lin, label = fit_section(fit, "linear", depth, f"latency_profiles.{name}")
        described = fit.get("description", profile.get("source"))
        if depth == "full" and "full_depth" in fit:
            described = f"{label}; {fit['full_depth'].get('method', '')}; {described}"
        source = f"least-squares fit: {described}"
        return LinearLatency(float(lin["slope"]), float(lin["intercept"]), name, source, verdict)
    raise InputError(f"latency profile {name!r}: kind must be 'fixed' or 'fit', got {kind!r}")


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
    return LinearLatency(vals["a"], vals["b0"], name="cli", source="--latency")
