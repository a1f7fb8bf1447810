"""How long one simulated point runs: the one :class:`SimSettings` of every study and CLI."""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmqueue.errors import InputError

__all__ = ["SimSettings"]


def _count(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


@dataclass(frozen=True)
class SimSettings:
    """Run length of one simulated point: ``requests`` measured requests (None: every request of
    a finite workload after the warm-up, e.g. a replayed trace), ``warmup`` requests discarded
    first, ``batches`` batch-means batches for the 95% confidence intervals."""

    requests: int | None
    warmup: int
    batches: int

    def __post_init__(self) -> None:
        if self.requests is not None and not (_count(self.requests) and self.requests >= 1):
            raise InputError(f"requests must be an integer >= 1 (or none), got {self.requests!r}")
        if not (_count(self.warmup) and self.warmup >= 0):
            raise InputError(f"warmup must be an integer >= 0, got {self.warmup!r}")
        if not (_count(self.batches) and self.batches >= 2):
            raise InputError(f"batches must be an integer >= 2, got {self.batches!r}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], where: str = "simulation") -> SimSettings:
        """From a config mapping with ``warmup`` and ``batches`` and, unless the point replays a
        finite workload, ``requests``; InputError names `where` and the missing key."""
        missing = [k for k in ("warmup", "batches") if k not in cfg]
        if missing:
            raise InputError(f"{where}: missing {missing} (requests, warmup, batches)")
        req = cfg.get("requests")
        try:
            return cls(None if req is None else int(req), int(cfg["warmup"]), int(cfg["batches"]))
        except (TypeError, ValueError):
            raise InputError(f"{where}: requests, warmup and batches must be integers") from None

    def measured(self, total: int | None) -> int:
        """The measured requests of a run over a workload of `total` requests (None: unlimited)."""
        if self.requests is not None:
            return self.requests
        if total is None:
            raise InputError("requests: none (the whole workload) needs a finite workload")
        return int(total) - self.warmup
