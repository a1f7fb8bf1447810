"""Where the engine's processes run: the model worker alone on its cores, everything else beside.

vLLM's CPU build runs three processes: this one (the client and vLLM's ``AsyncLLM`` frontend), the
engine core (the scheduler, a busy loop) and the model worker, whose OpenMP threads vLLM binds to
``VLLM_CPU_OMP_THREADS_BIND``. vLLM leaves the other two unbound, so the operating system may run
them on the model's core; the worker spins between steps and is always runnable, so such a visit
would time-slice the model's step. (On the 2-core VM of docs/studies/validation.md, binding did
not steady the engine's speed: the matrix measured with it misses as the one without did.) With
``host_cpus_bind``
(config ``validation.vllm.engine``) every thread of the frontend's process tree that is not the
worker's is bound to the host CPUs once the engine is up (threads started later inherit the
binding of the thread that starts them); ``nobind`` leaves placement to the operating system.

- :func:`parse_cpu_list`: ``"1"``, ``"0,2-3"`` -> CPU ids; ``nobind`` / ``auto`` -> None.
- :func:`bind_host_processes`: bind the host threads, return what each process then runs on;
  :func:`bind_process` puts one process's threads back where they were once the engine is shut.
- :func:`involuntary_switches`: the worker's involuntary context switches (from
  ``/proc/<pid>/status``), the direct sign that something else ran on the model's core.

Only :func:`bind_host_processes`, :func:`bind_process` and :func:`involuntary_switches` read or
change the running system (the process tree from :func:`llmqueue.engines.contention.process_tree`);
the rest is pure.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from llmqueue.engines.contention import process_tree
from llmqueue.errors import InputError

__all__ = [
    "UNBOUND",
    "parse_cpu_list",
    "check_binding",
    "model_processes",
    "bind_host_processes",
    "bind_process",
    "involuntary_switches",
    "parse_involuntary",
    "preemption_rate",
]

UNBOUND = ("nobind", "auto")


def parse_cpu_list(text: str) -> frozenset[int] | None:
    """CPU ids of a Linux CPU list (``"1"``, ``"0,2-3"``); None for ``nobind`` or ``auto``.
    Raises ValueError on anything else."""
    s = str(text).strip()
    if s in UNBOUND:
        return None
    out: set[int] = set()
    for part in s.split(","):
        lo, sep, hi = part.strip().partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"not a CPU list: {text!r}")
        a, b = int(lo), int(hi) if sep else int(lo)
        if b < a:
            raise ValueError(f"not a CPU list: {text!r}")
        out.update(range(a, b + 1))
    return frozenset(out)


def check_binding(omp_threads_bind: str, host_cpus_bind: str) -> None:
    """Refuse a host binding that is not a CPU list or ``nobind``, or that shares a CPU with the
    model's OpenMP binding (InputError naming the key)."""
    key = "validation.vllm.engine.host_cpus_bind"
    if str(host_cpus_bind).strip() == "auto":
        raise InputError(f"{key} must be a CPU list (e.g. '1') or 'nobind', got 'auto'")
    try:
        host = parse_cpu_list(host_cpus_bind)
    except ValueError:
        raise InputError(
            f"{key} must be a CPU list (e.g. '1', '1-3') or 'nobind', got {host_cpus_bind!r}"
        ) from None
    try:
        model = parse_cpu_list(omp_threads_bind)
    except ValueError:
        raise InputError(
            "validation.vllm.engine.omp_threads_bind must be a CPU list, 'auto' or 'nobind', "
            f"got {omp_threads_bind!r}"
        ) from None
    if host is None:
        return
    if model is None:
        raise InputError(
            f"{key} = {host_cpus_bind!r} needs omp_threads_bind as a CPU list, got "
            f"{omp_threads_bind!r} (the host CPUs must be known to leave the model's free)"
        )
    if host & model:
        raise InputError(
            f"{key} = {host_cpus_bind!r} shares CPUs {sorted(host & model)} with "
            f"omp_threads_bind = {omp_threads_bind!r}; they must be disjoint"
        )


def model_processes(affinity: Mapping[int, frozenset[int]], model_cpus: frozenset[int]) -> set[int]:
    """The processes vLLM bound to the model's CPUs: those whose main thread may run on no CPU
    outside `model_cpus` (the worker; ``affinity``: pid -> its main thread's CPUs)."""
    return {pid for pid, cpus in affinity.items() if cpus and cpus <= model_cpus}


def _threads(pid: int) -> list[int]:
    try:
        return [int(t.name) for t in Path(f"/proc/{pid}/task").iterdir() if t.name.isdigit()]
    except OSError:
        return []


def _affinities(pids: Iterable[int]) -> dict[int, frozenset[int]]:
    """pid -> the CPUs its main thread may run on now (a process that ended is left out)."""
    out: dict[int, frozenset[int]] = {}
    for pid in pids:
        try:
            out[pid] = frozenset(os.sched_getaffinity(pid))
        except OSError:
            continue
    return out


def bind_host_processes(
    root: int, host_cpus: Iterable[int], model_cpus: Iterable[int]
) -> list[dict[str, Any]]:
    """Bind every thread of `root`'s process tree, except the model worker's, to `host_cpus`;
    returns, per process, its name, role (``model`` or ``host``) and the CPUs its main thread then
    may run on (read back). A thread that ends meanwhile is skipped."""
    aff = _affinities(process_tree(root))
    workers = model_processes(aff, frozenset(model_cpus))
    out = []
    for pid in sorted(aff):
        role = "model" if pid in workers else "host"
        if role == "host":
            bind_process(pid, host_cpus)
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            cpus = sorted(os.sched_getaffinity(pid))
        except OSError:
            continue
        out.append({"name": name, "role": role, "cpus": cpus, "threads": len(_threads(pid))})
    return out


def bind_process(pid: int, cpus: Iterable[int]) -> None:
    """Bind every thread of one process to `cpus` (a thread that ends meanwhile is skipped): after
    an engine session, the driver's own threads go back to the CPUs they had before it."""
    target = frozenset(cpus)
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, target)
        except OSError:
            continue


def parse_involuntary(text: str) -> int:
    """``nonvoluntary_ctxt_switches`` of one /proc/<pid>/status text."""
    for line in text.splitlines():
        if line.startswith("nonvoluntary_ctxt_switches:"):
            return int(line.split(":", 1)[1])
    raise ValueError("no nonvoluntary_ctxt_switches line")


def involuntary_switches(
    root: int, model_cpus: Iterable[int], proc: str | os.PathLike[str] = "/proc"
) -> int | None:
    """Involuntary context switches so far of the model worker's threads (the processes bound to
    `model_cpus` in `root`'s tree, summed over their threads); None where /proc cannot be read."""
    total, seen = 0, False
    for pid in model_processes(_affinities(process_tree(root, proc)), frozenset(model_cpus)):
        for tid in _threads(pid):
            try:
                total += parse_involuntary(
                    Path(proc, str(pid), "task", str(tid), "status").read_text()
                )
                seen = True
            except (OSError, ValueError):
                continue
    return total if seen else None


def preemption_rate(before: int | None, after: int | None, wall_s: float) -> float:
    """Involuntary context switches per second of the model worker between two counts (NaN where
    either is missing or the interval is not positive)."""
    if before is None or after is None or not wall_s > 0:
        return float("nan")
    return (after - before) / wall_s
