"""The traces operators have (llmqueue.traces): BurstGPT's CSV, Mooncake's JSONL, vidur's request
CSV and vLLM's benchmark result JSON, recognised by ``auto``, exported to vidur, and bad input.

Every file is small and written here, in each format's published layout (docs/traces.md)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.cli import main
from llmqueue.errors import InputError
from llmqueue.limits import MAX_TOKENS
from llmqueue.sim.workload import ReplayWorkload
from llmqueue.traces import (
    DAY_S,
    FORMATS,
    TraceColumns,
    TraceRows,
    detect_format,
    read_trace,
    write_vidur,
)

# A request as the tests write it: timestamp (s), prompt tokens, output tokens; a value may be
# any text or JSON value to make bad input.
Row = tuple[Any, Any, Any]
ROWS: list[Row] = [(0.0, 10, 5), (1.5, 20, 6), (4.0, 30, 7), (4.0, 40, 8)]


def burstgpt(rows: list[Row], drop: str | None = None) -> str:
    cols = ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]
    keep = [i for i, c in enumerate(cols) if c != drop]
    lines = [",".join(cols[i] for i in keep)]
    for t, p, o in rows:
        cells = [str(t), "ChatGPT", str(p), str(o), "0", "Conversation log"]
        lines.append(",".join(cells[i] for i in keep))
    return "\n".join(lines) + "\n"


def vidur(rows: list[Row], drop: str | None = None) -> str:
    cols = ["arrived_at", "num_prefill_tokens", "num_decode_tokens"]
    keep = [i for i, c in enumerate(cols) if c != drop]
    lines = [",".join(cols[i] for i in keep)]
    lines += [",".join([str(t), str(p), str(o)][i] for i in keep) for t, p, o in rows]
    return "\n".join(lines) + "\n"


def mooncake(rows: list[Row], drop: str | None = None) -> str:
    """Timestamps in ms, as the FAST'25 traces; hash_ids as they hold them (one per 512 tokens,
    the first shared)."""
    out = []
    for i, (t, p, o) in enumerate(rows):
        ms = t * 1000 if isinstance(t, float | int) and not isinstance(t, bool) else t
        n = math.ceil(p / 512) if isinstance(p, int | float) and not isinstance(p, bool) else 1
        ids = [0] + [1000 * (i + 1) + j for j in range(1, max(n, 1))] if n >= 1 else []
        obj = {"timestamp": ms, "input_length": p, "output_length": o, "hash_ids": ids}
        obj.pop(drop or "", None)
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


def vllm_bench(rows: list[Row], drop: str | None = None) -> str:
    """A result of ``vllm bench serve --save-result --save-detailed`` (newer: with start_times);
    start times on a perf_counter clock, far from 0."""
    n = len(rows)
    obj: dict[str, Any] = {
        "date": "20260101-000000",
        "backend": "vllm",
        "request_rate": 2.0,
        "burstiness": 1.0,
        "completed": n,
        "failed": 0,
        "request_throughput": 1.0,
        "input_lens": [p for _, p, _ in rows],
        "output_lens": [o for _, _, o in rows],
        "ttfts": [0.05] * n,
        "itls": [[0.01, 0.01]] * n,
        "latencies": [0.5] * n,
        "start_times": [t + 1000.0 if isinstance(t, float) else t for t, _, _ in rows],
        "generated_texts": ["hi"] * n,
        "errors": [""] * n,
    }
    obj.pop(drop or "", None)
    return json.dumps(obj)


WRITERS: dict[str, tuple[Callable[..., str], str]] = {
    # format: (writer, file name); the names of its columns or keys are its record's
    "burstgpt": (burstgpt, "BurstGPT_1.csv"),
    "mooncake": (mooncake, "conversation_trace.jsonl"),
    "vidur": (vidur, "splitwise_conv.csv"),
    "vllm-bench": (vllm_bench, "vllm-2.0qps-model.json"),
}


def time_key(fmt: str) -> str:
    """The column or key of a format's arrival times (its record's)."""
    return FORMATS[fmt].columns[0]  # type: ignore[index]


def output_key(fmt: str) -> str:
    """The column or key of a format's output tokens (its record's)."""
    return FORMATS[fmt].columns[2]  # type: ignore[index]


# the formats written here whose arrivals are a column of timestamps checked row by row (vLLM's
# benchmark result holds optional start times on a perf_counter clock, tested on their own)
TIMESTAMPED = [f for f in WRITERS if f != "vllm-bench"]
# the formats written here that are CSV files (read by the shared CSV reader: ragged rows)
CSV = [f for f in WRITERS if FORMATS[f].header]


def write(tmp_path: Path, fmt: str, rows: list[Row], drop: str | None = None) -> Path:
    writer, name = WRITERS[fmt]
    path = tmp_path / name
    path.write_text(writer(rows, drop))
    return path


# ---- each format ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_format_reads_arrivals_in_seconds_from_the_first_and_its_tokens(
    tmp_path: Path, fmt: str
) -> None:
    path = write(tmp_path, fmt, ROWS)
    rows = read_trace(path, format=fmt)
    assert rows.arrival_s.tolist() == [0.0, 1.5, 4.0, 4.0]
    assert rows.prompt_tokens.tolist() == [10, 20, 30, 40]
    assert rows.output_tokens.tolist() == [5, 6, 7, 8]
    assert fmt in rows.source and path.name in rows.source
    assert detect_format(path) == fmt
    auto = read_trace(path)  # the default: recognised from the file
    assert auto.fingerprint() == rows.fingerprint() and auto.source == rows.source


def test_burstgpt_drops_failed_requests_sorts_and_keeps_the_time_of_day(tmp_path: Path) -> None:
    """Failed requests are the rows with 0 response tokens (BurstGPT's README); Timestamp counts
    s from 0:00:00 on the first day, so the time of day is Timestamp modulo a day."""
    day = DAY_S
    rows: list[Row] = [(day + 7.0, 9, 0), (day + 5.0, 1, 2), (day + 3.0, 3, 4), (day + 6.0, 5, 0)]
    got = read_trace(write(tmp_path, "burstgpt", rows), format="burstgpt")
    assert got.arrival_s.tolist() == [0.0, 2.0] and got.time_of_day_s.tolist() == [3.0, 5.0]
    assert got.prompt_tokens.tolist() == [3, 1] and got.output_tokens.tolist() == [4, 2]
    assert "2 failed requests dropped" in got.source
    failed = write(tmp_path, "burstgpt", [(0, 1, 0), (1, 2, 0)])
    with pytest.raises(InputError, match=r"all 2 rows are failed requests \('Response tokens' is"):
        read_trace(failed)
    one = write(tmp_path, "burstgpt", [(0, 1, 0), (1, 2, 3)])
    with pytest.raises(InputError, match="holds 1 successful requests; a trace needs at least 2"):
        read_trace(one)


def test_mooncake_reads_milliseconds_skips_blank_lines_and_refuses_disorder(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.jsonl"
    lines = mooncake([(0.0, 6758, 500), (0.0, 7322, 490), (3.0, 13544, 71), (5.999, 1053, 26)])
    path.write_text("\n" + lines.replace("\n", "\n\n", 1))
    got = read_trace(path)
    assert got.arrival_s.tolist() == pytest.approx([0.0, 0.0, 3.0, 5.999], abs=1e-12)
    assert got.prompt_tokens.tolist() == [6758, 7322, 13544, 1053]
    back = write(tmp_path, "mooncake", [(0.0, 1, 1), (3.0, 1, 1), (2.0, 1, 1)])
    with pytest.raises(InputError, match="line 3: timestamp 2000 ms is earlier than the 3000 ms"):
        read_trace(back)


def test_vidur_refuses_disorder_and_ignores_other_columns(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,note\n0.5,3,4,a\n2,5,6,b\n")
    got = read_trace(path)
    assert got.arrival_s.tolist() == [0.0, 1.5] and got.output_tokens.tolist() == [4, 6]
    back = write(tmp_path, "vidur", [(0.0, 1, 1), (3.0, 1, 1), (2.0, 1, 1)])
    with pytest.raises(InputError, match="data row 3: arrived_at 2 s is earlier than the 3 s"):
        read_trace(back, format="vidur")


def test_vllm_bench_drops_errors_sorts_by_send_time_and_keeps_what_it_measured(
    tmp_path: Path,
) -> None:
    obj = json.loads(vllm_bench([(2.0, 10, 5), (0.0, 20, 0), (1.0, 30, 7), (3.0, 40, 8)]))
    obj["errors"][1] = "Bad Request"
    obj["latencies"] = [0.5, 0.0, 0.25, 1.0]
    obj["ttfts"] = [0.1, 0.0, 0.2, 0.3]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(obj, indent=2))  # spread over lines: recognised all the same
    got = read_trace(path)
    assert got.arrival_s.tolist() == [0.0, 1.0, 2.0] and got.prompt_tokens.tolist() == [30, 10, 40]
    assert got.finish_s is not None and got.finish_s.tolist() == [0.25, 1.5, 3.0]
    assert "1 failed requests dropped" in got.source
    assert got.frame["request"].tolist() == [2, 0, 3]
    assert got.frame["ttft_s"].tolist() == [0.2, 0.1, 0.3]
    # without errors, 0 output tokens mark the failed ones (vLLM writes 0 for them)
    del obj["errors"]
    path.write_text(json.dumps(obj))
    assert read_trace(path, format="vllm-bench").prompt_tokens.tolist() == [30, 10, 40]


def test_vllm_bench_without_send_times_has_no_arrivals_and_cannot_be_replayed(
    tmp_path: Path,
) -> None:
    """Older results hold no start_times: the rows are a length law (all arrivals 0), drawn at
    --rate; a replay refuses them, and the recorded request rate is not turned into times."""
    path = write(tmp_path, "vllm-bench", ROWS, drop="start_times")
    got = read_trace(path)
    assert got.arrival_s.tolist() == [0.0] * 4 and got.finish_s is None
    assert "no start_times: arrival times unknown" in got.source
    with pytest.raises(InputError, match="all timestamps are equal"):
        ReplayWorkload.from_csv(path, trace_format="vllm-bench")
    summary = tmp_path / "summary.json"  # saved without --save-detailed
    summary.write_text(json.dumps({"completed": 4, "request_throughput": 1.0, "duration": 4.0}))
    assert detect_format(summary) == "vllm-bench"
    with pytest.raises(InputError, match="without the per-request list 'input_lens'.*--save-det"):
        read_trace(summary)


# ---- recognising a format -------------------------------------------------------------------------
def test_detection_keeps_csv_for_the_named_columns_and_lists_the_formats(tmp_path: Path) -> None:
    azure = tmp_path / "azure.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,374,44\n")
    assert detect_format(azure) == "csv"
    requests = tmp_path / "requests_x.csv"
    requests.write_text(
        "request_id,arrival_s,prompt_tokens,output_tokens,first_token_s,finish_s,warmup\n"
    )
    assert detect_format(requests) == "vllm-requests"
    ssjf = tmp_path / "p.csv"
    ssjf.write_text(",output_token_length,predicted_length\n0,40,1\n")
    assert detect_format(ssjf) == "ssjf-predictions"
    mine = tmp_path / "mine.csv"
    mine.write_text("ts,in_tok,out_tok\n0,1,2\n")
    assert detect_format(mine, TraceColumns("ts", "in_tok", "out_tok")) == "csv"
    known = "known formats: " + re.escape(str(sorted(f for f in FORMATS if f != "auto")))
    with pytest.raises(InputError, match=r"lacks columns \['TIMESTAMP', 'ContextTokens'.*" + known):
        detect_format(mine)
    with pytest.raises(InputError, match=r"--trace: .*mine.csv: no known trace format.*in_tok"):
        read_trace(mine)
    other = tmp_path / "other.json"
    other.write_text('{"prompt": "hi"}\n')
    with pytest.raises(InputError, match="JSON of no known trace format.*" + known):
        read_trace(other)
    with pytest.raises(InputError, match="unknown trace format 'parquet'"):
        read_trace(mine, format="parquet")


# ---- export to vidur ------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0, 1e4, allow_nan=False), min_size=2, max_size=30),
    seed=st.integers(0, 2**32 - 1),
)
def test_write_vidur_round_trips(tmp_path_factory: pytest.TempPathFactory, gaps, seed) -> None:  # type: ignore[no-untyped-def]
    """Written as vidur's request CSV and read back (format vidur): the same rows, every digit."""
    rng = np.random.default_rng(seed)
    arrival = np.cumsum(np.array([0.0, *gaps[1:]]))
    n = arrival.size
    rows = TraceRows(
        arrival,
        np.mod(arrival, DAY_S),
        rng.integers(0, 100_000, n).astype(float),
        rng.integers(0, int(MAX_TOKENS), n).astype(float),
    )
    path = tmp_path_factory.mktemp("vidur") / "out" / "trace.csv"
    write_vidur(rows, path)
    back = read_trace(path, format="vidur")
    for a, b in zip(
        (rows.arrival_s, rows.time_of_day_s, rows.prompt_tokens, rows.output_tokens),
        (back.arrival_s, back.time_of_day_s, back.prompt_tokens, back.output_tokens),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert back.fingerprint() == rows.fingerprint() and detect_format(path) == "vidur"
    assert [p.name for p in path.parent.iterdir()] == ["trace.csv"]  # no temporary file left


def test_write_vidur_writes_vidurs_header_from_the_first_request(tmp_path: Path) -> None:
    rows = read_trace(write(tmp_path, "burstgpt", [(7.0, 3, 4), (9.5, 5, 6)]))
    write_vidur(rows, tmp_path / "v.csv")
    text = (tmp_path / "v.csv").read_text()
    assert text == "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,3,4\n2.5,5,6\n"
    half = TraceRows(np.array([0.0, 1.0]), np.zeros(2), np.array([1.0, 2.5]), np.ones(2), None, "x")
    with pytest.raises(InputError, match="write_vidur: x: 1 prompt token counts are not whole"):
        write_vidur(half, tmp_path / "w.csv")
    assert not (tmp_path / "w.csv").exists()


# ---- bad input, every reader ---------------------------------------------------------------------
def _bad_value_cases() -> list[tuple[str, Any, str]]:
    """(the bad output-token value, how the file holds it, the words of the error)."""
    return [
        ("text", "x", "are not numbers"),
        ("negative", -1, "are out of range"),
        ("nan", math.nan, "are not numbers"),
        ("inf", math.inf, "are not finite"),
        ("too many", 2 * MAX_TOKENS, "are out of range"),
    ]


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("case", _bad_value_cases(), ids=lambda c: c[0])
def test_a_bad_token_count_is_refused_naming_file_key_place_and_range(
    tmp_path: Path, fmt: str, case: tuple[str, Any, str]
) -> None:
    _, value, words = case
    rows = [*ROWS[:2], (4.0, 30, value), ROWS[3]]
    path = write(tmp_path, fmt, rows)
    key = output_key(fmt)
    where = {"mooncake": "line 3", "vllm-bench": "entry 2"}.get(fmt, "data row 3")
    with pytest.raises(InputError) as err:
        read_trace(path, format=fmt)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("--trace: ") and path.name in msg
    assert f"{key!r}" in msg and words in msg and where in msg
    assert "allowed: numbers >= 0 and <= 1e+09 tokens" in msg


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_missing_empty_and_keyless_files_are_refused(tmp_path: Path, fmt: str) -> None:
    name = WRITERS[fmt][1]
    with pytest.raises(InputError, match=f"trace file .*{name}' does not exist"):
        read_trace(tmp_path / name, format=fmt)
    (tmp_path / name).write_text("")
    with pytest.raises(InputError, match="is empty"):
        read_trace(tmp_path / name, format=fmt)
    with pytest.raises(InputError, match="is empty"):
        read_trace(tmp_path / name)
    for key in (output_key(fmt), time_key(fmt)):
        path = write(tmp_path, fmt, ROWS, drop=key)
        if fmt == "vllm-bench" and key == "start_times":
            continue  # optional: without it the arrivals are unknown (tested above)
        with pytest.raises(InputError, match=f"{name}.*{key!r}") as err:
            read_trace(path, format=fmt)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("fmt", TIMESTAMPED)
def test_a_bad_or_out_of_range_timestamp_is_refused(tmp_path: Path, fmt: str) -> None:
    key = time_key(fmt)
    for value, words in ((-1.0, "out of range"), (math.inf, "not finite"), ("soon", "not numb")):
        rows = [ROWS[0], (value, 20, 6), *ROWS[2:]]
        path = write(tmp_path, fmt, rows)
        with pytest.raises(InputError, match=f"{key!r} of .*{path.name}: 1 values are {words}"):
            read_trace(path, format=fmt)


@pytest.mark.parametrize("fmt", CSV)
def test_a_ragged_row_is_refused(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path, fmt, ROWS)
    lines = path.read_text().splitlines()
    for bad in (lines[2] + ",extra", lines[2].rsplit(",", 1)[0]):
        path.write_text("\n".join([*lines[:2], bad, *lines[3:]]) + "\n")
        with pytest.raises(InputError, match=f"{path.name}, line 3: .* fields where the header"):
            read_trace(path, format=fmt)


def test_malformed_json_is_refused_by_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(mooncake(ROWS[:2]) + "{not json\n")
    with pytest.raises(InputError, match=r"t.jsonl, line 3: not JSON .*allowed: one JSON object"):
        read_trace(path, format="mooncake")
    path.write_text(mooncake(ROWS[:2]) + "[1, 2]\n")
    with pytest.raises(InputError, match="line 3: not an object"):
        read_trace(path, format="mooncake")
    bench = json.loads(vllm_bench(ROWS))
    bench["output_lens"] = bench["output_lens"][:3]
    path = tmp_path / "r.json"
    path.write_text(json.dumps(bench))
    with pytest.raises(InputError, match="key 'output_lens' holds 3 entries; allowed: a list of"):
        read_trace(path)
    bench = json.loads(vllm_bench(ROWS))
    bench["errors"] = ["boom"] * 4
    path.write_text(json.dumps(bench))
    with pytest.raises(InputError, match="all 4 requests failed"):
        read_trace(path)
    bench["input_lens"] = 4
    path.write_text(json.dumps(bench))
    with pytest.raises(InputError, match="key 'input_lens' holds a JSON int; allowed: a list"):
        read_trace(path)
    path.write_text("[1, 2]")
    with pytest.raises(InputError, match="a JSON list, not a vLLM result"):
        read_trace(path, format="vllm-bench")


def test_every_format_of_the_registry_is_read_by_a_test() -> None:
    """Every format (but ``auto``, the recognition) is written here or read by name by a test
    (the table formats of the project's own data are read in test_traces.py and the SSJF
    study's tests): a new format without a test fails here."""
    texts = "".join(p.read_text() for p in Path(__file__).parents[1].rglob("test_*.py"))
    named = {f for f in FORMATS if f'format="{f}"' in texts}
    assert set(FORMATS) - {"auto"} <= set(WRITERS) | named
    assert all(FORMATS[f].name == f for f in FORMATS)


# ---- end to end -----------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_simulate_runs_on_a_recognised_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    rng = np.random.default_rng(7)
    n = 60
    times = np.round(np.cumsum(rng.exponential(0.5, n)), 3)
    rows: list[Row] = [
        (float(t), int(p), int(o))
        for t, p, o in zip(times, rng.integers(1, 500, n), rng.integers(1, 300, n), strict=True)
    ]
    path = write(tmp_path, fmt, rows)
    args = ["simulate", "--trace", str(path), "--trace-format", "auto", "--rate", "2"]
    args += ["--batching", "continuous", "--step", "c0=0.01,c_tok=0.0001,c_ctx=0"]
    code = main([*args, "--requests", "400", "--warmup", "40", "--json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads(out.out)
    assert path.name in result["workload"] and math.isclose(result["rate_per_s"], 2.0)
    assert result["requests"] == 400 and math.isfinite(result["ttft"]["mean"])
