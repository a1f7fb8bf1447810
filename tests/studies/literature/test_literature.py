"""The literature study (llmqueue.studies.literature): its settings, tables and claim rows.

- the one-bit threshold solves its equation; bad reference rows are refused naming the row;
- the exact formulas reproduce the committed published numbers of Mitzenmacher and Shahout's
  Table 1 within one unit of their last printed digit (the engine's runs are the pipeline's);
- a small table from the committed reference runs the engine and the formula at every point;
- the claim rows: a number within its tolerance, a misprint the formula exposes, a setting the
  engine does not express.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.studies.literature.claims import claims_rows
from llmqueue.studies.literature.spec import (
    ONE_BIT,
    LiteratureSpec,
    Setting,
    optimal_threshold,
    reference_points,
)
from llmqueue.studies.literature.tables import exact_response, literature_curves, literature_table

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "src/llmqueue/studies/literature/reference_claims.csv"
SETTINGS = {
    "exponential": {"tokens": "exponential:mean=1", "predictor": "exp"},
    "weibull": {"tokens": "weibull:shape=0.5,scale=0.5", "predictor": "exp"},
    "one_bit": {"tokens": "exponential:mean=1", "predictor": ONE_BIT},
}
SPEC = {
    "settings": SETTINGS,
    "simulation": {"requests": 40_000, "warmup": 2_000, "batches": 10},
    "curves": {"rates": [0.5, 0.8]},
}
TOL = {"literature_mean": {"kind": "rel", "value": 0.02}}


def _reference() -> pd.DataFrame:
    return pd.read_csv(REFERENCE, dtype={"id": str}, keep_default_na=False)


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9, 0.99])
def test_the_one_bit_threshold_solves_its_equation(rate: float) -> None:
    t = optimal_threshold(rate)
    assert (t - 1) / (math.exp(-t) + t - 1) == pytest.approx(rate, rel=1e-9)
    assert (
        Setting("b", "exponential:mean=1", ONE_BIT).predictor_at(rate).startswith("buckets:edges=")
    )
    with pytest.raises(InputError, match="load in"):
        optimal_threshold(1.0)


def test_bad_reference_rows_are_refused_naming_the_row() -> None:
    settings = LiteratureSpec.from_config(SPEC).settings
    good = {"id": "x1", "setting": "exponential", "order": "srpt", "rate_per_s": 0.5}
    assert reference_points([good, {**good, "id": "x2"}], settings) == [
        ("exponential", "srpt", 0.5)
    ]
    assert reference_points([{**good, "setting": ""}], settings) == []
    for bad, what in (
        ({"setting": "gamma"}, "setting 'gamma'"),
        ({"order": "lifo"}, "order must be one of"),
        ({"rate_per_s": 1.2}, r"rate_per_s must lie in \(0, 1\)"),
    ):
        with pytest.raises(InputError, match=f"row x1: {what}"):
            reference_points([{**good, **bad}], settings)


def test_the_formulas_reproduce_table_1() -> None:
    """Table 1's published numbers (exponential sizes and predictions), except the SPRPT
    column, which is the ITCS paper's simulation: within 1.1 units of the last printed digit
    (the formula by quadrature, about 1e-5 relative)."""
    settings = LiteratureSpec.from_config(SPEC).settings
    ref = _reference()
    table1 = ref[(ref["setting"] == "exponential") & (ref["order"] != "sprpt")]
    assert len(table1) == 18
    for r in table1.to_dict("records"):
        exact, _, se = exact_response(settings["exponential"], r["order"], float(r["rate_per_s"]))
        assert se == 0.0
        assert exact == pytest.approx(float(r["paper"]), abs=1.1e-3), r["id"]


def test_a_small_table_runs_every_point_and_its_claims() -> None:
    ref = _reference()
    tab = literature_table(str(REFERENCE), SPEC, 7)
    points = reference_points(ref.to_dict("records"), LiteratureSpec.from_config(SPEC).settings)
    assert len(tab) == len(points) and len(points) == int((ref["setting"] != "").sum())
    assert (tab["sim_requests"] == 40_000).all()
    assert tab["exact_response_mean_s"].notna().all()  # every expressed point has a formula
    # the simulated mean lies near the formula (a short run: a loose bound, the pipeline's
    # runs are 600 times longer)
    rel = (tab["sim_response_mean_s"] / tab["exact_response_mean_s"] - 1).abs()
    assert (rel < 0.3).all(), tab[rel >= 0.3]
    rows = claims_rows(ClaimBook(ref, TOL), ref, tab)
    assert [r.id for r in rows] == list(ref["id"]) and {r.scope for r in rows} == {"literature"}
    by_id = {r.id: r for r in rows}
    for cid in ref.loc[ref["setting"] == "", "id"]:
        assert by_id[cid].ours == "not expressed" and by_id[cid].verdict == "not_reproduced"
    curves = literature_curves(str(REFERENCE), SPEC)
    assert set(curves["rate_per_s"]) == {0.5, 0.8}
    assert len(curves) == 2 * len({(s, o) for s, o, _ in points})


def _point(sim: float, ci: float, exact: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "setting": "weibull",
                "tokens": "weibull:shape=0.5,scale=0.5",
                "predictor": "exp",
                "order": "fcfs",
                "rate_per_s": 0.9,
                "sim_requests": 1000,
                "sim_response_mean_s": sim,
                "sim_response_ci95_s": ci,
                "exact_response_mean_s": exact,
                "exact_response_se_s": 0.0,
                "exact_method": "Pollaczek-Khinchine",
            }
        ]
    )


def test_a_miss_says_whether_the_published_number_or_the_engine_differs() -> None:
    ref = _reference()
    ref = ref[
        (ref["setting"] == "weibull") & (ref["order"] == "fcfs") & (ref["rate_per_s"] == "0.9")
    ]
    assert float(ref["paper"].iloc[0]) == 29.0  # the printed entry
    book = ClaimBook(ref, TOL)
    (misprint,) = claims_rows(book, ref, _point(28.1, 0.3, 28.0))
    assert misprint.verdict == "not_reproduced" and "published number is what differs" in (
        misprint.note
    )
    (noisy,) = claims_rows(book, ref, _point(26.0, 0.3, 29.0))
    assert noisy.verdict == "not_reproduced" and "the engine's run does not" in noisy.note
    (close,) = claims_rows(book, ref, _point(28.9, 0.3, 28.0))
    assert close.verdict == "reproduced" and "exact 28" in close.note


def test_the_config_check_names_the_key() -> None:
    import copy

    import yaml

    from llmqueue.studies.literature.checks import check

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    check(config, ROOT)
    for key, value, what in (
        ("tokens", "exponential:mean=2", "one_bit.predictor: one_bit_optimal needs"),
        ("predictor", "buckets:pe=0.7", "one_bit.predictor: predictor 'buckets"),
    ):
        bad = copy.deepcopy(config)
        bad["literature"]["settings"]["one_bit"][key] = value
        with pytest.raises(InputError, match=f"literature.settings.{what}"):
            check(bad, ROOT)
