"""The prefix study's settings (config section ``prefix``), typed, and what its runs stand on:
each trace read with its prompts' block ids, each step profile's law and KV budget.

Units: tokens, requests/s, s. A KV budget is a multiple of the profile's: one GPU's KV tokens at
``kv_memory_fraction`` of its memory after the fp16 weights (:func:`llmqueue.profiles.
kv_tokens_of_fit`), rounded down to whole blocks; the pool that never evicts holds every block
the trace ever allocates (:func:`never_evicting_tokens`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.schema import with_defaults
from llmqueue.sim.workload import ReplayWorkload

__all__ = [
    "PrefixSpec",
    "read_replay",
    "never_evicting_tokens",
    "budget_tokens",
    "profile_law",
]


@dataclass(frozen=True)
class PrefixSpec:
    """The ``prefix`` section, filled from its schema (its keys' meanings are there)."""

    traces: dict[str, str]
    step_profiles: tuple[str, ...]
    policy: Policy
    kv_memory_fraction: float
    budgets: tuple[float, ...]
    budget_load: float
    loads: tuple[float, ...]
    rate_budget: float
    replicas: tuple[int, ...]
    routers: tuple[str, ...]
    router_load: float
    claim_load: float
    warmup: int
    batches: int

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> PrefixSpec:
        """The section's settings; a policy that is not continuous batching with on-demand KV
        and a non-preemptive order, or that sets what the runs set, is refused naming the key."""
        from llmqueue.policy import ROUTERS, queue_order
        from llmqueue.policy_text import parse_policy

        s = with_defaults(section, "prefix")
        try:
            pol = parse_policy(str(s["policy"]))
        except InputError as err:
            raise InputError(f"prefix.policy: {err}") from None
        if pol.kind != "continuous" or pol.admission != "on_demand":
            raise InputError(
                f"prefix.policy: {s['policy']!r}; allowed: continuous batching with "
                "admission=on_demand (the cache's pool)"
            )
        if queue_order(pol.order).preemptive:
            raise InputError(f"prefix.policy: order {pol.order!r}; allowed: a non-preemptive order")
        if pol.kv_tokens is not None or pol.prefix_caching or pol.replicas != 1:
            raise InputError(
                f"prefix.policy: {s['policy']!r} sets kv_tokens, prefix_caching or replicas; "
                "allowed: none of them (the runs set them)"
            )
        for r in s["routers"]:
            if r not in ROUTERS or r == "central":
                allowed = ", ".join(x for x in ROUTERS if x != "central")
                raise InputError(f"prefix.routers: {r!r}; allowed: {allowed}")
        return cls(
            traces={str(k): str(v) for k, v in s["traces"].items()},
            step_profiles=tuple(str(p) for p in s["step_profiles"]),
            policy=pol,
            kv_memory_fraction=float(s["kv_memory_fraction"]),
            budgets=tuple(float(b) for b in s["budgets"]),
            budget_load=float(s["budget_load"]),
            loads=tuple(float(x) for x in s["loads"]),
            rate_budget=float(s["rate_budget"]),
            replicas=tuple(int(r) for r in s["replicas"]),
            routers=tuple(str(r) for r in s["routers"]),
            router_load=float(s["router_load"]),
            claim_load=float(s["claim_load"]),
            warmup=int(s["warmup"]),
            batches=int(s["batches"]),
        )

    def with_budget(self, kv_tokens: int, *, caching: bool) -> Policy:
        """The policy at a KV budget of `kv_tokens` (whole blocks), the cache on or off."""
        bs = int(self.policy.block_size)
        return replace(self.policy, kv_tokens=int(kv_tokens) // bs * bs, prefix_caching=caching)


def read_replay(path: str | Path, name: str) -> ReplayWorkload:
    """A Mooncake FAST'25 trace (``traces.formats`` ``mooncake``) as a replay at its own
    timestamps with its prompts' block ids; a trace without ids is refused naming
    ``prefix.traces.<name>``."""
    from llmqueue.traces import read_trace
    from llmqueue.traces.base import TraceColumns

    where = f"prefix.traces.{name}"
    rows = read_trace(path, TraceColumns(), format="mooncake", where=where)
    if rows.blocks is None:
        raise InputError(f"{where}: {path} has no prompt block ids (hash_ids)")
    return ReplayWorkload(
        rows.arrival_s,
        rows.prompt_tokens,
        rows.output_tokens,
        1.0,
        source=f"{Path(path).name} (mooncake)",
        blocks=rows.blocks,
    )


def never_evicting_tokens(replay: ReplayWorkload, block_size: int) -> int:
    """A KV budget (tokens) that holds every block the replay ever allocates: the sum over its
    requests of their prompt and output tokens in whole blocks, so no allocation ever evicts."""
    tokens = np.asarray(replay.prompt_tokens, dtype=np.int64) + np.asarray(
        replay.output_tokens, dtype=np.int64
    )
    return int(np.sum(-(-tokens // int(block_size)))) * int(block_size)


def budget_tokens(profile_kv: int, multiple: float) -> int:
    """`multiple` x the profile's KV tokens (`profile_kv`), rounded down."""
    if not (multiple >= 1 and math.isfinite(multiple)):
        raise InputError(f"prefix.budgets: {multiple!r}; allowed: a finite number >= 1")
    return int(math.floor(profile_kv * multiple))


def profile_law(
    name: str, profiles: Mapping[str, Any], fit: Mapping[str, Any], memory_fraction: float
) -> tuple[StepLaw, int]:
    """The step law and the KV budget (tokens) of step profile `name` from its fit.json."""
    from llmqueue.profiles import kv_tokens_of_fit, resolve_step_profile

    cfg = profiles.get(name)
    if cfg is None:
        raise InputError(f"prefix.step_profiles: {name!r} is not a step_profiles entry")
    law = resolve_step_profile(name, cfg, fit, where=f"prefix.step_profiles: {name}")
    return law, kv_tokens_of_fit(fit, memory_fraction=memory_fraction)
