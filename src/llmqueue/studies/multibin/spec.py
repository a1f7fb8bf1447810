"""The settings of the Multi-Bin Batching study (config section ``multibin``) as typed specs.

Kept apart from :mod:`llmqueue.studies.multibin.tables` so the config check
(:mod:`llmqueue.studies.multibin.checks`, run before every workflow run) reads them without importing
the simulators. The defaults are the schema's (src/llmqueue/studies/multibin/schema.yaml), filled in
by :func:`section`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency
from llmqueue.schema import with_defaults
from llmqueue.sim.settings import SimSettings
from llmqueue.traces import parse_trace_spec

__all__ = [
    "CLAIM_RATE_IDS",
    "CLAIM_GAIN_ID",
    "CLAIM_SYNTHETIC_IDS",
    "CLAIM_REAL_ID",
    "CLAIM_MONOTONE_ID",
    "CLAIM_BOUND_ID",
    "section",
    "trace_files",
    "CapacitySettings",
    "SyntheticSpec",
    "LLMSpec",
    "ContinuousVariant",
    "VsContinuousSpec",
]


# Reference ids of claim 11 (src/llmqueue/studies/multibin/reference_claims.csv): the six highest rates of the
# simulated LLM by k, the gain from k = 1 to 32, Theorem 4.2 in the synthetic setting by k, the
# real-serving gain, the rise with k and Lemma 5.1.
CLAIM_RATE_IDS = {1: "11a", 2: "11b", 4: "11c", 8: "11d", 16: "11e", 32: "11f"}
CLAIM_GAIN_ID = "11g"
CLAIM_SYNTHETIC_IDS = {1: "11h", 2: "11i", 3: "11j", 4: "11k", 5: "11l"}
CLAIM_REAL_ID = "11m"
CLAIM_MONOTONE_ID = "11n"
CLAIM_BOUND_ID = "11o"


def section(part: str, cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """Config ``multibin.<part>`` (`cfg`, possibly partial) with every default the schema
    (src/llmqueue/studies/multibin/schema.yaml) declares filled in; InputError for an unknown key."""
    return with_defaults(cfg or {}, f"multibin.{part}")


def trace_files(spec: str) -> list[str]:
    """The trace file a token-law spec reads (``trace:PATH:COLUMN[:cap=L]``; none for a
    parametric law): the workflow's input of a job that parses the spec."""
    if not spec.startswith("trace:"):
        return []
    return [parse_trace_spec(spec).path]


@dataclass(frozen=True)
class CapacitySettings:
    """The simulated highest rate: `replications` saturated queues of `requests` requests each;
    the estimate is their mean with a 95% Student-t half-width."""

    requests: int
    replications: int

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> CapacitySettings:
        return cls(int(cfg["requests"]), int(cfg["replications"]))


def _bins(values: Sequence[Any], key: str) -> tuple[int, ...]:
    out = tuple(int(v) for v in values)
    if not out or any(v < 1 for v in out) or len(set(out)) != len(out):
        raise InputError(f"multibin.{key}: distinct integers >= 1, got {list(values)}")
    return out


@dataclass(frozen=True)
class SyntheticSpec:
    """Sec. 6.1: `tokens` (a uniform law for Theorem 4.2), batch size B, the k values, and the
    batch time constant + time per token x longest (time units, tokens)."""

    tokens: str
    batch: int
    bins: tuple[int, ...]
    time_per_token: float
    constant: float
    capacity: CapacitySettings

    @classmethod
    def from_config(cls, given: Mapping[str, Any] | None) -> SyntheticSpec:
        cfg = section("synthetic", given)
        return cls(
            str(cfg["tokens"]),
            int(cfg["batch"]),
            _bins(cfg["bins"], "synthetic.bins"),
            float(cfg["time_per_token"]),
            float(cfg["constant"]),
            CapacitySettings.from_config(cfg["capacity"]),
        )

    @property
    def latency(self) -> LinearLatency:
        return LinearLatency(self.time_per_token, self.constant, name="synthetic")


@dataclass(frozen=True)
class LLMSpec:
    """Sec. 6.2 "simulated LLM": lengths `tokens`, batch time constant_s + time_per_token_s x
    longest, batch size B, c servers, the k values, the prediction error probabilities p_e, the
    loads of the latency sweep (fractions of the k = 1 highest rate) and the flush timeouts
    drawn beside the paper's no-timeout model."""

    tokens: str
    time_per_token_s: float
    constant_s: float
    batch: int
    servers: int
    bins: tuple[int, ...]
    error_probs: tuple[float, ...]
    capacity: CapacitySettings
    loads: tuple[float, ...]
    flush_s: tuple[float, ...]
    sim: SimSettings

    @classmethod
    def from_config(cls, given: Mapping[str, Any] | None) -> LLMSpec:
        cfg = section("llm", given)
        return cls(
            str(cfg["tokens"]),
            float(cfg["time_per_token_s"]),
            float(cfg["constant_s"]),
            int(cfg["batch"]),
            int(cfg["servers"]),
            _bins(cfg["bins"], "llm.bins"),
            tuple(float(p) for p in cfg["error_probs"]),
            CapacitySettings.from_config(cfg["capacity"]),
            tuple(float(x) for x in cfg["loads"]),
            tuple(float(x) for x in cfg["flush_s"]),
            SimSettings.from_config(cfg["simulation"]),
        )

    @property
    def latency(self) -> LinearLatency:
        return LinearLatency(self.time_per_token_s, self.constant_s, name="paper_llm")


@dataclass(frozen=True)
class ContinuousVariant:
    """A continuous-batching server: `max_batch` (None = no cap), `kv_tokens` (None = no KV
    limit; "batch_memory" = B x (prompt + longest output), what one Multi-Bin batch may hold),
    admission rule."""

    name: str
    max_batch: int | None
    kv_tokens: int | str | None
    admission: str

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ContinuousVariant:
        return cls(
            str(cfg["name"]),
            None if cfg.get("max_batch") is None else int(cfg["max_batch"]),
            cfg.get("kv_tokens"),
            str(cfg["admission"]),
        )


@dataclass(frozen=True)
class VsContinuousSpec:
    """Multi-Bin (Eq. 18 batch law `batch_profile`, a config ``batch_profiles`` name) against
    continuous batching (step law `step_profile`, a ``step_profiles`` name) on c servers, lengths
    `tokens`, prompts of `prompt_tokens` tokens; loads are fractions of the highest Multi-Bin
    rate (largest k)."""

    tokens: str
    prompt_tokens: int
    batch_profile: str
    step_profile: str
    batch: int
    servers: int
    bins: tuple[int, ...]
    variants: tuple[ContinuousVariant, ...]
    loads: tuple[float, ...]
    capacity: CapacitySettings
    sim: SimSettings

    @classmethod
    def from_config(cls, given: Mapping[str, Any] | None) -> VsContinuousSpec:
        cfg = section("vs_continuous", given)
        return cls(
            str(cfg["tokens"]),
            int(cfg["prompt_tokens"]),
            str(cfg["batch_profile"]),
            str(cfg["step_profile"]),
            int(cfg["batch"]),
            int(cfg["servers"]),
            _bins(cfg["bins"], "vs_continuous.bins"),
            tuple(ContinuousVariant.from_config(v) for v in cfg["continuous"]),
            tuple(float(x) for x in cfg["loads"]),
            CapacitySettings.from_config(cfg["capacity"]),
            SimSettings.from_config(cfg["simulation"]),
        )
