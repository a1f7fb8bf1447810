"""Where the engine's processes run (llmqueue.engines.placement): CPU lists, the binding check,
the worker's recognition, the involuntary-switch count, and a live binding of a process tree."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmqueue.engines.contention import process_tree
from llmqueue.engines.placement import (
    bind_host_processes,
    check_binding,
    involuntary_switches,
    model_processes,
    parse_cpu_list,
    parse_involuntary,
    preemption_rate,
)
from llmqueue.errors import InputError

TWO_CPUS = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs Linux CPU affinity and two CPUs",
)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("1", {1}), ("0,2-3", {0, 2, 3}), (" 4-4 ", {4}), ("nobind", None), ("auto", None)],
)
def test_cpu_lists_parse(text: str, cpus: set[int] | None) -> None:
    assert parse_cpu_list(text) == (None if cpus is None else frozenset(cpus))


@pytest.mark.parametrize("text", ["", "a", "1-", "3-1", "1,,2", "-1", "1.5"])
def test_bad_cpu_lists_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a CPU list"):
        parse_cpu_list(text)


@given(st.sets(st.integers(0, 63), min_size=1))
def test_a_cpu_list_written_back_parses_to_itself(cpus: set[int]) -> None:
    assert parse_cpu_list(",".join(str(c) for c in sorted(cpus))) == frozenset(cpus)


@pytest.mark.parametrize(
    ("omp", "host", "match"),
    [
        ("0", "0", r"shares CPUs \[0\]"),
        ("0-1", "1-2", r"shares CPUs \[1\]"),
        ("auto", "1", "needs omp_threads_bind as a CPU list"),
        ("0", "auto", "must be a CPU list"),
        ("0", "x", "host_cpus_bind must be a CPU list"),
        ("zero", "1", "omp_threads_bind must be a CPU list"),
    ],
)
def test_bindings_that_cannot_hold_are_named(omp: str, host: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        check_binding(omp, host)


@pytest.mark.parametrize(("omp", "host"), [("0", "1"), ("0", "nobind"), ("auto", "nobind")])
def test_bindings_that_hold_pass(omp: str, host: str) -> None:
    check_binding(omp, host)


def test_the_worker_is_the_process_bound_inside_the_model_cpus() -> None:
    aff = {10: frozenset({0, 1}), 11: frozenset({1}), 12: frozenset({0}), 13: frozenset()}
    assert model_processes(aff, frozenset({0})) == {12}
    assert model_processes(aff, frozenset({0, 1})) == {10, 11, 12}


def test_involuntary_switches_are_read_from_status_text() -> None:
    text = "Name:\tx\nvoluntary_ctxt_switches:\t12\nnonvoluntary_ctxt_switches:\t345\n"
    assert parse_involuntary(text) == 345
    with pytest.raises(ValueError):
        parse_involuntary("Name:\tx\n")
    assert preemption_rate(100, 400, 2.0) == 150.0
    assert preemption_rate(None, 4, 1.0) != preemption_rate(None, 4, 1.0)  # NaN
    assert preemption_rate(1, 4, 0.0) != preemption_rate(1, 4, 0.0)


_TREE = (
    "import os, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(30)\n"
)


@TWO_CPUS
def test_a_live_tree_is_bound_except_its_worker() -> None:
    """A parent with a child bound to the 'model' CPU, as vLLM leaves its worker: the parent's
    threads move to the host CPU, the child stays; the child's switches are counted."""
    model_cpu, host_cpu = sorted(os.sched_getaffinity(0))[:2]
    parent = subprocess.Popen([sys.executable, "-c", _TREE], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker = int(parent.stdout.readline())
        os.sched_setaffinity(worker, {model_cpu})
        deadline = time.monotonic() + 10
        while worker not in process_tree(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        placed = bind_host_processes(parent.pid, {host_cpu}, {model_cpu})
        roles = sorted((p["role"], tuple(p["cpus"])) for p in placed)
        assert roles == [("host", (host_cpu,)), ("model", (model_cpu,))]
        assert os.sched_getaffinity(parent.pid) == {host_cpu}
        assert os.sched_getaffinity(worker) == {model_cpu}
        n = involuntary_switches(parent.pid, {model_cpu})
        assert n is not None and n >= 0
        assert involuntary_switches(parent.pid, {host_cpu + 1000}) is None
    finally:
        parent.kill()
        parent.wait()


_CLOSE = (
    "import os, sys\n"
    "from llmqueue.engines.engine import _AFFINITY_BEFORE, close_engine\n"
    "class Engine:\n"
    "    def shutdown(self): pass\n"
    "cpus = sorted(os.sched_getaffinity(0))\n"
    "e = Engine()\n"
    "setattr(e, _AFFINITY_BEFORE, frozenset(cpus))\n"
    "os.sched_setaffinity(0, {cpus[-1]})\n"
    "close_engine(e)\n"
    "print(sorted(os.sched_getaffinity(0)) == cpus)\n"
)


@TWO_CPUS
def test_closing_the_engine_puts_the_driver_back_on_its_cpus() -> None:
    """After a session bound the driver to the host CPUs, the next engine must start from the
    CPUs the driver had (else vLLM's worker could not be bound to the model's)."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", _CLOSE],
        capture_output=True, text=True, check=True, timeout=60,
        env={**os.environ, "PYTHONPATH": src},
    )  # fmt: skip
    assert out.stdout.strip() == "True"


def test_a_process_tree_and_its_cpu_time_come_from_one_proc_walk(tmp_path: Path) -> None:
    """A fake /proc: 10 -> 11 -> 12, and 20 outside; 13 has a broken stat (it ended)."""
    from llmqueue.engines.contention import process_table, snapshot

    hz = os.sysconf("SC_CLK_TCK")
    rows = {10: (1, 100, 50), 11: (10, 30, 10), 12: (11, 5, 5), 20: (1, 999, 1)}
    for pid, (ppid, ut, st_) in rows.items():
        (tmp_path / str(pid)).mkdir()
        fields = ["S", str(ppid)] + ["0"] * 9 + [str(ut), str(st_)] + ["0"] * 10
        (tmp_path / str(pid) / "stat").write_text(f"{pid} (a (b) c) " + " ".join(fields))
    (tmp_path / "13").mkdir()
    (tmp_path / "stat").write_text("cpu 1 2 3 4 5 6 7 8\n")
    (tmp_path / "loadavg").write_text("0.5 0.4 0.3 1/100 42\n")
    assert process_table(tmp_path)[11] == (10, 40.0)
    assert process_tree(10, tmp_path) == {10, 11, 12}
    snap = snapshot(10, tmp_path)
    assert snap is not None
    assert snap.own_cpu_s == pytest.approx((150 + 40 + 10) / hz)
    assert snap.loadavg == (0.5, 0.4, 0.3)
