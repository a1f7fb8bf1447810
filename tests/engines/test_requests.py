"""Request tables of the vLLM validation: trace lengths scaled into the model, Poisson arrivals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.engines.requests import (
    TABLE_COLUMNS,
    build_request_table,
    poisson_arrivals,
    prompt_token_ids,
    read_trace_lengths,
    scale_lengths,
    table_prompts,
)
from llmqueue.errors import InputError


@settings(max_examples=200, deadline=None)
@given(
    p=st.lists(st.integers(1, 20000), min_size=1, max_size=50),
    scale=st.floats(0.01, 1.0),
    max_len=st.integers(2, 4096),
    data=st.data(),
)
def test_scaled_lengths_fit_the_context(
    p: list[int], scale: float, max_len: int, data: st.DataObject
) -> None:
    o = data.draw(st.lists(st.integers(1, 5000), min_size=len(p), max_size=len(p)))
    ps, os_ = scale_lengths(np.array(p), np.array(o), scale, max_len)
    assert (ps >= 1).all() and (os_ >= 1).all()
    assert (ps + os_ <= max_len).all()
    # the output keeps its scaled length whenever the context allows it
    want = np.clip(np.rint(np.array(o) * scale), 1, max_len - 1)
    assert (os_ == want).all()


def test_scaling_rounds_both_lengths_by_one_factor() -> None:
    ps, os_ = scale_lengths(np.array([1020, 4, 8000]), np.array([129, 3, 16]), 0.125, 1024)
    assert ps.tolist() == [128, 1, 1000]  # 8000 / 8 = 1000 fits beside 2 output tokens
    assert os_.tolist() == [16, 1, 2]
    ps, os_ = scale_lengths(np.array([14050]), np.array([1000]), 0.125, 1024)
    assert (ps + os_).tolist() == [1024] and os_.tolist() == [125]


@pytest.mark.parametrize(("scale", "max_len"), [(0.0, 100), (1.5, 100), (0.5, 1)])
def test_scale_rejects_bad_arguments(scale: float, max_len: int) -> None:
    with pytest.raises(InputError):
        scale_lengths(np.array([10]), np.array([10]), scale, max_len)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_poisson_arrivals_have_the_rate(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, rate = 20000, 3.0
    t = poisson_arrivals(rate, n, rng)
    gaps = np.diff(np.concatenate([[0.0], t]))
    assert (gaps > 0).all()
    # mean gap 1/rate: standard error (1/rate)/sqrt(n); 4 sigma
    assert abs(gaps.mean() - 1 / rate) < 4 * (1 / rate) / np.sqrt(n)
    # exponential: coefficient of variation 1 (its standard error ~ 1/sqrt(n) for large n)
    assert abs(gaps.std() / gaps.mean() - 1) < 4 * np.sqrt(2 / n)


def test_poisson_rejects_bad_rate() -> None:
    with pytest.raises(InputError):
        poisson_arrivals(0.0, 5, np.random.default_rng(0))
    with pytest.raises(InputError):
        poisson_arrivals(1.0, 0, np.random.default_rng(0))


def test_table_from_the_committed_trace(azure_trace) -> None:  # type: ignore[no-untyped-def]
    prompt, output = read_trace_lengths(azure_trace, "ContextTokens", "GeneratedTokens")
    rng = np.random.default_rng(7)
    tab = build_request_table(prompt, output, 300, 2.5, 0.125, 1024, 30, rng, "load60")
    assert list(tab.columns) == TABLE_COLUMNS
    assert tab["request_id"].iloc[0] == "load60-0000" and tab["request_id"].is_unique
    assert tab["warmup"].sum() == 30 and tab["warmup"].iloc[:30].all()
    assert (np.diff(tab["planned_s"]) > 0).all()
    # each row's lengths are its trace row's lengths, scaled
    ps, os_ = scale_lengths(prompt[tab["trace_row"]], output[tab["trace_row"]], 0.125, 1024)
    assert (tab["prompt_tokens"].to_numpy() == ps).all()
    assert (tab["output_tokens"].to_numpy() == os_).all()
    assert (tab["trace_prompt_tokens"].to_numpy() == prompt[tab["trace_row"]]).all()
    # the same generator state gives the same table
    again = build_request_table(
        prompt, output, 300, 2.5, 0.125, 1024, 30, np.random.default_rng(7), "load60"
    )
    assert again.equals(tab)


def test_table_rejects_warmup_without_measured_requests() -> None:
    with pytest.raises(InputError, match="warm-up"):
        build_request_table(
            np.array([5]), np.array([5]), 10, 1.0, 0.5, 64, 10, np.random.default_rng(0), "x"
        )


def test_trace_errors_name_the_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError, match="does not exist"):
        read_trace_lengths(tmp_path / "none.csv", "a", "b")
    f = tmp_path / "t.csv"
    f.write_text("a,c\n1,2\n")
    with pytest.raises(InputError, match=r"has no column 'b'"):
        read_trace_lengths(f, "a", "b")
    f.write_text("a,b\n1,0\n")
    with pytest.raises(InputError, match=">= 1"):
        read_trace_lengths(f, "a", "b")


def test_prompt_ids_avoid_special_tokens() -> None:
    ids = prompt_token_ids(5000, 64, np.random.default_rng(0))
    assert len(ids) == 5000 and min(ids) >= 3 and max(ids) < 64
    with pytest.raises(InputError):
        prompt_token_ids(0, 64, np.random.default_rng(0))


def test_table_prompts_draw_each_request_in_table_order() -> None:
    table = pd.DataFrame({"request_id": ["a", "b", "c"], "prompt_tokens": [3, 1, 5]})
    got = table_prompts(table, 100, np.random.default_rng(7))
    rng = np.random.default_rng(7)
    want = {r: prompt_token_ids(n, 100, rng) for r, n in (("a", 3), ("b", 1), ("c", 5))}
    assert got == want and list(got) == ["a", "b", "c"]
    assert all(3 <= t < 100 for ids in got.values() for t in ids)
