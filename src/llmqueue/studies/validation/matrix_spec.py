"""What the held-out validation matrix's comparison reads: config ``validation.matrix_compare``
(:class:`MatrixCompareSettings`) and the committed group folders of ``make validate-vllm``
(``<dir>/<group>/``, :mod:`llmqueue.engines.groups`), read by :func:`read_group` and checked
(headers only, before any job) by :func:`check_group_folder`.

A group folder holds ``group.json`` (the group as run: policy, model, trace, engine settings,
runs, repeats), ``settings.json`` (what vLLM used, read back), ``calibration_steps.csv`` (the
calibration iterations, the only data any law is fitted on), ``calibration_fit.json``,
``meta.json`` (per run: planned and achieved load, rates, contention, preemptions) and per run
(capacity bursts and judged runs) ``requests_<run>.csv`` and ``steps_<run>.csv``.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue.engines.groups import ENGINE_KINDS, GroupSpec, RunSpec, group_from_summary
from llmqueue.errors import InputError
from llmqueue.schema import with_defaults
from llmqueue.studies.validation.spec import REQUEST_COLUMNS, STEP_COLUMNS, csv_header
from llmqueue.traces import read_trace

__all__ = [
    "GROUP_FILES",
    "MATRIX_REQUEST_COLUMNS",
    "CALIBRATION_COLUMNS",
    "PROBE_FILE",
    "PROBE_COLUMNS",
    "LAWS",
    "MatrixTargets",
    "MatrixCompareSettings",
    "engine_section",
    "GroupData",
    "check_group_folder",
    "read_group",
]

GROUP_FILES = (
    "group.json",
    "settings.json",
    "calibration_fit.json",
    "calibration_steps.csv",
    "meta.json",
)

# a matrix run's request table: the replayed columns, then what the matrix adds
MATRIX_REQUEST_COLUMNS = (
    *REQUEST_COLUMNS,
    "engine_start_s",
    "token_limit",
    "priority",
    "requested_tokens",
)

CALIBRATION_COLUMNS = (*STEP_COLUMNS, "time_s", "admitted_ids")

# the protocol's speed probes (llmqueue.engines.protocol), in folders measured with one
PROBE_FILE = "probe_steps.csv"
PROBE_COLUMNS = ("probe", "session", "run", "position", *STEP_COLUMNS)

# the step laws a prediction may use (config validation.matrix_compare.law): fitted on the
# group's calibration iterations only; ``split`` is the form chosen by leave-one-batch-out
# cross-validation on the calibration batches (llmqueue.studies.validation.law_form)
LAWS = ("split", "shaped", "linear")


@dataclass(frozen=True)
class MatrixTargets:
    """The targets over the judged runs (fractions; pp for the queue orders' reductions): the
    unconditional prediction's median and largest |mean JCT error|, its median |p90 JCT| and
    |mean TTFT| errors, the probe-scaled prediction's and the run-speed diagnosis's median
    |mean JCT error|, SJF's and SSJF's reductions against FCFS (issue on the real-engine
    protocol; judged by :func:`llmqueue.studies.validation.verdict.judge_targets`)."""

    jct_mean_median: float = 0.08
    jct_mean_max: float = 0.20
    jct_p90_median: float = 0.10
    ttft_mean_median: float = 0.12
    probe_jct_mean_median: float = 0.05
    run_speed_jct_mean_median: float = 0.03
    reduction_pp: float = 3.0


@dataclass(frozen=True)
class MatrixCompareSettings:
    """Config ``validation.matrix_compare`` for one engine's matrix: the folder of its group
    folders and the groups compared, in order (``matrices.<engine>``), the prediction's step law
    (:data:`LAWS`; the others are reported beside it), KV model and budget (as
    ``validation.compare``), batches for the batch-means CIs of the measured waits, the targets
    (the same for every engine), the root seed, the window of the engine's speed diagnosis (s)
    and the engine (:data:`llmqueue.engines.groups.ENGINE_KINDS`)."""

    dir: str
    groups: tuple[str, ...]
    law: str = "split"
    kv_model: str = "paged"
    kv_budget: str = "usable"
    ci_batches: int = 6
    targets: MatrixTargets = field(default_factory=MatrixTargets)
    seed: int = 0
    speed_window_s: float = 15.0
    engine: str = "vllm"

    def __post_init__(self) -> None:
        where = "validation.matrix_compare"
        if self.engine not in ENGINE_KINDS:
            raise InputError(
                f"{where}.matrices: engine {self.engine!r} is not one of {', '.join(ENGINE_KINDS)}"
            )
        if not self.groups or len(set(self.groups)) != len(self.groups):
            raise InputError(f"{where}.groups: one or more distinct group names, got {self.groups}")
        if self.law not in LAWS:
            raise InputError(f"{where}.law must be one of {', '.join(LAWS)}, got {self.law!r}")
        if not (isinstance(self.ci_batches, int) and 3 <= self.ci_batches <= 50):
            raise InputError(f"{where}.ci_batches must be an integer in [3, 50]")
        if not (math.isfinite(self.speed_window_s) and 1.0 <= self.speed_window_s <= 600.0):
            raise InputError(f"{where}.speed_window_s must be a time in [1, 600] s")

    @property
    def other_laws(self) -> tuple[str, ...]:
        """The laws reported beside the prediction's, in :data:`LAWS` order."""
        return tuple(x for x in LAWS if x != self.law)

    @classmethod
    def from_config(cls, section: Mapping[str, Any], seed: int) -> MatrixCompareSettings:
        """From one engine's flattened section: the shared keys of ``validation.matrix_compare``
        with that engine's ``dir``, ``groups`` and ``engine`` (:func:`engine_section`)."""
        t = dict(section.get("targets") or {})
        known = MatrixTargets.__dataclass_fields__
        bad = sorted(set(t) - set(known))
        if bad:
            raise InputError(
                f"validation.matrix_compare.targets: unknown {bad}; keys are {list(known)}"
            )
        return cls(
            str(section["dir"]),
            tuple(str(g) for g in section["groups"]),
            str(section["law"]),
            str(section["kv_model"]),
            str(section["kv_budget"]),
            int(section["ci_batches"]),
            MatrixTargets(**{k: float(v) for k, v in t.items()}),
            int(seed),
            float(section["speed_window_s"]),
            str(section.get("engine", "vllm")),
        )


def engine_section(section: Mapping[str, Any], engine: str = "vllm") -> dict[str, Any]:
    """Config ``validation.matrix_compare`` flattened for one engine: its shared keys with
    ``matrices.<engine>``'s ``dir`` and ``groups`` and ``engine`` (what
    :meth:`MatrixCompareSettings.from_config` reads), every default the schema declares filled."""
    section = with_defaults(section, "validation.matrix_compare")
    matrices = section.get("matrices") or {}
    if engine not in matrices:
        raise InputError(
            f"validation.matrix_compare.matrices has no {engine!r}; it has {sorted(matrices)}"
        )
    shared = {k: v for k, v in section.items() if k not in ("matrices", "token_limit_figure")}
    return {**shared, **matrices[engine], "engine": engine}


@dataclass(frozen=True)
class GroupData:
    """One committed group folder, read and checked (:func:`read_group`)."""

    name: str
    folder: str
    group: Mapping[str, Any]
    settings: Mapping[str, Any]
    fits: Mapping[str, Any]
    meta: Mapping[str, Any]
    calibration: pd.DataFrame
    requests: Mapping[str, pd.DataFrame]
    steps: Mapping[str, pd.DataFrame]
    probes: pd.DataFrame | None = None

    @functools.cached_property
    def spec(self) -> GroupSpec:
        """The group as measured, read back through the driver's own reader
        (:func:`llmqueue.engines.groups.group_from_summary`)."""
        return group_from_summary(self.group, repr(f"{self.folder}/group.json"))

    @property
    def policy(self) -> str:
        """The group's policy: ``continuous``, ``none`` or ``dynamic``."""
        return self.spec.policy

    @property
    def judged(self) -> list[str]:
        """The judged runs' table names (session 1, then the repeats)."""
        return [str(x) for x in self.group["judged"]]

    @property
    def max_gap_s(self) -> float:
        """The calibration's idle-gap threshold the group was measured with (s; meta.json):
        how :func:`llmqueue.engines.calibration.iteration_times` counts iterations."""
        return float(self.meta.get("calibration", {}).get("max_gap_s", 0.002))

    def run_meta(self, name: str) -> Mapping[str, Any]:
        runs = self.meta.get("runs", {})
        if name not in runs:
            raise InputError(f"{self.folder}/meta.json has no run {name!r}")
        return runs[name]

    def run_spec(self, name: str) -> RunSpec:
        """The configured run behind table `name` (a repeat or an alternating block names its
        run)."""
        run = str(self.run_meta(name).get("run", name))
        for r in self.spec.runs:
            if r.name == run:
                return r
        raise InputError(f"{self.folder}/group.json has no run {run!r}")


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{str(path)!r}: not readable JSON ({err})") from None


def check_group_folder(folder: str | Path) -> list[str]:
    """The group folder holds what the comparison reads: :data:`GROUP_FILES`, and for every
    judged run and capacity burst of ``group.json`` its request table
    (:data:`MATRIX_REQUEST_COLUMNS`) and step log (:data:`STEP_COLUMNS`). Reads JSON files and
    CSV headers only; returns the judged runs; InputError names the file and what is missing."""
    p = Path(folder)
    if not p.is_dir():
        raise InputError(
            f"validation group folder {str(p)!r} does not exist (validation.matrix_compare.matrices"
            ".<engine>.groups names folders under its dir, made by `make validate-vllm` or "
            "`make validate-transformers-matrix`)"
        )
    for name in GROUP_FILES:
        if not (p / name).is_file():
            raise InputError(f"validation group folder {str(p)!r} lacks {name}")
    group = _json(p / "group.json")
    group_from_summary(group, repr(str(p / "group.json")))
    if not isinstance(group.get("judged"), list):
        raise InputError(f"{str(p / 'group.json')!r} lacks the list 'judged'")
    lacking = [c for c in CALIBRATION_COLUMNS if c not in csv_header(p / "calibration_steps.csv")]
    if lacking:
        raise InputError(f"{str(p / 'calibration_steps.csv')!r} lacks columns {lacking}")
    meta = _json(p / "meta.json")
    tables = [
        *group["judged"],
        *(k for k, v in meta.get("runs", {}).items() if k not in group["judged"]),
    ]
    for t in tables:
        for kind, cols in (("requests", MATRIX_REQUEST_COLUMNS), ("steps", STEP_COLUMNS)):
            f = p / f"{kind}_{t}.csv"
            if not f.is_file():
                raise InputError(f"validation group folder {str(p)!r} lacks {f.name}")
            miss = [c for c in cols if c not in csv_header(f)]
            if miss:
                raise InputError(f"{str(f)!r} lacks columns {miss}")
    return [str(x) for x in group["judged"]]


def read_group(
    folder: str | Path, tables: Sequence[str] | None = None, *, all_runs: bool = False
) -> GroupData:
    """Read a committed group folder (checked by :func:`check_group_folder`): the judged runs'
    tables (or `tables`; with `all_runs` every recorded run's, capacity bursts too), rows in
    arrival order with arrival <= first token <= finish."""
    p = Path(folder)
    judged = check_group_folder(p)
    names = list(judged if tables is None else tables)
    if all_runs:
        recorded = _json(p / "meta.json").get("runs", {})
        names += [t for t in recorded if t not in names]
    requests, steps = {}, {}
    for t in names:
        f = str(p / f"requests_{t}.csv")
        df = read_trace(f, format="vllm-requests", where="validation group run").frame
        if len(df) < 20:
            raise InputError(f"{f!r}: at least 20 requests are needed, got {len(df)}")
        requests[t] = df
        steps[t] = pd.read_csv(p / f"steps_{t}.csv", keep_default_na=False, na_values=[""])
    probes = None
    if (p / PROBE_FILE).is_file():
        lacking = [c for c in PROBE_COLUMNS if c not in csv_header(p / PROBE_FILE)]
        if lacking:
            raise InputError(f"{str(p / PROBE_FILE)!r} lacks columns {lacking}")
        probes = pd.read_csv(p / PROBE_FILE, keep_default_na=False, na_values=[""])
    return GroupData(
        p.name,
        str(p),
        _json(p / "group.json"),
        _json(p / "settings.json"),
        _json(p / "calibration_fit.json"),
        _json(p / "meta.json"),
        pd.read_csv(p / "calibration_steps.csv", keep_default_na=False, na_values=[""]),
        requests,
        steps,
        probes,
    )
