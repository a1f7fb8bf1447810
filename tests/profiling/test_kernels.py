"""Kernel-profile source (vidur's per-operator CSVs + roofline attention): hand-computed times from
the committed CSV, monotone interpolation, attention linear in context, clear errors, fit.json,
Table I and claim rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.profiling.kernels import BLOCK_OPS, isotonic, load_kernel_profile, read_kernel_csv

ROOT = Path(__file__).resolve().parents[2]
A100_CSV = ROOT / "data/profiling/vidur-a100/mlp.csv"
BW_A100 = 2.039e12  # A100-80GB HBM bytes/s (devices.py)
KV_BYTES = 2 * 32 * 4096 * 2  # K and V, 32 layers, hidden 4096, fp16: 512 KiB per token
LM_HEAD_BYTES = 32000 * 4096 * 2  # LLaMA-2-7B vocab x hidden, fp16


@pytest.fixture(scope="module")
def prof() -> dict:
    return yaml.safe_load((ROOT / "config/config.yaml").read_text())["profiling"]


@pytest.fixture(scope="module")
def a100(prof: dict):
    return load_kernel_profile("vidur-a100", prof["kernel_profiles"]["vidur-a100"], prof, ROOT)


def _hand_linear_ms(num_tokens: int) -> list[float]:
    """32 x (sum of the block's operator medians) + embedding median, in ms, for every TP-1 row at
    `num_tokens`, read with the csv module (independently of pandas and the source)."""
    out = []
    with open(A100_CSV, newline="") as fh:
        for row in csv.DictReader(fh):
            if (
                int(row["num_tokens"]) == num_tokens
                and int(row["num_tensor_parallel_workers"]) == 1
            ):
                block = sum(float(row[f"time_stats.{op}.median"]) for op in BLOCK_OPS)
                out.append(32 * block + float(row["time_stats.emb.median"]))
    return out


def test_hand_computed_step_times_from_the_csv(a100) -> None:
    # 128 and 64 token rows lie on the monotone fit (no pooling there): the source is the raw sum
    (lin128,) = _hand_linear_ms(128)
    (lin64,) = _hand_linear_ms(64)
    assert a100.linear_time(128) == pytest.approx(lin128 / 1e3, rel=1e-12)
    # t1(1, 128): linear part at 128 tokens + the prompt's KV written (memory bound) + LM head weights
    t1 = lin128 / 1e3 + 128 * KV_BYTES / BW_A100 + LM_HEAD_BYTES / BW_A100
    assert a100.prefill_time(1, 128) == pytest.approx(t1, rel=1e-9)
    # t2(64, 1024): linear part at 64 tokens + 64 x 1025 tokens of KV read/written + LM head weights
    t2 = lin64 / 1e3 + 64 * 1025 * KV_BYTES / BW_A100 + LM_HEAD_BYTES / BW_A100
    assert a100.decode_time(64, 1024) == pytest.approx(t2, rel=1e-9)
    assert t2 == pytest.approx(
        0.0267, abs=2e-4
    )  # 9.70 ms of kernels + 16.87 ms of KV + 0.13 ms head
    # at 1..8 tokens the four raw sums (9.28, 8.96, 9.03, 9.06 ms) are not monotone: the isotonic
    # fit pools them into their mean, which is t_linear(1)
    pooled = [_hand_linear_ms(n)[0] for n in (1, 2, 4, 8)]
    assert pooled[0] == pytest.approx(9.283) and pooled[1] < pooled[0]
    assert a100.linear_time(1) == pytest.approx(np.mean(pooled) / 1e3, rel=1e-12)


def test_linear_part_is_monotone_and_extrapolated_proportionally(a100) -> None:
    n = np.arange(1, 8193)
    t = a100.linear_time(n)
    assert np.all(np.diff(t) >= 0)
    assert a100.linear_time(8192) == pytest.approx(2 * a100.linear_time(4096))
    d = [a100.decode_time(b, 512) for b in range(1, 65)]
    assert np.all(np.diff(d) > 0)
    # the raw sums are NOT monotone (kernel choice changes with the token count); the fit moves
    # none of them by more than 8%
    raw, fit = a100.table["raw_s"].to_numpy(), a100.table["linear_s"].to_numpy()
    assert np.any(np.diff(raw) < 0) and np.max(np.abs(fit / raw - 1)) < 0.08
    with pytest.raises(InputError, match=">= 1 token"):
        a100.linear_time(0)


def test_attention_grows_linearly_with_context(a100) -> None:
    for b in (1, 8, 32):
        c = np.array([0, 256, 1024, 2048, 4000])
        t = np.array([a100.decode_time(b, x) for x in c])
        np.testing.assert_allclose(np.diff(t) / np.diff(c), b * KV_BYTES / BW_A100, rtol=1e-9)


def test_isotonic_pools_adjacent_violators() -> None:
    np.testing.assert_allclose(isotonic(np.array([1.0, 3.0, 2.0, 4.0])), [1, 2.5, 2.5, 4])
    np.testing.assert_allclose(isotonic(np.array([3.0, 1.0]), np.array([1.0, 3.0])), [1.5, 1.5])
    np.testing.assert_allclose(isotonic(np.array([5.0, 4.0, 3.0])), [4, 4, 4])


def test_bad_csvs_fail_with_clear_errors(tmp_path: Path) -> None:
    df = pd.read_csv(A100_CSV)
    df.drop(columns=["time_stats.mlp_down_proj.median"]).to_csv(tmp_path / "a.csv", index=False)
    with pytest.raises(InputError, match=r"lacks columns \['time_stats.mlp_down_proj.median'\]"):
        read_kernel_csv(tmp_path / "a.csv", "llama2-7b-chat")
    df.assign(n_embd=5120).to_csv(tmp_path / "b.csv", index=False)  # a 13B-wide model
    with pytest.raises(InputError, match="another model: n_embd = \\[5120\\].*hidden = 4096"):
        read_kernel_csv(tmp_path / "b.csv", "llama2-7b-chat")
    with pytest.raises(InputError, match="another model: n_kv_head = \\[32\\].*kv_heads = 2"):
        read_kernel_csv(A100_CSV, "chatglm3-6b")
    with pytest.raises(InputError, match="tensor-parallel degree 3"):
        read_kernel_csv(A100_CSV, "llama2-7b-chat", tensor_parallel=3)
    with pytest.raises(InputError, match="does not exist"):
        read_kernel_csv(tmp_path / "none.csv", "llama2-7b-chat")
    bad = df.astype({"time_stats.add.median": object})
    bad.loc[0, "time_stats.add.median"] = "n/a"
    bad.to_csv(tmp_path / "c.csv", index=False)
    with pytest.raises(InputError, match="time_stats.add.median"):
        read_kernel_csv(tmp_path / "c.csv", "llama2-7b-chat")


def test_kernel_fit_json_table1_and_claim_rows(prof: dict, a100) -> None:
    from llmqueue.profiling.fits import kernel_fit_json
    from llmqueue.studies.profiling.claims import kernel_table1_claims
    from llmqueue.studies.profiling.tables import table1_frame

    meta = json.loads((ROOT / "data/profiling/vidur-a100/meta.json").read_text())
    f = kernel_fit_json(a100, meta, prof)
    assert f["verdict"] == "measured-kernels" and f["source"] == "vidur-a100"
    assert "measured by others" in f["parts"]["linear_layers"]
    assert f["parts"]["attention"].startswith("roofline") and f["parts"]["lm_head"].startswith(
        "roofline"
    )
    assert f["t2_batch1_s"] == pytest.approx(a100.decode_time(1, 0))
    assert (
        0.0090 < f["t2_batch1_s"] < 0.0095
    )  # ~9.2 ms: above the 6.6 ms roofline, below the paper's 23
    assert f["step"]["r2"] > 0.99 and f["step"]["n"] == len(f["step"]["points"]["time_s"])
    # the step law is fitted to the source's own t2, t1 on the step-law grid
    pts = pd.DataFrame(f["step"]["points"])
    dec = pts[pts["kind"] == "decode"].iloc[0]
    assert dec["time_s"] == pytest.approx(a100.decode_time(dec["batch"], dec["tokens_per_seq"]))
    table1 = pd.read_csv(ROOT / "data/reference/table1.csv")
    t1 = table1_frame(table1, [], prof, {}, {"vidur-a100": a100})
    assert t1.loc[0, "vidur-a100_kernels_s"] == pytest.approx(a100.request_time(128, 128))
    ref = pd.read_csv(
        ROOT / "src/llmqueue/studies/profiling/reference_claims.csv", dtype={"id": str}
    )
    ref = ref[ref["id"].str.startswith("1") & ~ref["id"].isin(["1i", "1j"])].reset_index(drop=True)
    cells = ~t1[["input_tokens", "output_tokens"]].duplicated().to_numpy()
    book = ClaimBook(
        pd.read_csv(
            ROOT / "src/llmqueue/studies/profiling/reference_claims.csv", dtype={"id": str}
        ),
        {"time": {"kind": "rel", "value": 0.05}, "count": {"kind": "exact"}},
    )
    rows = kernel_table1_claims(book, t1, "vidur-a100", f)
    assert [r.id for r in rows] == [f"{i}-vidur-a100" for i in ref["id"]]
    assert all(r.verdict == "not_reproduced" for r in rows)
    assert "paper / ours = 2.4" in rows[3].note and "13.5 ms per output token" in rows[3].note
    assert all(
        "eager Hugging Face" in r.note and "not the paper's A100" not in r.note for r in rows
    )
    # an A100 within tolerance would be reproduced; another GPU never
    close = t1["vidur-a100_kernels_s"].to_numpy().copy()
    close[cells] = ref["paper"].to_numpy() * 1.01
    t1_close = t1.assign(**{"vidur-a100_kernels_s": close})
    assert {r.verdict for r in kernel_table1_claims(book, t1_close, "vidur-a100", f)} == {
        "reproduced"
    }
    f_h100 = {
        **f,
        "gpu": {"name": "h100", "label": "H100-SXM-80GB"},
        "hardware": {"gpu": "NVIDIA H100"},
    }
    rows = kernel_table1_claims(book, t1_close, "vidur-a100", f_h100)
    assert {r.verdict for r in rows} == {"not_reproduced"} and "not the paper's A100" in rows[
        0
    ].note
    with pytest.raises(InputError, match="no column 'x_kernels_s'"):
        kernel_table1_claims(book, t1, "x", f)
