"""The prefix study (llmqueue.studies.prefix): its settings, runs, claims rows and blocks.

- the trace's own bound (ideal_hit_share) by hand on a small table, and equal to the engine's
  share when requests never overlap in a pool that never evicts (session workloads, hypothesis);
- the never-evicting budget holds every block a run allocates (no request is ever refused);
- the runs on a session workload: every table, cache-off rows without a share, the affinity
  router's one-replica rows equal to the cache-blind ones;
- bad settings refused naming their key (the spec and the config checks);
- the claims rows: a share within tolerance, a miss that names the trace's own bound, a row
  without a trace not expressed; the page's renderers on the figures' example table.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue.blocks import PromptBlocks
from llmqueue.claims import ClaimBook
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.sim.engine import run
from llmqueue.sim.sessions import SessionSpec, session_workload
from llmqueue.sim.workload import ReplayWorkload
from llmqueue.studies.prefix import checks
from llmqueue.studies.prefix.claims import claims_rows
from llmqueue.studies.prefix.docs import render_prefix_budgets, render_prefix_routers
from llmqueue.studies.prefix.spec import PrefixSpec, never_evicting_tokens
from llmqueue.studies.prefix.tables import example_runs, ideal_hit_share, prefix_runs
from llmqueue.tokens import parse_law

ROOT = Path(__file__).resolve().parents[3]
LAW = StepLaw(0.01, 2e-4, 1e-6, name="test_law")
SECTION = {
    "traces": {"sessions": "unused.jsonl"},
    "step_profiles": ["test_law"],
    "policy": "continuous:max_batch=16,admission=on_demand,block_size=8,max_batched_tokens=512",
    "budgets": [1, 8],
    "loads": [0.3, 0.8],
    "rate_budget": 8,
    "replicas": [1, 2],
    "routers": ["round_robin", "prefix_affinity"],
    "warmup": 50,
    "batches": 5,
}


def _sessions(*, rate: float, seed: int, sessions: int = 200, block: int = 8) -> ReplayWorkload:
    spec = SessionSpec(
        rate_per_s=rate, sessions=sessions, system_prompts=4, system_tokens=64, zipf_alpha=1.0,
        turns=parse_law("uniform:low=1,high=8"), message=parse_law("uniform:low=1,high=40"),
        answer=parse_law("uniform:low=1,high=30"), think_s=2.0 / rate, block_tokens=block,
    )  # fmt: skip
    return session_workload(spec, seed=seed)


def test_ideal_share_by_hand() -> None:
    """Three prompts of 16, 24 and 17 tokens over 8-token blocks: the second repeats the first's
    two ids and adds one (2 blocks hit); the third lists the first two again, capped at
    (17 - 1) // 8 = 2; the first hits nothing: (0 + 16 + 16) / 57."""
    blocks = PromptBlocks(np.array([0, 2, 5, 8]), np.array([4, 5, 4, 5, 6, 4, 5, 6]), 8)
    w = ReplayWorkload(np.array([0.0, 1.0, 2.0]), np.array([16.0, 24.0, 17.0]), np.array([1.0, 1.0, 1.0]), 1.0, blocks=blocks)  # fmt: skip
    assert ideal_hit_share(w, 8) == pytest.approx(32 / 57)
    assert ideal_hit_share(w, 8, first=2) == pytest.approx(16 / 17)
    assert ideal_hit_share(w, 4) == pytest.approx((0 + 16 + 16) / 57)  # ids map onto 4-token blocks


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10**6), block=st.sampled_from([4, 8]))
def test_engine_share_equals_the_bound_when_requests_never_overlap(seed: int, block: int) -> None:
    """One request at a time (arrivals far apart) in a pool that never evicts: every block an
    earlier request listed is computed and cached when the next arrives, so the engine serves
    exactly the trace's own bound."""
    w = _sessions(rate=1e-4, seed=seed, sessions=40, block=block)
    spec = PrefixSpec.from_config(
        {**SECTION, "policy": SECTION["policy"].replace("block_size=8", f"block_size={block}")}
    )
    kv = never_evicting_tokens(w, block)
    res = run(w, spec.with_budget(kv, caching=True), LAW, requests=int(w.total), warmup=0, batches=5, seed=seed)  # fmt: skip
    assert res.rejected == 0 and res.preemptions == 0
    assert res.prefix_hit_share == pytest.approx(ideal_hit_share(w, block), abs=1e-12)


def test_the_runs_on_a_session_workload() -> None:
    w = _sessions(rate=2.0, seed=3, sessions=300)
    spec = PrefixSpec.from_config(SECTION)
    df = prefix_runs(spec, w, LAW, 4096, trace="sessions", seed=1)
    assert set(df["table"]) == {"capacity", "budget", "rate", "routers", "claim"}
    cap = df[df["table"] == "capacity"]
    assert sorted(set(cap["budget"])) == [1.0, 8.0, math.inf]
    assert (cap["max_rate_per_s"] > 0).all()
    off = df[(df["table"].isin(["budget", "rate"])) & ~df["prefix_caching"].astype(bool)]
    on = df[(df["table"].isin(["budget", "rate"])) & df["prefix_caching"].astype(bool)]
    assert off["prefix_hit_share"].isna().all()
    assert ((on["prefix_hit_share"] > 0) & (on["prefix_hit_share"] < 1)).all()
    never = df[(df["table"] == "capacity") & (df["budget"] == math.inf)]
    assert int(never["kv_tokens"].iloc[0]) == never_evicting_tokens(w, 8)
    rt = df[df["table"] == "routers"]
    one = rt[rt["replicas"] == 1]
    assert one["jct_mean_s"].nunique() == 1  # one replica: every router sends it everything
    two = rt[rt["replicas"] == 2].set_index("router")
    assert (
        two.loc["prefix_affinity", "prefix_hit_share"] > two.loc["round_robin", "prefix_hit_share"]
    )
    claim = df[df["table"] == "claim"].iloc[0]
    assert claim["requests"] == w.total and 0 < claim["ideal_hit_share"] < 1
    assert claim["prefix_hit_share"] <= claim["ideal_hit_share"] + 1e-12


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"policy": "dynamic:bmax=8"}, "prefix.policy"),
        ({"policy": "continuous:max_batch=8,admission=reserve"}, "admission=on_demand"),
        ({"policy": "continuous:max_batch=8,admission=on_demand,order=srpt"}, "non-preemptive"),
        ({"policy": "continuous:max_batch=8,admission=on_demand,kv_tokens=4096"}, "kv_tokens"),
        (
            {"policy": "continuous:max_batch=8,admission=on_demand,prefix_caching=true"},
            "prefix_caching",
        ),
        ({"policy": "continuous:bogus=1"}, "prefix.policy"),
        ({"routers": ["round_robin", "nearest"]}, "prefix.routers"),
        ({"routers": ["central"]}, "prefix.routers"),
    ],
)
def test_bad_settings_name_their_key(change: dict, word: str) -> None:
    with pytest.raises(InputError, match=word):
        PrefixSpec.from_config({**SECTION, **change})


def _config(**prefix: object) -> dict:
    import yaml

    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    cfg["prefix"] = {**cfg["prefix"], **prefix}
    return cfg


@pytest.mark.parametrize(
    ("change", "word"),
    [
        ({"step_profiles": ["nope"]}, "prefix.step_profiles: 'nope'"),
        ({"traces": {"conversation": "data/traces/none.jsonl", "synthetic": "x"}}, "prefix.traces.conversation"),
        ({"traces": {"conversation": "data/traces/mooncake-fast25/conversation_trace.jsonl"}}, "claim 13c reads trace 'synthetic'"),
    ],
)  # fmt: skip
def test_the_config_checks_name_their_key(change: dict, word: str) -> None:
    checks.check(_config(), ROOT)  # the shipped section passes
    with pytest.raises(InputError, match=word):
        checks.check(_config(**change), ROOT)


def _reference() -> pd.DataFrame:
    path = ROOT / "src/llmqueue/studies/prefix/reference_claims.csv"
    return pd.read_csv(path, dtype={"id": str}, keep_default_na=False)


def _runs(conversation: float, synthetic: float) -> pd.DataFrame:
    rows = []
    for trace, share in (("conversation", conversation), ("synthetic", synthetic)):
        base = dict(trace=trace, profile="p", prefix_caching=True, load=0.5, rate_per_s=0.3)
        rows.append(base | dict(table="claim", budget=math.inf, kv_tokens=10**8, requests=1000,
                                prefix_hit_share=share, ideal_hit_share=share))  # fmt: skip
        rows.append(base | dict(table="budget", budget=4.0, kv_tokens=10**6, requests=800,
                                prefix_hit_share=share / 3, ideal_hit_share=math.nan))  # fmt: skip
    return pd.DataFrame(rows)


def test_the_claims_rows() -> None:
    tol = {"fraction": {"kind": "rel", "value": 0.05}}
    ref = _reference()
    rows = {r.id: r for r in claims_rows(ClaimBook(ref, tol), ref, _runs(0.30, 0.65))}
    assert rows["13c"].verdict == "reproduced" and rows["13c"].ours == pytest.approx(65.0)
    assert rows["13a"].verdict == "not_reproduced"
    assert "the released trace's own bound (30.0%)" in rows["13a"].note
    assert rows["13b"].ours == "not expressed" and "tool and agent" in rows["13b"].note
    assert "at 4x" in rows["13c"].note


def test_the_page_blocks_render_the_example_table() -> None:
    runs = example_runs()
    budgets = render_prefix_budgets(runs)
    assert budgets.count("\n") >= 2 * 4  # a header, a rule and a row per trace and budget
    assert "never evicts" in budgets
    routers = render_prefix_routers(runs)
    assert "prefix_affinity" in routers and "1 replica" in routers
