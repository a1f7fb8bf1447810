"""The ``plan`` section of the config: the worked example of ``llmqueue plan`` (docs/cli.md) as a
workflow, one job per slice of the search space, merged at the end (src/llmqueue/plan/plan.smk).

The section holds the command's own flags (:func:`plan_args` turns it into them), so the
pipeline runs exactly what an operator would type: ``step_profile`` (a ``step_profiles``
entry), ``trace`` (default ``data.azure_trace``) and ``trace_format``, ``slo``, ``rate``, ``target_rate``, ``predictor``, ``space`` (``replicas``, ``router``,
``order``, ``max_batch``, ``max_batched_tokens``, ``kv_fraction``, ``block_size``), ``run``
(``requests``, ``warmup``, ``tolerance``, ``headroom``, ``guard_s``, ``max_load``) and ``slices``, the
number of jobs. An operator's own search: the same keys in a ``--configfile``, and
``snakemake plan`` (on a cluster: ``--profile profiles/slurm``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llmqueue.schema import with_defaults

__all__ = ["plan_args", "run_setting", "SPACE_FLAGS", "RUN_FLAGS", "RUN_DEFAULTS"]

# config key -> flag of llmqueue plan
SPACE_FLAGS = {
    "replicas": "--replicas",
    "router": "--router",
    "order": "--order",
    "max_batch": "--max-batch",
    "max_batched_tokens": "--max-batched-tokens",
    "kv_fraction": "--kv-fraction",
    "block_size": "--block-size",
}
RUN_FLAGS = {
    "requests": "--requests",
    "warmup": "--warmup",
    "tolerance": "--tolerance",
    "headroom": "--headroom",
    "guard_s": "--guard",
    "max_load": "--max-load",
}
# the defaults of the run flags (llmqueue plan's parser takes them from here, and the workflow
# reads a key the section leaves out through run_setting): one declaration
RUN_DEFAULTS: dict[str, Any] = {
    "requests": 20_000,
    "warmup": 2_000,
    "tolerance": 0.02,
    "headroom": 0.8,
    "guard_s": None,
    "max_load": 0.95,
}


def run_setting(section: Mapping[str, Any], key: str) -> Any:
    """``run.<key>`` of a plan section, or the command's default (:data:`RUN_DEFAULTS`)."""
    run = section.get("run") or {}
    return run[key] if run.get(key) is not None else RUN_DEFAULTS[key]


def plan_args(section: Mapping[str, Any], *, seed: int) -> list[str]:
    """The flags of ``llmqueue plan`` that the section gives (every job of the search shares
    them; the workflow adds the trace, the profile's config, the slice and the outputs)."""
    section = with_defaults(section, "plan")
    args = ["--profile", str(section["step_profile"]), "--slo", str(section["slo"])]
    args += ["--trace-format", str(section["trace_format"])]
    args += ["--rate", str(section["rate"]), "--seed", str(seed)]
    if section.get("target_rate") is not None:
        args += ["--target-rate", str(section["target_rate"])]
    if section.get("predictor"):
        args += ["--predictor", str(section["predictor"])]
    for key, flag in SPACE_FLAGS.items():
        val = (section.get("space") or {}).get(key)
        if val is not None:
            args += [flag, str(val)]
    for key, flag in RUN_FLAGS.items():
        val = (section.get("run") or {}).get(key)
        if val is not None:
            args += [flag, str(val)]
    return args
