"""The SSJF study's config read into typed settings (shared by the config checks): the batching
modes, the policies and the cost models (:class:`Setting`, from config ``ssjf.settings``, each a
profile name or an inline law, :func:`llmqueue.profiles.law_of_setting`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.policy import Policy
from llmqueue.profiles import law_of_setting

__all__ = [
    "QUANTITIES",
    "MODES",
    "POLICIES",
    "PolicySpec",
    "Setting",
    "resolve_setting",
    "settings_from_config",
]


MODES = ("none", "dynamic", "continuous")


ARRIVALS = ("poisson", "replay")
# the claim-10 quantities of each (setting, mode), in the order of its reference rows
QUANTITIES = ("jct_protocol", "jct_steady", "thr_protocol", "thr_steady")


@dataclass(frozen=True)
class PolicySpec:
    """A policy of the study: queue order, whether it reads the learned predictor, guard."""

    order: str
    learned: bool
    guard: bool


POLICIES: dict[str, PolicySpec] = {
    "FCFS": PolicySpec("fcfs", False, False),
    "SJF": PolicySpec("sjf", False, False),
    "SSJF": PolicySpec("spjf", True, False),
    "SJF+guard": PolicySpec("sjf", False, True),
    "SSJF+guard": PolicySpec("spjf", True, True),
}


# ---- settings -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Setting:
    """A cost model with its three batching modes: the batch law (Eq. 18; ``none`` serves one
    request, T_1 = t1(1) + t2(1) n) and the continuous-batching step law, with b_max."""

    name: str
    description: str
    batch: BatchLatency
    step: StepLaw
    dynamic_bmax: int
    continuous_max_batch: int

    def latency(self, mode: str) -> BatchLatency | StepLaw:
        return self.step if mode == "continuous" else self.batch

    def policy(self, mode: str, order: str = "fcfs", guard_s: float | None = None) -> Policy:
        if mode == "none":
            return Policy("none", order=order, guard_s=guard_s)
        if mode == "dynamic":
            return Policy("dynamic", bmax=self.dynamic_bmax, order=order, guard_s=guard_s)
        if mode == "continuous":
            return Policy(
                "continuous", bmax=self.continuous_max_batch, order=order, guard_s=guard_s
            )
        raise InputError(f"batching mode must be one of {', '.join(MODES)}, got {mode!r}")

    def service_s(self, output_tokens: np.ndarray) -> np.ndarray:
        """One request's service time with no batching, S = t1(1) + t2(1) n (s)."""
        return float(self.batch.t1(1)) + float(self.batch.t2(1)) * np.asarray(output_tokens)


def resolve_setting(
    name: str,
    cfg: Mapping[str, Any],
    batch_profiles: Mapping[str, Any],
    step_profiles: Mapping[str, Any],
    fits: Mapping[str, Any],
) -> Setting:
    """The :class:`Setting` config ``ssjf.settings.<name>`` names: ``batch`` ({k1..k4} or a
    ``batch_profiles`` name) and ``step`` ({c0_s, c_tok_s, c_ctx_s} or a ``step_profiles``
    name); `fits` maps fit.json paths to their parsed contents."""
    where = f"ssjf.settings.{name}"
    config = {"batch_profiles": batch_profiles, "step_profiles": step_profiles}
    batch = law_of_setting(
        cfg["batch"], "batch", config, where=f"{where}.batch", name=f"{name}_batch", fits=fits
    )
    step = law_of_setting(
        cfg["step"], "step", config, where=f"{where}.step", name=f"{name}_step", fits=fits
    )
    assert isinstance(batch, BatchLatency) and isinstance(step, StepLaw)
    return Setting(
        name,
        str(cfg.get("description", name)),
        batch,
        step,
        int(cfg["dynamic_bmax"]),
        int(cfg["continuous_max_batch"]),
    )


def settings_from_config(
    settings: Mapping[str, Any],
    batch_profiles: Mapping[str, Any],
    step_profiles: Mapping[str, Any],
    fits: Mapping[str, Any],
    names: Sequence[str] | None = None,
) -> list[Setting]:
    """The :class:`Setting` s of config ``ssjf.settings`` (those in `names`, in that order)."""
    chosen = list(settings) if names is None else list(names)
    return [resolve_setting(n, settings[n], batch_profiles, step_profiles, fits) for n in chosen]


# ---- SSJF's own protocol ----------------------------------------------------------------------
# SSJF's public scheduler always applies its starvation guard, so its protocol and the claim rows
# compare SJF and SSJF *with* the guard against FCFS.
PROTOCOL_POLICIES = ("FCFS", "SJF+guard", "SSJF+guard")
