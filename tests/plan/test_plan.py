"""``llmqueue plan`` and its library (llmqueue.plan): SLO and search-space parsing, the goodput
bisection against a closed form, the summary (best, fewest replicas, Pareto front), slices and
their merge, reproducibility across worker counts, one-rate configurations that miss their SLOs
(no goodput, off the front and the figure), the figure's headroom, and bad input (unwritable
outputs, a slice with nowhere to go) refused in one line before any simulation."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import pandas as pd
import pytest

from llmqueue.analytic.priority import pk_wait
from llmqueue.cli import main
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.plan.search import PlanRun, goodput, parse_rate, result_row
from llmqueue.plan.slo import parse_slo
from llmqueue.plan.space import MAX_CONFIGS, Config, SearchSpace, parse_ints
from llmqueue.plan.summary import best, fewest_replicas, pareto_front
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law

TRACE = "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"
STEP = "c0=0.0125,c_tok=4e-5,c_ctx=1.5e-7"


# ---- parsing -------------------------------------------------------------------------------------
def test_slo_forms() -> None:
    s = parse_slo("ttft_p99=2,tpot_p99=0.1")
    assert [(b.metric, b.stat, b.limit_s) for b in s.bounds] == [
        ("ttft", "p99", 2.0),
        ("tpot", "p99", 0.1),
    ]
    assert not s.needs_table and s.first_metric == "ttft"
    d = parse_slo("ttft=2,tpot=0.1,attainment=0.95")
    assert d.needs_table and d.attainment == 0.95 and len(d.deadlines) == 2
    assert parse_slo("jct=30").attainment == 0.9  # DistServe's default share
    assert "90% of requests with jct <= 30 s" in parse_slo("jct=30").describe()


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "at least one SLO"),
        ("ttft_p98=2", "unknown SLO 'ttft_p98'"),
        ("latency_p99=2", "unknown SLO"),
        ("ttft_p99=-1", r"in \(0, "),
        ("ttft_p99=inf", r"in \(0, "),
        ("ttft_p99=2,ttft_p99=3", "given twice"),
        ("ttft_p99", "expected KEY=VALUE"),
        ("ttft_p99=2,attainment=0.9", "attainment applies to per-request deadlines"),
        ("ttft=2,attainment=1.5", r"fraction in \(0, 1\]"),
    ],
)
def test_bad_slos_are_refused(text: str, match: str) -> None:
    with pytest.raises(InputError, match=match):
        parse_slo(text)


def test_ranges_and_lists() -> None:
    assert parse_ints("1:4", "--replicas", lo=1, hi=64, geometric=False) == (1, 2, 3, 4)
    assert parse_ints("512:8192", "--t", lo=1, hi=10**6, geometric=True) == (
        512, 1024, 2048, 4096, 8192,
    )  # fmt: skip
    assert parse_ints("2:20:+6", "--t", lo=1, hi=100, geometric=True) == (2, 8, 14, 20)
    assert parse_ints("1:100:x10", "--t", lo=1, hi=100, geometric=False) == (1, 10, 100)
    assert parse_ints("64,none", "--t", lo=1, hi=100, geometric=True, allow_none=True) == (64, None)
    for bad, match in [
        ("4:1", "HI must be >= LO"),
        ("1:4:x1", "the step is"),
        ("0", r"integer in \[1, 64\]"),
        ("1,,2", "an empty item"),
        ("2,2", "given twice"),
        ("1.5", "integer"),
    ]:
        with pytest.raises(InputError, match=match):
            parse_ints(bad, "--replicas", lo=1, hi=64, geometric=False)


def test_a_space_over_a_million_configurations_is_refused_with_its_count() -> None:
    with pytest.raises(InputError, match=r"holds 1,048,576 configurations, more than 1,000,000"):
        SearchSpace(tuple(range(1, 1025)), ("jsq",), ("fcfs",), tuple(range(1, 1025)), (None,),
                    ((math.nan, 1000),))  # fmt: skip
    assert MAX_CONFIGS == 10**6


def test_power_of_d_on_one_replica_samples_it() -> None:
    one = Config(1, "power_of_d", "fcfs", 8, None, 4096, math.nan, 16).policy()
    assert one.router_d == 1
    assert Config(3, "power_of_d", "fcfs", 8, None, 4096, math.nan, 16).policy().router_d == 2


def test_slices_partition_the_space_in_a_fixed_order() -> None:
    sp = SearchSpace((1, 2, 3), ("jsq", "random"), ("fcfs", "spjf"), (8, 16), (None,),
                     ((math.nan, 4096),))  # fmt: skip
    every = list(sp.configs())
    assert len(every) == sp.size == 24
    parts = [sp.slice(k, 5) for k in range(5)]
    assert sorted(sum(parts, []), key=every.index) == every
    with pytest.raises(InputError, match="0 <= K < N"):
        sp.slice(5, 5)


# ---- the bisection against a closed form ---------------------------------------------------------
def test_goodput_of_a_mean_wait_slo_is_the_pollaczek_khinchine_rate() -> None:
    """One request at a time (max_batch 1), a constant step, Poisson arrivals: each replica behind
    random routing is M/G/1 with S = N x step, so mean wait <= W holds up to
    lambda* = c x 2W / (E[S^2] + 2 W E[S]); the bisection must land within its tolerance plus the
    runs' noise of it."""
    law = parse_law("uniform:low=1,high=200")
    step = 0.005
    n = np.arange(1, 201, dtype=float)
    m1, m2 = step * n.mean(), step**2 * (n**2).mean()
    limit = 0.5
    c = 2
    exact = c * 2 * limit / (m2 + 2 * limit * m1)
    assert pk_wait(exact / c, m1, m2) == pytest.approx(limit)
    cfg = Config(c, "random", "fcfs", 1, None, 10**6, math.nan, 1)
    run = PlanRun(requests=400_000, warmup=40_000, seed=3, rel_tol=0.01)
    g = goodput(PoissonWorkload(law, 1.0), cfg, StepLaw(step, 0.0, 0.0),
                parse_slo("wait_mean=0.5"), parse_rate("max"), run)  # fmt: skip
    assert g.bound == "="
    assert g.rate_per_s == pytest.approx(exact, rel=0.04)
    assert g.met and g.verdict.values["wait_mean"] <= limit
    assert g.saturation_per_s == pytest.approx(c / m1, rel=0.03)  # c / E[S]


def test_range_and_one_rate_modes() -> None:
    law = parse_law("uniform:low=1,high=200")
    cfg = Config(1, "central", "fcfs", 1, None, 10**6, math.nan, 1)
    lat = StepLaw(0.005, 0.0, 0.0)
    run = PlanRun(requests=20_000, warmup=2_000, seed=1)
    w = PoissonWorkload(law, 1.0)
    slo = parse_slo("wait_mean=0.5")
    assert goodput(w, cfg, lat, slo, parse_rate("0.1:0.2"), run).bound == ">="
    low = goodput(w, cfg, lat, slo, parse_rate("1.9:1.95"), run)  # beyond the capacity 1.99/s
    assert low.bound == "<" and not low.met
    one = goodput(w, cfg, lat, slo, parse_rate("0.5"), run)
    assert one.met and one.runs == 1 and one.rate_per_s == 0.5


def test_one_rate_a_configuration_that_misses_has_no_goodput() -> None:
    """At --rate R a configuration that misses its SLOs there has no goodput at R: bound ``<``
    (goodput 0 in its row), not met, no Pareto latency, no place in the summary."""
    law = parse_law("uniform:low=1,high=200")
    cfg = Config(1, "central", "fcfs", 1, None, 10**6, math.nan, 1)
    lat = StepLaw(0.005, 0.0, 0.0)
    run = PlanRun(requests=20_000, warmup=2_000, seed=1)
    slo = parse_slo("wait_mean=0.5")
    # M/G/1 at 1.5/s: rho 0.75, mean wait about 1.0 s > 0.5 s
    miss = goodput(PoissonWorkload(law, 1.0), cfg, lat, slo, parse_rate("1.5"), run)
    assert not miss.met and miss.runs == 1
    assert miss.bound == "<" and miss.rate_per_s == 1.5
    assert math.isnan(miss.pareto_latency_s) and "wait_mean" in miss.why_not_higher
    row = result_row(cfg, miss, slo)
    assert row["goodput_rate_per_s"] == 0.0 and row["goodput_per_replica_per_s"] == 0.0
    assert row["goodput_bound"] == "<" and row["met"] is False
    assert row["wait_mean_s"] > 0.5  # the SLO's value at R stays in the row
    assert best([row]) is None and pareto_front([row]) == [False]
    assert fewest_replicas([row], 1.5, True) is None


def test_an_slo_no_rate_meets_has_goodput_zero() -> None:
    law = parse_law("uniform:low=100,high=200")
    cfg = Config(1, "central", "fcfs", 4, None, 10**6, math.nan, 1)
    g = goodput(PoissonWorkload(law, 1.0), cfg, StepLaw(0.01, 0.0, 0.0), parse_slo("jct_p50=0.5"),
                parse_rate("max"), PlanRun(requests=4000, warmup=400))  # fmt: skip
    assert g.bound == "<" and "jct_p50" in g.why_not_higher


# ---- the summary ---------------------------------------------------------------------------------
def _row(replicas: int, rate: float, lat: float, bound: str = "=") -> dict:
    return dict(replicas=replicas, goodput_rate_per_s=rate, goodput_bound=bound,
                goodput_per_replica_per_s=rate / replicas, met=bound != "<",
                pareto_latency_s=lat)  # fmt: skip


def test_best_fewest_and_pareto() -> None:
    rows = [
        _row(2, 10, 1.0),
        _row(4, 22, 1.2),
        _row(4, 18, 0.5),
        _row(1, 0.2, 9, "<"),
        _row(2, 9, 1.1),  # less goodput per replica and more latency than the first
    ]
    assert best(rows) is rows[1]
    assert fewest_replicas(rows, 9.0, False) is rows[0]
    assert fewest_replicas(rows, 21.0, False) is rows[1]
    assert fewest_replicas(rows, 30.0, False) is None
    assert pareto_front(rows) == [True, True, True, False, False]
    assert best([_row(1, 0.2, 9, "<")]) is None


def test_a_row_that_misses_its_slos_is_never_on_the_front_nor_plotted() -> None:
    """A row whose ``met`` is false (e.g. a slice written before one-rate rows got bound ``<``)
    neither joins nor dominates the front, and the figure leaves it out."""
    import matplotlib.pyplot as plt

    from llmqueue.plan.fig_plan_pareto import plot  # after it: matplotlib's Agg backend

    miss = {**_row(1, 50, 0.1), "met": False}  # goodput and latency better than any other
    rows = [_row(2, 10, 1.0), miss, _row(4, 18, 0.5)]
    assert pareto_front(rows) == [True, False, True]
    assert best(rows) is rows[0] and fewest_replicas(rows, 5.0, False) is rows[0]
    df = pd.DataFrame(
        [{**r, "router": "jsq", "order": "fcfs", "max_batch": 64, "pareto": p}
         for r, p in zip(rows, pareto_front(rows), strict=True)]
    )  # fmt: skip
    fig = plot({"plan": df}, {"headroom": 0.8})
    try:
        ys = _plotted_goodputs(fig)
    finally:
        plt.close(fig)
    assert 50.0 not in ys and {5.0, 4.5} <= ys


def _plotted_goodputs(fig) -> set[float]:  # type: ignore[no-untyped-def]
    """The goodputs per replica a plan figure draws (its scatter points and front line)."""
    ax = fig.axes[0]
    ys = {float(y) for coll in ax.collections for y in np.asarray(coll.get_offsets())[:, 1]}
    return ys | {float(y) for line in ax.get_lines() for y in line.get_ydata()}


# ---- the command ---------------------------------------------------------------------------------
def _plan(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    rc = main(["plan", "--tokens", "uniform:low=1,high=300", "--prompt-tokens",
               "uniform:low=10,high=500", "--step", STEP, "--kv-tokens", "20000",
               "--requests", "3000", "--warmup", "300", "--json", *args])  # fmt: skip
    assert rc == 0
    return json.loads(capsys.readouterr().out)


def test_plan_reports_goodput_best_and_fewest(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--slo", "ttft_p99=1,tpot_p99=0.05", "--replicas", "1:3",
                "--router", "jsq,random", "--max-batch", "16,64", "--target-rate", "20")  # fmt: skip
    assert out["configurations"] == 12 and len(out["rows"]) == 12
    assert out["best"]["goodput_per_replica_per_s"] == max(
        r["goodput_per_replica_per_s"] for r in out["rows"]
    )
    few = out["fewest_replicas"]
    assert few is not None and few["goodput_rate_per_s"] >= 20
    assert all(
        r["replicas"] >= few["replicas"] for r in out["rows"] if r["goodput_rate_per_s"] >= 20
    )
    for r in out["rows"]:
        if r["goodput_bound"] == "=":
            assert r["ttft_p99_s"] <= 1 and r["tpot_p99_s"] <= 0.05
    # more replicas of the same setting carry more
    by = {
        (r["router"], r["max_batch"], r["replicas"]): r["goodput_rate_per_s"] for r in out["rows"]
    }
    assert by[("jsq", 64, 3)] > by[("jsq", 64, 2)] > by[("jsq", 64, 1)]


def test_plan_is_the_same_on_any_number_of_workers_and_slices_merge(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    args = ["--slo", "ttft=1,tpot=0.05,attainment=0.9", "--replicas", "1,2", "--max-batch", "8,32",
            "--order", "fcfs,sjf", "--guard", "5"]  # fmt: skip
    one = _plan(capsys, *args, "--workers", "1")
    two = _plan(capsys, *args, "--workers", "2")
    assert one["rows"] == two["rows"]
    paths = []
    for k in range(3):
        p = tmp_path / f"s{k}.csv"
        _plan(capsys, *args, "--slice", f"{k}/3", "--csv", str(p))
        paths.append(str(p))
    assert main(["plan", "--merge", *paths, "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    key = ("replicas", "router", "order", "max_batch")
    got = sorted((tuple(r[k] for k in key), r["goodput_rate_per_s"]) for r in merged["rows"])
    want = sorted((tuple(r[k] for k in key), r["goodput_rate_per_s"]) for r in one["rows"])
    assert [g[0] for g in got] == [w[0] for w in want]
    np.testing.assert_allclose([g[1] for g in got], [w[1] for w in want], rtol=1e-12)
    assert merged["best"]["goodput_per_replica_per_s"] == one["best"]["goodput_per_replica_per_s"]


@pytest.fixture
def plan_figures(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """The figures ``llmqueue plan --figure`` draws during the test, closed at its end."""
    from llmqueue.plan import fig_plan_pareto

    drawn: list = []
    original = fig_plan_pareto.plot

    def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
        fig = original(inputs, params)
        drawn.append(fig)
        return fig

    monkeypatch.setattr(fig_plan_pareto, "plot", plot)
    yield drawn
    import matplotlib.pyplot as plt

    for fig in drawn:
        plt.close(fig)


def test_one_rate_reports_a_configuration_that_misses_as_not_met(
    capsys: pytest.CaptureFixture[str], tmp_path, plan_figures: list
) -> None:
    """--rate R: one replica misses p99 TPOT <= 16 ms at 8/s (about 18 ms), four meet it; the
    one that misses gets goodput 0 (bound <) in the JSON, the table and the figure, is not on
    the Pareto front, and best / fewest replicas are the one that meets them."""
    args = ["--slo", "ttft_p99=1,tpot_p99=0.016", "--replicas", "1,4", "--router", "jsq",
            "--max-batch", "64", "--rate", "8", "--workers", "1"]  # fmt: skip
    out = _plan(capsys, *args, "--figure", str(tmp_path / "fig"))
    by = {r["replicas"]: r for r in out["rows"]}
    miss, meet = by[1], by[4]
    assert not miss["met"] and miss["tpot_p99_s"] > 0.016 and math.isfinite(miss["ttft_p99_s"])
    assert meet["met"] and meet["goodput_bound"] == "=" and meet["goodput_rate_per_s"] == 8
    assert miss["goodput_bound"] == "<" and miss["goodput_rate_per_s"] == 0
    assert miss["goodput_per_replica_per_s"] == 0 and miss["pareto"] is False
    assert meet["pareto"] is True
    assert out["best"]["replicas"] == 4 and out["fewest_replicas"]["replicas"] == 4
    (fig,) = plan_figures
    assert 8.0 not in _plotted_goodputs(fig) and 2.0 in _plotted_goodputs(fig)
    # the table: the one that misses shows no goodput of 8/s
    assert main(["plan", "--tokens", "uniform:low=1,high=300", "--prompt-tokens",
                 "uniform:low=10,high=500", "--step", STEP, "--kv-tokens", "20000",
                 "--requests", "3000", "--warmup", "300", *args]) == 0  # fmt: skip
    table = capsys.readouterr().out.splitlines()
    (line_1,) = [ln for ln in table if ln.split()[:2] == ["1", "jsq"]]
    assert line_1.split()[6:8] == ["<0", "0"]


def test_the_figure_names_the_headroom_given(
    capsys: pytest.CaptureFixture[str], tmp_path, plan_figures: list
) -> None:
    _plan(capsys, "--slo", "ttft_p99=1", "--max-batch", "64", "--headroom", "0.6",
          "--figure", str(tmp_path / "fig"))  # fmt: skip
    (fig,) = plan_figures
    assert fig.axes[0].get_xlabel() == "p99 TTFT at 0.6 x goodput (s)"


def test_an_slo_no_configuration_meets_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--slo", "jct_p50=0.01", "--max-batch", "8")
    assert out["best"] is None
    assert out["note"] == "no configuration meets the SLOs at any rate tried"


def test_table_csv_and_figure(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    csv_path, fig = tmp_path / "plan.csv", tmp_path / "pareto"
    rc = main(["plan", "--trace", TRACE, "--step", STEP, "--kv-tokens", "100000",
               "--slo", "ttft_p99=2", "--replicas", "1,2", "--router", "jsq",
               "--requests", "3000", "--warmup", "300", "--target-rate", "5",
               "--csv", str(csv_path), "--figure", str(fig)])  # fmt: skip
    assert rc == 0
    text = capsys.readouterr().out
    assert "best (goodput per replica): " in text and "fewest replicas for 5/s" in text
    with open(csv_path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and {"goodput_rate_per_s", "ttft_p99_s", "pareto"} <= set(rows[0])
    assert (tmp_path / "pareto.png").stat().st_size > 0 and (tmp_path / "pareto.pdf").exists()


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (
            [
                "--slo",
                "ttft_p99=2",
                "--replicas",
                "1:100",
                "--max-batch",
                "1:100:+1",
                "--max-batched-tokens",
                "1:200:+1",
            ],
            "holds 2,000,000 configurations, more than",
        ),
        (["--slo", "ttft_p42=2"], "--slo 'ttft_p42=2': unknown SLO"),
        (["--slo", "ttft_p99=2", "--rate", "5:1"], "--rate '5:1': a range LO:HI needs HI > LO"),
        (["--slo", "ttft_p99=2", "--rate", "fast"], "--rate: 'fast' must be a rate"),
        (["--slo", "ttft_p99=2", "--router", "nearest"], "--router: 'nearest' is not one of"),
        (["--slo", "ttft_p99=2", "--replicas", "0:3"], r"--replicas: '0' must be an integer"),
        (["--slo", "ttft_p99=2", "--slice", "3/3"], "--slice '3/3': K/N with 0 <= K < N"),
        # plan has no --batching: its message names only the orders and routers that predict
        (
            ["--slo", "ttft_p99=2", "--order", "spjf"],
            r"--predictor SPEC is needed by (?!.*--batching)",
        ),
        (["--replicas", "2"], "--slo is required"),
    ],
)
def test_bad_input_exits_2_in_one_line(
    capsys: pytest.CaptureFixture[str], args: list[str], match: str
) -> None:
    import re

    rc = main(["plan", "--tokens", "uniform:low=1,high=300", "--step", STEP, "--kv-tokens",
               "20000", *args])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(match, err), err


def _no_search(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the command starts the search (or its runs)."""
    import llmqueue.plan.search as search_mod

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the search ran before the bad flag was refused")

    monkeypatch.setattr(search_mod, "search", refuse)
    monkeypatch.setattr(search_mod, "evaluate", refuse)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--figure", "{tmp}/no_such_folder/fig"], r"error: --figure: the folder .*no_such_folder"),
        (["--figure", "{tmp}/fig"], r"error: --figure: .*fig.pdf' is a directory"),
        (["--slice", "0/2"], r"error: --slice K/N writes its rows with --csv PATH or --json"),
        (["--slice", "0/2", "--json", "--figure", "{tmp}/f"], r"error: --figure draws the whole"),
    ],
)
def test_outputs_are_refused_before_the_search(
    capsys: pytest.CaptureFixture[str],
    tmp_path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    match: str,
) -> None:
    """An unwritable --figure, or a --slice whose rows would go nowhere, exits 2 in one line
    naming the flag, before any simulation."""
    import re

    _no_search(monkeypatch)
    (tmp_path / "fig.pdf").mkdir()  # --figure {tmp}/fig would write over a directory
    args = [a.format(tmp=tmp_path) for a in args]
    rc = main(["plan", "--tokens", "uniform:low=1,high=300", "--step", STEP, "--kv-tokens",
               "20000", "--slo", "ttft_p99=2", *args])  # fmt: skip
    err = capsys.readouterr().err
    assert rc == 2
    assert len(err.strip().splitlines()) == 1
    assert re.search(match, err), err


def test_merge_checks_the_figure_path_first(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "replicas,router,order,max_batch,goodput_rate_per_s,goodput_bound,"
        "goodput_per_replica_per_s,met,pareto_latency_s\n"
        "1,jsq,fcfs,64,4.0,=,4.0,True,0.5\n"
    )
    rc = main(["plan", "--merge", str(rows), "--figure", str(tmp_path / "nope" / "fig")])
    err = capsys.readouterr().err
    assert rc == 2 and "error: --figure: the folder" in err and len(err.splitlines()) == 1


def test_a_slice_with_json_only_prints_its_rows(capsys: pytest.CaptureFixture[str]) -> None:
    out = _plan(capsys, "--slo", "ttft_p99=2", "--replicas", "1,2", "--max-batch", "64",
                "--slice", "1/2")  # fmt: skip
    assert [r["replicas"] for r in out["rows"]] == [2]
