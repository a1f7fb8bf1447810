"""Every engine's validation matrix in one error table: config ``validation.matrix_compare
.matrices`` read per engine (engine_section, MatrixCompareSettings.engine), the folders checked
against the engine they are listed under, the medians per engine and machine
(llmqueue.studies.validation.matrix_summary.engine_medians) and the committed side-by-side table
(figures/table_engine_matrix.csv) recomputed from each engine's committed error table."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.studies.validation.checks import check_matrix_compare_section
from llmqueue.studies.validation.matrix_spec import MatrixCompareSettings, engine_section
from llmqueue.studies.validation.matrix_summary import engine_medians, markdown_engines

ROOT = Path(__file__).resolve().parents[3]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SECTION = CONFIG["validation"]["matrix_compare"]


def _table(rng: np.random.Generator) -> pd.DataFrame:
    """Two engines on two machines, three groups, four variants, errors drawn at random."""
    rows = []
    for engine, machine, runs in (("vllm", "m1", 5), ("transformers", "m2", 4)):
        for i in range(runs):
            for variant in ("prediction", "probe_scaled", "run_speed", "in_situ_law"):
                rows.append({
                    "engine": engine, "machine": machine, "group": f"g{i % 3}",
                    "run": f"r{i}", "variant": variant,
                    **{f"{m}_rel_error": float(rng.normal(0, 0.1))
                       for m in ("jct_mean", "jct_p90", "ttft_mean")},
                })  # fmt: skip
    return pd.DataFrame(rows)


def test_engine_medians_are_the_medians_of_each_engines_runs() -> None:
    table = _table(np.random.default_rng(5))
    targets = pd.DataFrame({
        "engine": ["vllm", "vllm", "vllm", "transformers", "transformers"],
        "verdict": ["met", "missed", "n/a", "met", "met"],
    })  # fmt: skip
    med = engine_medians(table, targets).set_index("engine")
    assert list(med.index) == ["vllm", "transformers"]
    for engine in ("vllm", "transformers"):
        t = table[table["engine"] == engine]
        pred = t[t["variant"] == "prediction"]
        e = np.abs(pred["jct_mean_rel_error"].to_numpy())
        r = med.loc[engine]
        assert r["runs"] == len(pred) and r["groups"] == pred["group"].nunique()
        assert r["jct_mean_median_abs_rel_error"] == pytest.approx(np.median(e))
        assert r["jct_mean_max_abs_rel_error"] == pytest.approx(e.max())
        assert r["ttft_mean_median_abs_rel_error"] == pytest.approx(
            np.median(np.abs(pred["ttft_mean_rel_error"]))
        )
        probe = t.loc[t["variant"] == "probe_scaled", "jct_mean_rel_error"].abs()
        assert r["probe_scaled_jct_mean_median_abs_rel_error"] == pytest.approx(probe.median())
    assert (med.loc["vllm", "targets_met"], med.loc["vllm", "targets_judged"]) == (1, 2)
    assert (med.loc["transformers", "targets_met"], med.loc["transformers", "targets_judged"]) == (
        2,
        2,
    )
    md = markdown_engines(engine_medians(table, targets))
    assert md.count("\n") == 2 + 2
    assert "| vLLM | m1 | 3 / 5 |" in md and "transformers' continuous batching | m2 | 3 / 4" in md
    assert "1 of 2" in md and "2 of 2" in md


def test_an_engine_without_a_variant_reads_nan() -> None:
    table = _table(np.random.default_rng(6))
    table = table[table["variant"] != "probe_scaled"]
    med = engine_medians(table)
    assert med["probe_scaled_jct_mean_median_abs_rel_error"].isna().all()
    assert "targets_met" not in med
    assert "n/a" in markdown_engines(med)


def test_the_section_is_read_per_engine() -> None:
    flat = engine_section(SECTION, "vllm")
    assert flat["dir"] == SECTION["matrices"]["vllm"]["dir"] and flat["engine"] == "vllm"
    assert "matrices" not in flat and "token_limit_figure" not in flat
    cfg = MatrixCompareSettings.from_config(flat, 0)
    assert cfg.engine == "vllm" and cfg.groups == tuple(SECTION["matrices"]["vllm"]["groups"])
    with pytest.raises(InputError, match=r"matrix_compare\.matrices has no 'sglang'"):
        engine_section(SECTION, "sglang")
    with pytest.raises(InputError, match=r"matrix_compare\.matrices: engine 'sglang' is not one"):
        MatrixCompareSettings.from_config({**flat, "engine": "sglang"}, 0)


def _section(**change: Any) -> dict[str, Any]:
    s = copy.deepcopy(SECTION)
    s.update(change)
    return s


def test_the_committed_matrices_pass_their_check() -> None:
    check_matrix_compare_section(SECTION, ROOT)


def test_a_folder_listed_under_the_wrong_engine_is_named() -> None:
    vllm = SECTION["matrices"]["vllm"]
    bad = _section(matrices={**SECTION["matrices"], "transformers": dict(vllm)})
    with pytest.raises(InputError, match=r"matrices\.transformers: .* measured on vllm"):
        check_matrix_compare_section(bad, ROOT)


def test_a_token_limit_figure_outside_vllms_groups_is_named() -> None:
    with pytest.raises(InputError, match=r"token_limit_figure must be one of vLLM's groups"):
        check_matrix_compare_section(_section(token_limit_figure="nogroup"), ROOT)


def test_a_missing_group_folder_is_named() -> None:
    vllm = {**SECTION["matrices"]["vllm"], "groups": ["nogroup"]}
    with pytest.raises(InputError, match=r"nogroup.* does not exist"):
        check_matrix_compare_section(_section(matrices={"vllm": vllm}), ROOT)


def test_the_committed_side_by_side_table_recomputes() -> None:
    """figures/table_engine_matrix.csv is every listed engine's committed error table, and its
    Markdown medians are engine_medians of it."""
    combined = pd.read_csv(ROOT / "figures" / "table_engine_matrix.csv")
    engines = list(SECTION["matrices"])
    assert list(dict.fromkeys(combined["engine"])) == engines
    for engine in engines:
        own = pd.read_csv(ROOT / "figures" / f"table_{engine}_matrix.csv")
        part = combined[combined["engine"] == engine].reset_index(drop=True)
        assert len(part) == len(own)
        np.testing.assert_allclose(
            part["jct_mean_rel_error"].to_numpy(dtype=float),
            own["jct_mean_rel_error"].to_numpy(dtype=float),
        )
    md = (ROOT / "figures" / "table_engine_matrix.md").read_text()
    for _, r in engine_medians(combined).iterrows():
        assert f"{100 * r['jct_mean_median_abs_rel_error']:.1f}%" in md


def test_the_prediction_law_is_the_form_cross_validation_chooses() -> None:
    """Each engine's prediction law (config validation.matrix_compare.law, or its own
    matrices.<engine>.law) is the form the leave-one-batch-out cross-validation on that engine's
    committed matrix's calibration batches chooses (figures/table_<engine>_law_forms.md, written
    by the pipeline), or, where that form is one the replay cannot predict with, the best scored
    of those it can (matrix_spec.LAWS)."""
    import re

    from llmqueue.studies.validation.matrix_spec import LAWS

    for engine, matrix in SECTION["matrices"].items():
        text = (ROOT / "figures" / f"table_{engine}_law_forms.md").read_text()
        chosen = re.search(r"Chosen by the one-standard-error rule[^*]*\*\*(\w+)\*\*", text)
        assert chosen is not None, engine
        scores = dict(re.findall(r"(\w+) (\d+(?:\.\d+)?)% \+- ", text.split("\n", 1)[0]))
        # a chosen form the replay cannot predict with (split_attention) leaves the best of those
        # it can
        want = (
            chosen.group(1)
            if chosen.group(1) in LAWS
            else min((f for f in scores if f in LAWS), key=lambda f: float(scores[f]))
        )
        assert matrix.get("law", SECTION["law"]) == want, engine
