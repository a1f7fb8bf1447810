"""The generated block of ``llmqueue plan``'s answer (llmqueue.plan.docs.render_plan_summary).

On a small synthetic plan, read as the docs rule reads it (the CSV as text cells, the summary as
parsed JSON): the answer table shows the best configuration and the fewest replicas for the target
with their goodput, SLO values and the SLO that stops a higher rate; the top table ranks the
configurations that meet the SLOs by goodput per replica (ties: lower Pareto latency, then fewer
replicas), shows a goodput's bound and leaves out configurations of goodput 0; a summary without
an answer says so. Then the committed pages hold the blocks the workflow renders.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from llmqueue import docgen

ROOT = Path(__file__).resolve().parents[2]
COLUMNS = [
    "replicas", "router", "order", "max_batch", "max_batched_tokens", "kv_fraction", "kv_tokens",
    "block_size", "goodput_rate_per_s", "goodput_bound", "goodput_per_replica_per_s", "met",
    "saturation_rate_per_s", "pareto_latency_s", "ttft_p99_s", "tpot_p99_s", "runs",
    "why_not_higher", "pareto",
]  # fmt: skip
# replicas, router, order, max_batch, chunk, goodput, bound, per replica, met, pareto latency,
# ttft_p99, tpot_p99, why, pareto
ROWS = [
    (1, "jsq", "fcfs", 64, 2048, 3.0, "=", 3.0, True, 0.4, 0.49, 0.03, "ttft_p99 = 0.51 s > 0.5 s",
     False),
    (2, "jsq", "fcfs", 64, 2048, 9.0, "=", 4.5, True, 0.42, 0.48, 0.049, "tpot_p99 = 0.052 s > 0.05 s",
     True),
    (4, "jsq", "fcfs", 64, 2048, 18.0, "=", 4.5, True, 0.45, 0.47, 0.048, "tpot_p99 = 0.051 s > 0.05 s",
     False),
    (3, "least_work", "spjf", 128, "", 15.0, ">=", 5.0, True, 0.41, 0.3, 0.04,
     "the search's top, 0.95 x saturation", True),
    (5, "random", "fcfs", 64, 2048, 0.0, "<", 0.0, False, "nan", "inf", "inf",
     "no steady state (the queue grows without bound)", False),
]  # fmt: skip


def synthetic_plan() -> pd.DataFrame:
    """The table as the docs rule loads results/plan/plan.csv: every cell a string."""
    keys = ["replicas", "router", "order", "max_batch", "max_batched_tokens",
            "goodput_rate_per_s", "goodput_bound", "goodput_per_replica_per_s", "met",
            "pareto_latency_s", "ttft_p99_s", "tpot_p99_s", "why_not_higher", "pareto"]  # fmt: skip
    records = []
    for values in ROWS:
        rec = dict(zip(keys, values, strict=True))
        rec.update(kv_fraction=0.9, kv_tokens=121750, block_size=16, runs=7)
        rec["saturation_rate_per_s"] = 6.0 * float(rec["replicas"])
        records.append(rec)
    return pd.DataFrame(records, columns=COLUMNS).astype(str)


def row_dict(i: int) -> dict[str, object]:
    """Row i as summary.json holds it (parsed JSON values)."""
    out: dict[str, object] = {}
    for k, v in synthetic_plan().iloc[i].items():
        try:
            out[str(k)] = float(v)
        except ValueError:
            out[str(k)] = {"True": True, "False": False}.get(v, v)
    out["max_batched_tokens"] = None if out["max_batched_tokens"] == "" else 2048
    return out


def synthetic_summary(**changes: object) -> dict[str, object]:
    summary: dict[str, object] = {
        "configurations": 5,
        "slo": "ttft_p99=0.5,tpot_p99=0.05",
        "target_rate_per_s": 16.0,
        "best": row_dict(3),
        "fewest_replicas": row_dict(2),
    }
    summary.update(changes)
    return summary


def tables(text: str) -> list[list[dict[str, str]]]:
    return docgen.parse_tables(text)


def test_the_answer_names_the_best_and_the_fewest_replicas() -> None:
    text = docgen.render("plan_summary", summary=synthetic_summary(), plan=synthetic_plan(), top=0)
    assert text.startswith(
        "5 configurations; SLOs `ttft_p99=0.5,tpot_p99=0.05`; target 16 requests/s."
    )
    (answer,) = tables(text)
    assert [r["question"] for r in answer] == [
        "best: highest goodput per replica",
        "fewest replicas for 16 req/s",
    ]
    best, fewest = answer
    assert best["configuration"] == "3 x least_work, spjf, max_batch 128, no chunked prefill"
    assert best["goodput (req/s)"] == ">= 15.0" and best["per replica (req/s)"] == "5.00"
    assert best["p99 TTFT (s)"] == "0.300" and best["p99 TPOT (s)"] == "0.0400"
    assert best["what stops a higher rate"] == "the search's top, 0.95 x saturation"
    assert fewest["configuration"] == "4 x jsq, fcfs, max_batch 64, 2,048 batched tokens"
    assert fewest["goodput (req/s)"] == "18.0"
    assert fewest["what stops a higher rate"] == "tpot_p99 = 0.051 s > 0.05 s"


def test_the_top_table_ranks_by_goodput_per_replica() -> None:
    text = docgen.render(
        "plan_summary", summary=synthetic_summary(), plan=synthetic_plan(), top=3, headroom=0.7
    )
    answer, top = tables(text)
    assert len(answer) == 2
    assert "The 3 configurations of highest goodput per replica, of 4 that meet the SLOs" in text
    # 5.0 first; then the two rows at 4.5: the lower Pareto latency (2 replicas, 0.42 s) first
    assert [(r["rank"], r["replicas"], r["router"]) for r in top] == [
        ("1", "3", "least_work"),
        ("2", "2", "jsq"),
        ("3", "4", "jsq"),
    ]
    assert top[0]["goodput (req/s)"] == ">= 15.0" and top[0]["batched tokens"] == "no chunking"
    assert top[1]["p99 TTFT at 0.7 x goodput (s)"] == "0.420"
    assert [r["Pareto front"] for r in top] == ["yes", "yes", "no"]
    assert "KV tokens" not in top[0]  # one KV budget: no column for it


def test_goodput_zero_is_never_ranked_and_several_kv_budgets_are_shown() -> None:
    plan = synthetic_plan()
    plan.loc[4, "kv_tokens"] = "60000"
    text = docgen.render("plan_summary", summary=synthetic_summary(), plan=plan, top=10)
    _, top = tables(text)
    assert len(top) == 4 and "random" not in {r["router"] for r in top}
    assert {r["KV tokens"] for r in top} == {"121,750"}
    assert "KV 121,750 tokens" in tables(text)[0][0]["configuration"]


def test_a_plan_without_an_answer_says_so() -> None:
    summary = synthetic_summary(
        best=None,
        fewest_replicas=None,
        note="no configuration meets the SLOs at any rate tried",
    )
    text = docgen.render("plan_summary", summary=summary, plan=synthetic_plan().iloc[4:], top=5)
    (answer,) = tables(text)  # no ranking: no configuration meets the SLOs
    assert [r["configuration"] for r in answer] == ["none", "none"]
    assert "no configuration meets the SLOs at any rate tried." in text


def test_without_a_target_only_the_best_is_answered() -> None:
    summary = synthetic_summary()
    del summary["target_rate_per_s"], summary["fewest_replicas"]
    text = docgen.render("plan_summary", summary=summary, plan=synthetic_plan(), top=0)
    (answer,) = tables(text)
    assert [r["question"] for r in answer] == ["best: highest goodput per replica"]
    assert "target" not in text.split("\n")[0]


@pytest.mark.parametrize(
    ("page", "block"), [("docs/cli.md", "plan-answer"), ("docs/studies/plan.md", "plan-summary")]
)
def test_the_pages_hold_the_plan_blocks(page: str, block: str) -> None:
    found = {b.name: b for b in docgen.find_blocks((ROOT / page).read_text(), page)}
    assert block in found, f"{page} lacks the generated block {block!r}"
    assert found[block].sources == ("results/plan/summary.json", "results/plan/plan.csv")
    (answer, *_) = docgen.parse_tables(found[block].body)
    assert answer[0]["question"] == "best: highest goodput per replica"
