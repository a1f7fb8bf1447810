"""Does the engine's speed follow the machine's? The machine-speed run, cycle by cycle.

``llmqueue validate machine-speed`` (``make validate-vllm-speed``) starts the engine once and
repeats a cycle: one batch of identical requests decoded to the end (``batch`` sequences, every
iteration after the prompts a decode of exactly ``batch`` sequences), then two fixed kernels on
the driver's core while the engine is idle (:mod:`llmqueue.engines.speedprobe`: a
memory-bound matrix-vector product over about the model's weights, a compute-bound in-cache
matrix product). Its folder holds the raw records (data/validation/README.md): ``cycles.csv``
(each cycle's decode start and end, the kernels' seconds per call, CPU steal and other
processes' share over the whole cycle), ``steps.csv`` (the scheduler's iterations) and
``model_steps.csv`` (the worker's iterations).

:func:`cycle_table` reduces each cycle to medians over its decode iterations: the engine's
iteration time (scheduler planning to output, ``step_ms``), the model's compute within it
(``model_ms``: forward pass and sampling on the worker's own clock, its waits for the engine
core left out) and the rest (``engine_ms`` = step - model: planning, messages between
processes); the probes' times and the cycle's CPU steal beside them. :func:`speed_summary` gives,
per series, its median, coefficient of variation, largest over smallest cycle and its
correlations with the model's time, the engine's iteration and the cycle's CPU steal. On a
machine whose speed holds the series stay flat; a model time that moves with the fixed kernels
is the machine, not the engine.

Units: milliseconds (``*_ms``), microseconds (``compute_us``); times from the first cycle's start.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from llmqueue.engines.speed_run import CYCLE_COLUMNS
from llmqueue.errors import InputError

__all__ = [
    "CYCLE_COLUMNS",
    "SERIES",
    "required_columns",
    "read_speed_run",
    "cycle_table",
    "speed_summary",
]

# cycles.csv: what the driver writes per cycle (seconds)
# the per-cycle series of cycle_table, in the summary's order, with their meaning
SERIES = {
    "step_ms": "engine iteration (scheduler to output)",
    "model_ms": "model compute (worker)",
    "engine_ms": "engine's share (iteration - model compute)",
    "stream_ms": "memory-bound probe (matrix-vector)",
    "compute_us": "compute-bound probe (in-cache matrix product)",
}
_STEP_NEEDS = ["t_sched_s", "t_done_s", "decode_seqs", "prefill_reqs"]
_MODEL_NEEDS = ["t_start_s", "t_end_s", "wait_s", "tokens", "requests"]


def required_columns() -> dict[str, list[str]]:
    """The CSV files of a machine-speed folder and the columns read from each."""
    return {
        "cycles.csv": list(CYCLE_COLUMNS),
        "steps.csv": list(_STEP_NEEDS),
        "model_steps.csv": list(_MODEL_NEEDS),
    }


def read_speed_run(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(cycles, steps, model steps) of a machine-speed folder, columns checked (InputError)."""
    folder = Path(folder)
    out = []
    for name, need in required_columns().items():
        path = folder / name
        if not path.is_file():
            raise InputError(f"machine-speed run: {path} is missing")
        d = pd.read_csv(path)
        missing = [c for c in need if c not in d.columns]
        if missing:
            raise InputError(f"machine-speed run: {path} lacks columns {missing}")
        out.append(d)
    return out[0], out[1], out[2]


def cycle_table(
    cycles: pd.DataFrame, steps: pd.DataFrame, model: pd.DataFrame, batch: int
) -> pd.DataFrame:
    """Per cycle: medians over its decode iterations of exactly `batch` sequences of the engine's
    iteration time and the model's compute (ms), their difference, the probes' times and the
    cycle's CPU steal and other processes' share. A cycle with no such iteration, or whose
    scheduler and worker records hold different numbers of them, is an error (the batch did not
    run as planned)."""
    if batch < 1:
        raise InputError(f"machine-speed: batch must be >= 1, got {batch}")
    dec = steps[(steps["prefill_reqs"] == 0) & (steps["decode_seqs"] == batch)]
    fwd = model[(model["tokens"] == batch) & (model["requests"] == batch)]
    rows = []
    for c in cycles.to_dict(orient="records"):
        t0, t1 = float(c["t_start_s"]), float(c["t_end_s"])
        s = dec[(dec["t_sched_s"] >= t0) & (dec["t_done_s"] <= t1)]
        m = fwd[(fwd["t_start_s"] >= t0) & (fwd["t_end_s"] <= t1)]
        if s.empty or len(s) != len(m):
            raise InputError(
                f"machine-speed: cycle {c['cycle']}: decode iterations of {batch} sequences: "
                f"scheduler {len(s)}, worker {len(m)} (none, or the records disagree)"
            )
        step = 1e3 * float(np.median(s["t_done_s"] - s["t_sched_s"]))
        fw = 1e3 * float(np.median(m["t_end_s"] - m["t_start_s"] - m["wait_s"]))
        rows.append(
            {
                "cycle": int(c["cycle"]),
                "t_mid_s": 0.5 * (t0 + t1),
                "iterations": len(s),
                "step_ms": step,
                "model_ms": fw,
                "engine_ms": step - fw,
                "stream_ms": 1e3 * float(c["stream_s"]),
                "compute_us": 1e6 * float(c["compute_s"]),
                "steal_share": float(c["steal_share"]),
                "other_cpu_share": float(c["other_cpu_share"]),
            }
        )
    return pd.DataFrame(rows)


def speed_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per series of :data:`SERIES`: median, coefficient of variation (std / mean over cycles),
    largest over smallest cycle, and Pearson correlation over cycles with ``model_ms``, with
    ``step_ms`` and with the cycle's CPU steal (NaN where a series is constant). Needs at least
    three cycles."""
    if len(table) < 3:
        raise InputError(f"machine-speed: at least 3 cycles needed, got {len(table)}")
    rows = []
    for key, label in SERIES.items():
        x = table[key].astype(float)
        rows.append(
            {
                "series": key,
                "label": label,
                "median": float(x.median()),
                "cv": float(x.std(ddof=1) / x.mean()),
                "max_over_min": float(x.max() / x.min()),
                "corr_model": _corr(x, table["model_ms"]),
                "corr_step": _corr(x, table["step_ms"]),
                "corr_steal": _corr(x, table["steal_share"]),
            }
        )
    return pd.DataFrame(rows)


def _corr(x: pd.Series, y: pd.Series) -> float:
    """Pearson correlation; NaN when either series is constant."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])
