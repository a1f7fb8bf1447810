"""The validation matrix's measurement protocol (:mod:`llmqueue.engines.protocol`), without
vLLM: the calibration grid repeated in random orders over at least two engine sessions and spread
between the runs, a probe right before and right after every judged run, alternating blocks of
queue orders on shared arrivals, repeats on a fresh engine with calibration rounds of their own;
and the protocol's settings refused by key."""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.engines.groups import read_matrix
from llmqueue.engines.protocol import (
    ProtocolSpec,
    Step,
    block_name,
    group_probe,
    probe_name,
    read_protocol,
    session_plan,
)
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
PROTOCOL = {
    "calibration_rounds": 6,
    "calibration_min_span_s": 300,
    "probe": {"batch": 4, "prompt_tokens": 16, "output_tokens": 64},
    "alternate_rounds": 6,
}


def matrix(protocol: dict[str, Any] | None = PROTOCOL, **group_edits: dict[str, Any]) -> Any:
    vllm = copy.deepcopy(CONFIG["validation"]["vllm"])
    if protocol is None:
        vllm["matrix"].pop("protocol", None)
    else:
        vllm["matrix"]["protocol"] = copy.deepcopy(protocol)
    for name, edits in group_edits.items():
        vllm["matrix"]["groups"][name].update(edits)
    return read_matrix(vllm, CONFIG["data"], CONFIG["ssjf"]["train_fraction"])


def steps_of(plan: list[list[Step]], kind: str) -> list[Step]:
    return [s for session in plan for s in session if s.kind == kind]


@pytest.mark.parametrize("group", ["fcfs", "nobatch", "dynamic", "kvpressure", "priority", "shape"])
def test_calibration_rounds_sample_the_grid_in_random_orders_over_sessions(group: str) -> None:
    spec = matrix()
    g = spec.group(group)
    p = spec.protocol
    assert p is not None
    plan = session_plan(g, p, seed=0)
    rounds = steps_of(plan, "calibration")
    assert sorted(r.round for r in rounds) == list(range(1, p.calibration_rounds + 1))
    probe = group_probe(g, p).triple
    grid = Counter([tuple(b) for b in g.calibration] + [probe])
    for r in rounds:
        assert Counter(r.batches) == grid, "every round holds the whole grid and the probe once"
    assert len({r.batches for r in rounds}) > 1, "the rounds' orders differ"
    sessions = {r.session for r in rounds}
    assert len(plan) >= 2 and sessions == set(range(1, len(plan) + 1))
    for session in plan:
        assert session[0].kind == "calibration", "each session starts with a calibration round"


@pytest.mark.parametrize("group", ["fcfs", "nobatch", "kvpressure", "priority"])
def test_every_judged_run_sits_between_its_two_probes(group: str) -> None:
    spec = matrix()
    plan = session_plan(spec.group(group), spec.protocol, seed=0)
    for session in plan:
        for i, s in enumerate(session):
            if s.kind != "run":
                continue
            before, after = session[i - 1], session[i + 1]
            assert (before.kind, before.name, before.position) == (
                "probe", probe_name(s.name, "before"), "before"
            )  # fmt: skip
            assert (after.kind, after.name, after.position) == (
                "probe", probe_name(s.name, "after"), "after"
            )  # fmt: skip
    names = [s.name for session in plan for s in session]
    assert len(names) == len(set(names)), "every step has its own name"


def test_capacity_bursts_come_before_the_first_run() -> None:
    spec = matrix()
    plan = session_plan(spec.group("nobatch"), spec.protocol, seed=0)
    first = plan[0]
    caps = [i for i, s in enumerate(first) if s.kind == "capacity"]
    runs = [i for i, s in enumerate(first) if s.kind == "run"]
    assert [first[i].token_limit for i in caps] == [None, 48, 24]
    assert max(caps) < min(runs)


def test_the_rounds_are_spread_between_the_runs() -> None:
    spec = matrix(fcfs={"repeat": ["load85"], "repeat_sessions": 1})
    plan = session_plan(spec.group("fcfs"), spec.protocol, seed=0)
    first = [s.kind for s in plan[0] if s.kind in ("calibration", "run")]
    # 3 rounds in session 1 (rounds 1, 3, 5) around 3 runs: not all at the start
    assert first.count("calibration") == 3
    assert first != sorted(first), first
    assert first[0] == "calibration" and "run" in first[1:3]


def test_alternating_blocks_serve_each_order_in_turn_on_shared_arrivals() -> None:
    spec = matrix(priority={"alternate": True, "repeat": []})
    p = spec.protocol
    g = spec.group("priority")
    plan = session_plan(g, p, seed=0)
    runs = [s for s in plan[0] if s.kind == "run"]
    names = [r.name for r in g.runs]
    assert [s.run for s in runs] == names * p.alternate_rounds
    assert [s.block for s in runs] == [k for k in range(1, p.alternate_rounds + 1) for _ in names]
    assert [s.name for s in runs[:3]] == [block_name(n, 1) for n in names]
    for k in range(1, p.alternate_rounds + 1):
        tables = {s.table for s in runs if s.block == k}
        assert len(tables) == 1, "the orders of one round share their arrivals"
    assert len({s.table for s in runs}) == p.alternate_rounds, "each round has its own arrivals"
    assert not [s for s in plan[1] if s.kind == "run"], "the repeat session only calibrates"


def test_repeat_sessions_serve_the_repeats_with_calibration_of_their_own() -> None:
    spec = matrix(fcfs={"repeat": ["load85"], "repeat_sessions": 2})
    plan = session_plan(spec.group("fcfs"), spec.protocol, seed=0)
    assert len(plan) == 3
    for k, session in enumerate(plan[1:], start=2):
        assert [s.name for s in session if s.kind == "run"] == [f"load85_r{k}"]
        assert any(s.kind == "calibration" for s in session)


def test_the_plan_is_deterministic_in_the_seed() -> None:
    spec = matrix()
    g = spec.group("fcfs")
    assert session_plan(g, spec.protocol, seed=3) == session_plan(g, spec.protocol, seed=3)
    a = [s.batches for s in steps_of(session_plan(g, spec.protocol, seed=3), "calibration")]
    b = [s.batches for s in steps_of(session_plan(g, spec.protocol, seed=4), "calibration")]
    assert a != b


def test_without_a_protocol_the_legacy_plan_is_kept() -> None:
    spec = matrix(None)
    g = spec.group("fcfs")
    plan = session_plan(g, None, seed=0)
    assert [s.name for s in plan[0]] == ["calibration", "capacity", "load30", "load60", "load85"]
    assert plan[0][0].batches == tuple(tuple(b) for b in g.calibration)
    assert [[s.name for s in ses] for ses in plan[1:]] == [["load85_r2"]]


def test_a_one_at_a_time_group_probes_with_one_sequence() -> None:
    spec = matrix()
    assert spec.protocol is not None
    assert group_probe(spec.group("nobatch"), spec.protocol).batch == 1
    assert group_probe(spec.group("fcfs"), spec.protocol).batch == 4


@pytest.mark.parametrize(
    ("key", "value", "named"),
    [
        ("calibration_rounds", 4, "calibration_rounds"),
        ("calibration_rounds", 5.5, "calibration_rounds"),
        ("calibration_rounds", True, "calibration_rounds"),
        ("calibration_min_span_s", 60, "calibration_min_span_s"),
        ("calibration_min_span_s", float("nan"), "calibration_min_span_s"),
        ("calibration_min_span_s", "long", "calibration_min_span_s"),
        ("alternate_rounds", 5, "alternate_rounds"),
        ("probe", {"batch": 4, "prompt_tokens": 16}, "probe"),
        ("probe", {"batch": 0, "prompt_tokens": 16, "output_tokens": 64}, "probe.batch"),
        ("probe", {"batch": 4, "prompt_tokens": 16, "output_tokens": 2}, "probe.output_tokens"),
        ("extra", 1, "unknown ['extra']"),
    ],
)
def test_bad_protocol_settings_are_refused_by_key(key: str, value: Any, named: str) -> None:
    sec = copy.deepcopy(PROTOCOL)
    sec[key] = value
    with pytest.raises(InputError, match=r"validation\.vllm\.matrix\.protocol") as err:
        read_protocol(sec)
    assert named in str(err.value)


def test_a_probe_that_does_not_fit_a_group_is_refused() -> None:
    big = {**PROTOCOL, "probe": {"batch": 8, "prompt_tokens": 256, "output_tokens": 64}}
    with pytest.raises(InputError, match=r"protocol\.probe: .*kvpressure"):
        matrix(big)


@pytest.mark.parametrize(
    ("edits", "match"),
    [
        ({"alternate": True, "repeat": ["ssjf"]}, "repeat"),
        ({"alternate": "yes"}, "alternate must be true or false"),
    ],
)
def test_alternating_groups_are_checked(edits: dict[str, Any], match: str) -> None:
    with pytest.raises(InputError, match=match):
        matrix(priority=edits)


def test_alternation_needs_runs_on_one_table() -> None:
    with pytest.raises(InputError, match="sharing one table"):
        matrix(fcfs={"alternate": True, "repeat": []})


@settings(max_examples=40, derandomize=True, deadline=None)
@given(
    rounds=st.integers(5, 12),
    sessions=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_any_protocol_covers_every_round_once(rounds: int, sessions: int, seed: int) -> None:
    spec = matrix(fcfs={"repeat_sessions": sessions})
    p = dataclasses.replace(spec.protocol, calibration_rounds=rounds)
    assert isinstance(p, ProtocolSpec)
    plan = session_plan(spec.group("fcfs"), p, seed=seed)
    cal = steps_of(plan, "calibration")
    assert sorted(r.round for r in cal) == list(range(1, rounds + 1))
    assert len(plan) == 1 + sessions
    assert {r.session for r in cal} == set(range(1, 2 + sessions))
    runs = steps_of(plan, "run")
    assert len(runs) == 3 + sessions  # three runs, load85 again in every repeat session
