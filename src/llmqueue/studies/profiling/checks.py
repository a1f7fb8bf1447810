"""Checks of the ``profiling`` section of the config (what the schema cannot see).

Raised before any job starts, each naming the key: unknown models or GPU specs, Table I pairs or
batch grids that do not fit a model's context or its depth check, committed measurement folders
(``profiling.measured``) that lack ``timing.csv`` / ``e2e.csv`` / ``meta.json``, kernel profiles
(``profiling.kernel_profiles``) whose CSV is missing, and ``step_profiles`` that name a source,
model or variant no fit.json will have.
Imports nothing beyond what the GPU machine has (used by ``python -m llmqueue profile``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.schema import with_defaults

MEASURED_FILES = ("timing.csv", "e2e.csv", "meta.json")


def check_profiling_section(prof: Mapping[str, Any]) -> None:
    """Semantic checks of config ``profiling`` (no file access)."""
    from llmqueue.hardware.devices import GPU_SPECS
    from llmqueue.hardware.models import MODEL_SPECS

    prof = with_defaults(prof, "profiling")
    models = list(prof["models"])
    for m in models:
        if m not in MODEL_SPECS:
            raise InputError(f"profiling.models: unknown model {m!r}; known: {sorted(MODEL_SPECS)}")
    for pair in prof.get("table1_pairs", []):
        if len(pair) != 2 or min(pair) < 1:
            raise InputError(
                f"profiling.table1_pairs: {pair} must be [input, output] tokens, both >= 1"
            )
        for m in models:
            if sum(pair) > MODEL_SPECS[m].context:
                raise InputError(
                    f"profiling.table1_pairs: {pair} exceeds the context of {m} ({MODEL_SPECS[m].context})"
                )
    f2a = prof.get("fig2a", {})
    if f2a and f2a.get("max_output_tokens", 512) < 2:
        raise InputError("profiling.fig2a.max_output_tokens must be >= 2")
    for kind, plan in prof.get("hardware", {}).items():
        key = f"profiling.hardware.{kind}"
        if kind == "cpu" and plan.get("dtype") == "float16":
            raise InputError(
                f"{key}.dtype: float16 is not supported on CPU; use float32 or bfloat16"
            )
        for grid in ("batch_sizes", "throughput_batch_sizes"):
            vals = plan.get(grid, [])
            if not vals or min(vals) < 1 or len(set(vals)) != len(vals):
                raise InputError(
                    f"{key}.{grid}: a non-empty list of distinct batch sizes >= 1, got {vals}"
                )
        for m in plan["depth_models"]:
            if m not in models:
                raise InputError(f"{key}.depth_models: {m!r} is not in profiling.models {models}")
        depth = plan["depth_layers"]
        if plan.get("depth_models") and (len(depth) < 3 or plan.get("layers", 1) not in depth):
            raise InputError(
                f"{key}.depth_layers must list >= 3 depths including the sweep depth "
                f"({plan.get('layers')}), got {depth}"
            )
        for m in models:
            spec = MODEL_SPECS[m]
            if plan.get("layers") and plan["layers"] > spec.layers:
                raise InputError(
                    f"{key}.layers = {plan['layers']} exceeds {m}'s {spec.layers} layers"
                )
            for b, s, n in plan["composition_runs"]:
                if b < 1 or s < 1 or n < 2 or s + n > spec.context:
                    raise InputError(
                        f"{key}.composition_runs: [{b}, {s}, {n}] needs b, input >= 1, output >= 2 "
                        f"and input + output <= {spec.context} ({m})"
                    )
            if (
                plan.get("decode_steps", 1) + prof["fig2b"]["throughput_input_tokens"]
                > spec.context
            ):
                raise InputError(f"{key}.decode_steps too long for {m}'s context")
    sl = prof.get("step_law")
    if sl:
        if sl["model"] not in MODEL_SPECS:
            raise InputError(
                f"profiling.step_law.model: unknown model {sl['model']!r}; known: {sorted(MODEL_SPECS)}"
            )
        window = MODEL_SPECS[sl["model"]].context
        for c in sl["decode_contexts"]:
            if c + sl["decode_steps"] + 1 > window:
                raise InputError(
                    f"profiling.step_law.decode_contexts: {c} + decode_steps + 1 exceeds "
                    f"{sl['model']}'s window of {window} tokens"
                )
        for _b, p in sl["prefill_points"]:
            if p > window:
                raise InputError(
                    f"profiling.step_law.prefill_points: prompt {p} exceeds the window of {window}"
                )
        if min(sl["decode_batch_sizes"]) * min(sl["decode_contexts"]) > sl["max_kv_tokens"]:
            raise InputError(
                "profiling.step_law.max_kv_tokens: no (batch, context) of the decode grid fits"
            )
    kv = prof.get("kv_limit")
    if kv:
        if kv["model"] not in MODEL_SPECS:
            raise InputError(
                f"profiling.kv_limit.model: unknown model {kv['model']!r}; known: {sorted(MODEL_SPECS)}"
            )
        ids = [r["id"] for r in kv.get("readings", [])]
        if len(set(ids)) != len(ids):
            raise InputError(f"profiling.kv_limit.readings: ids must be unique, got {ids}")
        for r in kv.get("readings", []):
            if r["gpu"] not in GPU_SPECS:
                raise InputError(
                    f"profiling.kv_limit.readings[{r['id']}].gpu: unknown GPU {r['gpu']!r}; known: {sorted(GPU_SPECS)}"
                )
    kernels = prof.get("kernel_profiles") or {}
    for name, kc in kernels.items():
        key = f"profiling.kernel_profiles.{name}"
        if name == "paper" or name.startswith("roofline-") or name in prof["measured"]:
            raise InputError(
                f"{key}: the name collides with another source (paper, roofline-<gpu>, profiling.measured)"
            )
        if kc["model"] not in MODEL_SPECS:
            raise InputError(
                f"{key}.model: unknown model {kc['model']!r}; known: {sorted(MODEL_SPECS)}"
            )
        if kc["gpu"] not in GPU_SPECS:
            raise InputError(f"{key}.gpu: unknown GPU {kc['gpu']!r}; known: {sorted(GPU_SPECS)}")
    for name in prof.get("fig2b", {}).get("kernel_sources") or []:
        if name not in kernels:
            raise InputError(
                f"profiling.fig2b.kernel_sources: {name!r} is not in profiling.kernel_profiles {sorted(kernels)}"
            )
        gpu = prof.get("roofline", {}).get("batch_gpu_for_fig5")
        if kernels[name]["gpu"] != gpu:
            raise InputError(
                f"profiling.fig2b.kernel_sources: {name!r} is on {kernels[name]['gpu']}, but Fig. 2b draws "
                f"kernel sources beside the roofline {gpu} (profiling.roofline.batch_gpu_for_fig5)"
            )
    roof = prof.get("roofline")
    if roof:
        for g in list(roof.get("gpus", [])) + [roof.get("batch_gpu_for_fig5")]:
            if g is not None and g not in GPU_SPECS:
                raise InputError(
                    f"profiling.roofline: unknown GPU {g!r}; known: {sorted(GPU_SPECS)}"
                )
        if roof.get("batch_gpu_for_fig5") not in roof.get("gpus", []):
            raise InputError(
                "profiling.roofline.batch_gpu_for_fig5 must be one of profiling.roofline.gpus"
            )


def step_sources(prof: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every source that writes a fit.json with a step law, and the models it has: roofline-<gpu>
    and the measured folders for ``profiling.models``, kernel profiles for their own model."""
    prof = with_defaults(prof, "profiling")
    models = list(prof["models"])
    out = {f"roofline-{g}": models for g in prof.get("roofline", {}).get("gpus", [])}
    out.update({hw: models for hw in prof["measured"]})
    out.update({k: [v["model"]] for k, v in (prof.get("kernel_profiles") or {}).items()})
    return out


def check_step_profiles(config: Mapping[str, Any], base_dir: Path) -> None:
    """``step_profiles``: each ``kind: fit`` entry names a source and model the pipeline fits, and
    ``variant: step_graph`` only a measured folder whose ``step_law.csv`` exists."""
    from llmqueue.profiles import resolve_step_profile

    prof = with_defaults(config.get("profiling") or {}, "profiling")
    sources = step_sources(prof)
    for name, sp in (config.get("step_profiles") or {}).items():
        key = f"step_profiles.{name}"
        if sp.get("kind") == "fixed":
            try:
                resolve_step_profile(name, sp)
            except InputError as err:
                raise InputError(f"{key}: {err}") from None
            continue
        src, model = sp.get("source"), sp.get("model")
        if src == "paper":
            raise InputError(
                f"{key}.source: the paper's Table I is batch 1 only, so c0 and c_tok cannot be told apart: "
                "no step law; use a roofline-<gpu>, kernel-profile or measured source"
            )
        if src not in sources:
            raise InputError(
                f"{key}.source: unknown source {src!r}; sources with a step law: {sorted(sources)}"
            )
        if model not in sources[src]:
            raise InputError(f"{key}.model: {src} has no model {model!r}; it has {sources[src]}")
        if sp.get("variant") == "step_graph":  # the schema's default variant: step
            if src not in prof["measured"]:
                raise InputError(
                    f"{key}.variant: step_graph (CUDA-graph decode steps) exists only for a measured GPU folder, not {src!r}"
                )
            if not (Path(base_dir) / "data" / "profiling" / src / "step_law.csv").is_file():
                raise InputError(
                    f"{key}.variant: step_graph needs data/profiling/{src}/step_law.csv "
                    "(`python -m llmqueue profile step-law`)"
                )


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    """Config checks plus: every ``profiling.measured`` folder holds timing.csv, e2e.csv, meta.json;
    every kernel profile's CSV exists; step profiles name what the pipeline fits."""
    check_step_profiles(config, base_dir)
    if not config.get("profiling"):
        return
    prof = with_defaults(config["profiling"], "profiling")
    check_profiling_section(prof)
    for hw in prof["measured"]:
        folder = Path(base_dir) / "data" / "profiling" / hw
        for name in MEASURED_FILES:
            if not (folder / name).is_file():
                raise InputError(
                    f"profiling.measured: {hw!r} lacks {folder / name} (committed measurements: "
                    f"timing.csv, e2e.csv, meta.json from `python -m llmqueue profile measure`)"
                )
    for name, kc in (prof.get("kernel_profiles") or {}).items():
        if not (Path(base_dir) / kc["csv"]).is_file():
            raise InputError(
                f"profiling.kernel_profiles.{name}.csv: {Path(base_dir) / kc['csv']} does not exist"
            )
