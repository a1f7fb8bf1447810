"""The search space of ``llmqueue plan``: the serving configurations to compare.

Each dimension is a list or a range given on the command line:

- a list ``64,128,256`` (names for ``--order`` / ``--router``);
- a range ``LO:HI``: every integer for ``--replicas``, powers of two times LO up to HI for the
  sizes (``--max-batch``, ``--max-batched-tokens``: ``512:8192`` is 512, 1024, ..., 8192);
- an explicit step ``LO:HI:+K`` (LO, LO + K, ...) or ``LO:HI:xK`` (LO, K LO, K^2 LO, ...);
- ``none`` in ``--max-batched-tokens`` (no chunked prefill), ``--kv-fraction F,...`` (the share
  of the GPU's memory for weights + KV cache, with a profile) or ``--kv-tokens N,...``.

A configuration is one value per dimension (:class:`Config`); the space is their product in a
fixed order (:meth:`SearchSpace.configs`), so a slice ``k/n`` (every n-th configuration from the
k-th) is the same on every machine. A space of more than :data:`MAX_CONFIGS` configurations is
refused with its count.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass

from llmqueue.errors import InputError
from llmqueue.policy import ORDERS, ROUTERS, Policy, queue_order

__all__ = [
    "MAX_CONFIGS",
    "MAX_VALUES",
    "Config",
    "SearchSpace",
    "parse_ints",
    "parse_fractions",
    "parse_names",
]

MAX_CONFIGS = 10**6
POWER_D = 2  # power_of_d samples two replicas (one when there is one)
MAX_KV_TOKENS = 10**12  # KV-cache tokens per server (replica): --kv-tokens of plan and simulate
MAX_VALUES = 10_000  # values of one dimension


def _int(text: str, flag: str, lo: int, hi: int) -> int:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and v == int(v) and lo <= v <= hi):
        raise InputError(f"{flag}: {text!r} must be an integer in [{lo}, {hi}]")
    return int(v)


def parse_ints(
    text: str, flag: str, *, lo: int, hi: int, geometric: bool, allow_none: bool = False
) -> tuple[int | None, ...]:
    """A list or range of integers (module docstring); ``geometric``: how ``LO:HI`` steps."""
    out: list[int | None] = []
    for part in (p.strip() for p in str(text).split(",")):
        if not part:
            raise InputError(f"{flag} {text!r}: an empty item; give N,N,... or LO:HI[:+K|:xK]")
        if allow_none and part.lower() == "none":
            out.append(None)
            continue
        if ":" not in part:
            out.append(_int(part, flag, lo, hi))
            continue
        bits = part.split(":")
        if len(bits) not in (2, 3):
            raise InputError(f"{flag} {part!r}: a range is LO:HI, LO:HI:+K or LO:HI:xK")
        a, b = _int(bits[0], flag, lo, hi), _int(bits[1], flag, lo, hi)
        if b < a:
            raise InputError(f"{flag} {part!r}: HI must be >= LO")
        mul, add = (2, 0) if geometric else (1, 1)
        if len(bits) == 3:
            step = bits[2].strip()
            if (
                step[:1] in ("+", "x")
                and step[1:].isdigit()
                and int(step[1:]) >= (2 if step[0] == "x" else 1)
            ):
                mul, add = (int(step[1:]), 0) if step[0] == "x" else (1, int(step[1:]))
            else:
                raise InputError(f"{flag} {part!r}: the step is +K (K >= 1) or xK (K >= 2)")
        v = a
        while v <= b:
            out.append(v)
            if len(out) > MAX_VALUES:
                raise InputError(f"{flag} {part!r}: more than {MAX_VALUES} values")
            v = v * mul + add
    if len(set(out)) != len(out):
        raise InputError(f"{flag} {text!r}: a value is given twice")
    return tuple(out)


def parse_fractions(text: str, flag: str) -> tuple[float, ...]:
    """A list of fractions in (0, 1]."""
    out = []
    for part in (p.strip() for p in str(text).split(",")):
        try:
            v = float(part)
        except ValueError:
            v = math.nan
        if not (0 < v <= 1):
            raise InputError(f"{flag}: {part!r} must be a fraction in (0, 1]")
        out.append(v)
    if len(set(out)) != len(out):
        raise InputError(f"{flag} {text!r}: a value is given twice")
    return tuple(out)


def parse_names(text: str, flag: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of names out of `allowed`."""
    out = tuple(p.strip() for p in str(text).split(","))
    for name in out:
        if name not in allowed:
            raise InputError(f"{flag}: {name!r} is not one of {', '.join(allowed)}")
    if len(set(out)) != len(out):
        raise InputError(f"{flag} {text!r}: a name is given twice")
    return out


@dataclass(frozen=True)
class Config:
    """One serving configuration: continuous batching on ``replicas`` replicas behind
    ``router`` (``central``: one shared queue), queue ``order``, at most ``max_batch`` running
    requests and ``max_batched_tokens`` tokens per iteration (None: no chunked prefill) per
    replica, a KV budget of ``kv_tokens`` tokens per replica (from ``kv_fraction`` of the GPU's
    memory when a profile gives it; NaN otherwise), paged in blocks of ``block_size`` tokens,
    on-demand admission with preemption (vLLM's); ``power_of_d`` samples two replicas."""

    replicas: int
    router: str
    order: str
    max_batch: int
    max_batched_tokens: int | None
    kv_tokens: int
    kv_fraction: float
    block_size: int

    def policy(self, guard_s: float | None = None) -> Policy:
        """The engine's policy of this configuration."""
        kv = self.kv_tokens // self.block_size * self.block_size
        return Policy(
            "continuous",
            bmax=self.max_batch,
            order=self.order,
            guard_s=guard_s if not queue_order(self.order).by_arrival else None,
            kv_tokens=kv,
            admission="on_demand",
            max_batched_tokens=self.max_batched_tokens,
            block_size=self.block_size,
            replicas=self.replicas,
            router=self.router,
            router_d=min(POWER_D, self.replicas) if self.router == "power_of_d" else 2,
        )

    def row(self) -> dict[str, object]:
        """The configuration's columns in a plan's table."""
        return {
            "replicas": self.replicas,
            "router": self.router,
            "order": self.order,
            "max_batch": self.max_batch,
            "max_batched_tokens": self.max_batched_tokens,
            "kv_fraction": self.kv_fraction,
            "kv_tokens": self.kv_tokens,
            "block_size": self.block_size,
        }


@dataclass(frozen=True)
class SearchSpace:
    """The dimensions of a search; ``kv``: (fraction, tokens) pairs (fraction NaN when the
    budget was given in tokens)."""

    replicas: tuple[int, ...]
    routers: tuple[str, ...]
    orders: tuple[str, ...]
    max_batch: tuple[int, ...]
    max_batched_tokens: tuple[int | None, ...]
    kv: tuple[tuple[float, int], ...]
    block_size: int = 16

    def __post_init__(self) -> None:
        for name in ("replicas", "routers", "orders", "max_batch", "max_batched_tokens", "kv"):
            if not getattr(self, name):
                raise InputError(f"the search space needs at least one {name} value")
        for r in self.routers:
            if r not in ROUTERS:
                raise InputError(f"--router: {r!r} is not one of {', '.join(ROUTERS)}")
        for o in self.orders:
            if o not in ORDERS:
                raise InputError(f"--order: {o!r} is not one of {', '.join(ORDERS)}")
            if queue_order(o).preemptive:
                plain = ", ".join(x for x in ORDERS if not queue_order(x).preemptive)
                raise InputError(
                    f"--order: {o!r} preempts and runs only under batching none on one server "
                    f"(llmqueue simulate); plan searches continuous batching: {plain}"
                )
        n = self.size
        if n > MAX_CONFIGS:
            raise InputError(
                f"the search space holds {n:,} configurations, more than {MAX_CONFIGS:,}: "
                "narrow a dimension, or split it into several searches"
            )

    @property
    def size(self) -> int:
        return math.prod(
            len(x)
            for x in (
                self.replicas,
                self.routers,
                self.orders,
                self.max_batch,
                self.max_batched_tokens,
                self.kv,
            )
        )

    def configs(self) -> Iterator[Config]:
        """Every configuration, in a fixed order (replicas vary fastest)."""
        for kv, mbt, mb, order, router, c in itertools.product(
            self.kv, self.max_batched_tokens, self.max_batch, self.orders, self.routers,
            self.replicas,
        ):  # fmt: skip
            yield Config(c, router, order, mb, mbt, kv[1], kv[0], self.block_size)

    def slice(self, k: int, n: int) -> list[Config]:
        """Configurations k, k + n, k + 2n, ... (0 <= k < n): one job's share of the space."""
        if not (isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k < n):
            raise InputError(f"--slice K/N needs 0 <= K < N, got {k}/{n}")
        return [c for i, c in enumerate(self.configs()) if i % n == k]
