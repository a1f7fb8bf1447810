"""The registries of queue orders, batch formers and routers (llmqueue.policy): declared once, their codes
derived from that list, every part of the engine keyed by them, and an unknown name refused
everywhere (never treated as another order or former)."""

from __future__ import annotations

import pytest

from llmqueue import policy as P
from llmqueue.errors import InputError
from llmqueue.latency import LinearLatency, StepLaw
from llmqueue.sim import engine, exact
from llmqueue.sim import queue as Q
from llmqueue.sim import router as R
from llmqueue.sim import static as ST
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law


def test_codes_are_positions_in_the_one_list() -> None:
    assert [P.order_code(o) for o in P.ORDERS] == list(range(len(P.ORDERS)))
    assert [P.former_code(f) for f in P.BATCHING] == list(range(len(P.BATCHING)))
    assert (Q.FCFS, Q.SJF, Q.SPJF) == tuple(P.order_code(o) for o in ("fcfs", "sjf", "spjf"))
    assert (ST.NONE, ST.DYNAMIC, ST.FIXED, ST.ELASTIC) == tuple(
        P.former_code(f) for f in ("none", "dynamic", "fixed", "elastic")
    )


def test_every_registered_name_has_its_engine_parts() -> None:
    assert set(engine.FORMERS) == set(P.BATCHING)
    assert set(Q.COMPILED_ORDERS) == {P.order_code(o) for o in P.ORDERS}
    assert set(exact.ROW_FORMULAS) == set(P.ORDERS)
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
    monkeypatch.setattr(P, "ROUTERS", (*P.ROUTERS, "prefix_affinity"))
    pol = P.Policy("none", replicas=2, router="prefix_affinity")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="'prefix_affinity' has no compiled branch"):
        engine.run(w, pol, LinearLatency(0.01, 0.1), requests=1000, warmup=0, seed=1)
    with pytest.raises(InputError, match="no compiled branch"):
        R.check_router("central")  # the shared queue is the engine's, not a router's choice


@pytest.mark.parametrize("name", ["srpt", "SJF", "", "spjf "])
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
    monkeypatch.setattr(P, "ORDERS", (*P.ORDERS, "lpf"))
    with pytest.raises(InputError, match="'lpf' has no compiled branch in llmqueue.sim.queue"):
        Q.check_order("lpf")
    assert exact.row_mean_wait("lpf", [1.0], [1.0], None, 0.1) is None  # no formula: none given
    pol = P.Policy("none", order="lpf")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="no compiled branch"):
        engine.run(w, pol, LinearLatency(0.01, 0.1), requests=1000, warmup=0, seed=1)


def test_a_registered_former_without_a_driver_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(P, "BATCHING", (*P.BATCHING, "chunked"))
    pol = P.Policy("chunked")
    w = PoissonWorkload(parse_law("deterministic:value=10"), 0.5)
    with pytest.raises(InputError, match="batching 'chunked' has no driver"):
        engine.run(w, pol, StepLaw(0.01, 0.0, 0.0), requests=1000, warmup=0, seed=1)
