"""Claim 10 under SSJF's own inputs (llmqueue.studies.ssjf.official, groups, claims): the reader of
SSJF's published predictions, the policies of the two servings, the scoring of the published
classes, SSJF's protocol on a small file, the rate-averaged readings with their jackknife
intervals, and the rows of groups a and b."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.policy import Policy
from llmqueue.studies.ssjf.claims import official_claims_rows, sweep_reading
from llmqueue.studies.ssjf.groups import groups_table, rate_reading
from llmqueue.studies.ssjf.official import (
    load_predictions,
    official_predictor_table,
    official_sweep_table,
    official_table,
)
from llmqueue.studies.ssjf.spec import (
    MODES,
    OFFICIAL_GROUPS,
    PROTOCOL_POLICIES,
    Official,
    PredictionFile,
    official_from_config,
    resolve_setting,
)
from llmqueue.traces import PREDICTED_CLASS, read_trace

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
COST = {
    "batch": {"k1": 0.0, "k2": 0.1, "k3": 0.0, "k4": 0.02},
    "step": {"c0_s": 0.02, "c_tok_s": 0.0, "c_ctx_s": 0.0},
    "dynamic_bmax": 2,
    "continuous_max_batch": 2,
}
EDGES = (42.0, 141.0, 294.0, 503.0)


def _write(path: Path, out: list[int], cls: list[int]) -> Path:
    df = pd.DataFrame(
        {
            "output_token_length": out,
            "predicted_length": cls,
            "latency": 0.01,
            "model": "vicuna-13b",
        }
    )
    df.to_csv(path)  # with the unnamed index column, as SSJF's files have
    return path


def _official(path: Path) -> Official:
    return Official(
        {"five": PredictionFile("five", str(path), EDGES)}, "five", "ssjf_cost", 2, 10.0, 10.0
    )


# ---- the reader ------------------------------------------------------------------------------------------
def test_reader_gives_lengths_and_classes(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.csv", [40, 72, 600], [0, 1, 4])
    rows = read_trace(f, format="ssjf-predictions", where="test")
    np.testing.assert_array_equal(rows.output_tokens, [40, 72, 600])
    assert list(rows.frame[PREDICTED_CLASS]) == [0, 1, 4]
    assert list(rows.frame.columns) == ["output_tokens", PREDICTED_CLASS, "latency", "model"]
    assert np.all(rows.arrival_s == 0) and np.all(rows.prompt_tokens == 0)
    sub = rows.take(1)  # the frame follows the rows
    assert list(sub.frame[PREDICTED_CLASS]) == [1, 4]


def test_the_shipped_files_read(tmp_path: Path) -> None:
    off = official_from_config(CONFIG["ssjf"]["official"])
    for f in off.files.values():
        rows = load_predictions(f, str(ROOT))
        assert rows.n == 85_482 and rows.output_tokens.max() == 511
        assert rows.classes.max() == len(f.edges)


@pytest.mark.parametrize(
    ("out", "cls", "match"),
    [
        ([40, 0], [0, 1], "output_token_length must hold whole numbers >= 1"),
        ([40, 7.5], [0, 1], "output_token_length must hold whole numbers"),
        ([40, 50], [0, -1], "predicted_length must hold classes"),
        ([40, 50], [0, 1.5], "predicted_length must hold classes"),
    ],
)
def test_reader_refuses_bad_rows(tmp_path: Path, out, cls, match) -> None:  # type: ignore[no-untyped-def]
    f = _write(tmp_path / "p.csv", out, cls)
    with pytest.raises(InputError, match=match):
        read_trace(f, format="ssjf-predictions", where="test")


def test_reader_names_missing_columns(tmp_path: Path) -> None:
    f = tmp_path / "p.csv"
    pd.DataFrame({"output_token_length": [1, 2]}).to_csv(f)
    with pytest.raises(InputError, match=r"lacks columns \['predicted_length'\]"):
        read_trace(f, format="ssjf-predictions", where="test")


def test_classes_beyond_the_edges_are_refused(tmp_path: Path) -> None:
    f = _write(tmp_path / "p.csv", [40, 72], [0, 5])
    with pytest.raises(InputError, match="classes up to 5; its 4 edges make 5 classes"):
        load_predictions(PredictionFile("five", str(f), EDGES))


# ---- the two servings ------------------------------------------------------------------------------------
def test_policies_of_the_two_servings() -> None:
    off = _official(Path("x.csv"))
    a = {m: {p: off.policy("a", m, p, 100.0) for p in PROTOCOL_POLICIES} for m in MODES}
    b = {m: {p: off.policy("b", m, p, 100.0) for p in PROTOCOL_POLICIES} for m in MODES}
    # SSJF's simulator: FCFS waits to fill a batch, the guard has both triggers, rebatching
    assert a["none"]["FCFS"] == Policy("none")
    assert a["none"]["SSJF+guard"] == Policy("none", order="spjf", guard_s=100.0, guard_factor=10.0)
    assert a["dynamic"]["FCFS"] == Policy("dynamic", bmax=2, batch_timeout_s=10.0)
    assert a["dynamic"]["SJF+guard"].batch_timeout_s is None  # their SJF never waits
    assert a["continuous"]["FCFS"] == Policy("rebatch", bmax=2, batch_timeout_s=10.0)
    assert a["continuous"]["SSJF+guard"].kind == "rebatch"
    # this engine: no timeout, the age trigger only, iteration-level continuous batching
    assert b["dynamic"]["FCFS"] == Policy("dynamic", bmax=2)
    assert b["continuous"]["SSJF+guard"] == Policy(
        "continuous", bmax=2, order="spjf", guard_s=100.0
    )
    s = resolve_setting("ssjf_cost", COST, {}, {}, {})
    assert off.latency("a", "continuous", s) is s.batch
    assert off.latency("b", "continuous", s) is s.step
    with pytest.raises(InputError, match="group must be one of a, b"):
        off.policy("c", "none", "FCFS", 100.0)


# ---- scoring and the protocol ------------------------------------------------------------------------------
def test_published_classes_are_scored_against_the_true_lengths(tmp_path: Path) -> None:
    out = [10, 50, 200, 400, 600, 20, 100]
    right = _write(tmp_path / "r.csv", out, [0, 1, 2, 3, 4, 0, 1])
    wrong = _write(tmp_path / "w.csv", out, [0, 1, 2, 3, 4, 1, 0])  # the last two swapped
    files = {
        n: load_predictions(PredictionFile(n, str(f), EDGES))
        for n, f in (("right", right), ("wrong", wrong))
    }
    t = official_predictor_table(files).set_index("predictor")
    assert t.loc["right", "accuracy"] == 1.0 and t.loc["wrong", "accuracy"] == pytest.approx(5 / 7)
    # tau-b of classes against lengths: below 1 for ties within a class, lower when swapped
    assert 0 < t.loc["wrong", "kendall_tau"] < t.loc["right", "kendall_tau"] < 1
    assert t.loc["right", "classes"] == 5 and t.loc["right", "edges"] == "42/141/294/503"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, Official]:
    rng = np.random.default_rng(3)
    out = rng.integers(2, 512, 400)
    cls = np.clip(np.searchsorted(EDGES, out, side="right") + rng.integers(-1, 2, 400), 0, 4)
    f = _write(tmp_path_factory.mktemp("official") / "p.csv", list(out), list(cls))
    off = _official(f)
    setting = resolve_setting("ssjf_cost", COST, {}, {}, {})
    df = official_table(
        load_predictions(off.ssjf_file), off, setting, 20, 3, [1.0, 5.0], 25.0, 100.0, 9
    )
    return df, off


def test_protocol_on_the_published_inputs(small: tuple[pd.DataFrame, Official]) -> None:
    df, _ = small
    assert len(df) == 2 * 3 * len(OFFICIAL_GROUPS) * len(MODES) * len(PROTOCOL_POLICIES)
    assert (df["jct_mean_s"] > 0).all() and (df["throughput_per_s"] > 0).all()
    key = ["nominal_rate_per_s", "run", "policy"]
    none = df[df["mode"] == "none"]
    # no batching, FCFS: the two servings are one and the same on the same jobs
    fa = none[(none["group"] == "a") & (none["policy"] == "FCFS")].set_index(key)
    fb = none[(none["group"] == "b") & (none["policy"] == "FCFS")].set_index(key)
    pd.testing.assert_series_equal(fa["jct_mean_s"], fb["jct_mean_s"])
    # SSJF's FCFS waits to fill its batches, this engine's does not: the same jobs fare otherwise
    dyn = df[(df["mode"] == "dynamic") & (df["policy"] == "FCFS") & (df["nominal_rate_per_s"] == 1)]
    ja = dyn[dyn["group"] == "a"]["jct_mean_s"].to_numpy()
    jb = dyn[dyn["group"] == "b"]["jct_mean_s"].to_numpy()
    assert not np.allclose(ja, jb)
    assert set(df.loc[df["policy"] == "SSJF+guard", "predictor"]) == {"five"}


# ---- the readings ------------------------------------------------------------------------------------
def _runs(fcfs: np.ndarray, ssjf: np.ndarray, rates: list[float]) -> pd.DataFrame:
    rows = []
    for i, rate in enumerate(rates):
        for r in range(fcfs.shape[1]):
            for pol, j in (("FCFS", fcfs[i, r]), ("SSJF+guard", ssjf[i, r])):
                rows.append(dict(policy=pol, nominal_rate_per_s=rate, run=r, jct_mean_s=j,
                                 throughput_per_s=1.0 / j))  # fmt: skip
    return pd.DataFrame(rows)


def test_reading_averages_over_rates_before_the_ratio() -> None:
    fcfs = np.array([[10.0, 10.0], [100.0, 100.0]])
    ssjf = np.array([[5.0, 5.0], [80.0, 80.0]])
    got = rate_reading(_runs(fcfs, ssjf, [1.0, 9.0]), "SSJF+guard")
    # (5 + 80) / 2 against (10 + 100) / 2, not the mean of 50% and 20%
    assert got["jct_reduction_pct"] == pytest.approx(100 * (1 - 42.5 / 55))
    assert got["jct_reduction_ci95"] == 0.0  # identical runs
    assert got["throughput_ratio"] == pytest.approx((1 / 5 + 1 / 80) / (1 / 10 + 1 / 100))
    one = rate_reading(_runs(fcfs, ssjf, [1.0, 9.0]), "SSJF+guard", [0])
    assert one["jct_reduction_pct"] == pytest.approx(50.0)


def test_jackknife_of_a_linear_reading_is_the_standard_error() -> None:
    """With FCFS the same in every run the reduction is linear in the runs' SSJF means: the
    jackknife gives t x sd / sqrt(n) of the per-run reductions."""
    from scipy.stats import t

    rng = np.random.default_rng(1)
    ssjf = 60 + rng.normal(0, 5, (3, 8))
    fcfs = np.full((3, 8), 100.0)
    got = rate_reading(_runs(fcfs, ssjf, [1.0, 3.0, 5.0]), "SSJF+guard")
    per_run = 100 * (1 - ssjf.mean(axis=0) / 100)
    want = t.ppf(0.975, 7) * per_run.std(ddof=1) / math.sqrt(8)
    assert got["jct_reduction_ci95"] == pytest.approx(want, rel=1e-9)


def _groups() -> pd.DataFrame:
    off = pd.DataFrame(
        [
            dict(group=g, setting="ssjf_cost", mode=m, policy=p, nominal_rate_per_s=rate, run=r,
                 jct_mean_s=j, throughput_per_s=th)
            for g in ("a", "b")
            for m in MODES
            for rate in (1.0, 9.0)
            for r in range(3)
            for p, j, th in (
                ("FCFS", 100.0, 1.0),
                ("SJF+guard", 50.0, 3.0 * rate ** 0.5),
                ("SSJF+guard", 65.0 if m != "continuous" or g == "b" else 75.0, 2.0 * rate ** 0.3),
            )
        ]
    )  # fmt: skip
    prot = off[off["group"] == "a"].drop(columns="group").assign(setting="ssjf_cost")
    preds = pd.DataFrame([{"predictor": "learned:classifier", "kendall_tau": 0.6, "accuracy": 0.7}])
    opreds = pd.DataFrame([{"predictor": "five_class", "kendall_tau": 0.63, "accuracy": 0.6}])
    return groups_table(off, prot, preds, opreds, "classifier", "five_class", ["ssjf_cost"])


def test_groups_table_holds_every_group_and_reading() -> None:
    g = _groups()
    assert set(g["group"]) == {"a", "b", "c"}
    assert set(g["reading"]) == {"rates", "rate"}
    r = g[(g["group"] == "a") & (g["mode"] == "none") & (g["policy"] == "SSJF+guard")]
    assert list(r["reading"]) == ["rates", "rate", "rate"]
    assert r["jct_reduction_pct"].iloc[0] == pytest.approx(35.0)
    assert (r["kendall_tau"] == 0.63).all()
    c = g[(g["group"] == "c") & (g["policy"] == "SSJF+guard")]
    assert (c["predictor"] == "learned:classifier").all() and (c["kendall_tau"] == 0.6).all()
    sjf = g[g["policy"] == "SJF+guard"]
    assert (sjf["predictor"] == "oracle").all() and (sjf["kendall_tau"] == 1.0).all()
    with pytest.raises(InputError, match="no score"):
        groups_table(g, g, pd.DataFrame({"predictor": []}), g, "classifier", "five", ["x"])


def test_rows_of_groups_a_and_b() -> None:
    ref = pd.read_csv(ROOT / "src/llmqueue/studies/ssjf/reference_claims.csv", dtype={"id": str})
    book = ClaimBook(ref, CONFIG["claims"]["tolerances"])
    off = official_from_config(CONFIG["ssjf"]["official"])
    rows = official_claims_rows(book, _groups(), off, 50, 3, 100.0)
    assert [r.id for r in rows] == [i for i in ref["id"] if i[:3] in ("10a", "10b")]
    v = {r.id: r for r in rows}
    assert v["10a1"].verdict == "reproduced" and v["10a1"].ours == pytest.approx(35.0)
    assert "per rate: 1: 35.0%, 9: 35.0%" in v["10a1"].note
    assert "10x a job's run time" in v["10a1"].note and "no FCFS timeout" in v["10b3"].note
    # continuous under SSJF's simulator: 25% < 30.5, with SJF's gain in both batching modes
    assert v["10a5"].verdict == "not_reproduced"
    assert "SJF with true lengths gains 50.0% (50.0% with dynamic batching" in v["10a5"].note
    assert "recover 50% of it" in v["10a5"].note
    # group b names group a's reading beside its own
    assert "served as SSJF's simulator serves (group a): 25.0%" in v["10b5"].note
    # the throughput ratio is averaged over rates before the ratio: (2 + 2 x 9^0.3) / 2
    assert v["10a2"].ours == pytest.approx((2 + 2 * 9**0.3) / 2, rel=1e-5)


def test_the_batch_size_sweep_repeats_the_runs_at_every_size(
    small: tuple[pd.DataFrame, Official], tmp_path: Path
) -> None:
    """Group a's continuous batching at batch sizes 2-4: the batch size 2 runs are those of the
    official table (the same draws); 10a5/10a6 read the whole sweep, means before the ratio."""
    df, off = small
    setting = resolve_setting("ssjf_cost", COST, {}, {}, {})
    rows = load_predictions(off.ssjf_file)
    sw = official_sweep_table(rows, off, setting, 20, 3, [1.0, 5.0], 25.0, 100.0, 9, [2, 3, 4])
    assert sorted(sw["batch_size"].unique()) == [2, 3, 4]
    assert set(sw["group"]) == {"a"} and set(sw["mode"]) == {"continuous"}
    key = ["nominal_rate_per_s", "run", "policy"]
    at2 = sw[sw["batch_size"] == 2].set_index(key)["jct_mean_s"]
    ref = df[(df["group"] == "a") & (df["mode"] == "continuous")].set_index(key)["jct_mean_s"]
    pd.testing.assert_series_equal(at2.sort_index(), ref.sort_index())
    reading, text = sweep_reading(sw)
    each = [rate_reading(g, "SSJF+guard") for _, g in sw.groupby("batch_size")]
    want = 100 * (
        1 - np.mean([r["jct_mean_s"] for r in each]) / np.mean([r["fcfs_jct_mean_s"] for r in each])
    )
    assert reading["jct_reduction_pct"] == pytest.approx(want)
    assert text.startswith("2: ") and "4: " in text
    with pytest.raises(InputError, match="sweep_batch_sizes"):
        official_sweep_table(rows, off, setting, 20, 3, [1.0], 25.0, 100.0, 9, [0])


def test_rows_10a5_10a6_read_the_sweep() -> None:
    ref = pd.read_csv(ROOT / "src/llmqueue/studies/ssjf/reference_claims.csv", dtype={"id": str})
    book = ClaimBook(ref, CONFIG["claims"]["tolerances"])
    off = official_from_config(CONFIG["ssjf"]["official"])
    assert off.sweep_batch_sizes == (2, 4, 6, 8, 10)
    fcfs = np.full((2, 3), 100.0)
    sweep = pd.concat(
        [
            _runs(fcfs, np.full((2, 3), 100.0 - gain), [1.0, 9.0]).assign(batch_size=b)
            for b, gain in ((2, 25.0), (3, 35.0), (4, 45.0))
        ]
    )
    rows = {r.id: r for r in official_claims_rows(book, _groups(), off, 50, 3, 100.0, sweep)}
    assert rows["10a5"].ours == pytest.approx(35.0) and rows["10a5"].verdict == "reproduced"
    assert "over SSJF's batch sizes 2-4" in rows["10a5"].note
    assert "at the batch size 2 alone: 25.0" in rows["10a5"].note
    assert rows["10a1"].ours == pytest.approx(35.0)  # the other modes keep their reading
    assert "served as SSJF's simulator serves (group a): 25.0%" in rows["10b5"].note
