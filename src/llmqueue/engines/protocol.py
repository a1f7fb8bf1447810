"""The measurement protocol of the validation matrix: which engine session serves what, in which
order, so that the machine's speed cannot hide the model.

On a machine whose speed wanders (on the 2-core VM the same decode batch varies by ~13% over
minutes and decorrelates within ~20 s), a step law fitted on one calibration of a few seconds
records one speed state, and every run judged against it inherits that state's error, amplified
by the queue. The protocol (config ``validation.vllm.matrix.protocol``, :class:`ProtocolSpec`)
therefore:

- **samples the calibration over the machine's states**: the group's grid of controlled batches
  is repeated ``calibration_rounds`` times, each round in its own random order (seeded), the
  rounds spread round-robin over the group's engine sessions (the first session and every repeat
  session: at least two) and, within a session, evenly between its runs; the law is fitted on
  every round pooled, each round's own fit gives the calibration's noise;
- **probes the speed beside every judged run**: one fixed decode batch (``probe``: batch,
  prompt and output tokens; a few seconds) right before and right after each judged run, and
  the same batch inside every calibration round, so the law prices it; the probe before a run is
  information available before the run starts (the probe-scaled prediction), the one after it
  measures the drift during the run;
- **alternates the runs of a group marked ``alternate``** (queue orders on the same arrivals):
  ``alternate_rounds`` rounds A B C A B C ..., each round on its own arrivals, each block behind
  its probe, so that a slow phase of the machine falls on every order alike;
- **repeats on a fresh engine with a fresh calibration**: the repeat sessions hold their own
  calibration rounds, so a repeat's error can be read with and without the calibration's noise.

Without a protocol section the legacy plan is produced (one calibration pass in config order in
the first session, capacity bursts, the runs in order; repeat sessions serve the repeated runs).

:func:`session_plan` is pure (no vLLM, no clock): a list of sessions, each a list of
:class:`Step`; the matrix driver (:mod:`llmqueue.engines.matrix_run`) executes it. Names:
``calibration`` (legacy) or ``calibration<k>`` (round k, from 1), ``capacity``/``capacity_l<l>``,
``<run>`` (session 1), ``<run>_r<s>`` (repeat session s), ``<run>_b<k>`` (alternation round k),
``probe_<table>_before`` / ``probe_<table>_after``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.limits import section_keys
from llmqueue.seeds import seed_sequence

__all__ = [
    "KINDS",
    "ProbeSpec",
    "ProtocolSpec",
    "Step",
    "read_protocol",
    "session_plan",
    "block_name",
    "probe_name",
    "group_probe",
    "capacity_name",
    "repeat_name",
    "plan_summary",
]

KINDS = ("calibration", "capacity", "probe", "run")


@dataclass(frozen=True)
class ProbeSpec:
    """The speed probe: `batch` requests of `prompt_tokens` tokens each asking `output_tokens`
    tokens, sent at once; nearly all its iterations decode exactly `batch` sequences."""

    batch: int
    prompt_tokens: int
    output_tokens: int

    @property
    def triple(self) -> tuple[int, int, int]:
        return (self.batch, self.prompt_tokens, self.output_tokens)


@dataclass(frozen=True)
class ProtocolSpec:
    """Config ``validation.vllm.matrix.protocol`` (module docstring): rounds of the calibration
    grid (>= 5), the least time they must span (s, >= 300; a shorter span is flagged), the probe,
    the rounds of an alternating group (>= 6)."""

    calibration_rounds: int
    calibration_min_span_s: float
    probe: ProbeSpec
    alternate_rounds: int


@dataclass(frozen=True)
class Step:
    """One thing an engine session does, in order.

    `kind`: ``calibration`` (controlled `batches`, in this order), ``capacity`` (a burst; its
    `token_limit`), ``probe`` (the probe batch, `batches` holds it; `position` ``before`` or
    ``after`` the judged run `table`), ``run`` (judged run `name` of configured run `run`, on
    request table `table`, alternation round `block`, 0 when not alternating)."""

    kind: str
    name: str
    session: int
    batches: tuple[tuple[int, int, int], ...] = ()
    round: int = 0
    run: str = ""
    table: str = ""
    token_limit: int | None = None
    position: str = ""
    block: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"protocol step kind {self.kind!r} is not one of {KINDS}")


def repeat_name(run: str, session: int) -> str:
    """The name of run `run` served again in repeat session `session` (2, 3, ...)."""
    return f"{run}_r{int(session)}"


def capacity_name(token_limit: int | None) -> str:
    """The table name of the capacity burst with this token limit (None: no limit)."""
    return "capacity" if token_limit is None else f"capacity_l{int(token_limit)}"


def _triple(b: Sequence[int]) -> tuple[int, int, int]:
    return (int(b[0]), int(b[1]), int(b[2]))


def block_name(run: str, block: int) -> str:
    """The judged run of configured run `run` in alternation round `block` (1, 2, ...)."""
    return f"{run}_b{int(block)}"


def probe_name(table: str, position: str) -> str:
    """The probe served `position` (``before`` / ``after``) judged run `table`."""
    return f"probe_{table}_{position}"


def _int(x: Any, where: str, lo: int, hi: int) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or not lo <= x <= hi:
        raise InputError(f"{where} must be an integer in [{lo}, {hi}], got {x!r}")
    return int(x)


def read_protocol(sec: Any, where: str = "validation.vllm.matrix.protocol") -> ProtocolSpec | None:
    """The protocol section as a :class:`ProtocolSpec` (None when absent); every key checked by
    type and range, one line naming the key."""
    if sec is None:
        return None
    section_keys(
        sec, where, ("calibration_rounds", "calibration_min_span_s", "probe", "alternate_rounds")
    )
    rounds = _int(sec["calibration_rounds"], f"{where}.calibration_rounds", 5, 50)
    span = sec["calibration_min_span_s"]
    if (
        isinstance(span, bool)
        or not isinstance(span, (int, float))
        or not math.isfinite(span)
        or not 300 <= span <= 36000
    ):
        raise InputError(
            f"{where}.calibration_min_span_s must be a time in [300, 36000] s, got {span!r}"
        )
    probe = sec["probe"]
    if not isinstance(probe, Mapping) or sorted(probe) != [
        "batch",
        "output_tokens",
        "prompt_tokens",
    ]:
        raise InputError(
            f"{where}.probe must be {{batch, prompt_tokens, output_tokens}}, got {probe!r}"
        )
    p = ProbeSpec(
        _int(probe["batch"], f"{where}.probe.batch", 1, 256),
        _int(probe["prompt_tokens"], f"{where}.probe.prompt_tokens", 2, 4096),
        _int(probe["output_tokens"], f"{where}.probe.output_tokens", 8, 4096),
    )
    alt = _int(sec["alternate_rounds"], f"{where}.alternate_rounds", 6, 100)
    return ProtocolSpec(rounds, float(span), p, alt)


def _even_slots(rounds: int, items: int) -> list[int]:
    """After how many of `items` work items each of `rounds` calibration rounds goes, spread
    evenly (0: before the first item, `items`: after the last)."""
    return [(j + 1) * (items + 1) // (rounds + 1) for j in range(rounds)]


def session_plan(g: Any, protocol: ProtocolSpec | None, *, seed: int) -> list[list[Step]]:
    """Every engine session of group `g` (:class:`llmqueue.engines.groups.GroupSpec`), in
    order, as its steps (module docstring). Deterministic in `seed`."""
    if protocol is None:
        return _legacy_plan(g)
    n_sessions = 1 + int(g.repeat_sessions)
    if n_sessions < 2:
        raise InputError(
            f"validation.vllm.matrix.groups.{g.name}: the protocol calibrates in at least two "
            "engine sessions: repeat_sessions must be >= 1"
        )
    grid = [_triple(b) for b in g.calibration]
    probe = group_probe(g, protocol)
    rounds: list[Step] = []
    for k in range(1, protocol.calibration_rounds + 1):
        items = [*grid, probe.triple]
        rng = np.random.default_rng(seed_sequence(seed, "validation", g.name, "calibration", k))
        order = rng.permutation(len(items))
        session = 1 + (k - 1) % n_sessions
        rounds.append(
            Step("calibration", f"calibration{k}", session, tuple(items[i] for i in order), round=k)
        )
    sessions: list[list[Step]] = []
    for s in range(1, n_sessions + 1):
        mine = [r for r in rounds if r.session == s]
        work = _work(g, probe, protocol.alternate_rounds, s)
        steps: list[Step] = [mine[0]]
        if s == 1:
            steps += [
                Step("capacity", capacity_name(lim), 1, token_limit=lim) for lim in g.token_limits
            ]
        slots = _even_slots(len(mine) - 1, len(work))
        for i, item in enumerate(work):
            steps += [r for r, at in zip(mine[1:], slots, strict=True) if at == i]
            steps += item
        steps += [r for r, at in zip(mine[1:], slots, strict=True) if at == len(work)]
        sessions.append(steps)
    return sessions


def group_probe(g: Any, protocol: ProtocolSpec) -> ProbeSpec:
    """The probe of group `g`: the protocol's, its batch capped at the group's request cap
    (``max_num_seqs``; transformers' ``max_requests_per_batch``): a one-at-a-time group probes
    with one sequence."""
    cap = int(g.settings().max_num_seqs)
    p = protocol.probe
    return ProbeSpec(min(p.batch, cap), p.prompt_tokens, p.output_tokens)


def _probed(
    name: str, run: str, table: str, session: int, probe: ProbeSpec, block: int
) -> list[Step]:
    """A judged run behind its probe and followed by the next."""
    return [
        Step("probe", probe_name(name, "before"), session, (probe.triple,), run=run, table=name,
             position="before", block=block),
        Step("run", name, session, run=run, table=table, block=block),
        Step("probe", probe_name(name, "after"), session, (probe.triple,), run=run, table=name,
             position="after", block=block),
    ]  # fmt: skip


def _work(g: Any, p: ProbeSpec, alternate_rounds: int, session: int) -> list[list[Step]]:
    """The judged runs of one session, each between its probes `p`: session 1 serves every run
    (an alternating group in `alternate_rounds` rounds of blocks), a repeat session its repeated
    runs."""
    if session > 1:
        return [
            _probed(repeat_name(name, session), name, g.run(name).table, session, p, 0)
            for name in g.repeat
        ]
    if not g.alternate:
        return [_probed(r.name, r.name, r.table, 1, p, 0) for r in g.runs]
    work = []
    for k in range(1, alternate_rounds + 1):
        for r in g.runs:
            work.append(_probed(block_name(r.name, k), r.name, f"{r.table}_b{k}", 1, p, k))
    return work


def _legacy_plan(g: Any) -> list[list[Step]]:
    """One calibration pass in config order, capacity bursts, the runs; repeats after."""
    first: list[Step] = [
        Step("calibration", "calibration", 1, tuple(_triple(b) for b in g.calibration))
    ]
    first += [Step("capacity", capacity_name(lim), 1, token_limit=lim) for lim in g.token_limits]
    first += [Step("run", r.name, 1, run=r.name, table=r.table) for r in g.runs]
    out = [first]
    if g.repeat:
        for s in range(2, 2 + g.repeat_sessions):
            out.append(
                [Step("run", repeat_name(n, s), s, run=n, table=g.run(n).table) for n in g.repeat]
            )
    return out


def plan_summary(sessions: Sequence[Sequence[Step]]) -> list[dict[str, Any]]:
    """The plan as JSON (for the group's meta.json): per session its steps' kind and name."""
    return [
        {"session": k + 1, "steps": [f"{s.kind}:{s.name}" for s in steps]}
        for k, steps in enumerate(sessions)
    ]
