"""``llmqueue predictor train`` / ``score``: an operator's own trace, a versioned model file, and
bad input that exits 2 naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from llmqueue.cli import main


@pytest.fixture(scope="module")
def trace(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """A synthetic trace whose output length depends on the prompt length (so a model learns)."""
    rng = np.random.default_rng(5)
    n = 1500
    t = pd.Timestamp("2024-01-01 10:00:00") + pd.to_timedelta(
        np.cumsum(rng.exponential(0.5, n)), unit="s"
    )
    prompt = rng.integers(10, 2000, n)
    out = np.maximum(1, (prompt // 4 + rng.integers(0, 40, n))).astype(int)
    path = tmp_path_factory.mktemp("trace") / "trace.csv"
    pd.DataFrame({"when": t.astype(str), "in": prompt, "out": out}).to_csv(path, index=False)
    return path


def _cols(trace: Path) -> list[str]:
    return [
        "--trace",
        str(trace),
        "--timestamp-column",
        "when",
        "--prompt-column",
        "in",
        "--output-column",
        "out",
    ]


def test_train_then_score_round_trip(trace: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model = tmp_path / "m.model"
    rc = main(
        ["predictor", "train", *_cols(trace), "--out", str(model), "--max-iter", "15", "--json"]
    )
    assert rc == 0
    trained = json.loads(capsys.readouterr().out)
    assert trained["held_out_score"]["n"] == 450  # the last 30% of 1500 rows
    assert trained["held_out_score"]["kendall_tau"] > 0.8  # outputs follow the prompt here
    assert main(["predictor", "score", *_cols(trace), "--model", str(model), "--json"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["scored_on"].startswith("held-out")
    assert scored["kendall_tau"] == pytest.approx(trained["held_out_score"]["kendall_tau"])
    rc = main(["predictor", "score", *_cols(trace), "--predictor", "buckets:k=5,acc=1", "--json"])
    assert rc == 0
    assert json.loads(capsys.readouterr().out)["accuracy"] == 1.0
    rc = main(["predictor", "train", *_cols(trace), "--out", str(tmp_path / "c.model"),
               "--kind", "classifier", "--classes", "quantiles", "--max-iter", "5"])  # fmt: skip
    assert rc == 0
    assert "edges_tokens" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args,flag",
    [
        (["train", "--out", "X", "--train-fraction", "1.5"], "--train-fraction"),
        (["train", "--out", "X", "--known-after", "0"], "--known-after"),
        (["train", "--out", "X", "--history", "4,x"], "--history"),
        (["train", "--out", "X", "--max-iter", "0"], "--max-iter"),
        (["score", "--model", "/no/such.model"], "--model"),
        (["score", "--predictor", "psychic"], "psychic"),
        (["score"], "--model MODEL"),
    ],
)
def test_bad_input_exits_2_naming_the_flag(trace: Path, capsys, args, flag) -> None:  # type: ignore[no-untyped-def]
    assert main(["predictor", args[0], *_cols(trace), *args[1:]]) == 2
    assert flag in capsys.readouterr().err


def test_missing_column_and_file(trace: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["predictor", "score", "--trace", str(trace), "--predictor", "oracle"]) == 2
    assert "--trace" in capsys.readouterr().err  # no column TIMESTAMP / ContextTokens
    assert main(["predictor", "score", "--trace", "/no/trace.csv", "--predictor", "oracle"]) == 2
    assert "does not exist" in capsys.readouterr().err
