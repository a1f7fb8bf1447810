"""The bounds of every input, declared once, and the checks every entry point uses.

The operator CLI, the config checks and the file readers refuse a value outside these bounds
with one :class:`~llmqueue.errors.InputError` that names the flag, key or column and the allowed
range, before any long computation. The bounds keep every accepted value inside what the
library computes right and quickly:

- token counts (a reply, a prompt, a limit, a law's mean) at most :data:`MAX_TOKENS`: no LLM reply
  is longer, and the engine counts tokens in float64 and int64 exactly far beyond it;
- times (latency coefficients, patience, guards, timeouts) at most :data:`MAX_TIME_S`, rates at
  most :data:`MAX_RATE_PER_S`: their products (a load, a backlog) stay finite;
- sizes the engine allocates per server or per batch (servers, batch caps) at most
  :data:`MAX_SERVERS` and :data:`MAX_BATCH`; simulated requests at most :data:`MAX_REQUESTS`;
- seeds in [0, 2**63); a GPU's memory (a fit.json's) at most :data:`MAX_MEMORY_GIB`.

Sizes that are each in range can still multiply into a job that does not fit: the engine's
per-server tables (servers x batch cap, servers x KV block size) hold at most
:data:`MAX_ENGINE_ENTRIES` entries each; one command simulates at most :data:`MAX_SIMULATED`
requests in all (points of a range x requests a point) and spends at most
:data:`MAX_EXACT_CELLS` cells of the exact M/G/1+D renewal grids in all. :func:`product` checks
such a product before any work, with one line giving the product, an estimate and the limit.

Units: tokens, seconds, requests per second.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from llmqueue.errors import InputError

__all__ = [
    "MAX_TOKENS",
    "MAX_TIME_S",
    "MAX_RATE_PER_S",
    "MAX_SERVERS",
    "MAX_BATCH",
    "MAX_REQUESTS",
    "MAX_SEED",
    "MAX_MEMORY_GIB",
    "MAX_ENGINE_ENTRIES",
    "MAX_SIMULATED",
    "MAX_EXACT_CELLS",
    "number",
    "integer",
    "interval",
    "product",
    "section_keys",
]

MAX_TOKENS = 1e9
MAX_TIME_S = 1e9
MAX_RATE_PER_S = 1e9
MAX_SERVERS = 4096
MAX_BATCH = 1 << 16
MAX_REQUESTS = 10**9
MAX_SEED = 2**63 - 1
MAX_MEMORY_GIB = float(1 << 20)  # a GPU's memory, GiB (1 PiB)
# entries of one per-server table of the engine (servers x batch cap, servers x block size):
# 32 MiB of int64 each, a few hundred MiB for all of a continuous-batching run's tables
MAX_ENGINE_ENTRIES = 1 << 22
MAX_SIMULATED = MAX_REQUESTS  # requests one command simulates in all (points x requests a point)
# cells of the exact M/G/1+D renewal grids one command solves in all (a grid of n cells costs
# n^2 of them; ~0.4 ns each on one core: a few minutes at most)
MAX_EXACT_CELLS = 5 * 10**11


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def interval(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> str:
    """The range as text: ``(0, 1e+09]``."""
    return f"{'(' if lo_open else '['}{_fmt(lo)}, {_fmt(hi)}{')' if hi_open else ']'}"


def number(
    value: Any,
    name: str,
    *,
    lo: float,
    hi: float,
    lo_open: bool = False,
    hi_open: bool = False,
    unit: str = "",
) -> float:
    """`value` (a number, or text that parses as one) as a finite float in the range; else an
    InputError naming `name`, the range and what was given."""
    rng = interval(lo, hi, lo_open, hi_open) + (f" {unit}" if unit else "")
    bad = InputError(f"{name} must be a number in {rng}, got {value!r}")
    if isinstance(value, bool):
        raise bad
    try:
        x = float(value)
    except (TypeError, ValueError, OverflowError):
        raise bad from None
    if not math.isfinite(x):
        raise bad
    if (x < lo or (lo_open and x == lo)) or (x > hi or (hi_open and x == hi)):
        raise bad
    return x


def integer(value: Any, name: str, *, lo: int, hi: int, unit: str = "") -> int:
    """`value` (an integer, an integral float such as 1e5, or text of one) as an int in
    [lo, hi]; else an InputError naming `name`, the range and what was given."""
    rng = interval(lo, hi) + (f" {unit}" if unit else "")
    bad = InputError(f"{name} must be an integer in {rng}, got {value!r}")
    if isinstance(value, bool):
        raise bad
    if isinstance(value, numbers.Integral):
        n = int(value)
    else:
        try:
            text = str(value).strip()
            n = int(text) if text.lstrip("+-").isdigit() else int(_integral(float(text)))
        except (TypeError, ValueError, OverflowError):
            raise bad from None
    if not lo <= n <= hi:
        raise bad
    return n


def _integral(x: float) -> float:
    if not math.isfinite(x) or x != int(x):
        raise ValueError(x)
    return x


def product(
    factors: Sequence[tuple[str, float]], hi: float, what: str, *, estimate: str = ""
) -> float:
    """The product of `factors` (``(flag, value)`` pairs: ``("--servers", 8)``) when it is at most
    `hi`; else an InputError of one line naming every flag and its value, the product (of `what`,
    e.g. ``KV-block entries``), the `estimate` it stands for (e.g. ``about 2 GiB``) and the limit."""
    total = math.prod(float(v) for _, v in factors)
    if total > hi:
        terms = " x ".join(f"{flag} {v:g}" for flag, v in factors)
        about = f" ({estimate})" if estimate else ""
        raise InputError(
            f"{terms} = {_count(total)} {what}{about}; at most {_count(hi)} are allowed"
        )
    return total


def _count(x: float) -> str:
    """A count as text: 4,194,304 (exact below 1e15), else 5.6e+14."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) < 1e15 else f"{x:.3g}"


def section_keys(
    section: Any, where: str, required: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """A config section `where` is a mapping holding every key of `required`, any of `optional`
    and nothing else; else one InputError naming the missing and unknown keys and the allowed
    ones."""
    if not isinstance(section, Mapping):
        raise InputError(f"{where} must be a mapping, got {type(section).__name__}")
    missing = [k for k in required if k not in section]
    extra = sorted(set(section) - set(required) - set(optional))
    if missing or extra:
        raise InputError(
            f"{where}: missing {missing}, unknown {extra}; keys are {[*required, *optional]}"
        )
