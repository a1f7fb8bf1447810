"""llmqueue.blocks: prompts' block ids, their mapping onto an engine's blocks, bad ids; and
Mooncake's hash_ids read through llmqueue.traces."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.blocks import PromptBlocks, blocks_from_lists
from llmqueue.errors import InputError
from llmqueue.traces import read_trace

MOONCAKE = "data/traces/mooncake-fast25/conversation_trace.jsonl"

# requests as (coarse ids, prompt tokens): ids from a small alphabet so that prefixes repeat
requests = st.lists(
    st.lists(st.integers(0, 3), min_size=1, max_size=5).flatmap(
        lambda ids: st.tuples(st.just(ids), st.integers(512 * (len(ids) - 1) + 1, 512 * len(ids)))
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=200, deadline=None)
@given(reqs=requests, b=st.sampled_from([16, 32, 128, 512]))
def test_equal_coarse_prefixes_stay_equal_and_different_ones_never_collide(reqs, b) -> None:  # noqa: ANN001
    coarse = blocks_from_lists([ids for ids, _ in reqs], 512, where="t")
    prompt = np.array([p for _, p in reqs], dtype=float)
    eng = coarse.on_blocks_of(b, prompt)
    r = 512 // b
    for i, (ids, p) in enumerate(reqs):
        mine = eng.of(i)
        assert mine.size == min(p // b, len(ids) * r)  # whole engine blocks inside the prompt
        for k, x in enumerate(mine):  # engine block k lies in coarse block k // r
            assert x // r == ids[k // r] and x % r == k % r
    for i in range(len(reqs)):
        for j in range(len(reqs)):
            a, c = eng.of(i), eng.of(j)
            k = np.arange(min(a.size, c.size))
            # engine blocks agree exactly where the coarse ids agree
            ci, cj = np.array(reqs[i][0]), np.array(reqs[j][0])
            assert np.array_equal(a[k] == c[k], ci[k // r] == cj[k // r])
    dense, u = eng.dense()
    assert u == np.unique(eng.ids).size and dense.ids.max(initial=-1) < max(u, 1)
    pairs = np.unique(np.stack([eng.ids, dense.ids]), axis=1)
    assert pairs.shape[1] == u == np.unique(dense.ids).size  # a one-to-one renaming


def test_dense_ids_follow_first_appearance() -> None:
    pb = PromptBlocks(np.array([0, 2, 4]), np.array([90, 7, 90, 5]), 16)
    d, u = pb.dense()
    assert d.ids.tolist() == [0, 1, 0, 2] and u == 3


def test_engine_ids_are_the_dense_mapping_remembered_per_prompts() -> None:
    """engine_ids = on_blocks_of(...).dense(), the same object again for the same engine block
    and prompts, a fresh answer for other prompts or another block size."""
    pb = PromptBlocks(np.array([0, 2, 3]), np.array([4, 9, 4]), 64)
    prompt = np.array([128.0, 40.0])
    d, u = pb.engine_ids(16, prompt)
    want, wu = pb.on_blocks_of(16, prompt).dense()
    assert d.ids.tolist() == want.ids.tolist() and d.offsets.tolist() == want.offsets.tolist()
    assert u == wu
    assert pb.engine_ids(16, prompt.copy())[0] is d
    other = pb.engine_ids(16, np.array([100.0, 40.0]))[0]
    assert other is not d and other.counts().tolist() == [6, 2]
    assert pb.engine_ids(32, prompt)[0].block_tokens == 32


def test_take_keeps_each_requests_ids() -> None:
    pb = PromptBlocks(np.array([0, 2, 2, 5]), np.array([1, 2, 3, 4, 5]), 16)
    t = pb.take(1, 3)
    assert t.n == 2 and t.of(0).tolist() == [] and t.of(1).tolist() == [3, 4, 5]


@pytest.mark.parametrize(
    ("lists", "match"),
    [
        ([[0, -1]], "integers in"),
        ([[0, 1.5]], "integers in"),
        ([[0, True]], "integers in"),
        (["abc"], "list of integers"),
        ([[0, 2**60]], "integers in"),
    ],
)
def test_bad_ids_are_refused_naming_the_field(lists: list, match: str) -> None:
    with pytest.raises(InputError, match=match) as err:
        blocks_from_lists(lists, 512, where="--trace: key 'hash_ids'")
    assert "hash_ids" in str(err.value) and "\n" not in str(err.value)


def test_a_list_longer_than_the_prompt_and_a_block_that_does_not_divide_are_refused() -> None:
    pb = blocks_from_lists([[0, 1, 2]], 512, where="w")
    with pytest.raises(InputError, match=r"3 block ids for 1000 prompt tokens.*at most .* = 2"):
        pb.check_prompts(np.array([1000.0]))
    pb = blocks_from_lists([[0, 1]], 512, where="w")
    with pytest.raises(InputError, match="does not divide .* allowed: a divisor of 512"):
        pb.on_blocks_of(48, np.array([1000.0]))


def write_lines(path: Path, objs: list[dict]) -> str:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs))
    return str(path)


def test_mooncake_hash_ids_are_read_and_checked(tmp_path: Path) -> None:
    rows = read_trace(MOONCAKE, "mooncake")
    assert rows.blocks is not None and rows.blocks.n == rows.n == 12_031
    assert rows.blocks.block_tokens == 512
    assert np.all(rows.blocks.counts() == np.ceil(rows.prompt_tokens / 512))
    line = {"timestamp": 0, "input_length": 600, "output_length": 3}
    ok = write_lines(tmp_path / "a.jsonl", [{**line, "hash_ids": [4, 5]}, dict(line)])
    got = read_trace(ok, "mooncake")
    assert got.blocks.of(0).tolist() == [4, 5] and got.blocks.of(1).tolist() == []
    none = write_lines(tmp_path / "b.jsonl", [dict(line), dict(line)])
    assert read_trace(none, "mooncake").blocks is None
    for bad, match in (
        ([4, -5], "line 1: block ids must be a list of integers"),
        ("x", "line 1: block ids must be a list"),
        ([1, 2, 3], "line 1: it has 3 block ids for 600 prompt tokens"),
    ):
        p = write_lines(tmp_path / "c.jsonl", [{**line, "hash_ids": bad}, dict(line)])
        with pytest.raises(InputError, match=match) as err:
            read_trace(p, "mooncake", where="--trace")
        assert "hash_ids" in str(err.value)
