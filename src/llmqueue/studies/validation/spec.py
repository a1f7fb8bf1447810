"""What the vLLM validation study reads: config ``validation.compare``
(:class:`CompareSettings`) and the committed run folders (:func:`read_run`, checked by
:func:`check_run_folder`; the config checks call it before any job), with the columns and
settings each file must hold.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue.errors import InputError
from llmqueue.schema import with_defaults
from llmqueue.traces import VLLM_REQUEST_COLUMNS, read_trace

__all__ = [
    "REQUEST_COLUMNS",
    "STEP_COLUMNS",
    "SETTINGS_KEYS",
    "PREDICTION_COLUMNS",
    "COMPARISON_COLUMNS",
    "STEP_LAW_FORMS",
    "VARIANTS",
    "KV_MODELS",
    "CompareSettings",
    "RunData",
    "check_run_folder",
    "csv_header",
    "read_run",
]


REQUEST_COLUMNS = VLLM_REQUEST_COLUMNS


STEP_COLUMNS = ("t_sched_s", "t_done_s", "decode_seqs", "prefill_tokens", "context_tokens")


SETTINGS_KEYS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "block_size",
    "usable_kv_tokens",
    "kv_tokens",
    "preemption_mode",
    "scheduling_policy",
    "reserve_full_prompt_on_admission",
)


FIT_KEYS = ("c0_s", "c_tok_s", "c_ctx_s")


PREDICTION_COLUMNS = (
    "run",
    "variant",
    "request_id",
    "warmup",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "measured_ttft_s",
    "measured_jct_s",
    "predicted_ttft_s",
    "predicted_jct_s",
)


STATS = ("mean", "p50", "p90")


COMPARISON_COLUMNS = (
    "run_id",
    "run",
    "load",
    "rate_per_s",
    "variant",
    "metric",
    "requests",
    *(f"{w}_{s}_s" for s in STATS for w in ("measured", "predicted")),
    *(f"{s}_rel_error" for s in STATS),
    "pearson",
    "spearman",
    "median_abs_rel_error",
    "target_mean",
    "target_p90",
    "within_target",
    "law_total_rel_error",
    "law_prefill_rel_error",
    "law_decode_rel_error",
    "law_after_idle_rel_error",
    "iterations",
    "c0_s",
    "c_tok_s",
    "c_ctx_s",
    "c_qk_s",
    "engine",
    "unmodelled_rules",
)


# the forms a step law may take (llmqueue.studies.validation.tables.fit_form); config
# validation.compare.laws names one per engine
STEP_LAW_FORMS = ("linear", "shaped", "split", "split_attention", "packed")


# the prediction, then the diagnostic variants (config validation.compare.diagnostics)
VARIANTS = ("prediction", "token_kv", "in_situ_law")


KV_MODELS = ("paged", "tokens")


KV_BUDGETS = ("usable", "all")


@dataclass(frozen=True)
class CompareSettings:
    """Config ``validation.compare`` (the simulator side): which request tables of a run folder,
    KV model (``paged``: whole blocks, ``tokens``: token-granular), KV budget (``usable``: the
    blocks vLLM can hand out, its null block left out; ``all``), the diagnostic variants, the
    issue's targets (relative errors of mean and p90 JCT), the root seed, and per engine
    (``settings.json``'s ``engine``, vLLM where absent) the step law's form (``linear``: the run
    folder's own calibration fit; any other :data:`STEP_LAW_FORMS` entry: fitted here on its
    ``calibration_steps.csv``)."""

    tables: tuple[str, ...]
    kv_model: str = "paged"
    kv_budget: str = "usable"
    diagnostics: tuple[str, ...] = ()
    target_mean: float = 0.10
    target_p90: float = 0.15
    seed: int = 0
    laws: tuple[tuple[str, str], ...] = (("vllm", "linear"),)

    def __post_init__(self) -> None:
        where = "validation.compare"
        for engine, form in self.laws:
            if form not in STEP_LAW_FORMS:
                raise InputError(
                    f"{where}.laws.{engine} must be one of {list(STEP_LAW_FORMS)}, got {form!r}"
                )
        if not self.tables or len(set(self.tables)) != len(self.tables):
            raise InputError(f"{where}.tables: one or more distinct run names, got {self.tables}")
        if self.kv_model not in KV_MODELS:
            raise InputError(f"{where}.kv_model must be one of {KV_MODELS}, got {self.kv_model!r}")
        if self.kv_budget not in KV_BUDGETS:
            raise InputError(
                f"{where}.kv_budget must be one of {KV_BUDGETS}, got {self.kv_budget!r}"
            )
        bad = [d for d in self.diagnostics if d not in VARIANTS[1:]]
        if bad:
            raise InputError(f"{where}.diagnostics: {bad} unknown; allowed: {list(VARIANTS[1:])}")
        for key, v in (("jct_mean", self.target_mean), ("jct_p90", self.target_p90)):
            if not (0 < v < 1):
                raise InputError(f"{where}.targets.{key} must be a fraction in (0, 1), got {v}")

    @classmethod
    def from_config(cls, section: Mapping[str, Any], seed: int) -> CompareSettings:
        """Config ``validation.compare``, possibly partial (the schema's defaults fill it)."""
        section = with_defaults(section, "validation.compare")
        t = section["targets"]
        return cls(
            tuple(section["tables"]),
            section["kv_model"],
            section["kv_budget"],
            tuple(section["diagnostics"]),
            float(t["jct_mean"]),
            float(t["jct_p90"]),
            int(seed),
            tuple((str(k), str(v)) for k, v in (section.get("laws") or {"vllm": "linear"}).items()),
        )

    def law_form(self, engine: str) -> str:
        """The step law's form for runs of `engine` (``linear`` where the config names none)."""
        return dict(self.laws).get(engine, "linear")


@dataclass(frozen=True)
class RunData:
    """One committed run folder, read and checked (:func:`read_run`)."""

    run_id: str
    settings: Mapping[str, Any]
    fits: Mapping[str, Any]
    meta: Mapping[str, Any]
    requests: Mapping[str, pd.DataFrame]
    steps: Mapping[str, pd.DataFrame]
    calibration: pd.DataFrame | None = None  # calibration_steps.csv, where the folder has one


# ---- reading ----------------------------------------------------------------------------------
def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file (its first line), read without the rest."""
    with path.open() as fh:
        return fh.readline().strip().split(",")


def check_run_folder(folder: str | Path, tables: Sequence[str]) -> None:
    """The run folder exists and holds what the comparison reads: settings.json (the engine
    settings of :data:`SETTINGS_KEYS`), calibration_fit.json, meta.json, and for every name in
    `tables` requests_<name>.csv (:data:`REQUEST_COLUMNS`) and steps_<name>.csv
    (:data:`STEP_COLUMNS`). Reads headers only; InputError names the file and what is missing."""
    p = Path(folder)
    if not p.is_dir():
        raise InputError(
            f"validation run folder {str(p)!r} does not exist (validation.compare.runs names "
            "folders under validation.compare.dir, made by `make validate-vllm`)"
        )
    for name in ("settings.json", "calibration_fit.json", "meta.json"):
        if not (p / name).is_file():
            raise InputError(f"validation run folder {str(p)!r} lacks {name}")
    settings = json.loads((p / "settings.json").read_text())
    missing = [k for k in SETTINGS_KEYS if k not in settings]
    if missing:
        raise InputError(f"{str(p / 'settings.json')!r} lacks the engine settings {missing}")
    cal = json.loads((p / "calibration_fit.json").read_text()).get("calibration", {})
    missing = [k for k in FIT_KEYS if k not in cal]
    if missing:
        raise InputError(f"{str(p / 'calibration_fit.json')!r}: 'calibration' lacks {missing}")
    for t in tables:
        for kind, cols in (("requests", REQUEST_COLUMNS), ("steps", STEP_COLUMNS)):
            f = p / f"{kind}_{t}.csv"
            if not f.is_file():
                raise InputError(
                    f"validation run folder {str(p)!r} lacks {f.name} (validation.compare.tables "
                    f"names {t!r})"
                )
            lacking = [c for c in cols if c not in csv_header(f)]
            if lacking:
                raise InputError(f"{str(f)!r} lacks columns {lacking}")


def read_run(folder: str | Path, tables: Sequence[str]) -> RunData:
    """Read a committed run folder (checked by :func:`check_run_folder`); request rows must be in
    arrival order with arrival <= first token <= finish and whole token counts >= 1 output."""
    p = Path(folder)
    check_run_folder(p, tables)
    requests, steps = {}, {}
    for t in tables:
        f = str(p / f"requests_{t}.csv")
        df = read_trace(f, format="vllm-requests", where="validation run").frame
        if len(df) < 20:
            raise InputError(f"{f!r}: at least 20 requests are needed, got {len(df)}")
        requests[t] = df
        steps[t] = pd.read_csv(p / f"steps_{t}.csv")
    return RunData(
        p.name,
        json.loads((p / "settings.json").read_text()),
        json.loads((p / "calibration_fit.json").read_text()),
        json.loads((p / "meta.json").read_text()),
        requests,
        steps,
        pd.read_csv(p / "calibration_steps.csv")
        if (p / "calibration_steps.csv").is_file()
        else None,
    )
