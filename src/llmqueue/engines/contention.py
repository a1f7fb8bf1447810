"""Is another process sharing the machine during a run? Measured from /proc, flagged per run.

Each run of the validation matrix records a :class:`CpuSnapshot` before and after
(:func:`snapshot`): the machine's CPU time by state from ``/proc/stat`` (the ``cpu`` line, in clock
ticks), the CPU time of this process and all its descendants (vLLM's engine core and worker) from
``/proc/<pid>/stat``, the 1-, 5- and 15-minute load averages and the monotonic clock. From two
snapshots :func:`contention` derives, over the run:

- ``steal_share``: CPU time stolen by the hypervisor / all CPU time (``steal`` delta over the sum of
  every state's delta): another VM on the same host;
- ``other_cpu_share``: CPU time used by processes outside this process tree / (wall time x cores):
  the machine's busy time (every state but idle, iowait and steal) minus this tree's own;
- ``own_cpu_share``: this tree's CPU time / (wall time x cores), for scale (a run keeps about one
  core busy with the model and part of the other with the engine core and the client).

:func:`drift` adds the engine's own view: the calibration law against the run's iteration times
(its median ratio over the run, and the change of that ratio from the first to the last quarter
of the run's iterations); a slower machine stretches every iteration. :func:`flags` names what
exceeds the thresholds (config ``validation.vllm.matrix.contention``): ``steal``,
``other_processes``, ``drift``. A flag is a warning on a run, recorded with it (``meta.json``) and
shown in the error table; nothing is dropped.

Pure functions over text and numbers; :func:`snapshot` is the only one that reads /proc.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "STAT_FIELDS",
    "CpuSnapshot",
    "parse_proc_stat",
    "parse_pid_stat",
    "descendants",
    "process_table",
    "process_tree",
    "snapshot",
    "contention",
    "drift",
    "flags",
]

STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_NOT_BUSY = ("idle", "iowait", "steal")


@dataclass(frozen=True)
class CpuSnapshot:
    """CPU times (s) of the machine by state and of one process tree, load averages, clock."""

    t_s: float
    cpu_s: Mapping[str, float]
    own_cpu_s: float
    loadavg: tuple[float, float, float] | None
    cores: int

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cpu_s"] = dict(self.cpu_s)
        return d


def parse_proc_stat(text: str, hz: float) -> dict[str, float]:
    """Seconds per CPU state from the aggregate ``cpu`` line of /proc/stat (clock ticks / hz)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            vals = [float(x) for x in parts[1 : 1 + len(STAT_FIELDS)]]
            vals += [0.0] * (len(STAT_FIELDS) - len(vals))
            return {k: v / hz for k, v in zip(STAT_FIELDS, vals, strict=True)}
    raise ValueError("/proc/stat has no aggregate 'cpu' line")


def parse_pid_stat(text: str) -> tuple[int, float]:
    """(parent pid, utime + stime in clock ticks) of one /proc/<pid>/stat line (the command name,
    in parentheses, may hold spaces)."""
    rest = text[text.rindex(")") + 2 :].split()
    # after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    return int(rest[1]), float(rest[11]) + float(rest[12])


def descendants(parents: Mapping[int, int], root: int) -> set[int]:
    """`root` and every process whose chain of parents reaches it."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {root}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in out:
                out.add(c)
                todo.append(c)
    return out


def process_table(proc: str | os.PathLike[str] = "/proc") -> dict[int, tuple[int, float]]:
    """Every process now: pid -> (parent pid, utime + stime in clock ticks), read from /proc (a
    process that ends while it is read is left out)."""
    out: dict[int, tuple[int, float]] = {}
    for d in Path(proc).iterdir():
        if not d.name.isdigit():
            continue
        try:
            out[int(d.name)] = parse_pid_stat((d / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # the process ended while we looked
    return out


def process_tree(root: int, proc: str | os.PathLike[str] = "/proc") -> set[int]:
    """`root` and its descendant processes now, read from /proc."""
    return descendants({pid: ppid for pid, (ppid, _) in process_table(proc).items()}, root)


def _tree_cpu_s(root: int, hz: float, proc: Path) -> float:
    table = process_table(proc)
    tree = descendants({pid: ppid for pid, (ppid, _) in table.items()}, root)
    return sum(table[p][1] for p in tree if p in table) / hz


def snapshot(root: int | None = None, proc: str | os.PathLike[str] = "/proc") -> CpuSnapshot | None:
    """The machine's and this process tree's CPU times now (None where /proc cannot be read)."""
    p = Path(proc)
    try:
        hz = float(os.sysconf("SC_CLK_TCK"))
        cpu = parse_proc_stat((p / "stat").read_text(), hz)
        own = _tree_cpu_s(os.getpid() if root is None else root, hz, p)
        la = tuple(float(x) for x in (p / "loadavg").read_text().split()[:3])
    except (OSError, ValueError, AttributeError):
        return None
    return CpuSnapshot(time.monotonic(), cpu, own, la, os.cpu_count() or 1)  # type: ignore[arg-type]


def contention(before: CpuSnapshot | None, after: CpuSnapshot | None) -> dict[str, Any]:
    """Steal, other processes' and this tree's CPU shares between two snapshots (module doc);
    NaN where a snapshot is missing."""
    nan = float("nan")
    if before is None or after is None or after.t_s <= before.t_s:
        return {"steal_share": nan, "other_cpu_share": nan, "own_cpu_share": nan, "wall_s": nan}
    wall = after.t_s - before.t_s
    d = {k: after.cpu_s[k] - before.cpu_s[k] for k in STAT_FIELDS}
    total = sum(d.values())
    busy = sum(v for k, v in d.items() if k not in _NOT_BUSY)
    own = after.own_cpu_s - before.own_cpu_s
    cap = wall * after.cores
    return {
        "steal_share": d["steal"] / total if total > 0 else nan,
        "other_cpu_share": max(busy - own, 0.0) / cap,
        "own_cpu_share": own / cap,
        "wall_s": wall,
        "loadavg_before": list(before.loadavg) if before.loadavg else None,
        "loadavg_after": list(after.loadavg) if after.loadavg else None,
    }


def drift(
    measured_s: Sequence[float] | np.ndarray, law_s: Sequence[float] | np.ndarray
) -> dict[str, float]:
    """The calibration law against a run's iteration times: ``law_ratio_median`` (median of
    measured / law - 1 over the run's iterations) and ``law_ratio_trend`` (the median of the last
    quarter of iterations minus the first quarter's; a machine that slows down during the run
    shows a positive trend). NaN with fewer than 8 iterations."""
    m = np.asarray(measured_s, dtype=float)
    f = np.asarray(law_s, dtype=float)
    ok = np.isfinite(m) & np.isfinite(f) & (f > 0)
    r = m[ok] / f[ok]
    if r.size < 8:
        return {"law_ratio_median": float("nan"), "law_ratio_trend": float("nan")}
    q = r.size // 4
    return {
        "law_ratio_median": float(np.median(r) - 1.0),
        "law_ratio_trend": float(np.median(r[-q:]) - np.median(r[:q])),
    }


def flags(record: Mapping[str, Any], thresholds: Mapping[str, float]) -> list[str]:
    """The names of what exceeds its threshold: ``steal`` (steal_share), ``other_processes``
    (other_cpu_share), ``drift`` (|law_ratio_trend|); missing or NaN values raise no flag."""

    def over(key: str, limit_key: str, absolute: bool = False) -> bool:
        v = record.get(key)
        if v is None or not np.isfinite(v):
            return False
        return bool((abs(v) if absolute else v) > thresholds[limit_key])

    out = []
    if over("steal_share", "steal_share"):
        out.append("steal")
    if over("other_cpu_share", "other_cpu_share"):
        out.append("other_processes")
    if over("law_ratio_trend", "drift", absolute=True):
        out.append("drift")
    return out
