"""The SSJF study's config read into typed settings (shared by the config checks): the batching
modes, the policies and the cost models (:class:`Setting`, from config ``ssjf.settings``, each a
profile name or an inline law, :func:`llmqueue.profiles.law_of_setting`); the three groups of
claim-10 rows and the serving semantics of SSJF's own simulator (:class:`Official`, from config
``ssjf.official``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, StepLaw
from llmqueue.policy import DEFAULT_ORDER, FCFS_ORDER, SJF_ORDER, SPJF_ORDER, Policy, queue_order
from llmqueue.profiles import law_of_setting
from llmqueue.schema import with_defaults

__all__ = [
    "QUANTITIES",
    "OFFICIAL_QUANTITIES",
    "GROUPS",
    "OFFICIAL_GROUPS",
    "MODES",
    "POLICIES",
    "PolicySpec",
    "Setting",
    "resolve_setting",
    "settings_from_config",
    "PredictionFile",
    "Official",
    "official_from_config",
]


MODES = ("none", "dynamic", "continuous")


ARRIVALS = ("poisson", "replay")

# The three groups of claim-10 rows (docs/studies/ssjf.md): (a) SSJF's inputs (their published
# lengths and proxy-model classes), their protocol (the rate average) and their simulator's
# serving semantics: do the published numbers follow from the published data? (b) the same
# inputs and protocol, this engine's serving (vLLM-style continuous batching, no FCFS timeout, the
# guard's age trigger only): does the gain survive a modern scheduler? (c) the Azure trace's
# lengths and our learned predictor: does it transfer?
GROUPS = ("a", "b", "c")
OFFICIAL_GROUPS = ("a", "b")
GROUP_TITLES = {
    "a": "SSJF's inputs, protocol and simulator",
    "b": "SSJF's inputs and protocol, this engine's serving",
    "c": "Azure lengths, learned predictor",
}
# the claim-10 quantities per mode of groups a and b (rate-averaged, SSJF's protocol), and per
# (setting, mode) of group c, in the order of their reference rows
OFFICIAL_QUANTITIES = ("jct_rates", "thr_rates")
QUANTITIES = ("jct_protocol", "jct_steady", "thr_protocol")


@dataclass(frozen=True)
class PolicySpec:
    """A policy of the study: queue order, whether it reads the learned predictor, guard."""

    order: str
    learned: bool
    guard: bool


POLICIES: dict[str, PolicySpec] = {
    "FCFS": PolicySpec(FCFS_ORDER.name, False, False),
    "SJF": PolicySpec(SJF_ORDER.name, False, False),
    "SSJF": PolicySpec(SPJF_ORDER.name, True, False),
    "SJF+guard": PolicySpec(SJF_ORDER.name, False, True),
    "SSJF+guard": PolicySpec(SPJF_ORDER.name, True, True),
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

    def policy(self, mode: str, order: str = DEFAULT_ORDER, guard_s: float | None = None) -> Policy:
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
        str(with_defaults(cfg, "ssjf.settings.<name>")["description"]) or name,
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


# ---- SSJF's own inputs and serving semantics (claim-10 groups a and b) --------------------------
@dataclass(frozen=True)
class PredictionFile:
    """One of SSJF's published prediction files: its path and the class edges (tokens) its proxy
    model's classes stand for (class c: [edges[c-1], edges[c]))."""

    name: str
    path: str
    edges: tuple[float, ...]


@dataclass(frozen=True)
class Official:
    """Config ``ssjf.official``: SSJF's inputs (``files``, the one whose classes order SSJF's
    queue: ``ssjf_predictor``), the cost model (``setting``), the batch size of dynamic and
    continuous batching (``batch_size``, the paper's) and the two options of their simulator
    that differ from this engine's serving: FCFS waits up to ``fcfs_batch_timeout_s`` to fill a
    batch, and the starvation guard also fires at ``guard_factor`` times a job's run time.
    ``sweep_batch_sizes``: the batch sizes SSJF's run script sweeps (group a's continuous
    batching is read over all of them, :func:`llmqueue.studies.ssjf.official.official_sweep_table`)."""

    files: dict[str, PredictionFile]
    ssjf_predictor: str
    setting: str
    batch_size: int
    fcfs_batch_timeout_s: float
    guard_factor: float
    sweep_batch_sizes: tuple[int, ...] = ()

    @property
    def ssjf_file(self) -> PredictionFile:
        return self.files[self.ssjf_predictor]

    def policy(self, group: str, mode: str, label: str, guard_s: float) -> Policy:
        """The policy `label` of :data:`POLICIES` in `group` and batching `mode`: group ``a``
        serves as SSJF's simulator (FCFS waits to fill a batch, SJF/SSJF's guard has both
        triggers, "continuous" is re-batching at the shortest member's end, ``rebatch``), group
        ``b`` as this engine does (no timeout, the guard's age trigger, iteration-level
        continuous batching)."""
        spec = POLICIES[label]
        guard = guard_s if spec.guard else None
        bmax = None if mode == "none" else self.batch_size
        if group == "a":
            kind = {"none": "none", "dynamic": "dynamic", "continuous": "rebatch"}[mode]
            timeout = (
                self.fcfs_batch_timeout_s
                if queue_order(spec.order).by_arrival and mode != "none"
                else None
            )
            return Policy(
                kind,
                bmax=bmax,
                order=spec.order,
                guard_s=guard,
                guard_factor=self.guard_factor if spec.guard else None,
                batch_timeout_s=timeout,
            )
        if group == "b":
            return Policy(mode, bmax=bmax, order=spec.order, guard_s=guard)
        raise InputError(f"group must be one of {', '.join(OFFICIAL_GROUPS)}, got {group!r}")

    @staticmethod
    def latency(group: str, mode: str, setting: Setting) -> BatchLatency | StepLaw:
        """Group ``a`` prices every job alone (the batch law's batch of one, whatever the mode);
        group ``b`` continuous batching by the setting's step law."""
        return setting.step if group == "b" and mode == "continuous" else setting.batch


def official_from_config(cfg: Mapping[str, Any]) -> Official:
    """:class:`Official` from config ``ssjf.official`` (InputError for a file name given twice)."""
    files: dict[str, PredictionFile] = {}
    for f in cfg["predictions"]:
        name = str(f["name"])
        if name in files:
            raise InputError(f"ssjf.official.predictions: the name {name!r} is given twice")
        files[name] = PredictionFile(name, str(f["file"]), tuple(float(e) for e in f["edges"]))
    return Official(
        files,
        str(cfg["ssjf_predictor"]),
        str(cfg["setting"]),
        int(cfg["batch_size"]),
        float(cfg["fcfs_batch_timeout_s"]),
        float(cfg["guard_factor"]),
        tuple(int(b) for b in cfg.get("sweep_batch_sizes") or ()),
    )
