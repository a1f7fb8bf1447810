"""The request-table readers (llmqueue.traces): one typed table, one trace-spec parser."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmqueue.errors import InputError
from llmqueue.limits import MAX_TOKENS
from llmqueue.traces import (
    DAY_S,
    VLLM_REQUEST_COLUMNS,
    TraceColumns,
    TraceRows,
    parse_trace_spec,
    read_column,
    read_columns,
    read_timestamps,
    read_token_columns,
    read_trace,
)


def _csv(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_csv_rows_are_sorted_from_the_earliest_arrival(tmp_path: Path) -> None:
    p = _csv(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:47,10,3\n2023-11-16 18:15:46,20,4\n2023-11-16 18:15:49,5,1\n",
    )
    rows = read_trace(p)
    assert rows.arrival_s.tolist() == [0.0, 1.0, 3.0]
    assert rows.prompt_tokens.tolist() == [20.0, 10.0, 5.0]
    assert rows.output_tokens.tolist() == [4.0, 3.0, 1.0]
    assert rows.time_of_day_s[0] == 18 * 3600 + 15 * 60 + 46
    assert rows.finish_s is None and rows.frame is None


def test_numeric_timestamps_and_a_finish_column(tmp_path: Path) -> None:
    p = _csv(tmp_path, "t,p,o,f\n100,1,2,105\n90000,3,4,90010\n")
    rows = read_trace(p, TraceColumns("t", "p", "o", "f"))
    assert rows.arrival_s.tolist() == [0.0, 89900.0]
    assert rows.finish_s is not None and rows.finish_s.tolist() == [5.0, 89910.0]
    assert rows.time_of_day_s.tolist() == [100.0, 90000.0 - DAY_S]
    abs_s, tod = read_timestamps(p, "t")
    assert abs_s.tolist() == [100.0, 90000.0] and tod.tolist() == rows.time_of_day_s.tolist()


def test_errors_name_the_file_the_column_and_what_exists(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--trace: trace file .* does not exist"):
        read_trace(tmp_path / "none.csv")
    p = _csv(tmp_path, "a,b\n1,x\n2,3\n")
    with pytest.raises(InputError, match=r"has no column 'c'; its columns are \['a', 'b'\]"):
        read_columns(p, ["a", "c"])
    with pytest.raises(InputError, match="columns \\['c', 'd'\\]"):
        read_columns(p, ["c", "d"])
    with pytest.raises(InputError, match="column 'b' .* 1 values are not numbers"):
        read_columns(p, ["b"], where="ssjf.trace")
    with pytest.raises(InputError, match="no timestamp column 'ts'"):
        read_timestamps(p, "ts")
    neg = _csv(tmp_path, "n\n1\n-2\n", "neg.csv")
    with pytest.raises(InputError, match=">= 0"):
        read_column(neg, "n")
    with pytest.raises(InputError, match="unknown trace format 'parquet'; known"):
        read_trace(p, format="parquet")
    with pytest.raises(InputError, match="unknown keys \\['stamp'\\]"):
        TraceColumns.from_mapping({"stamp": "x"})


@pytest.mark.parametrize(
    "cell, words",
    [
        ("inf", "'GeneratedTokens' of .*t.csv: 1 values are not finite, the first in data row 2"),
        ("nan", "'GeneratedTokens' of .*t.csv: 1 values are not numbers .*data row 2"),
        ("", "'GeneratedTokens' of .*t.csv: 1 values are not numbers .*data row 2"),
        ("x", "'GeneratedTokens' of .*t.csv: 1 values are not numbers .*data row 2: 'x'"),
        ("-1", "'GeneratedTokens' of .*t.csv: 1 values are out of range, .*: -1; allowed: "),
        (
            f"{2 * MAX_TOKENS:.0f}",
            r"out of range, the first in data row 2: 2e\+09; allowed: .*1e\+09",
        ),
    ],
)
def test_csv_token_counts_must_be_finite_and_in_range(
    tmp_path: Path, cell: str, words: str
) -> None:
    """The csv reader refuses a token count that is not a number, NaN, infinite, negative or
    above MAX_TOKENS, in one line naming the file, the column, the row and the allowed range."""
    p = _csv(tmp_path, f"TIMESTAMP,ContextTokens,GeneratedTokens\n0,1,2\n1,3,{cell}\n2,5,6\n")
    with pytest.raises(InputError, match=words) as err:
        read_trace(p, format="csv")
    assert "\n" not in str(err.value) and str(err.value).startswith("--trace: ")
    with pytest.raises(InputError, match="allowed: numbers >= 0 and <= 1e\\+09 tokens"):
        read_trace(p, format="csv")


def test_csv_refuses_ragged_rows_infinite_times_and_empty_files(tmp_path: Path) -> None:
    head = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
    for row in ("1,3,4,9", "1,3"):  # pandas would drop the 9 or read the missing cell as NaN
        p = _csv(tmp_path, f"{head}0,1,2\n{row}\n2,5,6\n", "ragged.csv")
        with pytest.raises(
            InputError, match=r"ragged.csv, line 3: \d fields where the header has 3"
        ):
            read_trace(p)
        with pytest.raises(InputError, match="ragged row"):
            read_columns(p, ["ContextTokens"])
    p = _csv(tmp_path, f"{head}0,1,2\ninf,3,4\n", "inf.csv")
    with pytest.raises(
        InputError, match="timestamp column 'TIMESTAMP' of .*inf.csv: 1 values are not finite"
    ):
        read_trace(p)
    with pytest.raises(InputError, match="'TIMESTAMP' of .*: 1 values are not finite"):
        read_columns(p, ["TIMESTAMP"])
    with pytest.raises(InputError, match="empty.csv' is empty; known formats"):
        read_trace(_csv(tmp_path, "", "empty.csv"))
    with pytest.raises(InputError, match="holds 0 rows; a trace needs at least 2"):
        read_trace(_csv(tmp_path, head, "head.csv"))
    with pytest.raises(
        InputError, match="holds neither numbers nor dates, the first in data row 2"
    ):
        read_trace(_csv(tmp_path, f"{head}2023-11-16 18:15:46,1,2\nsoon,3,4\n", "d.csv"))
    big = _csv(tmp_path, "n\n1\n2e9\n", "big.csv")
    with pytest.raises(InputError, match="<= 1e\\+09 tokens"):
        read_column(big, "n")


def test_auto_reads_every_csv_the_csv_reader_reads_as_csv(tmp_path: Path) -> None:
    """read_trace's default, auto, gives the csv reader's rows for a table holding the named
    columns, even one whose header also matches another format."""
    p = _csv(
        tmp_path,
        "Timestamp,Request tokens,Response tokens,t\n5,1,0,1\n3,2,4,2\n9,3,5,3\n",
        "both.csv",
    )
    cols = TraceColumns("t", "Request tokens", "Response tokens")
    auto, csv = read_trace(p, cols), read_trace(p, cols, format="csv")
    assert auto.fingerprint() == csv.fingerprint() and auto.n == 3  # the failed row kept
    assert auto.source == csv.source == "--trace both.csv"
    assert read_trace(p).n == 2  # without those columns named: BurstGPT's, failed row dropped


def test_trace_rows_check_their_columns() -> None:
    a = np.array([0.0, 1.0])
    with pytest.raises(InputError, match="arrival order"):
        TraceRows(a[::-1], a, a, a)
    with pytest.raises(InputError, match="finite"):
        TraceRows(a, a, np.array([1.0, np.inf]), a)
    with pytest.raises(InputError, match=">= 0"):
        TraceRows(a, a, a, -a - 1)
    with pytest.raises(InputError, match="after its arrival"):
        TraceRows(a, a, a, a, finish_s=a)
    rows = TraceRows(np.arange(5.0), np.zeros(5), np.ones(5), np.arange(5.0), source="x")
    part = rows.take(2)
    assert part.n == 3 and part.arrival_s.tolist() == [2.0, 3.0, 4.0]
    assert (
        rows.fingerprint() != part.fingerprint()
        and rows.fingerprint() == rows.take(0).fingerprint()
    )


def _vllm_table(n: int = 4) -> pd.DataFrame:
    arrival = np.arange(n, dtype=float)
    return pd.DataFrame(
        {
            "request_id": [f"r{i}" for i in range(n)],
            "arrival_s": arrival,
            "prompt_tokens": np.full(n, 7),
            "output_tokens": np.arange(1, n + 1),
            "first_token_s": arrival + 0.5,
            "finish_s": arrival + 1.0,
            "warmup": [True] + [False] * (n - 1),
            "chunks": np.ones(n, dtype=int),
        }
    )


def test_vllm_request_tables_read_as_rows_with_their_frame(tmp_path: Path) -> None:
    df = _vllm_table()
    df.to_csv(tmp_path / "requests_x.csv", index=False)
    rows = read_trace(tmp_path / "requests_x.csv", format="vllm-requests")
    assert set(VLLM_REQUEST_COLUMNS) <= set(rows.frame.columns)
    assert rows.output_tokens.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert rows.arrival_s.tolist() == df["arrival_s"].tolist()  # the run's own clock
    pd.testing.assert_frame_equal(rows.frame, pd.read_csv(tmp_path / "requests_x.csv"))
    bad = df.copy()
    bad.loc[1, "first_token_s"] = 0.5
    bad.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(InputError, match="arrival <= first token <= finish"):
        read_trace(tmp_path / "bad.csv", format="vllm-requests")
    df.drop(columns=["warmup"]).to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(InputError, match=r"lacks columns \['warmup'\]"):
        read_trace(tmp_path / "short.csv", format="vllm-requests")


@given(
    path=st.text(st.sampled_from("ab/._:-"), min_size=1, max_size=12).filter(
        lambda s: not s.startswith(":") and not s.endswith(":")
    ),
    column=st.text(st.sampled_from("XYZ_"), min_size=1, max_size=6),
    cap=st.none() | st.integers(1, 10_000),
)
def test_trace_spec_round_trips(path: str, column: str, cap: int | None) -> None:
    spec = f"trace:{path}:{column}" + ("" if cap is None else f":cap={cap}")
    parsed = parse_trace_spec(spec)
    assert (parsed.path, parsed.column) == (path, column)
    assert parsed.cap_text == (None if cap is None else str(cap))


@pytest.mark.parametrize("spec", ["trace:onlypath", "trace::X", "trace:p:", "lognormal:mu=1"])
def test_malformed_trace_specs_are_refused(spec: str) -> None:
    with pytest.raises(InputError):
        parse_trace_spec(spec)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("9223372036854775808", r"9\.22337e\+18"),  # 2**63: would wrap in the engine's int64
        ("1e19", r"1e\+19"),
        (str(int(MAX_TOKENS) + 1), r"1e\+09"),
        ("-3", "-3"),
    ],
)
def test_token_columns_are_bounded_like_the_other_readers(
    tmp_path: Path, value: str, shown: str
) -> None:
    p = _csv(tmp_path, f"ContextTokens,GeneratedTokens\n10,20\n5,{value}\n7,8\n", "huge.csv")
    with pytest.raises(InputError) as err:
        read_token_columns(p, ["ContextTokens", "GeneratedTokens"])
    text = str(err.value)
    assert "\n" not in text and text.startswith("--trace: column 'GeneratedTokens' of ")
    assert "huge.csv" in text and "data row 2" in text
    assert "allowed: numbers >= 0 and <= 1e+09 tokens" in text
    assert re.search(shown, text), text
    # read_columns (any numeric column, e.g. times) stays unbounded but finite
    assert read_columns(p, ["GeneratedTokens"])["GeneratedTokens"][1] == float(value)


def test_a_trace_workload_names_the_flag_and_refuses_huge_counts(tmp_path: Path) -> None:
    from llmqueue.sim.workload import TraceWorkload

    p = _csv(tmp_path, "ContextTokens,GeneratedTokens\n10,20\n5,1e12\n", "big.csv")
    with pytest.raises(InputError, match=r"^--trace: column 'GeneratedTokens' of .*big.csv"):
        TraceWorkload.from_csv(p, 1.0, trace_format="csv")
    with pytest.raises(InputError, match=r"^--trace: column 'ContextTokens' .*data row 1: -1"):
        TraceWorkload.from_csv(
            _csv(tmp_path, "ContextTokens,GeneratedTokens\n-1,2\n3,4\n", "neg.csv"),
            1.0,
            trace_format="csv",
        )
    ok = TraceWorkload.from_csv(
        _csv(tmp_path, f"ContextTokens,GeneratedTokens\n0,{int(MAX_TOKENS)}\n3,4\n", "ok.csv"),
        1.0,
    )
    assert ok.output_tokens.max() == MAX_TOKENS
    # the library's own constructor: the same bound, naming the source and the row
    with pytest.raises(InputError, match=r"1 output token counts are not numbers in \[0, 1e\+09\]"):
        TraceWorkload(np.array([1.0, 2.0]), np.array([3.0, 2.0**63]), 1.0, source="t")
    with pytest.raises(InputError, match="the first in row 1: nan"):
        TraceWorkload(np.array([np.nan]), np.array([3.0]), 1.0)
