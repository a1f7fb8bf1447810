"""The validation matrix: named run groups of ``make validate-vllm``, read from config
``validation.vllm.matrix`` and checked before any engine starts; and the second engine's matrix
(``make validate-transformers-matrix``), whose groups are ``validation.transformers.matrix.groups``
over ``validation.transformers.engine`` and whose models, traces, calibration grid, protocol and
contention thresholds are the vLLM matrix's (declared once).

A **group** is one engine shape (a model, a trace, the engine's settings, the scheduler class)
and everything measured on it, written to one folder ``<out>/matrix-<hardware-id>/<group>/``
(``<out>/matrix-transformers-<hardware-id>/<group>/`` for the second engine):

- its **calibration** (``calibration``: controlled batches, default ``matrix.calibration``, from which the step law, and for ``none`` groups the
  per-request law, are fitted; the only data any prediction is fitted on);
- its **capacity bursts** (all requests at t = 0; one per token limit its runs use): the measured
  capacity that planned loads are fractions of and achieved loads are measured against;
- its **judged runs** (Poisson arrivals at ``load`` x the unlimited capacity, request tables drawn
  from the trace), in config order, one engine start for all of them;
- its **repeats**: the runs named in ``repeat`` served again, ``repeat_sessions`` times, each time by
  a freshly started engine (same request tables, same planned times), named ``<run>_r2``, ...

Group ``policy`` says what the engine does and what the serving model replays:

- ``continuous``: the engine's own scheduler (vLLM: FCFS, or ``priority`` with per-request
  priorities; transformers: its FIFO scheduler, FCFS only);
- ``none``: one request at a time (``max_num_seqs`` 1), the paper's Sec. III queue; a run's
  ``token_limit`` l gives every request ``max_tokens = min(n, l)``;
- ``dynamic``: the paper's batch queue (Sec. IV) through the scheduler subclass
  :class:`llmqueue.engines.admission.BatchQueueMixin` (waiting requests are admitted only when
  nothing runs, up to ``max_num_seqs`` = b_max); chunked prefill must be off and the token budget
  must hold b_max whole prompts, so that a batch is admitted in one iteration (vLLM only).

Runs sharing a ``table`` key serve the same request table (same arrivals, same trace rows): SJF and
SSJF next to FCFS, or a token limit next to none, on the same arrivals. ``priority``: ``fcfs``
(priority 0 for all), ``sjf`` (the true output length) or ``ssjf`` (the learned predictor's
prediction for the request's trace row; the trace's rows must then be ``held_out``: those the
predictor was not trained on).

Pure data and checks (no vLLM, no file access): :func:`read_matrix` returns the
:class:`MatrixSpec`; every mistake is an InputError naming the key.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from llmqueue.engines.engine import FIFO_SCHEDULING
from llmqueue.engines.protocol import (
    ProtocolSpec,
    capacity_name,
    group_probe,
    read_protocol,
    repeat_name,
)
from llmqueue.engines.requests import FCFS_PRIORITY, PRIORITY_ORDERS
from llmqueue.errors import InputError
from llmqueue.limits import section_keys

__all__ = [
    "ENGINE_KINDS",
    "POLICIES",
    "engine_policies",
    "settings_class",
    "matrix_section",
    "PRIORITIES",
    "ROWS",
    "TraceSpec",
    "ModelSpec",
    "RunSpec",
    "GroupSpec",
    "BatchQueueGate",
    "MatrixSpec",
    "read_matrix",
    "group_from_summary",
    "repeat_name",
    "capacity_name",
    "select_groups",
]

POLICIES = ("continuous", "none", "dynamic")
# the engines a matrix measures, and the config section holding each one's matrix
ENGINE_KINDS = ("vllm", "transformers")
_SECTIONS = {"vllm": "validation.vllm.matrix", "transformers": "validation.transformers.matrix"}


def matrix_section(engine: str) -> str:
    """The config key of `engine`'s matrix (``validation.<engine>.matrix``)."""
    if engine not in _SECTIONS:
        raise InputError(f"--engine must be one of {', '.join(ENGINE_KINDS)}, got {engine!r}")
    return _SECTIONS[engine]


def engine_policies(engine: str) -> tuple[str, ...]:
    """The group policies `engine` can serve: transformers has no batch-queue scheduler."""
    matrix_section(engine)
    return POLICIES if engine == "vllm" else ("continuous", "none")


def settings_class(engine: str) -> Any:
    """The checked settings type of `engine` (``from_config`` gives one-line errors by key):
    :class:`llmqueue.engines.engine.EngineSettings` or
    :class:`llmqueue.engines.hf_engine.HFEngineSettings` (both plain Python)."""
    matrix_section(engine)
    if engine == "vllm":
        from llmqueue.engines.engine import EngineSettings

        return EngineSettings
    from llmqueue.engines.hf_engine import HFEngineSettings

    return HFEngineSettings


PRIORITIES = tuple(PRIORITY_ORDERS)
ROWS = ("all", "held_out")
_NAME = re.compile(r"^[a-z][a-z0-9]*$")
_RUN = re.compile(r"^[a-z][a-z0-9]*$")


@dataclass(frozen=True)
class TraceSpec:
    """Where request lengths come from: a trace CSV, its columns, one scale for both lengths,
    optionally a fixed prompt length (the paper's Sec. III and IV laws have no prompt term) and
    which rows (``held_out``: those after the predictor's training fraction, in arrival order)."""

    name: str
    file: str
    input_column: str
    output_column: str
    scale: float
    prompt_tokens: int | None = None
    rows: str = "all"
    train_fraction: float = 0.7


@dataclass(frozen=True)
class ModelSpec:
    """A random-weight Llama shape (config ``validation.vllm.model`` or a named
    ``matrix.models`` entry)."""

    name: str
    dir: str
    dtype: str
    seed: int
    shape: Mapping[str, Any]

    def as_config(self) -> dict[str, Any]:
        return {"dir": self.dir, "dtype": self.dtype, "seed": self.seed, "shape": dict(self.shape)}


@dataclass(frozen=True)
class RunSpec:
    """One judged run: ``load`` (fraction of the group's unlimited capacity), requests (warm-up
    included), the first ``warmup`` left out of every statistic, the request table's key,
    the token limit (None: none) and the queue order given to the engine."""

    name: str
    load: float
    requests: int
    warmup: int
    table: str
    token_limit: int | None = None
    priority: str = FCFS_PRIORITY


@dataclass(frozen=True)
class GroupSpec:
    """One group (module docstring): its engine settings are config ``validation.vllm.engine``
    (``validation.transformers.engine`` when `engine_kind` is transformers) with the group's
    ``engine`` overrides."""

    name: str
    policy: str
    model: ModelSpec
    trace: TraceSpec
    engine: Mapping[str, Any]
    calibration: tuple[tuple[int, int, int], ...]
    capacity_requests: int
    runs: tuple[RunSpec, ...]
    repeat: tuple[str, ...] = ()
    repeat_sessions: int = 1
    description: str = ""
    alternate: bool = False
    engine_kind: str = "vllm"

    @property
    def scheduler(self) -> str:
        """vLLM: ``batch_queue`` (the dynamic-batching subclass) or ``recording`` (vLLM's own);
        transformers: its ``scheduler_type`` (``fifo``)."""
        if self.engine_kind == "transformers":
            return str(self.engine.get("scheduler_type", "fifo"))
        return "batch_queue" if self.policy == "dynamic" else "recording"

    def settings(self) -> Any:
        """The group's checked engine settings (:func:`settings_class`)."""
        return settings_class(self.engine_kind).from_config(self.engine)

    @property
    def token_limits(self) -> tuple[int | None, ...]:
        """The distinct token limits of the runs (None first): one capacity burst each."""
        seen = dict.fromkeys([None, *(r.token_limit for r in self.runs)])
        return tuple(seen)

    def run(self, name: str) -> RunSpec:
        for r in self.runs:
            if r.name == name:
                return r
        raise InputError(f"group {self.name}: no run {name!r}")

    def judged_runs(self) -> list[tuple[str, RunSpec, int]]:
        """(table name, run, session) of every judged run: session 1 first, then the repeats."""
        out = [(r.name, r, 1) for r in self.runs]
        for k in range(2, 2 + self.repeat_sessions):
            out += [(repeat_name(n, k), self.run(n), k) for n in self.repeat]
        return out

    def summary(self) -> dict[str, Any]:
        """The group as run (for its folder's ``group.json``)."""
        return {
            "name": self.name,
            "engine_kind": self.engine_kind,
            "policy": self.policy,
            "scheduler": self.scheduler,
            "description": self.description,
            "model": self.model.name,
            "model_config": self.model.as_config(),
            "trace": dict(self.trace.__dict__),
            "engine": dict(self.engine),
            "calibration": [list(b) for b in self.calibration],
            "capacity_requests": self.capacity_requests,
            "token_limits": list(self.token_limits),
            "runs": [dict(r.__dict__) for r in self.runs],
            "repeat": list(self.repeat),
            "repeat_sessions": self.repeat_sessions,
            "alternate": self.alternate,
            "judged": [name for name, _, _ in self.judged_runs()],
        }


@dataclass(frozen=True)
class BatchQueueGate:
    """Config ``validation.vllm.matrix.batch_queue_gate``: in a ``dynamic`` group every controlled
    batch is preceded by a gate, one request of `prompt_tokens` prompt tokens asking one token, and
    the batch is sent `lead_s` s after it. The gate is admitted alone; the batch arrives while its
    prompt is prefilled, waits, and is admitted whole once the gate has ended. Without it the batch
    queue admits a batch's first request alone (it reaches the idle engine before the others) and
    the rest as a second batch, so the calibration would never see b_max sequences decode."""

    prompt_tokens: int
    lead_s: float


@dataclass(frozen=True)
class MatrixSpec:
    """Config ``validation.vllm.matrix`` (or ``validation.transformers.matrix`` beside it, for
    `engine` transformers): where group folders go, the groups in run order, the contention
    thresholds and the predictions file of the learned predictor."""

    out: str
    groups: tuple[GroupSpec, ...]
    contention: Mapping[str, float] = field(default_factory=dict)
    predictions: str = ""
    predictor_model: str = ""
    batch_queue_gate: BatchQueueGate | None = None
    protocol: ProtocolSpec | None = None
    engine: str = "vllm"

    @property
    def folder(self) -> str:
        """The matrix folder's name for `hardware_id` is ``<folder>-<hardware_id>``:
        ``matrix`` (vLLM) or ``matrix-transformers``."""
        return "matrix" if self.engine == "vllm" else f"matrix-{self.engine}"

    def gate_for(self, g: GroupSpec) -> BatchQueueGate | None:
        """What group `g`'s controlled batches wait behind: the batch-queue gate for a group of
        the batch-queue scheduler, else nothing."""
        return self.batch_queue_gate if g.scheduler == "batch_queue" else None

    def group(self, name: str) -> GroupSpec:
        for g in self.groups:
            if g.name == name:
                return g
        raise InputError(
            f"{matrix_section(self.engine)}.groups has no group {name!r}; groups: "
            f"{', '.join(g.name for g in self.groups)}"
        )

    @property
    def needs_predictions(self) -> tuple[str, ...]:
        return tuple(
            g.name
            for g in self.groups
            if any(PRIORITY_ORDERS[r.priority].needs_prediction for r in g.runs)
        )


def _int(x: Any, where: str, lo: int = 1) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < lo:
        raise InputError(f"{where} must be an integer >= {lo}, got {x!r}")
    return int(x)


def _trace(name: str, sec: Any, train_fraction: float) -> TraceSpec:
    where = f"validation.vllm.matrix.traces.{name}"
    section_keys(sec, where, ("file", "input_column", "output_column", "scale"))
    scale = float(sec["scale"])
    if not (0 < scale <= 1):
        raise InputError(f"{where}.scale must be in (0, 1], got {sec['scale']!r}")
    return TraceSpec(
        name, str(sec["file"]), str(sec["input_column"]), str(sec["output_column"]), scale,
        train_fraction=train_fraction,
    )  # fmt: skip


def _model(name: str, sec: Any) -> ModelSpec:
    where = (
        "validation.vllm.model" if name == "default" else f"validation.vllm.matrix.models.{name}"
    )
    section_keys(sec, where, ("dir", "dtype", "seed", "shape"))
    shape = sec["shape"]
    if not isinstance(shape, Mapping):
        raise InputError(f"{where}.shape must be a mapping")
    for k in ("hidden_size", "num_attention_heads", "num_key_value_heads", "num_hidden_layers"):
        _int(shape.get(k), f"{where}.shape.{k}")
    if shape["hidden_size"] % shape["num_attention_heads"]:
        raise InputError(f"{where}.shape: hidden_size must be a multiple of num_attention_heads")
    if shape["num_attention_heads"] % shape["num_key_value_heads"]:
        raise InputError(
            f"{where}.shape: num_attention_heads must be a multiple of num_key_value_heads"
        )
    return ModelSpec(name, str(sec["dir"]), str(sec["dtype"]), int(sec["seed"]), dict(shape))


def _run(group: str, k: int, sec: Any, section: str = "validation.vllm.matrix") -> RunSpec:
    where = f"{section}.groups.{group}.runs[{k}]"
    section_keys(
        sec, where, ("name", "load", "requests"), ("warmup", "table", "token_limit", "priority")
    )
    name = str(sec["name"])
    if not _RUN.match(name):
        raise InputError(f"{where}.name must be lower-case letters and digits, got {name!r}")
    load = sec["load"]
    if isinstance(load, bool) or not isinstance(load, (int, float)) or not (0 < load < 1):
        raise InputError(f"{where}.load must be a fraction in (0, 1) of the capacity, got {load!r}")
    n = _int(sec["requests"], f"{where}.requests", 20)
    warm = _int(sec.get("warmup", 0), f"{where}.warmup", 0)
    if warm >= n - 10:
        raise InputError(f"{where}.warmup ({warm}) must leave >= 10 measured requests of {n}")
    lim = sec.get("token_limit")
    if lim is not None:
        lim = _int(lim, f"{where}.token_limit")
    prio = str(sec.get("priority", FCFS_PRIORITY))
    if prio not in PRIORITIES:
        raise InputError(f"{where}.priority must be one of {', '.join(PRIORITIES)}, got {prio!r}")
    return RunSpec(name, float(load), n, warm, str(sec.get("table", name)), lim, prio)


def _group(
    name: str,
    sec: Any,
    engine: Mapping[str, Any],
    models: Mapping[str, ModelSpec],
    traces: Mapping[str, TraceSpec],
    default_calibration: Sequence[Sequence[int]],
    default_capacity: int,
    engine_kind: str = "vllm",
) -> GroupSpec:
    section = matrix_section(engine_kind)
    where = f"{section}.groups.{name}"
    if not _NAME.match(name):
        raise InputError(f"{where}: a group name is lower-case letters and digits")
    section_keys(
        sec, where, ("policy", "runs"),
        ("model", "trace", "prompt_tokens", "rows", "engine", "calibration", "capacity_requests",
         "repeat", "repeat_sessions", "description", "alternate"),
    )  # fmt: skip
    policy = str(sec["policy"])
    allowed = engine_policies(engine_kind)
    if policy not in allowed:
        raise InputError(f"{where}.policy must be one of {', '.join(allowed)}, got {policy!r}")
    model = str(sec.get("model", "default"))
    if model not in models:
        raise InputError(f"{where}.model {model!r} is not one of {sorted(models)}")
    tname = str(sec.get("trace", "conv"))
    if tname not in traces:
        raise InputError(f"{where}.trace {tname!r} is not one of {sorted(traces)}")
    trace = traces[tname]
    fixed = sec.get("prompt_tokens")
    if fixed is not None:
        fixed = _int(fixed, f"{where}.prompt_tokens")
    rows = str(sec.get("rows", "all"))
    if rows not in ROWS:
        raise InputError(f"{where}.rows must be one of {', '.join(ROWS)}, got {rows!r}")
    trace = TraceSpec(
        trace.name, trace.file, trace.input_column, trace.output_column, trace.scale, fixed, rows,
        trace.train_fraction,
    )  # fmt: skip
    over = sec.get("engine") or {}
    if not isinstance(over, Mapping):
        raise InputError(f"{where}.engine must be a mapping of engine settings")
    unknown = sorted(set(over) - set(engine))
    if unknown:
        raise InputError(f"{where}.engine: unknown settings {unknown}; settings are {list(engine)}")
    eng = {**engine, **over}
    try:
        settings = settings_class(engine_kind).from_config(eng)
    except InputError as err:
        raise InputError(f"{where}.engine: {err}") from None
    cal_items = sec.get("calibration", "default")
    if cal_items == "default":
        cal_items = default_calibration
    if not isinstance(cal_items, Sequence) or isinstance(cal_items, str) or len(cal_items) < 2:
        raise InputError(f"{where}.calibration: 'default' or >= 2 [batch, prompt, output] triples")
    cal: list[tuple[int, int, int]] = []
    for k, item in enumerate(cal_items):
        if (
            isinstance(item, str)
            or not isinstance(item, Sequence)
            or len(item) != 3
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in item)
        ):
            raise InputError(
                f"{where}.calibration[{k}]: {item!r} must be [batch, prompt, output], all >= 1"
            )
        if item[1] + item[2] > settings.max_model_len:
            raise InputError(
                f"{where}.calibration[{k}]: prompt {item[1]} + output {item[2]} exceeds "
                f"max_model_len {settings.max_model_len}"
            )
        cal.append((int(item[0]), int(item[1]), int(item[2])))
    cap = _int(sec.get("capacity_requests", default_capacity), f"{where}.capacity_requests", 10)
    raw_runs = sec["runs"]
    if not isinstance(raw_runs, Sequence) or isinstance(raw_runs, str) or not raw_runs:
        raise InputError(f"{where}.runs must be a non-empty list of runs")
    runs = tuple(_run(name, k, r, section) for k, r in enumerate(raw_runs))
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise InputError(f"{where}.runs: run names must be distinct, got {names}")
    repeat = sec.get("repeat") or []
    if isinstance(repeat, str) or not isinstance(repeat, Sequence):
        raise InputError(f"{where}.repeat must be a list of run names")
    bad = [r for r in repeat if r not in names]
    if bad or len(set(repeat)) != len(repeat):
        raise InputError(f"{where}.repeat: {list(repeat)} must be distinct run names of {names}")
    sessions = _int(sec.get("repeat_sessions", 1), f"{where}.repeat_sessions")
    alternate = sec.get("alternate", False)
    if not isinstance(alternate, bool):
        raise InputError(f"{where}.alternate must be true or false, got {alternate!r}")
    if alternate and (len({r.table for r in runs}) != 1 or len(runs) < 2):
        raise InputError(
            f"{where}.alternate: the runs served in alternating blocks must be >= 2 runs sharing "
            f"one table, got tables {[r.table for r in runs]}"
        )
    spec = GroupSpec(
        name, policy, models[model], trace, eng, tuple(cal), cap, runs,
        tuple(str(r) for r in repeat), sessions,
        str(sec.get("description", "")), alternate, engine_kind,
    )  # fmt: skip
    _check_group(spec, settings, where)
    return spec


def _check_group(g: GroupSpec, s: Any, where: str) -> None:
    """What the engine shape must satisfy for the group's policy and runs."""
    same_table: dict[str, RunSpec] = {}
    for r in g.runs:
        if r.table in same_table:
            o = same_table[r.table]
            if (r.requests, r.warmup, r.load) != (o.requests, o.warmup, o.load):
                raise InputError(
                    f"{where}.runs: {r.name} and {o.name} share the table {r.table!r} and must "
                    "then have the same load, requests and warmup"
                )
        same_table.setdefault(r.table, r)
        if r.priority != FCFS_PRIORITY and g.engine_kind != "vllm":
            raise InputError(
                f"{where}.runs.{r.name}: priority {r.priority}: the {g.engine_kind} engine serves "
                "FCFS only (priority fcfs)"
            )
        order = PRIORITY_ORDERS[r.priority]
        if not order.by_arrival and s.scheduling_policy == FIFO_SCHEDULING:
            raise InputError(
                f"{where}.runs.{r.name}: priority {r.priority} needs engine scheduling_policy "
                "priority"
            )
        if order.needs_prediction and g.trace.rows != "held_out":
            raise InputError(
                f"{where}.runs.{r.name}: priority {r.priority} needs rows: held_out (requests drawn from "
                "the trace rows the learned predictor was not trained on)"
            )
    for b, _, _ in g.calibration:
        if b > 64 * s.max_num_seqs:
            raise InputError(f"{where}.calibration: batch {b} is far above max_num_seqs")
    if g.trace.prompt_tokens is not None and g.trace.prompt_tokens >= s.max_model_len:
        raise InputError(f"{where}.prompt_tokens must be below max_model_len {s.max_model_len}")
    cap_key = "max_num_seqs" if g.engine_kind == "vllm" else "max_requests_per_batch"
    if g.policy == "none" and s.max_num_seqs != 1:
        raise InputError(f"{where}: policy none serves one request at a time: engine {cap_key} 1")
    if g.policy != "none" and s.max_num_seqs == 1:
        raise InputError(f"{where}: {cap_key} 1 is policy none")
    if g.policy == "dynamic":
        if s.enable_chunked_prefill:
            raise InputError(
                f"{where}: policy dynamic needs engine enable_chunked_prefill false (a batch is "
                "admitted whole, in one iteration)"
            )
        if s.max_num_batched_tokens < s.max_num_seqs * s.max_model_len:
            raise InputError(
                f"{where}: policy dynamic needs engine max_num_batched_tokens >= max_num_seqs x "
                f"max_model_len = {s.max_num_seqs * s.max_model_len} (b_max whole prompts in one "
                f"iteration), got {s.max_num_batched_tokens}"
            )
        if s.scheduling_policy != FIFO_SCHEDULING:
            raise InputError(f"{where}: policy dynamic is FCFS here (scheduling_policy fcfs)")
    if any(r.token_limit is not None for r in g.runs) and g.policy != "none":
        raise InputError(f"{where}: token limits are for policy none (the paper's Sec. III)")


def read_matrix(
    vllm: Mapping[str, Any], data: Mapping[str, Any] | None = None, train_fraction: float = 0.7,
    *, engine: str = "vllm", transformers: Mapping[str, Any] | None = None,
) -> MatrixSpec:  # fmt: skip
    """Config ``validation.vllm`` (with its ``matrix`` section) as a :class:`MatrixSpec`.

    `data`: the config's ``data`` section (``azure_trace`` is the default ``conv`` trace);
    `train_fraction`: the learned predictor's (config ``ssjf.train_fraction``). With `engine`
    transformers the groups and ``out`` are `transformers`'s (config ``validation.transformers``)
    ``matrix`` section over its ``engine`` settings; everything else is the vLLM matrix's."""
    where = "validation.vllm.matrix"
    if "matrix" not in vllm:
        raise InputError(f"{where}: missing (the run groups of make validate-vllm)")
    sec = vllm["matrix"]
    base_engine: Mapping[str, Any] = vllm["engine"]
    out_dir, groups_sec = sec.get("out"), sec.get("groups")
    if engine != "vllm":
        own = matrix_section(engine)
        if not isinstance(transformers, Mapping) or "matrix" not in transformers:
            raise InputError(f"{own}: missing (the run groups of the {engine} engine's matrix)")
        if "engine" not in transformers:
            raise InputError(
                f"validation.{engine}.engine: missing (the {engine} engine's settings)"
            )
        section_keys(transformers["matrix"], own, ("out", "groups"))
        out_dir, groups_sec = transformers["matrix"]["out"], transformers["matrix"]["groups"]
        base_engine = transformers["engine"]
    section_keys(
        sec,
        where,
        ("out", "groups"),
        ("calibration", "models", "traces", "contention", "predictor", "batch_queue_gate",
         "protocol"),
    )  # fmt: skip
    models = {"default": _model("default", vllm["model"])}
    for name, m in (sec.get("models") or {}).items():
        if name == "default":
            raise InputError(f"{where}.models: 'default' is validation.vllm.model")
        models[str(name)] = _model(str(name), m)
    traces = {}
    base = vllm["trace"]
    if data and "azure_trace" in data:
        traces["conv"] = TraceSpec(
            "conv", str(data["azure_trace"]), str(base["input_column"]),
            str(base["output_column"]), float(base["scale"]), train_fraction=train_fraction,
        )  # fmt: skip
    for name, t in (sec.get("traces") or {}).items():
        traces[str(name)] = _trace(str(name), t, train_fraction)
    if not isinstance(groups_sec, Mapping) or not groups_sec:
        raise InputError(f"{matrix_section(engine)}.groups must map group names to groups")
    cal = sec.get("calibration") or vllm["calibration"]["batches"]
    cap = int(vllm["capacity"]["requests"])
    groups = tuple(
        _group(str(n), g, base_engine, models, traces, cal, cap, engine)
        for n, g in groups_sec.items()
    )
    cont = dict(sec.get("contention") or {})
    for k in cont:
        if k not in CONTENTION_KEYS:
            raise InputError(f"{where}.contention: unknown key {k!r}; keys are {CONTENTION_KEYS}")
        v = cont[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < 1):
            raise InputError(f"{where}.contention.{k} must be a fraction in (0, 1), got {v!r}")
    pred = sec.get("predictor") or {}
    if pred:
        section_keys(pred, f"{where}.predictor", ("model", "file"))
    gate = _gate(sec.get("batch_queue_gate"), groups, f"{where}.batch_queue_gate")
    protocol = read_protocol(sec.get("protocol"), f"{where}.protocol")
    if protocol is not None:
        _check_protocol(protocol, groups, f"{where}.protocol")
    spec = MatrixSpec(
        str(out_dir), groups, {**CONTENTION_DEFAULTS, **cont}, str(pred.get("file", "")),
        str(pred.get("model", "")), gate, protocol, engine,
    )  # fmt: skip
    if spec.needs_predictions and not spec.predictions:
        raise InputError(
            f"{where}.predictor: groups {list(spec.needs_predictions)} run ssjf and need "
            "predictor.model and predictor.file"
        )
    return spec


def group_from_summary(d: Any, where: str) -> GroupSpec:
    """A group as its folder's ``group.json`` records it (:meth:`GroupSpec.summary`) read back into
    the :class:`GroupSpec` the driver measured, with the checks the config's groups get (runs by
    :func:`_run`, the policy, the names): the one reader of a group, whether it comes from config
    or from a committed folder. `where` names the file in errors."""
    keys = ("name", "policy", "model", "model_config", "trace", "engine", "calibration",
            "capacity_requests", "runs", "repeat", "repeat_sessions")  # fmt: skip
    if not isinstance(d, Mapping):
        raise InputError(f"{where}: not a group (a JSON object)")
    missing = [k for k in keys if k not in d]
    if missing:
        raise InputError(f"{where}: lacks {missing}")
    name = str(d["name"])
    if not _NAME.match(name):
        raise InputError(f"{where}: name {name!r} is not lower-case letters and digits")
    kind = str(d.get("engine_kind", "vllm"))  # folders measured before the second engine: vLLM
    if kind not in ENGINE_KINDS:
        raise InputError(
            f"{where}: engine_kind must be one of {', '.join(ENGINE_KINDS)}, got {kind!r}"
        )
    policy = str(d["policy"])
    allowed = engine_policies(kind)
    if policy not in allowed:
        raise InputError(f"{where}: policy must be one of {', '.join(allowed)}, got {policy!r}")
    mc = d["model_config"]
    model = _model(str(d["model"]), mc)
    tr = d["trace"]
    tkeys = {f for f in TraceSpec.__dataclass_fields__}
    if not isinstance(tr, Mapping) or set(tr) - tkeys or {"name", "file", "scale"} - set(tr):
        raise InputError(f"{where}: trace must hold {sorted(tkeys)}")
    trace = TraceSpec(**{k: tr[k] for k in tkeys if k in tr})
    if not isinstance(d["engine"], Mapping):
        raise InputError(f"{where}: engine must be an object")
    cal = d["calibration"]
    if not isinstance(cal, Sequence) or any(
        not isinstance(b, Sequence) or len(b) != 3 for b in cal
    ):
        raise InputError(f"{where}: calibration must be [batch, prompt, output] triples")
    raw_runs = d["runs"]
    if not isinstance(raw_runs, Sequence) or isinstance(raw_runs, str) or not raw_runs:
        raise InputError(f"{where}: runs must be a non-empty list")
    runs = tuple(_run(name, k, r, matrix_section(kind)) for k, r in enumerate(raw_runs))
    alternate = d.get("alternate", False)
    if not isinstance(alternate, bool):
        raise InputError(f"{where}: alternate must be true or false")
    return GroupSpec(
        name, policy, model, trace, dict(d["engine"]),
        tuple((int(b[0]), int(b[1]), int(b[2])) for b in cal),
        _int(d["capacity_requests"], f"{where}: capacity_requests", 1),
        runs, tuple(str(r) for r in d["repeat"]),
        _int(d["repeat_sessions"], f"{where}: repeat_sessions", 1),
        str(d.get("description", "")), alternate, kind,
    )  # fmt: skip


def _check_protocol(p: ProtocolSpec, groups: Sequence[GroupSpec], where: str) -> None:
    """The probe fits every group's engine (a request within max_model_len, the probe batch's KV
    blocks within the cache), and no alternating group repeats runs (its rounds are its repeats)."""
    for g in groups:
        s = g.settings()
        probe = group_probe(g, p)
        s.check_batch(
            probe.batch, probe.prompt_tokens, probe.output_tokens, f"{where}.probe",
            f"group {g.name}'s",
        )  # fmt: skip
        if g.alternate and g.repeat:
            raise InputError(
                f"{matrix_section(g.engine_kind)}.groups.{g.name}.repeat: an alternating group repeats its "
                "runs in rounds (protocol.alternate_rounds); leave repeat empty"
            )


def _gate(sec: Any, groups: Sequence[GroupSpec], where: str) -> BatchQueueGate | None:
    """The batch-queue gate (:class:`BatchQueueGate`); required when a group is ``dynamic``."""
    dynamic = [g for g in groups if g.policy == "dynamic"]
    if sec is None:
        if dynamic:
            raise InputError(
                f"{where}: missing; groups {[g.name for g in dynamic]} are dynamic and need "
                "{prompt_tokens, lead_s} (a whole batch admitted at each controlled batch)"
            )
        return None
    section_keys(sec, where, ("prompt_tokens", "lead_s"))
    tokens = _int(sec["prompt_tokens"], f"{where}.prompt_tokens")
    lead = sec["lead_s"]
    if isinstance(lead, bool) or not isinstance(lead, (int, float)) or not (0 < lead <= 1):
        raise InputError(f"{where}.lead_s must be a time in (0, 1] s, got {lead!r}")
    for g in dynamic:
        limit = g.settings().max_model_len
        if tokens + 1 > limit:
            raise InputError(
                f"{where}.prompt_tokens: {tokens} + 1 exceeds group {g.name}'s max_model_len {limit}"
            )
    return BatchQueueGate(tokens, float(lead))


CONTENTION_KEYS = ("steal_share", "other_cpu_share", "drift")
CONTENTION_DEFAULTS = {"steal_share": 0.02, "other_cpu_share": 0.10, "drift": 0.05}


def select_groups(spec: MatrixSpec, names: str | Sequence[str] | None) -> list[GroupSpec]:
    """The groups named (comma-separated or a list; None, '' or 'all': every group, in config
    order); an unknown name is an InputError listing the groups."""
    if names is None or names in ("", "all"):
        return list(spec.groups)
    items = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
    items = [n for n in items if n]
    if not items:
        return list(spec.groups)
    return [spec.group(n) for n in dict.fromkeys(items)]


def planned_rate(load: float, capacity_per_s: float) -> float:
    """Requests/s of a run at `load` x the measured capacity."""
    r = float(load) * float(capacity_per_s)
    if not (math.isfinite(r) and r > 0):
        raise InputError(f"planned rate must be > 0 requests/s, got {r}")
    return r
