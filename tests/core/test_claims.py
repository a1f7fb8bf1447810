"""The shared claim helpers (llmqueue.claims): one verdict rule for every study, and the config
keys behind it (solved_from, tolerance classes)."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from llmqueue.claims import (
    SCOPES,
    VERDICTS,
    ClaimBook,
    ClaimRow,
    claims_frame,
    gather_claims,
    solved_parameter_row,
)
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, LinearLatency
from llmqueue.profiles import resolve_linear_profile
from llmqueue.studies import check_config

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = pd.DataFrame(
    {
        "id": ["3b", "3c", "8a"],
        "claim": ["W_q(1600)", "drop of W_q", "K*"],
        "paper": [23.0, 58.93, 8],
        "unit": ["s", "%", "requests"],
        "tolerance": ["time", "fraction", "optimum"],
        "scope": ["replication", "replication", "reading"],
    }
)
TOLERANCES = {
    "time": {"kind": "rel", "value": 0.05},
    "fraction": {"kind": "rel", "value": 0.05},
    "optimum": {"kind": "exact"},
}
SOLVED = LinearLatency(0.02203, 0.78, "back_solved", verdict="back_solved", solved_from=("3b",))
FITTED = LinearLatency(0.023, 0.186, "table1_fit")


def test_judge_by_tolerance_with_the_reference_text() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    ok, miss = book.judge("3b", 24.0), book.judge("3b", 24.7, miss="the law differs")
    assert (ok.verdict, ok.paper, ok.unit, ok.tolerance) == ("reproduced", 23.0, "s", "rel=0.05")
    assert miss.verdict == "not_reproduced" and miss.note == "the law differs"
    row = book.judge("8a", 8.0, row_id="8a-x", claim="K* [profile x]")
    assert (row.id, row.claim, row.verdict) == ("8a-x", "K* [profile x]", "reproduced")
    assert book.ids("3") == ["3b", "3c"] and book.tolerance("8a").kind == "exact"


def test_back_solved_only_for_the_claims_a_profile_was_solved_from() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    solved = book.judge("3b", 30.0, "P-K", profile=SOLVED, miss="x")  # a miss, yet solved from it
    assert solved.verdict == "back_solved" and "by construction" in solved.note
    assert solved.note.startswith("P-K; profile back_solved was solved from claim(s) 3b")
    judged = book.judge("3c", 58.9, profile=SOLVED)  # within tolerance, under a solved profile
    assert judged.verdict == "conditional"
    assert "back-solved from claim(s) 3b; this row is not one of them" in judged.note
    assert "conditional" in judged.note and "not this number" in judged.note
    missed = book.judge("3c", 70.0, profile=SOLVED, miss="too far")
    assert missed.verdict == "not_reproduced" and "too far" in missed.note
    plain = book.judge("3c", 58.9, "n", profile=FITTED)
    assert plain.verdict == "reproduced" and plain.note == "n"


def test_rows_carry_the_reference_scope_unless_told() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    assert book.judge("3b", 24.0).scope == "replication"
    assert book.judge("8a", 8.0).scope == "reading"
    assert book.judge("3b", 24.0, row_id="3b-x", scope="other-hardware").scope == "other-hardware"
    with pytest.raises(InputError, match="scope must be one of"):
        book.judge("3b", 24.0, scope="elsewhere")
    with pytest.raises(InputError, match="scope column"):
        ClaimBook(REFERENCE.drop(columns="scope"), TOLERANCES)
    with pytest.raises(InputError, match="claim 8a: scope must be"):
        ClaimBook(REFERENCE.assign(scope=["reading", "reading", ""]), TOLERANCES)


def test_no_row_leaves_the_gather_without_a_scope() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    df = claims_frame([book.judge("3b", 24.0), book.judge("8a", 8.0)])
    assert list(gather_claims([df])["scope"]) == ["replication", "reading"]
    with pytest.raises(ValueError, match=r"rows \['3b'\] have no scope"):
        gather_claims([df.assign(scope=["", "reading"])])
    with pytest.raises(ValueError, match="scope must be one of"):
        ClaimRow("1a", "c", 1.0, 1.0, "s", "exact", "reproduced", "", "")
    assert "conditional" in VERDICTS and set(SCOPES) == {
        "replication",
        "reading",
        "extension",
        "other-hardware",
        "internal",
        "literature",
    }


def test_a_noisy_optimum_is_judged_by_its_confidence_set() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    assert book.judge("8a", 10.0, accept=[7.0, 8.0, 9.0]).verdict == "reproduced"
    row = book.judge("8a", 10.0, accept=[9.0, 11.0], miss="set misses 8")
    assert row.verdict == "not_reproduced" and row.ours == 10.0
    assert book.judge("8a", 10.0, profile=SOLVED, accept=[8.0]).verdict == "conditional"


def test_bound_rows_pass_when_the_published_number_respects_the_bound() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    low = book.bound("3b", 20.0, "roofline", scope="replication")
    assert (low.id, low.verdict, low.tolerance) == (
        "3b-bound",
        "reproduced",
        "lower bound: paper >= ours",
    )
    assert "respects this lower bound" in low.note
    broken = book.bound("3b", 30.0, "floor", row_id="3b-floor")
    assert broken.verdict == "not_reproduced" and "breaks" in broken.note
    assert broken.scope == "replication"
    upper = book.bound("3b", 22.0, "most that fits", lower=False)
    assert upper.verdict == "not_reproduced" and upper.tolerance == "upper bound: paper <= ours"
    assert book.bound("3b", 23.0, "equal", lower=False).verdict == "reproduced"
    ref = pd.concat(
        [
            REFERENCE,
            pd.DataFrame(
                [["8o", "t2", 2.79, "ms", "bound", "replication"]], columns=REFERENCE.columns
            ),
        ]
    )
    b2 = ClaimBook(ref, TOLERANCES)  # the bound class needs no config tolerance
    with pytest.raises(InputError, match="bound row"):
        b2.judge("8o", 3.0)
    assert b2.bound("8o", 6.61, "floor", row_id="8o").verdict == "not_reproduced"


def test_incomparable_rows_are_never_reproduced() -> None:
    book = ClaimBook(REFERENCE, TOLERANCES)
    row = book.judge("3b", 23.0, incomparable="measured on an H100")
    assert row.verdict == "not_reproduced" and "within tolerance" in row.note


def test_book_refuses_unknown_claims_and_tolerance_classes() -> None:
    with pytest.raises(InputError, match="no class"):
        ClaimBook(REFERENCE, {"time": TOLERANCES["time"]})
    book = ClaimBook(REFERENCE, TOLERANCES)
    with pytest.raises(InputError, match="'9z'"):
        book.judge("9z", 1.0)
    with pytest.raises(InputError, match="same_delay"):
        book.tolerance_class("same_delay")


def test_solved_parameter_rows() -> None:
    hit = solved_parameter_row("3a-gamma", "which gamma", 1600, [3.5, 4.0], "gamma", "grid 0.25:8")
    assert (hit.verdict, hit.ours) == ("back_solved", "3.5, 4")
    assert "back-solved" in hit.note and "grid 0.25:8" in hit.note
    none = solved_parameter_row("4a-gamma", "which gamma", 1300, [], "gamma", "no gamma reaches it")
    assert (none.verdict, none.ours, none.note) == ("not_reproduced", "none", "no gamma reaches it")
    assert list(claims_frame([hit, none])["id"]) == ["3a-gamma", "4a-gamma"]


def test_profiles_name_what_they_were_solved_from() -> None:
    with pytest.raises(InputError, match="solved_from"):
        LinearLatency(0.02, 0.7, "x", verdict="back_solved")
    with pytest.raises(InputError, match="solved_from"):
        BatchLatency(0, 0, 1e-4, 1e-3, "y", solved_from=("8a",))
    cfg = {"kind": "fixed", "a_s_per_token": 0.02203, "b0_s": 0.78, "verdict": "back_solved"}
    lat = resolve_linear_profile("b", {**cfg, "solved_from": ["3b", "3c"]})
    assert lat.solved_from == ("3b", "3c")


@pytest.fixture
def config() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())


def test_shipped_back_solved_profiles_name_their_claims(config: dict) -> None:
    assert config["latency_profiles"]["back_solved"]["solved_from"] == ["3b", "3c"]
    assert config["batch_profiles"]["paper_k8"]["solved_from"] == ["8a"]
    assert config["claims"]["tolerances"]["same_delay"] == {"kind": "rel", "value": 0.01}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["latency_profiles"]["back_solved"].pop("solved_from"), "needs solved_from"),
        (
            lambda c: c["latency_profiles"]["table1_fit"].update(solved_from=["3b"]),
            "latency_profiles.table1_fit",
        ),
        (
            lambda c: c["batch_profiles"]["paper_k8"].update(solved_from=["8z"]),
            "batch_profiles.paper_k8.solved_from",
        ),
        (lambda c: c["claims"]["tolerances"].pop("same_delay"), "claims.tolerances.same_delay"),
        (lambda c: c["claims"]["tolerances"].pop("tracking"), "claims.tolerances.tracking"),
    ],
)
def test_config_checks_solved_from_and_tolerance_classes(config: dict, edit, message: str) -> None:
    cfg = copy.deepcopy(config)
    edit(cfg)
    with pytest.raises(InputError, match=message):
        check_config(cfg, ROOT)
