"""The registries of queue orders, batch formers and routers (llmqueue.policy): declared once, their codes
derived from that list, every part of the engine keyed by them, and an unknown name refused
everywhere (never treated as another order or former)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from llmqueue import policy as P
from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency, StepLaw
from llmqueue.policy_text import parse_policy, policy_spec
from llmqueue.sim import engine, exact
from llmqueue.sim import queue as Q
from llmqueue.sim import router as R
from llmqueue.sim import static as ST
from llmqueue.sim.preemptive import PREEMPTIVE_CODES
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law


def test_codes_are_positions_in_the_one_list() -> None:
    assert [P.order_code(o) for o in P.ORDERS] == list(range(len(P.ORDERS)))
    assert [P.former_code(f) for f in P.BATCHING] == list(range(len(P.BATCHING)))
    assert (Q.FCFS, Q.SJF, Q.SPJF) == tuple(P.order_code(o) for o in ("fcfs", "sjf", "spjf"))
    assert (ST.NONE, ST.DYNAMIC, ST.FIXED, ST.ELASTIC) == tuple(
        P.former_code(f) for f in ("none", "dynamic", "fixed", "elastic")
    )


def test_former_records_are_the_registry() -> None:
    assert P.BATCHING == tuple(f.name for f in P.FORMER_RECORDS)
    assert [f.code for f in P.FORMER_RECORDS] == [P.former_code(f) for f in P.BATCHING]
    assert all(P.batch_former(f.name) is f for f in P.FORMER_RECORDS)
    assert P.TIMEOUT_FORMERS == ("dynamic", "elastic", "rebatch")
    assert P.ROUTED_FORMERS == ("none", "dynamic", "elastic", "continuous")
    assert P.PREDICTING_FORMERS == ("multibin",)
    # the size each takes: exactly K, at most b_max, or one request
    for f in P.FORMER_RECORDS:
        kw = {"K": 4} if f.size == "K" else {}
        pol = P.Policy(f.name, **kw)  # type: ignore[arg-type]
        assert pol.cap == {"K": 4, "one": 1, "bmax": P.NO_CAP}[f.size]
        assert parse_policy(policy_spec(pol)) == pol
    with pytest.raises(InputError, match="size must be one, bmax or K"):
        P.BatchFormer("chunked", "tokens")


def test_order_records_are_the_registry() -> None:
    assert P.ORDERS == tuple(o.name for o in P.QUEUE_ORDERS)
    assert [o.code for o in P.QUEUE_ORDERS] == [P.order_code(o) for o in P.ORDERS]
    assert all(P.queue_order(o.name) is o for o in P.QUEUE_ORDERS)
    assert all(o.key in P.ORDER_KEYS for o in P.QUEUE_ORDERS)
    # an order that reads a prediction keys on it, and nothing else reads one
    predicted = ("predicted_size", "predicted_remaining")
    assert all(o.needs_prediction == (o.key in predicted) for o in P.QUEUE_ORDERS)
    assert P.DEFAULT_ORDER in P.ORDERS and P.queue_order(P.DEFAULT_ORDER).by_arrival
    needing = [o.name for o in P.QUEUE_ORDERS if o.needs_prediction]
    assert all(P.predictions_needed(orders=[o]) for o in needing)
    assert not P.predictions_needed(orders=[o for o in P.ORDERS if o not in needing])
    assert P.predictions_needed(formers=list(P.PREDICTING_FORMERS))
    assert P.predictions_needed(routers=list(P.PREDICTING_ROUTERS))
    with pytest.raises(InputError, match="order must be one of"):
        P.queue_order("srpt_typo")


def test_the_predicting_names_are_every_predicting_part_and_formers_only_when_asked() -> None:
    full, without = P.predicting_names(), P.predicting_names(formers=False)
    predicting = [o.name for o in P.QUEUE_ORDERS if o.needs_prediction]
    for name in predicting:
        assert f"--order {name}" in full and f"--order {name}" in without
    for name in P.PREDICTING_ROUTERS:
        assert f"--router {name}" in full and f"--router {name}" in without
    for name in P.PREDICTING_FORMERS:
        assert f"--batching {name}" in full
    assert "--batching" not in without and " and " in without and not without.endswith(" and ")


# string constants equal to an order name allowed outside policy.py, with their reason
OTHER_VOCABULARIES = {
    # vLLM's EngineArgs.scheduling_policy names its first-come-first-served scheduler "fcfs"
    "engines/engine.py": {"fcfs"},
}


def test_no_order_name_is_spelled_outside_the_registry() -> None:
    root = Path(P.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "policy.py":
            continue
        allowed = OTHER_VOCABULARIES.get(rel, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in P.ORDERS:
                if node.value not in allowed:
                    found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "order names spelled outside llmqueue.policy: " + ", ".join(found)


def test_every_registered_name_has_its_engine_parts() -> None:
    assert set(engine.FORMERS) == set(P.BATCHING)
    plain = {o.code for o in P.QUEUE_ORDERS if not o.preemptive}
    # the queue keys every order (continuous batching evicts by the preemptive ones' keys)
    assert set(Q.COMPILED_ORDERS) == {o.code for o in P.QUEUE_ORDERS}
    assert set(PREEMPTIVE_CODES) == {o.code for o in P.QUEUE_ORDERS} - plain
    assert {o.exact for o in P.QUEUE_ORDERS if o.exact is not None} == set(exact.FORMULAS)
    assert set(R.COMPILED_ROUTERS) == {P.router_code(r) for r in P.ROUTERS if r != "central"}
    assert [P.router_code(r) for r in P.ROUTERS] == list(range(len(P.ROUTERS)))


@pytest.mark.parametrize("name", ["nearest", "JSQ", ""])
def test_unknown_routers_raise_everywhere(name: str) -> None:
    with pytest.raises(InputError, match="router must be one of central, round_robin"):
        P.router_code(name)
    with pytest.raises(InputError, match="router must be one of"):
        P.Policy("none", replicas=2, router=name)
    with pytest.raises(InputError, match="router must be one of"):
        R.check_router(name)


def test_a_registered_router_without_a_compiled_branch_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new router added to the registry but not to the compiled part never runs as another."""
    monkeypatch.setattr(
        P, "ROUTER_RECORDS", (*P.ROUTER_RECORDS, P.Router("least_latency", "requests"))
    )
    monkeypatch.setattr(P, "ROUTERS", (*P.ROUTERS, "least_latency"))
    pol = P.Policy("none", replicas=2, router="least_latency")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="'least_latency' has no compiled branch"):
        engine.run(w, pol, LinearLatency(0.01, 0.1), requests=1000, warmup=0, seed=1)
    with pytest.raises(InputError, match="no compiled branch"):
        R.check_router("central")  # the shared queue is the engine's, not a router's choice


@pytest.mark.parametrize("name", ["lifo", "SJF", "", "spjf "])
def test_unknown_orders_raise_everywhere(name: str) -> None:
    with pytest.raises(InputError, match="order must be one of fcfs, sjf, spjf"):
        P.order_code(name)
    with pytest.raises(InputError, match="order must be one of"):
        P.Policy("none", order=name)
    with pytest.raises(InputError, match="order must be one of"):
        Q.check_order(name)
    with pytest.raises(InputError, match="order must be one of"):
        exact.row_mean_wait(name, [1.0], [1.0], None, 0.1)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["static", "", "Continuous"])
def test_unknown_formers_raise(name: str) -> None:
    with pytest.raises(InputError, match="batching must be one of none, dynamic"):
        P.former_code(name)
    with pytest.raises(InputError, match="batching must be one of"):
        P.Policy(name)


def test_a_registered_order_without_a_compiled_branch_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new order added to the registry but not to the compiled queue never runs as another."""
    lpf = P.QueueOrder("lpf", "size", False, False, None)
    monkeypatch.setattr(P, "QUEUE_ORDERS", (*P.QUEUE_ORDERS, lpf))
    with pytest.raises(InputError, match="'lpf' has no compiled branch in llmqueue.sim.queue"):
        Q.check_order("lpf")
    assert exact.row_mean_wait("lpf", [1.0], [1.0], None, 0.1) is None  # no formula: none given
    pol = P.Policy("none", order="lpf")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="no compiled branch"):
        engine.run(w, pol, LinearLatency(0.01, 0.1), requests=1000, warmup=0, seed=1)


def test_a_registered_former_without_a_driver_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "FORMER_RECORDS", (*P.FORMER_RECORDS, P.BatchFormer("chunked", "bmax")))
    monkeypatch.setattr(P, "BATCHING", (*P.BATCHING, "chunked"))
    pol = P.Policy("chunked")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="batching 'chunked' has no driver"):
        engine.run(w, pol, StepLaw(0.01, 0.0, 0.0), requests=1000, warmup=0, seed=1)
