"""Checks of the ``validation`` section of the config (what the schema cannot see).

``validation.vllm`` (the measurement): engine settings that contradict each other (a KV cache
smaller than one request, a token budget below the context without chunked prefill), calibration
batches that do not fit the engine, a model shape whose heads do not divide, warm-up requests that
leave no request to measure. Imports nothing beyond numpy/pandas (used by
``python -m llmqueue validate`` in the vLLM environment too).

``validation.vllm.matrix`` (the run groups of ``make validate-vllm``): every group, its engine
settings, runs and repeats (:func:`llmqueue.engines.groups.read_matrix`; no file access).

``validation.compare`` (the prediction): every run folder exists and holds the files and columns
the comparison reads, the figure's run is one of them, the settings are in range
(:func:`check_compare_section`; reads JSON files and CSV headers only).

``validation.machine_speed_compare`` (the machine-speed run read back): its folder exists with
the files and columns the reduction reads (:func:`check_machine_speed_folder`).

``validation.matrix_compare`` (every engine's matrix read back): each group folder holds what
the comparison reads and was measured on its engine (:func:`check_matrix_compare_section`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.schema import with_defaults

# the schema of the validation section: every key's type and range (checked before any meaning)
SCHEMA = Path(__file__).resolve().parents[1] / "studies" / "validation" / "schema.yaml"


def load_validation_config(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole config and its ``validation.vllm`` section, schema-checked and semantically
    checked."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError(f"config file {path!r} does not exist")
    try:
        cfg = yaml.safe_load(p.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise InputError(
            f"config file {path!r} is not readable YAML ({type(err).__name__})"
        ) from None
    if not isinstance(cfg, dict) or "vllm" not in (cfg.get("validation") or {}):
        raise InputError(f"{path}: no 'validation.vllm' section")
    schema_path = (
        SCHEMA if SCHEMA.is_file() else Path("src/llmqueue/studies/validation/schema.yaml")
    )
    if not schema_path.is_file():
        raise InputError(f"the config schema {SCHEMA} is missing (run from the project's folder)")
    import jsonschema

    schema = yaml.safe_load(schema_path.read_text())
    errors = sorted(
        jsonschema.Draft202012Validator(schema).iter_errors(cfg["validation"]),
        key=lambda e: list(e.path),
    )
    if errors:
        e = errors[0]
        key = ".".join(["validation", *(str(k) for k in e.path)])
        raise InputError(f"{path}: {key}: {e.message}")
    check_validation_section(cfg["validation"]["vllm"])
    check_matrix_section(cfg)
    return cfg, cfg["validation"]["vllm"]


def check_validation_section(section: Mapping[str, Any]) -> None:
    """Semantic checks of config ``validation.vllm`` (no file access)."""
    from llmqueue.engines.calibration import calibration_batches
    from llmqueue.engines.engine import EngineSettings

    where = "validation.vllm"
    eng = EngineSettings.from_config(section["engine"])
    shape = section["model"]["shape"]
    if shape["hidden_size"] % shape["num_attention_heads"]:
        raise InputError(
            f"{where}.model.shape: hidden_size must be a multiple of num_attention_heads"
        )
    if shape["num_attention_heads"] % shape["num_key_value_heads"]:
        raise InputError(
            f"{where}.model.shape: num_attention_heads must be a multiple of num_key_value_heads"
        )
    if shape["max_position_embeddings"] < eng.max_model_len:
        raise InputError(
            f"{where}.engine.max_model_len ({eng.max_model_len}) exceeds the model's "
            f"max_position_embeddings ({shape['max_position_embeddings']})"
        )
    calibration_batches(section["calibration"]["batches"], eng.max_model_len, eng.max_num_seqs)
    calibration_batches(
        section["warmup_batches"] or [[1, 1, 1]], eng.max_model_len, eng.max_num_seqs
    )
    if not (0 <= section["warmup_requests"] < section["requests"]):
        raise InputError(
            f"{where}.warmup_requests ({section['warmup_requests']}) must be below requests ({section['requests']})"
        )
    lo, hi = section["capacity"]["quantiles"]
    if not lo < hi:
        raise InputError(f"{where}.capacity.quantiles: {lo} must be below {hi}")


def check_compare_section(section: Mapping[str, Any], base_dir: Path, seed: int = 0) -> None:
    """Semantic checks of config ``validation.compare``: the settings (CompareSettings), the
    figure's run among ``runs``, and each run folder under ``dir`` (relative to `base_dir`) with
    its files and columns (:func:`llmqueue.studies.validation.check_run_folder`)."""
    from llmqueue.studies.validation.spec import CompareSettings, check_run_folder

    cfg = CompareSettings.from_config(section, seed)
    runs = list(section["runs"])
    if section["figure_run"] not in runs:
        raise InputError(
            f"validation.compare.figure_run {section['figure_run']!r} must be one of runs {runs}"
        )
    for run in runs:
        check_run_folder(Path(base_dir) / section["dir"] / run, cfg.tables)


def check_matrix_section(config: Mapping[str, Any]) -> None:
    """Semantic checks of ``validation.vllm.matrix`` and of the second engine's
    ``validation.transformers.matrix`` (:func:`llmqueue.engines.groups.read_matrix`)."""
    from llmqueue.engines.groups import read_matrix

    validation = config.get("validation") or {}
    vllm = validation.get("vllm") or {}
    hf = validation.get("transformers") or {}
    train = float(with_defaults(config.get("ssjf") or {}, "ssjf")["train_fraction"])
    if "matrix" in vllm:
        read_matrix(vllm, config.get("data") or {}, train)
    if "matrix" in hf:
        if "matrix" not in vllm:
            raise InputError(
                "validation.transformers.matrix: needs validation.vllm.matrix (its models, "
                "traces, calibration grid and protocol)"
            )
        read_matrix(vllm, config.get("data") or {}, train, engine="transformers", transformers=hf)


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    validation = config.get("validation") or {}
    section = validation.get("vllm")
    if section is not None:
        check_validation_section(section)
        check_matrix_section(config)
    compare = validation.get("compare")
    if compare is not None:
        check_compare_section(compare, base_dir, int(config.get("seed", 0)))
    speed = validation.get("machine_speed_compare")
    if speed is not None:
        check_machine_speed_folder(Path(base_dir) / speed["dir"])
    matrices = validation.get("matrix_compare")
    if matrices is not None:
        check_matrix_compare_section(matrices, base_dir)


def check_matrix_compare_section(section: Mapping[str, Any], base_dir: Path) -> None:
    """``validation.matrix_compare``: every engine's group folders hold what the comparison reads
    (:func:`llmqueue.studies.validation.matrix_spec.check_group_folder`; JSON and CSV headers
    only), each was measured on the engine it is listed under, and the token-limit figure's group
    is one of vLLM's."""
    import json

    from llmqueue.studies.validation.matrix_spec import check_group_folder

    where = "validation.matrix_compare"
    for engine, m in (section.get("matrices") or {}).items():
        for group in m["groups"]:
            folder = Path(base_dir) / m["dir"] / group
            check_group_folder(folder)
            kind = json.loads((folder / "group.json").read_text()).get("engine_kind", "vllm")
            if kind != engine:
                raise InputError(
                    f"{where}.matrices.{engine}: {folder} was measured on {kind}, not {engine}"
                )
    vllm_groups = (section.get("matrices") or {}).get("vllm", {}).get("groups", [])
    if section.get("token_limit_figure") not in vllm_groups:
        raise InputError(
            f"{where}.token_limit_figure must be one of vLLM's groups {list(vllm_groups)}, "
            f"got {section.get('token_limit_figure')!r}"
        )


def check_machine_speed_folder(folder: Path) -> None:
    """``validation.machine_speed_compare.dir``: the committed machine-speed folder exists with
    its files and columns (:func:`llmqueue.studies.validation.machine_speed.read_speed_run`;
    reads CSV headers and meta.json only)."""
    import json

    import pandas as pd

    from llmqueue.studies.validation.machine_speed import required_columns

    if not folder.is_dir():
        raise InputError(
            f"validation.machine_speed_compare.dir: {folder} is not a folder (made by "
            "make validate-vllm-speed)"
        )
    for name, need in required_columns().items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"validation.machine_speed_compare.dir: {path} is missing")
        missing = [c for c in need if c not in pd.read_csv(path, nrows=0).columns]
        if missing:
            raise InputError(
                f"validation.machine_speed_compare.dir: {path} lacks columns {missing}"
            )
    meta = (
        json.loads((folder / "meta.json").read_text()) if (folder / "meta.json").is_file() else {}
    )
    if "batch" not in (meta.get("machine_speed") or {}):
        raise InputError(
            f"validation.machine_speed_compare.dir: {folder / 'meta.json'} lacks machine_speed.batch"
        )
