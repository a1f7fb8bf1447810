"""Checks of the ``profiling`` section of the config (what the schema cannot see).

Raised before any job starts, each naming the key: unknown models or GPU specs, Table I pairs or
batch grids that do not fit a model's context or its depth check, committed measurement folders
(``profiling.measured``) that lack ``timing.csv`` / ``e2e.csv`` / ``meta.json``.
Imports nothing beyond what the GPU machine has (used by ``python -m llmqueue.profiling``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError

MEASURED_FILES = ("timing.csv", "e2e.csv", "meta.json")


def check_profiling_section(prof: Mapping[str, Any]) -> None:
    """Semantic checks of config ``profiling`` (no file access)."""
    from llmqueue.profiling.devices import GPU_SPECS
    from llmqueue.profiling.models import MODEL_SPECS

    models = list(prof.get("models", []))
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
        for m in plan.get("depth_models", []):
            if m not in models:
                raise InputError(f"{key}.depth_models: {m!r} is not in profiling.models {models}")
        depth = plan.get("depth_layers", [])
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
            for b, s, n in plan.get("composition_runs", []):
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


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    """Config checks plus: every ``profiling.measured`` folder holds timing.csv, e2e.csv, meta.json."""
    prof = config.get("profiling") or {}
    if not prof:
        return
    check_profiling_section(prof)
    for hw in prof.get("measured", []):
        folder = Path(base_dir) / "data" / "profiling" / hw
        for name in MEASURED_FILES:
            if not (folder / name).is_file():
                raise InputError(
                    f"profiling.measured: {hw!r} lacks {folder / name} (committed measurements: "
                    f"timing.csv, e2e.csv, meta.json from `python -m llmqueue.profiling measure`)"
                )
