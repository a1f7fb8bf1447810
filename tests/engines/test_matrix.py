"""The validation matrix's driver parts that need no vLLM: the run groups read from config and
checked, the request tables of a group (held-out rows, a fixed prompt, token limits, priorities),
the batch-queue admission rule, the contention measurements and the client's priorities."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.admission import BatchQueueMixin, admission_limit, check_batch_queue
from llmqueue.engines.contention import (
    CpuSnapshot,
    contention,
    descendants,
    drift,
    flags,
    parse_pid_stat,
    parse_proc_stat,
)
from llmqueue.engines.groups import read_matrix, repeat_name, select_groups
from llmqueue.engines.requests import candidate_rows, group_table, run_table
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def config() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())  # type: ignore[no-any-return]


def _matrix(cfg: dict[str, Any]) -> Any:
    return read_matrix(cfg["validation"]["vllm"], cfg["data"], cfg["ssjf"]["train_fraction"])


# ---- the groups -------------------------------------------------------------------------------
def test_shipped_matrix_covers_the_issue(config: dict[str, Any]) -> None:
    """At least 16 judged runs over the five kinds of policy, at least four configurations
    repeated on a fresh engine (the committed FCFS one among them), one calibration per group."""
    spec = _matrix(config)
    judged = [n for g in spec.groups for n, _, _ in g.judged_runs()]
    assert len(judged) >= 16
    policies = {g.policy for g in spec.groups}
    assert policies == {"continuous", "none", "dynamic"}
    assert sum(len(g.repeat) for g in spec.groups) >= 4
    assert "load85" in spec.group("fcfs").repeat
    prio = {r.priority for g in spec.groups for r in g.runs}
    assert prio == {"fcfs", "sjf", "ssjf"}
    assert any(r.token_limit for g in spec.groups for r in g.runs)
    assert any(
        not g.engine["enable_chunked_prefill"] for g in spec.groups if g.policy == "continuous"
    )
    assert {g.model.name for g in spec.groups} > {"default"}
    assert {g.trace.name for g in spec.groups} == {"conv", "code"}
    assert spec.group("dynamic").scheduler == "batch_queue"
    assert repeat_name("load85", 2) in [n for n, _, _ in spec.group("fcfs").judged_runs()]


def _mutate(cfg: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    c = copy.deepcopy(cfg)
    node = c["validation"]["vllm"]["matrix"]
    keys = path.split(".")
    for k in keys[:-1]:
        node = node[int(k)] if isinstance(node, list) else node[k]
    if value is KeyError:
        del node[keys[-1]]
    elif isinstance(node, list):
        node[int(keys[-1])] = value
    else:
        node[keys[-1]] = value
    return c


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        ("groups.fcfs.policy", "lifo", "groups.fcfs.policy"),
        ("groups.nobatch.engine.max_num_seqs", 2, "max_num_seqs 1"),
        ("groups.dynamic.engine.enable_chunked_prefill", True, "enable_chunked_prefill false"),
        ("groups.dynamic.engine.max_num_batched_tokens", 256, "max_num_batched_tokens"),
        ("groups.priority.rows", "all", "held_out"),
        ("groups.priority.engine.scheduling_policy", "fcfs", "scheduling_policy priority"),
        ("groups.kvpressure.runs.0.token_limit", 32, "token limits are for policy none"),
        ("groups.priority.engine.max_num_seqz", 8, "unknown settings"),
        ("groups.nobatch.runs.1.load", 0.5, "share the table"),
        ("groups.fcfs.repeat", ["load99"], "repeat"),
        ("groups.shape.model", "huge", "model"),
        ("groups.shape.trace", "chat", "trace"),
        ("groups.fcfs.runs.0.warmup", 295, "warmup"),
        ("groups.fcfs.runs.0.load", 1.2, "load"),
        ("groups.fcfs.calibration", [[1, 16, 2000], [2, 16, 8]], "max_model_len"),
        ("contention.drift", 3, "contention.drift"),
        ("predictor", KeyError, "predictor"),
        ("traces.code.scale", 2.0, "scale"),
        ("batch_queue_gate", KeyError, "batch_queue_gate: missing"),
        ("batch_queue_gate.prompt_tokens", 1024, "batch_queue_gate.prompt_tokens"),
        ("batch_queue_gate.lead_s", 0, "batch_queue_gate.lead_s"),
    ],
)
def test_matrix_mistakes_are_named(
    config: dict[str, Any], path: str, value: object, match: str
) -> None:
    with pytest.raises(InputError, match=match):
        _matrix(_mutate(config, path, value))


def test_groups_are_selected_by_name(config: dict[str, Any]) -> None:
    spec = _matrix(config)
    assert [g.name for g in select_groups(spec, "dynamic, fcfs")] == ["dynamic", "fcfs"]
    assert len(select_groups(spec, "")) == len(spec.groups)
    with pytest.raises(InputError, match="no group 'nope'; groups: fcfs"):
        select_groups(spec, "nope")


def test_batch_queue_gate_precedes_each_controlled_batch(config: dict[str, Any]) -> None:
    from llmqueue.engines.batches import batch_table
    from llmqueue.engines.calibration import CalibrationBatch

    spec = _matrix(config)
    gate = spec.batch_queue_gate
    assert gate is not None and gate.lead_s > 0
    assert spec.gate_for(spec.group("dynamic")) == gate
    assert spec.gate_for(spec.group("fcfs")) is None  # vLLM's own admission needs no gate
    b = CalibrationBatch(8, 64, 40)
    plain = batch_table(b, "calibration05")
    assert list(plain["planned_s"]) == [0.0] * 8
    gated = batch_table(b, "calibration05", gate)
    assert list(gated["request_id"])[:2] == ["calibration05-gate", "calibration05-0000"]
    assert list(gated["output_tokens"]) == [1] + [40] * 8
    assert gated["prompt_tokens"].iloc[0] == gate.prompt_tokens
    assert list(gated["planned_s"]) == [0.0] + [gate.lead_s] * 8


# ---- request tables ---------------------------------------------------------------------------
def test_held_out_rows_are_the_predictors_test_split() -> None:
    from llmqueue.predictor.features import split_index

    rows = candidate_rows(1000, "held_out", 0.7)
    assert rows[0] == split_index(1000, 0.7) and rows[-1] == 999
    assert candidate_rows(10, "all", 0.7).tolist() == list(range(10))
    with pytest.raises(InputError, match="all or held_out"):
        candidate_rows(10, "some", 0.7)


def _base(n: int = 200, prompt_tokens: int | None = 64) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    prompt = rng.integers(1, 4000, 500)
    output = rng.integers(1, 800, 500)
    rows = candidate_rows(500, "held_out", 0.7)
    return group_table(prompt, output, rows, n, 2.0, 0.125, 1024, 20, rng, "a", prompt_tokens)


def test_group_table_draws_held_out_rows_with_a_fixed_prompt() -> None:
    tab = _base()
    assert tab["trace_row"].min() >= 350
    assert (tab["prompt_tokens"] == 64).all()
    assert (tab["requested_tokens"] == tab["output_tokens"]).all()
    assert tab["warmup"].sum() == 20 and np.all(np.diff(tab["planned_s"]) > 0)


def test_run_tables_share_arrivals_and_differ_in_limit_and_priority() -> None:
    base = _base()
    preds = np.arange(500, dtype=float) * 1.7
    fcfs = run_table(base, "fcfs")
    lim = run_table(base, "limit24", token_limit=24)
    sjf = run_table(base, "sjf", priority="sjf")
    ssjf = run_table(base, "ssjf", priority="ssjf", predictions=preds)
    for t in (lim, sjf, ssjf):
        assert np.array_equal(t["planned_s"], fcfs["planned_s"])
    assert (lim["output_tokens"] == np.minimum(base["requested_tokens"], 24)).all()
    assert (lim["requested_tokens"] == base["requested_tokens"]).all()
    assert (lim["token_limit"] == 24).all() and (fcfs["token_limit"] == -1).all()
    assert (fcfs["priority"] == 0).all()
    assert (sjf["priority"] == sjf["output_tokens"]).all()
    assert (ssjf["priority"] == np.rint(preds[ssjf["trace_row"]])).all()
    assert ssjf["request_id"].iloc[0] == "ssjf-0000"
    with pytest.raises(InputError, match="needs the learned predictor"):
        run_table(base, "ssjf", priority="ssjf")
    with pytest.raises(InputError, match="predictions hold 10 trace rows"):
        run_table(base, "ssjf", priority="ssjf", predictions=np.ones(10))


# ---- the batch queue --------------------------------------------------------------------------
class _FakeScheduler:
    """The part of vLLM's Scheduler the mixin touches: its admission loop admits waiting requests
    while len(running) < max_num_active_reqs."""

    def __init__(self, b_max: int) -> None:
        self.max_num_running_reqs = b_max
        self.max_num_active_reqs = b_max
        self.running: list[str] = []
        self.waiting: list[str] = []

    def schedule(self) -> list[str]:
        admitted = []
        while self.waiting and len(self.running) < self.max_num_active_reqs:
            r = self.waiting.pop(0)
            self.running.append(r)
            admitted.append(r)
        return admitted


class _BatchQueue(BatchQueueMixin, _FakeScheduler):
    pass


def test_admission_limit() -> None:
    assert admission_limit(0, 8) == 8 and admission_limit(3, 8) == 0
    with pytest.raises(ValueError):
        admission_limit(0, 0)


def test_batch_queue_admits_only_between_batches() -> None:
    s = _BatchQueue(3)
    s.waiting = [f"r{i}" for i in range(7)]
    assert s.schedule() == ["r0", "r1", "r2"]
    s.running.remove("r0")  # a member finishes: the others still run
    assert s.schedule() == []
    s.running.clear()
    assert s.schedule() == ["r3", "r4", "r5"]
    plain = _FakeScheduler(3)
    plain.waiting = ["a", "b", "c", "d"]
    plain.schedule()
    plain.running.remove("a")
    assert plain.schedule() == ["d"]  # vLLM's own rule refills the slot at once


def test_check_batch_queue_finds_violations() -> None:
    ok = check_batch_queue([["a", "b"], [], ["c"]], [set(), set(), {"a", "b"}], 2)
    assert ok == []
    bad = check_batch_queue([["a", "b"], ["c"], []], [set(), {"a"}, set()], 2)
    assert bad and "still ran" in bad[0]
    big = check_batch_queue([["a", "b", "c"]], [set()], 2)
    assert big and "b_max" in big[0]


# ---- contention -------------------------------------------------------------------------------
def test_proc_stat_and_pid_stat_are_parsed() -> None:
    stat = "cpu  100 5 50 800 10 1 2 30 0 0\ncpu0 50 2 25 400 5 0 1 15 0 0\n"
    d = parse_proc_stat(stat, 100.0)
    assert d["user"] == 1.0 and d["steal"] == 0.3 and d["idle"] == 8.0
    line = "4242 (python3 (worker) x) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0"
    assert parse_pid_stat(line) == (17, 325.0)
    with pytest.raises(ValueError):
        parse_proc_stat("intr 1 2 3\n", 100.0)


def test_descendants_follow_the_parent_chain() -> None:
    parents = {1: 0, 10: 1, 11: 10, 12: 11, 20: 1, 21: 99}
    assert descendants(parents, 10) == {10, 11, 12}
    assert descendants(parents, 21) == {21}


def test_contention_shares() -> None:
    def snap(t: float, busy: float, idle: float, steal: float, own: float) -> CpuSnapshot:
        cpu = dict.fromkeys(
            ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"), 0.0
        )
        cpu.update(user=busy, idle=idle, steal=steal)
        return CpuSnapshot(t, cpu, own, (0.5, 0.4, 0.3), 2)

    a, b = snap(0.0, 0.0, 0.0, 0.0, 0.0), snap(10.0, 14.0, 5.0, 1.0, 12.0)
    c = contention(a, b)
    assert c["steal_share"] == pytest.approx(1.0 / 20.0)
    assert c["own_cpu_share"] == pytest.approx(12.0 / 20.0)
    assert c["other_cpu_share"] == pytest.approx(2.0 / 20.0)
    assert np.isnan(contention(None, b)["steal_share"])
    assert flags({**c, "law_ratio_trend": 0.2}, {"steal_share": 0.02, "other_cpu_share": 0.1,
                                                  "drift": 0.05}) == ["steal", "drift"]  # fmt: skip


def test_drift_of_a_machine_slowing_down() -> None:
    law = np.full(40, 0.02)
    flat = drift(law * 1.1, law)
    assert flat["law_ratio_median"] == pytest.approx(0.1) and flat[
        "law_ratio_trend"
    ] == pytest.approx(0.0)
    slowing = drift(law * np.linspace(1.0, 1.3, 40), law)
    assert slowing["law_ratio_trend"] > 0.2
    assert np.isnan(drift(law[:5], law[:5])["law_ratio_median"])


# ---- the client passes vLLM's priority --------------------------------------------------------
def test_client_passes_each_requests_priority() -> None:
    seen: dict[str, int] = {}

    async def stream(
        rid: str, prompt: Sequence[int], n: int, priority: int = 0
    ) -> AsyncIterator[int]:
        seen[rid] = priority
        for _ in range(n):
            yield 1

    tab = pd.DataFrame({
        "request_id": ["a", "b"], "planned_s": [0.0, 0.0], "prompt_tokens": [2, 2],
        "output_tokens": [1, 3], "priority": [7, 1],
    })  # fmt: skip
    from llmqueue.engines.client import run_open_loop

    asyncio.run(run_open_loop(tab, stream, {"a": [5, 5], "b": [5, 5]}))
    assert seen == {"a": 7, "b": 1}


# ---- statistics of the comparison -------------------------------------------------------------
def test_batch_means_ci_covers_the_mean_of_correlated_data() -> None:
    """An AR(1) sequence (correlation 0.9): the batch-means 95% interval around its sample mean
    covers the true mean in about 95% of 400 independent sequences (binomial tolerance), where
    the naive i.i.d. interval would cover far less; the effective size is below the length."""
    from llmqueue.studies.validation.matrix import batch_means_ci

    rng = np.random.default_rng(7)
    hits, n_eff = 0, []
    for _ in range(400):
        e = rng.normal(size=2000)
        x = np.empty(2000)
        x[0] = e[0]
        for i in range(1, 2000):
            x[i] = 0.9 * x[i - 1] + e[i]
        m, half, ne = batch_means_ci(x, 10)
        hits += abs(m) <= half
        n_eff.append(ne)
    # 95% coverage, +-3 binomial standard deviations over 400 tries, less the bias of 10 batches
    assert 0.88 <= hits / 400 <= 0.99
    assert np.median(n_eff) < 400


def test_quantile_ci_brackets_the_quantile() -> None:
    from llmqueue.studies.validation.matrix import quantile_ci

    x = np.arange(1000.0)
    lo, hi = quantile_ci(x, 0.9, 1000)
    assert lo < 900 < hi and hi - lo < 60
    lo2, hi2 = quantile_ci(x, 0.9, 100)
    assert hi2 - lo2 > hi - lo


def test_speed_windows_see_a_machine_slowing_down() -> None:
    from llmqueue.latency import StepLaw
    from llmqueue.studies.validation.matrix import speed_windows

    n = 3000

    def steps_of(d: np.ndarray) -> pd.DataFrame:
        t = np.concatenate(
            [[0.0], np.cumsum(d)[:-1]]
        )  # back to back: each starts at the last's end
        return pd.DataFrame({
            "t_sched_s": t, "t_done_s": t + d - 1e-4, "decode_seqs": 1, "prefill_tokens": 0,
            "context_tokens": 100,
        })  # fmt: skip

    law = StepLaw(0.02, 0.0, 0.0)
    slowing = np.where(np.arange(n) > n // 2, 0.025, 0.02)  # 25% slower for the second half
    assert speed_windows(steps_of(slowing), law, 0.002)["speed_spread"] == pytest.approx(0.25)
    steady = speed_windows(steps_of(np.full(n, 0.02)), law, 0.002)
    assert steady["speed_spread"] == pytest.approx(0.0, abs=1e-9)


def _back_to_back(d: np.ndarray, step0: int = 0) -> pd.DataFrame:
    """A step log of single-sequence decode iterations lasting `d` s, each starting at the last's
    end (as the calibration counts them: busy until the next start)."""
    t = np.concatenate([[0.0], np.cumsum(d)[:-1]])
    return pd.DataFrame({
        "step": step0 + np.arange(d.size), "t_sched_s": t, "t_done_s": t + d - 1e-4,
        "decode_seqs": 1, "prefill_tokens": 0, "context_tokens": 100,
    })  # fmt: skip


def test_speed_factor_reads_the_iterations_before_a_time() -> None:
    from llmqueue.latency import StepLaw
    from llmqueue.studies.validation.matrix import speed_factor

    law = StepLaw(0.02, 0.0, 0.0)
    d = np.where(np.arange(2000) < 500, 0.022, 0.026)  # 10% slow, then 30% slow
    steps = _back_to_back(d)
    k_all, n_all = speed_factor(steps, law, 0.002)
    assert n_all == 2000 and k_all == pytest.approx((500 * 1.1 + 1500 * 1.3) / 2000, rel=1e-3)
    k_early, n_early = speed_factor(steps, law, 0.002, until_s=500 * 0.022)
    assert n_early == 500 and k_early == pytest.approx(1.1, rel=1e-3)
    k_none, n_none = speed_factor(steps, law, 0.002, until_s=0.0)
    assert n_none == 0 and np.isnan(k_none)
    # the law scaled by the factor prices the run's total time exactly
    assert speed_factor(steps, law.scaled(k_all), 0.002)[0] == pytest.approx(1.0)


def test_speed_timeline_lays_phases_back_to_back_per_session() -> None:
    from llmqueue.latency import StepLaw
    from llmqueue.studies.validation.matrix import speed_timeline
    from llmqueue.studies.validation.matrix_spec import GroupData

    law = StepLaw(0.02, 0.0, 0.0)
    cal = _back_to_back(np.full(1000, 0.02))  # 20 s as calibrated
    cal["time_s"] = 0.02
    cap = _back_to_back(np.full(1000, 0.022), 1000)  # 10% slow
    run = _back_to_back(np.full(1500, 0.025), 2000)  # 25% slow
    rep = _back_to_back(np.full(750, 0.02), 0)  # a fresh session, as calibrated
    data = GroupData(
        "g", "g", {"judged": ["load50", "load50_r2"]}, {}, {},
        {"runs": {"capacity": {"kind": "capacity"}, "load50": {"session": 1},
                  "load50_r2": {"session": 2}}},
        cal, {}, {"load50_r2": rep, "load50": run, "capacity": cap},
    )  # fmt: skip
    tl = speed_timeline(data, law, 0.002, 5.0)
    assert list(dict.fromkeys(tl["phase"])) == ["calibration", "capacity", "load50", "load50_r2"]
    assert list(dict.fromkeys(tl["kind"])) == ["calibration", "capacity", "judged"]
    by = tl.groupby("phase")["speed"]
    assert by.min()["calibration"] == pytest.approx(1.0)
    assert by.median()["capacity"] == pytest.approx(1.1, rel=1e-3)
    assert by.median()["load50"] == pytest.approx(1.25, rel=1e-3)
    s1 = tl[tl["session"] == 1]
    assert s1["t_s"].is_monotonic_increasing
    first = s1.groupby("phase", sort=False)["t_s"].min()
    assert first["capacity"] == pytest.approx(20.0, abs=0.01)  # after the calibration's 20 s
    assert first["load50"] == pytest.approx(42.0, abs=0.01)  # after 22 s of capacity burst
    assert tl[tl["phase"] == "load50_r2"]["t_s"].min() == 0.0  # its own session starts at 0


@pytest.mark.parametrize("bad", [0.5, 601.0, float("nan"), float("inf")])
def test_a_bad_speed_window_is_named(config: dict[str, Any], bad: float) -> None:
    from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings, engine_section

    section = {**engine_section(config["validation"]["matrix_compare"]), "speed_window_s": bad}
    with pytest.raises(
        InputError, match=r"matrix_compare\.speed_window_s must be a time in \[1, 600\] s"
    ):
        MatrixCompareSettings.from_config(section, 0)
