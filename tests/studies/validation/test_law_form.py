"""The split step law (llmqueue.latency.SplitStepLaw) and the law-form study
(llmqueue.studies.validation.law_form): the fit recovers known coefficients, the compiled engine
prices the law as its formula says, the cross-validation holds out whole calibration batches, the
one-standard-error choice, and the analysis on the committed fcfs and shape groups."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_engine import RefPolicy, Req, run_continuous

from llmqueue.errors import InputError
from llmqueue.latency import ShapedStepLaw, SplitStepLaw
from llmqueue.latency_fits import fit_split_step_law
from llmqueue.policy import Policy
from llmqueue.sim.engine import run
from llmqueue.sim.predictors import Noisy
from llmqueue.sim.timelaw import SPLIT, decode_run_time, step_coefficients, step_time
from llmqueue.sim.workload import ReplayWorkload
from llmqueue.studies.validation.law_form import (
    FORMS,
    LAW_FORM_COLUMNS,
    batch_labels,
    choose_form,
    fit_form,
    form_scores,
    group_rows,
    leave_one_batch_out,
    markdown_law_forms,
)
from llmqueue.studies.validation.matrix_spec import read_group

ROOT = Path(__file__).resolve().parents[3]
MATRIX = ROOT / "data/validation/matrix-amd-epyc-2c"
KNOTS = (0, 1, 2, 3, 4, 8)
G_S = (0.004, 0.0135, 0.0161, 0.0139, 0.0141, 0.0158)


def _split(**kw: object) -> SplitStepLaw:
    base = dict(
        c0_s=G_S[0], c_tok_s=0.0004, c_ctx_s=1.3e-5, name="split", c_pre_s=0.0006, knots=KNOTS,
        values_s=G_S, c_ctx_pre_s=2e-5, c_attn_s=2e-7,
    )  # fmt: skip
    base.update(kw)
    return SplitStepLaw(**base)  # type: ignore[arg-type]


# ---- the law ----------------------------------------------------------------------------------
def test_split_law_prices_each_kind_of_iteration_by_its_formula() -> None:
    law = _split()
    # decode-only: g(d) + c_ctx c (beyond the last knot with slope c_tok)
    assert law.step(2, 0, 300) == pytest.approx(0.0161 + 1.3e-5 * 300)
    assert law.step(10, 0, 900) == pytest.approx(0.0158 + 2 * 0.0004 + 1.3e-5 * 900)
    # with a prefill: g(0) + c_pre (d + p) + c_ctx_pre c + c_attn p c
    want = 0.004 + 0.0006 * (3 + 40) + 2e-5 * 500 + 2e-7 * 40 * 500
    assert law.step(3, 40, 500) == pytest.approx(want)
    got = law.step(np.array([2, 3]), np.array([0, 40]), np.array([300, 500]))
    np.testing.assert_allclose(got, [0.0161 + 1.3e-5 * 300, want])
    s = law.scaled(1.5)
    assert type(s) is SplitStepLaw and s.c_attn_s == pytest.approx(3e-7)
    assert float(s.step(3, 40, 500)) == pytest.approx(1.5 * want)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(c_ctx_pre_s=-1e-6), "c_ctx_pre_s"),
        (dict(c_attn_s=float("nan")), "c_attn_s"),
        (dict(c0_s=0.0, values_s=(0.0, *G_S[1:]), c_pre_s=0.0), "g\\(0\\) and c_pre"),
    ],
)
def test_bad_split_laws_are_refused(kw: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match):
        _split(**kw)


def _draw(rng: np.random.Generator, n: int) -> tuple[np.ndarray, ...]:
    """Iterations drawn like a calibration's: decodes of 1-4 or 8 sequences alone (the knots),
    prefills of 16-900 tokens alone or beside up to 8 decodes, contexts that vary apart from the
    batch."""
    pre = rng.random(n) < 0.35
    d = np.where(pre, rng.integers(0, 9, n), rng.choice([1, 2, 3, 4, 8], n)).astype(float)
    p = np.where(pre, rng.integers(16, 900, n), 0).astype(float)
    c = d * rng.integers(20, 600, n) + p
    return d, p, c


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10**6), attention=st.booleans())
def test_split_fit_recovers_known_coefficients(seed: int, attention: bool) -> None:
    """1% noise on 1,200 iterations: the knots, g at them, the decode and prefill context prices,
    c_pre, g(0) and (with the attention term) c_attn come back. Tolerances: about 4 standard
    deviations of each estimate over 200 seeds (g at the knots: over 300) (g(0), the intercept of iterations that cost up to
    0.7 s, is the loosest: sd 16% with the attention term, 7% without)."""
    rng = np.random.default_rng(seed)
    d, p, c = _draw(rng, 1200)
    truth = _split(c_attn_s=2e-7 if attention else 0.0)
    y = truth.step(d, p, c) * (1 + rng.normal(0, 0.01, d.size))
    fit = fit_split_step_law(d, p, c, y, attention=attention)
    assert fit.knots == KNOTS
    # g at the knots 1, 2, 3, 4, 8: sd 0.12%, 0.14%, 0.21%, 0.26%, 0.32% over 300 seeds
    rel = np.asarray(fit.values_s[1:]) / np.asarray(truth.values_s[1:]) - 1.0
    assert np.all(np.abs(rel) <= 4 * np.array([0.0012, 0.0014, 0.0021, 0.0026, 0.0032])), rel
    assert fit.c0_s == pytest.approx(truth.c0_s, rel=0.65 if attention else 0.3)
    assert fit.c_pre_s == pytest.approx(truth.c_pre_s, rel=0.02)
    assert fit.c_ctx_s == pytest.approx(truth.c_ctx_s, rel=0.01)
    assert fit.c_ctx_pre_s == pytest.approx(truth.c_ctx_pre_s, rel=0.09 if attention else 0.035)
    if attention:
        assert fit.c_attn_s == pytest.approx(truth.c_attn_s, rel=0.03)
    else:
        assert fit.c_attn_s == 0.0


def test_split_fit_needs_both_kinds_of_iteration() -> None:
    d = np.arange(1.0, 21.0)
    with pytest.raises(InputError, match="decode-only"):
        fit_split_step_law(d, np.zeros(20), 10 * d, 0.01 + 0.001 * d)


# ---- the compiled engine prices it as the formula says -----------------------------------------
@settings(max_examples=40, deadline=None)
@given(d=st.integers(0, 20), p=st.integers(0, 3000), c=st.integers(0, 60_000))
def test_compiled_step_time_is_the_formula(d: int, p: int, c: int) -> None:
    law = _split()
    arr = step_coefficients(law, None)
    assert arr[3] == SPLIT
    assert step_time(arr, float(d), float(p), float(c)) == pytest.approx(float(law.step(d, p, c)))


def test_compiled_decode_runs_sum_decode_only_iterations() -> None:
    law = _split()
    arr = step_coefficients(law, None)
    for b, ctx, m in ((1, 40.0, 7), (5, 900.0, 12), (11, 3000.0, 3)):
        each = sum(float(law.step(b, 0, ctx + b * k)) for k in range(m))
        assert decode_run_time(arr, float(b), ctx, float(m)) == pytest.approx(each)


def _table(seed: int, n: int, rate: float) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    arr = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    return arr, rng.integers(0, 61, n).astype(float), rng.integers(1, 41, n).astype(float)


def _schedule(arr, prompt, out, pol, law, seed):  # type: ignore[no-untyped-def]  # noqa: ANN001, ANN202
    w = ReplayWorkload(arr, prompt, out, predictor=Noisy(0.8))
    return run(w, pol, law, requests=arr.size, warmup=0, batches=2, seed=seed,
               per_request=True).per_request  # fmt: skip


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10**6),
    whole=st.booleans(),
    tokens=st.sampled_from([48, 96]),
    kv=st.sampled_from([None, 600]),
    rate=st.floats(2.0, 25.0),
)
def test_engine_prices_the_split_law_as_the_reference_does(  # type: ignore[no-untyped-def]
    seed, whole, tokens, kv, rate
):
    """The compiled engine against the plain-Python reference engine (tests/reference_engine.py)
    stepping law.step iteration by iteration: the same start, first token and finish."""
    arr, prompt, out = _table(seed, 60, rate)
    law = _split()
    kw = dict(kv_tokens=kv, admission="on_demand", max_batched_tokens=tokens, block_size=8)
    pol = Policy("continuous", bmax=6, chunked_prefill=not whole, **kw)  # type: ignore[arg-type]
    tab = _schedule(arr, prompt, out, pol, law, seed)
    ref = RefPolicy(
        "continuous", bmax=6, order="fcfs", kv_tokens=math.inf if kv is None else kv,
        admission="on_demand", max_batched_tokens=tokens, block_size=8,
        chunked_prefill=not whole, batch_queue=False,
    )  # fmt: skip
    reqs = run_continuous([Req(int(r[0]), r[1], r[2], r[3], r[4]) for r in tab], ref, law.step)
    want = np.array([[r.start, r.first, r.finish] for r in reqs])
    np.testing.assert_allclose(tab[:, 5:8], want, rtol=1e-9, atol=1e-9)


def test_the_split_changes_the_schedule() -> None:
    """The same g, with the prefill iterations priced apart, gives other finish times than the
    shaped law (so the agreement above is not the shaped law's)."""
    arr, prompt, out = _table(3, 120, 20.0)
    law = _split()
    shaped = ShapedStepLaw(law.c0_s, law.c_tok_s, law.c_ctx_s, c_pre_s=law.c_pre_s,
                           knots=law.knots, values_s=law.values_s)  # fmt: skip
    pol = Policy("continuous", bmax=6, max_batched_tokens=64)
    a = _schedule(arr, prompt, out, pol, law, 3)
    b = _schedule(arr, prompt, out, pol, shaped, 3)
    assert not np.allclose(a[:, 7], b[:, 7])


# ---- batches and the cross-validation ----------------------------------------------------------
def _calibration(seed: int) -> pd.DataFrame:
    """A synthetic calibration: 6 controlled batches of a split law's iterations, each starting
    with an admission of its own requests (ids as the engine records them), one iteration of a
    warm-up's tail before the first."""
    rng = np.random.default_rng(seed)
    law = _split()
    rows = [dict(decode_seqs=1, prefill_tokens=0, context_tokens=30, admitted_ids="")]
    for k in range(6):
        b, prompt = 2 + k, 32 * (k + 1)
        ids = [f"calibration{k:02d}-{i:04d}-{rng.integers(1 << 30):08x}" for i in range(b)]
        # the first request alone, the rest beside its first decode (as the engine admits them)
        rows.append(dict(decode_seqs=0, prefill_tokens=prompt, context_tokens=prompt,
                         admitted_ids=ids[0]))  # fmt: skip
        rows.append(dict(decode_seqs=1, prefill_tokens=(b - 1) * prompt,
                         context_tokens=b * prompt + 1, admitted_ids="|".join(ids[1:])))  # fmt: skip
        for j in range(1, 12):
            rows.append(dict(decode_seqs=b, prefill_tokens=0,
                             context_tokens=b * (prompt + j), admitted_ids=""))  # fmt: skip
        # the batch's last request re-admitted after a preemption (same batch)
        rows.append(dict(decode_seqs=b - 1, prefill_tokens=prompt + 12,
                         context_tokens=b * (prompt + 12), admitted_ids=ids[-1]))  # fmt: skip
    cal = pd.DataFrame(rows)
    t = law.step(cal["decode_seqs"], cal["prefill_tokens"], cal["context_tokens"])
    cal["time_s"] = t * (1 + rng.normal(0, 0.02, len(cal)))
    return cal


def test_batch_labels_follow_the_admissions() -> None:
    cal = _calibration(0)
    lab = batch_labels(cal)
    assert lab[0] == ""  # before the first admission: no batch
    assert list(pd.unique(lab[1:])) == [f"calibration{k:02d}" for k in range(6)]
    assert (lab[1:15] == "calibration00").all() and lab[15] == "calibration01"
    gate = pd.DataFrame({"admitted_ids": ["cal03-gate-ab12", "", "cal04-0000-ff|cal04-0001-aa"]})
    assert batch_labels(gate).tolist() == ["cal03", "cal03", "cal04"]


def test_leave_one_batch_out_holds_out_whole_batches() -> None:
    """Each batch's rows are priced by the form fitted on exactly the other batches' rows."""
    cal = _calibration(1)
    lab = batch_labels(cal)
    pred = leave_one_batch_out(cal, "split")
    assert len(pred) == int((lab != "").sum())
    for b in pd.unique(lab[lab != ""]):
        out = lab == b
        law = fit_form("split", cal.loc[(lab != b) & (lab != "")])
        want = law.step(cal["decode_seqs"][out], cal["prefill_tokens"][out],
                        cal["context_tokens"][out])  # fmt: skip
        np.testing.assert_allclose(pred.loc[pred["batch"] == b, "law_s"], want)
        # and not the law fitted with the batch in it
        full = fit_form("split", cal.loc[lab != ""])
        with_it = full.step(cal["decode_seqs"][out], cal["prefill_tokens"][out],
                            cal["context_tokens"][out])  # fmt: skip
        assert not np.allclose(pred.loc[pred["batch"] == b, "law_s"], with_it, rtol=1e-6)


def test_cross_validation_needs_two_batches() -> None:
    cal = _calibration(2)
    one = cal[batch_labels(cal) == "calibration03"]
    with pytest.raises(InputError, match=">= 2 batches"):
        leave_one_batch_out(one, "shaped")
    with pytest.raises(InputError, match="one of"):
        fit_form("cubic", cal)


def _held(scores: dict[str, tuple[float, float]], n: int = 30) -> pd.DataFrame:
    return pd.DataFrame([
        {"group": "g", "form": f, "scope": "heldout", "batches": n, "batch_rms_mean": m,
         "batch_rms_sd": sd, "rms_iteration_error": m}
        for f, (m, sd) in scores.items()
    ])  # fmt: skip


def test_one_standard_error_rule() -> None:
    # split within one standard error (0.03 / sqrt(30) = 0.0055) of the best: the simpler is chosen
    assert choose_form(_held({"shaped": (0.12, 0.03), "split": (0.101, 0.03),
                              "split_attention": (0.100, 0.03)})) == "split"  # fmt: skip
    # no simpler form within it: the best
    assert choose_form(_held({"shaped": (0.12, 0.03), "split": (0.11, 0.03),
                              "split_attention": (0.09, 0.03)})) == "split_attention"  # fmt: skip
    sc = form_scores(_held({"shaped": (0.1, 0.02), "split": (0.1, 0.02)}))
    assert sc["folds"].tolist() == [30, 30]
    assert sc["se"].iloc[0] == pytest.approx(0.02 / math.sqrt(30), rel=0.05)


# ---- the committed groups ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    return pd.concat(
        [group_rows(read_group(MATRIX / g), {"seed": 0}) for g in ("fcfs", "shape")],
        ignore_index=True,
    )


def test_the_analysis_runs_on_the_committed_groups(committed: pd.DataFrame) -> None:
    assert list(committed.columns) == list(LAW_FORM_COLUMNS)
    for g in ("fcfs", "shape"):
        data = read_group(MATRIX / g)
        rows = committed[committed["group"] == g]
        assert set(rows["form"]) == set(FORMS)
        held = rows[rows["scope"] == "heldout"]
        # every controlled batch of the group's calibration grid is held out once
        assert (held["batches"] == len(data.group["calibration"])).all()
        assert set(rows["scope"]) == {"heldout", *data.judged}
        runs = rows[rows["scope"] != "heldout"]
        assert np.isfinite(runs[["decode_rel_error", "prefill_rel_error", "jct_mean_rel_error",
                                 "jct_mean_rel_error_run_speed"]].to_numpy(float)).all()  # fmt: skip
        assert np.isfinite(held[["median_abs_batch_error", "batch_rms_mean"]].to_numpy(float)).all()
        ratio = (1 + runs["decode_rel_error"]) / (1 + runs["prefill_rel_error"]) - 1
        np.testing.assert_allclose(runs["decode_vs_prefill"], ratio)
    text = markdown_law_forms(committed)
    assert f"**{choose_form(committed)}**" in text and "| shape | load80 |" in text
