"""Output-length predictors (llmqueue.sim.predictors) and the learned one (llmqueue.predictor):
spec parsing as config and CLI write it, the k-class error model, the one scoring function, the
learned model's features (no leakage), its versioned file, and how workloads carry it."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from llmqueue.errors import InputError
from llmqueue.predictor.features import FeatureSpec, known_history, trace_features
from llmqueue.predictor.model import FORMAT_VERSION, load_model, save_model
from llmqueue.predictor.scoring import SSJF_EDGES, score_predictions
from llmqueue.predictor.training import train_length_model
from llmqueue.sim.predictors import (
    Buckets,
    Exponential,
    Learned,
    Noisy,
    Oracle,
    Uniform,
    parse_predictor,
)
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload, TraceWorkload
from llmqueue.tokens import parse_law
from llmqueue.traces import TraceRows, read_trace

TRACE = "data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv"


# ---- specs -----------------------------------------------------------------------------------
def test_spec_names_as_the_issue_writes_them() -> None:
    assert isinstance(parse_predictor("oracle"), Oracle)
    assert parse_predictor("noisy:sigma=0.5") == Noisy(0.5)
    five = parse_predictor("buckets:k=5,acc=0.8")
    assert isinstance(five, Buckets)
    assert five.class_edges == SSJF_EDGES
    assert five.pe == pytest.approx(0.1)
    three = parse_predictor("buckets:k=3,pe=0.05")
    assert isinstance(three, Buckets) and not three.is_resolved and three.classes == 3
    assert three.spec == "buckets:k=3,pe=0.05"
    edges = parse_predictor("buckets:edges=100/400,pe=0.1")  # the explicit form still works
    assert isinstance(edges, Buckets) and edges.class_edges == (100.0, 400.0)


def test_error_models_of_the_scheduling_literature() -> None:
    assert parse_predictor("exp") == Exponential() and Exponential().spec == "exp"
    assert parse_predictor("uniform:a=0.3") == Uniform(0.3)
    assert Uniform(0.3).spec == "uniform:a=0.3"
    assert parse_predictor(Uniform(0.3).spec) == Uniform(0.3)


@pytest.mark.parametrize("pred", [Exponential(), Uniform(0.4), Noisy(0.7)])
def test_predictions_follow_their_conditional_law(pred: object) -> None:
    """Kolmogorov-Smirnov against the law the exact SPJF mean integrates (the same cdf), and the
    quantile function inverts it."""
    from scipy.stats import kstest

    cond = pred.conditional()  # type: ignore[attr-defined]
    assert cond is not None
    cdf, ppf = cond
    x = 300.0
    y = pred.predict(np.full(100_000, x), 7)  # type: ignore[attr-defined]
    assert kstest(y, lambda t: cdf(t, x)).pvalue > 1e-3
    v = np.linspace(0.01, 0.99, 9)
    assert cdf(ppf(v, x), x) == pytest.approx(v, abs=1e-12)
    assert Uniform(0.0).conditional() is None and Noisy(0.0).conditional() is None
    assert Oracle().conditional() is None


def test_uniform_predictions_stay_in_their_band() -> None:
    out = np.arange(1.0, 2001.0)
    y = Uniform(0.25).predict(out, 3)
    assert np.all(y >= 0.75 * out) and np.all(y <= 1.25 * out)
    assert np.array_equal(Uniform(0.0).predict(out, 3), out)


@pytest.mark.parametrize(
    "spec",
    [
        "psychic",
        "oracle:sigma=1",
        "noisy:s=1",
        "noisy:sigma=-1",
        "buckets:k=1,acc=0.9",
        "buckets:k=2.5,acc=0.9",
        "buckets:k=3,acc=1.5",
        "buckets:k=3,edges=1/2",
        "buckets:k=3,pe=0.1,acc=0.8",
        "buckets:edges=300/100",
        "exp:mean=1",
        "uniform",
        "uniform:a=1.5",
        "uniform:a=-0.1",
        "uniform:b=0.5",
        "learned:",
        "learned:/no/such/model",
    ],
)
def test_bad_specs_are_input_errors(spec: str) -> None:
    with pytest.raises(InputError):
        parse_predictor(spec)


def test_k_classes_take_the_workload_quantiles() -> None:
    law = parse_law("uniform:low=0,high=300")
    w = PoissonWorkload(law, 1.0, predictor=parse_predictor("buckets:k=3,acc=1"))
    assert w.predictor.class_edges == pytest.approx((100.0, 200.0))  # type: ignore[attr-defined]
    out = np.arange(1.0, 601.0)
    t = TraceWorkload(out, out, 1.0, parse_predictor("buckets:k=4,acc=1"))
    assert t.predictor.class_edges == pytest.approx(tuple(np.quantile(out, [0.25, 0.5, 0.75])))  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="build a workload"):
        parse_predictor("buckets:k=3,acc=1").predict(out, 0)
    with pytest.raises(InputError, match="not distinct"):
        TraceWorkload(out, np.full(600, 7.0), 1.0, parse_predictor("buckets:k=3,acc=1"))


def test_buckets_errors_go_to_a_neighbouring_class_only() -> None:
    pred = Buckets(SSJF_EDGES, 0.2)
    out = np.random.default_rng(1).integers(1, 1000, 200_000).astype(float)
    p = pred.predict(out, 3)
    e = np.asarray(SSJF_EDGES)
    ct, cp = np.searchsorted(e, out, side="right"), np.searchsorted(e, p, side="right")
    assert np.all(np.abs(ct - cp) <= 1)
    inner = (ct > 0) & (ct < len(e))
    assert np.mean(ct[inner] == cp[inner]) == pytest.approx(0.6, abs=0.01)  # 1 - 2 pe
    assert np.mean(cp[inner] == ct[inner] - 1) == pytest.approx(0.2, abs=0.01)


# ---- the one scoring function ------------------------------------------------------------------
def _tau_brute(p: np.ndarray, t: np.ndarray) -> float:
    """Kendall's tau-b by counting pairs."""
    conc = disc = tp = tt = 0
    for i, j in itertools.combinations(range(p.size), 2):
        dp, dt = np.sign(p[i] - p[j]), np.sign(t[i] - t[j])
        if dp == 0 and dt == 0:
            continue
        if dp == 0:
            tp += 1
        elif dt == 0:
            tt += 1
        elif dp == dt:
            conc += 1
        else:
            disc += 1
    return (conc - disc) / np.sqrt((conc + disc + tp) * (conc + disc + tt))


def test_score_predictions() -> None:
    t = np.array([10.0, 50.0, 200.0, 300.0, 600.0, 30.0, 150.0])
    assert score_predictions(t, t).to_dict() == {
        "n": 7,
        "accuracy": 1.0,
        "kendall_tau": 1.0,
        "mae_tokens": 0.0,
    }
    p = np.array([20.0, 45.0, 250.0, 280.0, 100.0, 30.0, 140.0])
    sc = score_predictions(t, p)
    # classes (42/141/294/503): t -> 0,1,2,3,4,0,2 ; p -> 0,1,2,2,1,0,1
    assert sc.accuracy == pytest.approx(4 / 7)
    assert sc.kendall_tau == pytest.approx(_tau_brute(p, t))
    assert sc.mae_tokens == pytest.approx(np.mean(np.abs(p - t)))
    assert score_predictions(t, np.full(7, 100.0)).kendall_tau == 0.0  # ranks nothing
    with pytest.raises(InputError):
        score_predictions(t, p[:3])


# ---- the learned predictor --------------------------------------------------------------------
def _rows(n: int, seed: int, finish: bool) -> TraceRows:
    rng = np.random.default_rng(seed)
    arr = np.cumsum(rng.exponential(2.0, n))
    out = rng.integers(1, 800, n).astype(float)
    fin = arr + rng.exponential(30.0, n) + 0.01 if finish else None
    return TraceRows(arr, np.mod(arr, 86_400.0), rng.integers(0, 3000, n).astype(float), out, fin)


@pytest.mark.parametrize("finish", [False, True], ids=["known_after", "finish_times"])
def test_features_read_no_output_unknown_at_arrival(finish: bool) -> None:
    rows = _rows(400, 7, finish)
    spec = FeatureSpec((1, 5, 30), known_after_s=25.0)
    x = trace_features(rows, spec)
    known = rows.finish_s if finish else rows.arrival_s + spec.known_after_s
    rng = np.random.default_rng(8)
    for i in range(0, rows.n, 7):
        # scramble the output of row i and of every request not finished by its arrival
        hidden = known > rows.arrival_s[i]
        assert hidden[i]
        out = rows.output_tokens.copy()
        out[hidden] = rng.integers(1, 5000, hidden.sum())
        changed = TraceRows(
            rows.arrival_s, rows.time_of_day_s, rows.prompt_tokens, out, rows.finish_s
        )
        np.testing.assert_array_equal(trace_features(changed, spec)[i], x[i])
        # and the features are what they say: means over the most recently known outputs
        seen = np.flatnonzero(~hidden)
        seen = seen[np.argsort(known[seen], kind="stable")]
        for col, m in enumerate(spec.history, start=2):
            last = seen[-m:]
            want = np.mean(np.log1p(rows.output_tokens[last])) if last.size else np.nan
            np.testing.assert_allclose(x[i, col], want, rtol=1e-12)
    order, count = known_history(rows, spec)
    assert np.all(known[order][: count.max()] <= rows.arrival_s.max())
    with pytest.raises(InputError, match="known_after_s"):
        FeatureSpec((4,), known_after_s=0.0)


@pytest.fixture(scope="module")
def small(tmp_path_factory):  # type: ignore[no-untyped-def]
    """A small classifier on the first 4000 rows of the Azure trace, and its file."""
    rows = read_trace(TRACE).take(0, 4000)
    model = train_length_model(rows, "classifier", max_iter=8)
    path = tmp_path_factory.mktemp("model") / "small.model"
    save_model(model, path)
    return rows, model, path


def test_learned_model_is_deterministic_and_scored_on_held_out_rows(small) -> None:  # type: ignore[no-untyped-def]
    rows, model, path = small
    again = train_length_model(rows, "classifier", max_iter=8)
    np.testing.assert_array_equal(again.predict_trace(rows), model.predict_trace(rows))
    test, same = model.held_out(rows)
    assert same and test.n == rows.n - model.meta["train_rows"]
    other, same = model.held_out(rows.take(10))
    assert not same and other.n == rows.n - 10
    loaded = load_model(path)
    np.testing.assert_array_equal(loaded.predict_trace(rows), model.predict_trace(rows))
    assert set(np.unique(loaded.predict_trace(rows))) <= set(loaded.class_values)
    reg = train_length_model(rows, "regressor", max_iter=8)
    assert np.all(reg.predict_trace(rows) >= 0)


def _rewrite_header(src: Path, dst: Path, **change: object) -> None:
    head, _, body = src.read_bytes().partition(b"\n")
    h = json.loads(head)
    for k, v in change.items():
        if k == "sklearn":
            h["meta"]["sklearn"] = v
        else:
            h[k] = v
    dst.write_bytes(json.dumps(h).encode() + b"\n" + body)


def test_model_file_is_versioned(small, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, _, path = small
    _rewrite_header(path, tmp_path / "v.model", version=FORMAT_VERSION + 1)
    with pytest.raises(InputError, match="format version"):
        load_model(tmp_path / "v.model")
    _rewrite_header(path, tmp_path / "s.model", sklearn="0.1.0")
    with pytest.raises(InputError, match="scikit-learn 0.1.0"):
        load_model(tmp_path / "s.model")
    (tmp_path / "x.model").write_text("id,claim\n")
    with pytest.raises(InputError, match="not an llmqueue length model"):
        load_model(tmp_path / "x.model")
    with pytest.raises(InputError, match="does not exist"):
        load_model(tmp_path / "none.model")


def test_workloads_carry_the_learned_predictions(small) -> None:  # type: ignore[no-untyped-def]
    rows, model, path = small
    pred = parse_predictor(f"learned:{path}")
    assert isinstance(pred, Learned) and pred.needs_rows
    with pytest.raises(InputError, match="--predictor"):
        PoissonWorkload(parse_law("uniform:low=1,high=100"), 1.0, predictor=pred)
    with pytest.raises(InputError, match="trace rows"):
        pred.predict(rows.output_tokens, 0)
    full = read_trace(TRACE)
    want = model.predict_trace(full)
    rep = ReplayWorkload.from_csv(TRACE, predictor=pred, rate_per_s=2.0)
    np.testing.assert_array_equal(rep.row_pred, want)
    ch = next(rep.chunks(0, 500, False))
    np.testing.assert_array_equal(ch.pred, want[:500])
    tw = TraceWorkload.from_csv(TRACE, 2.0, predictor=pred)
    np.testing.assert_array_equal(tw.row_pred, want)
    ch = next(tw.chunks(0, 2000, False))
    # every request carries the prediction of the row it was drawn from
    by_row = {
        (p, o, q) for p, o, q in zip(full.prompt_tokens, full.output_tokens, want, strict=True)
    }
    assert all((p, o, q) in by_row for p, o, q in zip(ch.prompt, ch.output, ch.pred, strict=True))
    with pytest.raises(InputError, match="timestamps"):
        TraceWorkload(full.prompt_tokens, full.output_tokens, 1.0, pred)


# ---- per-row predictions from a trace column ---------------------------------------------------
def _trace_with_predictions(tmp_path: Path, n: int = 3000) -> tuple[Path, np.ndarray]:
    rows = read_trace(TRACE)
    rng = np.random.default_rng(8)
    out = rows.output_tokens[:n]
    pred = np.round(out * np.exp(0.6 * rng.standard_normal(n)), 1)
    f = tmp_path / "with_pred.csv"
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens,pred"]
    lines += [
        f"{i},{p:g},{o:g},{q:g}"
        for i, (p, o, q) in enumerate(zip(rows.prompt_tokens[:n], out, pred, strict=True))
    ]
    f.write_text("\n".join(lines) + "\n")
    return f, pred


def test_column_predictions_are_each_rows_own(tmp_path: Path) -> None:
    from llmqueue.sim.predictors import Column

    f, pred = _trace_with_predictions(tmp_path)
    assert parse_predictor("column:pred") == Column("pred")
    w = TraceWorkload.from_csv(f, 1.0, predictor=Column("pred"))
    assert w.row_pred is not None and np.array_equal(w.row_pred, pred)
    ch = next(w.chunks(3, 5000, False))  # a drawn request carries its row's prediction
    pairs = set(zip(w.output_tokens.tolist(), w.row_pred.tolist(), strict=True))
    assert all(p in pairs for p in zip(ch.output.tolist(), ch.pred.tolist(), strict=True))
    with pytest.raises(InputError, match="column:NAME"):
        parse_predictor("column:")
    with pytest.raises(InputError, match="reads trace rows"):
        PoissonWorkload(parse_law("exponential:mean=100"), 1.0, predictor=Column("pred"))
    with pytest.raises(InputError, match="nope"):
        TraceWorkload.from_csv(f, 1.0, predictor=Column("nope"))
    bad = tmp_path / "bad.csv"
    bad.write_text("ContextTokens,GeneratedTokens,pred\n1,2,3\n4,5,x\n")
    with pytest.raises(InputError, match="pred"):
        TraceWorkload.from_csv(bad, 1.0, predictor=Column("pred"))
