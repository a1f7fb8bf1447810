"""The matrix driver's assembly of a group folder (:func:`llmqueue.engines.matrix_run.assemble_group`),
checked without vLLM by a round trip: the committed ``dynamic`` group folder is taken apart into
what the engine sessions handed the assembler (one raw step log per engine session on one clock,
the client's records, the request tables, the phases' clock marks, the engine's scheduler facts)
and assembled again; the step logs, request files, fits, settings and per-run summaries must come
back as committed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.client import RECORD_COLUMNS
from llmqueue.engines.engine import EngineSettings
from llmqueue.engines.groups import read_matrix
from llmqueue.engines.matrix_run import assemble_group
from llmqueue.engines.requests import MATRIX_COLUMNS
from llmqueue.engines.steplog import STEP_LOG_COLUMNS, core_facts_path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
# the legacy matrix's dynamic group, measured before the protocol: one calibration pass on the
# first session's clock, which this round trip rebuilds (the protocol's rounds and probes are
# assembled through the same function; tests/engines/test_transformers_matrix.py)
FOLDER = ROOT / "data" / "validation" / "matrix-amd-epyc-2c" / "dynamic"
GAP_S = 10.0  # seconds of clock left between two phases of a rebuilt session
DERIVED_SETTINGS = ("engine_core", "usable_kv_blocks", "usable_kv_tokens", "configured",
                    "scheduler", "sessions")  # fmt: skip
DERIVED_CONTENTION = ("flags", "law_ratio_median", "law_ratio_trend")


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(FOLDER / name, keep_default_na=False, na_values=[""])


def _sessions(tmp: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The committed group folder as its engine sessions handed it to the assembler."""
    meta = json.loads((FOLDER / "meta.json").read_text())
    settings = json.loads((FOLDER / "settings.json").read_text())
    read = {k: v for k, v in settings.items() if k not in DERIVED_SETTINGS}
    phases: dict[int, list[tuple[int, str, pd.DataFrame]]] = {}
    cal = _csv("calibration_steps.csv")
    phases.setdefault(1, []).append((int(cal["step"].min()), "calibration", cal))
    for name, run in meta["runs"].items():
        st = _csv(f"steps_{name}.csv")
        phases.setdefault(int(run.get("session") or 1), []).append(
            (int(st["step"].min()), name, st)
        )
    sessions = []
    for session, items in sorted(phases.items()):
        clock, logs, ph = 100.0, [], {}
        for _, name, st in sorted(items, key=lambda x: x[0]):
            t0 = clock
            raw = st[STEP_LOG_COLUMNS].copy()
            for col in ("t_sched_s", "t_planned_s", "t_done_s"):
                raw[col] = raw[col] + t0
            logs.append(raw)
            mark = {"t_start": t0, "t_end": float(raw["t_done_s"].max())}
            if name != "calibration":
                run = meta["runs"][name]
                req = _csv(f"requests_{name}.csv")
                cont = {k: v for k, v in run["contention"].items() if k not in DERIVED_CONTENTION}
                mark |= {
                    "t0": t0, "table": req[list(MATRIX_COLUMNS)], "records": req[RECORD_COLUMNS],
                    "contention": cont, "load_before": run.get("load_before"),
                    "load_after": run.get("load_after"),
                }  # fmt: skip
                if run["kind"] == "capacity":
                    mark["token_limit"] = run["token_limit"]
                else:
                    mark |= {k: run[k] for k in ("run", "session", "load", "rate_per_s")}
            ph[name] = mark
            clock = mark["t_end"] + GAP_S
        log = tmp / f"steps-{session}.csv"
        pd.concat(logs, ignore_index=True).to_csv(log, index=False)
        Path(core_facts_path(log)).write_text(json.dumps(settings["engine_core"]))
        sessions.append(
            {"session": session, "startup_s": 0.0, "phases": ph, "settings": read, "step_log": log}
        )
    return sessions, meta


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("assemble")
    vllm = CONFIG["validation"]["vllm"]
    spec = read_matrix(vllm, CONFIG["data"], CONFIG["ssjf"]["train_fraction"])
    g = spec.group("dynamic")
    sessions, meta = _sessions(tmp)
    capacity = {k: v for k, v in meta["capacity"].items()}
    files = assemble_group(
        g, spec, EngineSettings.from_config(g.engine), sessions, capacity,
        {"hardware_id": meta["hardware_id"], "group": "dynamic"}, {"seed": CONFIG["seed"]},
        {**vllm, "calibration": {**vllm["calibration"], "max_gap_s": meta["calibration"]["max_gap_s"]}},
    )  # fmt: skip
    return {"files": files, "meta": meta}


def _same_frame(got: pd.DataFrame, want: pd.DataFrame, where: str) -> None:
    assert list(got.columns) == list(want.columns), where
    assert len(got) == len(want), where
    for col in want.columns:
        a, b = got[col].to_numpy(), want[col].to_numpy()
        if pd.api.types.is_numeric_dtype(want[col]) and not pd.api.types.is_bool_dtype(want[col]):
            np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=0, atol=1e-6,
                                       err_msg=f"{where}: {col}")  # fmt: skip
        else:
            assert [("" if pd.isna(x) else str(x)) for x in a] == [
                ("" if pd.isna(x) else str(x)) for x in b
            ], f"{where}: {col}"


def test_step_logs_and_request_files_come_back(assembled: dict[str, Any]) -> None:
    files = assembled["files"]
    for name in assembled["meta"]["runs"]:
        for kind in ("steps", "requests"):
            f = f"{kind}_{name}.csv"
            got = files[f].reset_index(drop=True)
            want = _csv(f)
            _same_frame(pd.read_csv(_roundtrip(got), keep_default_na=False, na_values=[""]),
                        want, f)  # fmt: skip
    cal = files["calibration_steps.csv"]
    _same_frame(pd.read_csv(_roundtrip(cal), keep_default_na=False, na_values=[""]),
                _csv("calibration_steps.csv"), "calibration_steps.csv")  # fmt: skip


def _roundtrip(df: pd.DataFrame) -> Any:
    import io

    buf = io.StringIO()
    df.to_csv(buf, index=False)
    buf.seek(0)
    return buf


def test_fits_settings_and_run_summaries_come_back(assembled: dict[str, Any]) -> None:
    files, meta = assembled["files"], assembled["meta"]
    fits = json.loads((FOLDER / "calibration_fit.json").read_text())
    for key, want in fits.items():
        got = files["calibration_fit.json"][key]
        for coef in ("c0_s", "c_tok_s", "c_ctx_s"):
            assert got[coef] == pytest.approx(want[coef], rel=1e-6, abs=1e-12), (key, coef)
    settings = json.loads((FOLDER / "settings.json").read_text())
    got_settings = json.loads(json.dumps(files["settings.json"], default=str))
    for key in ("max_num_seqs", "usable_kv_tokens", "scheduler", "engine_core"):
        assert got_settings[key] == settings[key], key
    runs = files["meta.json"]["runs"]
    assert set(runs) == set(meta["runs"])
    for name, want in meta["runs"].items():
        got = runs[name]
        for key in ("kind", "iterations", "max_running", "preemptions", "preempted_share",
                    "achieved_load", "busy_fraction", "measured_rate_per_s",
                    "calibration_law_total_error"):  # fmt: skip
            if key not in want:
                continue
            if isinstance(want[key], str):
                assert got[key] == want[key], (name, key)
            else:
                # a relative error can sit near 0, where the CSVs' rounded clock times set an
                # absolute, not a relative, precision
                assert got[key] == pytest.approx(want[key], rel=1e-6, abs=1e-8), (name, key)
        if want["kind"] == "judged":
            assert got["contention"]["flags"] == want["contention"]["flags"], name
            assert got["jct_s"]["mean"] == pytest.approx(want["jct_s"]["mean"], rel=1e-9)
    gate = files["meta.json"]["calibration"]["batch_queue_gate"]
    assert gate == meta["calibration"]["batch_queue_gate"]
