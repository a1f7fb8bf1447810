"""The serving study's setup from config ``serving`` (shared by the config checks and the rules):
the policies with their KV budget, the time law of each, the workload and the replay.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llmqueue.analytic.batch_time import decode_context
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw, batch_law_from_step
from llmqueue.policy import Policy
from llmqueue.profiles import (
    Latency,
    fit_json_path,
    kv_tokens_of_fit,
    resolve_batch_profile,
    resolve_step_profile,
)
from llmqueue.schema import with_defaults
from llmqueue.sim.workload import ReplayWorkload, TraceWorkload

__all__ = ["with_kv", "ServingSetup", "serving_setup", "setup_for_rule"]


def with_kv(policy: Policy, kv_tokens: int | None) -> Policy:
    """A continuous policy with the KV budget filled in when it has none."""
    if policy.kind != "continuous" or policy.kv_tokens is not None or kv_tokens is None:
        return policy
    bs = int(policy.block_size)  # a paged cache holds whole blocks
    return replace(policy, kv_tokens=int(kv_tokens) // bs * bs)


# ---- the study's setup from its config section ---------------------------------------------------
@dataclass(frozen=True)
class ServingSetup:
    """What every serving-study rule needs: the policies (KV budget filled in), the time law of
    each, the Poisson workload of trace rows and the replay of the same trace."""

    policies: dict[str, Policy]
    latencies: dict[str, Latency]
    workload: TraceWorkload
    replay: ReplayWorkload
    step: StepLaw
    kv_tokens: int


def serving_setup(
    section: Mapping[str, Any],
    profiles: Mapping[str, Any],
    fit: Mapping[str, Any] | None,
    static_fit: Mapping[str, Any] | None,
    trace_path: str | Path,
) -> ServingSetup:
    """Build the study's setup from config ``serving`` (`section`), the config profile sections
    (`profiles`: step_profiles, batch_profiles), the step profile's fit.json (`fit`) and, when
    ``static_law`` names a batch profile, its fit.json (`static_fit`)."""
    from llmqueue.policy_text import parse_policy

    section = with_defaults(section, "serving")
    name = str(section["step_profile"])
    step_cfg = (profiles.get("step_profiles") or {}).get(name)
    if step_cfg is None:
        raise InputError(f"serving.step_profile: {name!r} is not a step_profiles entry")
    step = resolve_step_profile(name, step_cfg, fit)
    if section["kv_tokens"] is not None:
        kv = int(section["kv_tokens"])
    else:
        kv = kv_tokens_of_fit(fit, memory_fraction=float(section["kv_memory_fraction"]))
    cols = section["trace_columns"]
    workload = TraceWorkload.from_csv(trace_path, 1.0, cols["prompt"], cols["output"])
    replay = ReplayWorkload.from_csv(trace_path, cols["timestamp"], cols["prompt"], cols["output"])
    static = str(section["static_law"])
    static_law: Latency | None = None
    if static != "from_step":
        bcfg = (profiles.get("batch_profiles") or {}).get(static)
        if bcfg is None:
            raise InputError(
                f"serving.static_law: {static!r} is neither from_step nor a batch profile"
            )
        static_law = resolve_batch_profile(
            static, dict(bcfg), dict(static_fit) if static_fit else None
        )
    policies: dict[str, Policy] = {}
    latencies: dict[str, Latency] = {}
    for pname, spec in section["policies"].items():
        pol = with_kv(parse_policy(str(spec)), kv)
        policies[str(pname)] = pol
        if pol.kind == "continuous":
            latencies[str(pname)] = step
        elif static_law is not None:
            latencies[str(pname)] = static_law
        else:
            ctx = decode_context(workload.prompt_tokens, workload.output_tokens, _padded_to(pol))
            latencies[str(pname)] = batch_law_from_step(step, workload.mean_prompt(), ctx)
    return ServingSetup(policies, latencies, workload, replay, step, kv)


def _padded_to(policy: Policy) -> int:
    """The batch size whose longest reply a padded static batch decodes to (1: no padding)."""
    if policy.kind == "fixed":
        return int(policy.k)
    if policy.kind == "dynamic" and policy.bmax is not None:
        return int(policy.bmax)
    return 1  # none, elastic (each reply leaves when done), or an unbounded b_max


def setup_for_rule(params: Any, inputs: Any, policy: str) -> ServingSetup:
    """The setup of one policy inside a serving-study rule: `params` holds ``setup`` (the
    serving keys), ``profiles`` and ``spec``; `inputs` the fit.json files and the trace."""
    from llmqueue.io import read_json

    fits = [read_json(p) for p in inputs.fits]
    setup = dict(params.setup)
    section = dict(setup, policies={policy: params.spec})
    step_cfg = params.profiles["step_profiles"][setup["step_profile"]]
    # the rule lists the step profile's fit.json first, then the static batch profile's (if any)
    step_fit = fits.pop(0) if fit_json_path(step_cfg) else None
    static_fit = fits.pop(0) if fits else None
    return serving_setup(section, params.profiles, step_fit, static_fit, inputs.trace)
