"""The second engine's protocol matrix (``llmqueue validate matrix --engine transformers``): its
groups read from ``validation.transformers.matrix`` over the transformers engine's settings, with
the vLLM matrix's models, traces, calibration grid and protocol; what that engine cannot serve
refused by key; and a group folder assembled from a transformers session (the committed single
run's calibration, capacity burst and lightest load taken apart into what one engine session hands
the assembler), without transformers installed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from llmqueue.engines.client import RECORD_COLUMNS
from llmqueue.engines.engines import ENGINE_NOTES, open_engine
from llmqueue.engines.groups import group_from_summary, read_matrix
from llmqueue.engines.hf_engine import FIFO_SAFETY_MARGIN, HFEngineSettings
from llmqueue.engines.matrix_run import assemble_group, matrix_spec
from llmqueue.engines.protocol import group_probe
from llmqueue.engines.requests import MATRIX_COLUMNS
from llmqueue.engines.steplog import STEP_LOG_COLUMNS, core_facts_path
from llmqueue.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
SINGLE = ROOT / "data" / "validation" / "transformers-cpu-intel-xeon-2c"


def _spec(cfg: dict[str, Any] | None = None) -> Any:
    cfg = CONFIG if cfg is None else cfg
    v = cfg["validation"]
    return read_matrix(
        v["vllm"], cfg["data"], cfg["ssjf"]["train_fraction"], engine="transformers",
        transformers=v["transformers"],
    )  # fmt: skip


def _with_group(name: str, group: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(CONFIG)
    cfg["validation"]["transformers"]["matrix"]["groups"] = {name: group}
    return cfg


RUN = {"name": "load50", "load": 0.5, "requests": 40, "warmup": 4}


def test_the_groups_are_the_transformers_engines_over_the_vllm_matrixs_protocol() -> None:
    spec = _spec()
    vllm = read_matrix(CONFIG["validation"]["vllm"], CONFIG["data"])
    assert spec.engine == "transformers" and spec.folder == "matrix-transformers"
    assert vllm.folder == "matrix"
    assert spec.protocol == vllm.protocol and spec.contention == vllm.contention
    hf = CONFIG["validation"]["transformers"]
    assert [g.name for g in spec.groups] == list(hf["matrix"]["groups"])
    for g in spec.groups:
        assert g.engine_kind == "transformers" and g.scheduler == hf["engine"]["scheduler_type"]
        s = g.settings()
        assert isinstance(s, HFEngineSettings)
        over = hf["matrix"]["groups"][g.name].get("engine", {})
        assert {k: getattr(s, k) for k in over} == over
        assert g.model == vllm.groups[0].model  # the default model, declared once
    # the request cap binds where the group says so, and the no-batching group serves one
    assert spec.group("cap").settings().max_num_seqs == 4
    assert spec.group("nobatch").settings().max_num_seqs == 1
    assert group_probe(spec.group("nobatch"), spec.protocol).batch == 1


def test_matrix_spec_reads_either_engine() -> None:
    cfg = CONFIG
    assert matrix_spec(cfg, cfg["validation"]["vllm"]).engine == "vllm"
    assert (
        matrix_spec(cfg, cfg["validation"]["vllm"], "transformers").folder == "matrix-transformers"
    )
    with pytest.raises(InputError, match="--engine must be one of vllm, transformers"):
        matrix_spec(cfg, cfg["validation"]["vllm"], "sglang")


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ({"policy": "dynamic", "runs": [RUN]},
         r"validation\.transformers\.matrix\.groups\.g\.policy must be one of continuous, none"),
        ({"policy": "continuous", "runs": [{**RUN, "priority": "sjf"}]},
         r"groups\.g\.runs\.load50: priority sjf: the transformers engine serves FCFS only"),
        ({"policy": "continuous", "engine": {"max_num_seqs": 4}, "runs": [RUN]},
         r"validation\.transformers\.matrix\.groups\.g\.engine: unknown settings \['max_num_seqs'\]"),
        ({"policy": "continuous", "engine": {"num_blocks": 0}, "runs": [RUN]},
         r"groups\.g\.engine: validation\.transformers\.engine\.num_blocks must be an integer >= 1"),
        ({"policy": "none", "runs": [RUN]},
         r"groups\.g: policy none serves one request at a time: engine max_requests_per_batch 1"),
        ({"policy": "continuous", "engine": {"max_requests_per_batch": 1}, "runs": [RUN]},
         r"groups\.g: max_requests_per_batch 1 is policy none"),
        ({"policy": "continuous", "runs": [{**RUN, "load": 1.2}]},
         r"validation\.transformers\.matrix\.groups\.g\.runs\[0\]\.load must be a fraction"),
        # the probe (4 x (16 + 96) tokens: 16 pages) must fit 85% of 16 pages
        ({"policy": "continuous", "engine": {"num_blocks": 16, "max_model_len": 512},
          "calibration": [[1, 16, 48], [2, 16, 48]], "runs": [RUN]},
         r"protocol\.probe: batch x ceil\(\(prompt_tokens \+ output_tokens\) / page_size\) = 16 KV "
         r"pages exceed 13"),
    ],
)  # fmt: skip
def test_what_the_transformers_engine_cannot_serve_is_refused_by_key(
    group: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError, match=message):
        _spec(_with_group("g", group))


def test_a_missing_transformers_matrix_is_named() -> None:
    v = CONFIG["validation"]
    hf = {"engine": v["transformers"]["engine"]}
    with pytest.raises(InputError, match=r"^validation\.transformers\.matrix: missing"):
        read_matrix(v["vllm"], CONFIG["data"], engine="transformers", transformers=hf)
    bad = {
        **v["transformers"],
        "matrix": {**v["transformers"]["matrix"], "calibration": [[1, 2, 3]]},
    }
    with pytest.raises(
        InputError, match=r"validation\.transformers\.matrix: .*unknown \[.calibration.\]"
    ):
        read_matrix(v["vllm"], CONFIG["data"], engine="transformers", transformers=bad)


def test_check_batch_keeps_the_fifo_schedulers_safety_share_free() -> None:
    s = HFEngineSettings.from_config(
        {**CONFIG["validation"]["transformers"]["engine"], "num_blocks": 20, "max_model_len": 640}
    )
    room = int(20 * (1 - FIFO_SAFETY_MARGIN))
    s.check_batch(room, 16, 16, "w")  # one page each: fits exactly
    with pytest.raises(InputError, match=r"^w: batch x ceil.* = 18 KV pages exceed 17"):
        s.check_batch(room + 1, 16, 16, "w")
    with pytest.raises(InputError, match=r"^w: prompt_tokens \+ output_tokens \(641\) exceed"):
        s.check_batch(1, 600, 41, "w")


def test_the_group_summary_reads_back_with_its_engine() -> None:
    g = _spec().group("kvpressure")
    back = group_from_summary(json.loads(json.dumps(g.summary())), "group.json")
    assert back == g
    old = {k: v for k, v in read_matrix(CONFIG["validation"]["vllm"], CONFIG["data"])
           .group("fcfs").summary().items() if k != "engine_kind"}  # fmt: skip
    assert group_from_summary(old, "group.json").engine_kind == "vllm"  # folders before it
    with pytest.raises(InputError, match=r"group\.json: engine_kind must be one of"):
        group_from_summary({**g.summary(), "engine_kind": "tgi"}, "group.json")


def test_open_engine_refuses_an_unknown_engine_before_importing_one(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="--engine must be one of vllm, transformers"):
        open_engine("tgi", tmp_path, {}, "auto", None, tmp_path / "steps.csv")


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(SINGLE / name, keep_default_na=False, na_values=[""])


def _table(req: pd.DataFrame) -> pd.DataFrame:
    """The matrix's request table of a single run's request file (no limit, FCFS, no prediction)."""
    tab = req.copy()
    tab["requested_tokens"] = tab["output_tokens"]
    tab["token_limit"] = -1
    tab["priority"] = 0
    tab["predicted_tokens"] = np.nan
    return tab[list(MATRIX_COLUMNS)]


@pytest.fixture(scope="module")
def assembled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The single run's calibration, capacity and load30 as one transformers session of group
    ``fcfs`` (calibration round 1, the burst, the judged run), assembled."""
    tmp = tmp_path_factory.mktemp("hf-assemble")
    meta = json.loads((SINGLE / "meta.json").read_text())
    settings = json.loads((SINGLE / "settings.json").read_text())
    spec = _spec()
    g = spec.group("fcfs")
    clock, logs, phases = 100.0, [], {}
    for name, steps in (("calibration1", "calibration_steps.csv"),
                        ("capacity", "steps_capacity.csv"), ("load30", "steps_load30.csv")):  # fmt: skip
        st = _csv(steps)
        raw = st[STEP_LOG_COLUMNS].copy()
        for col in ("t_sched_s", "t_planned_s", "t_done_s"):
            raw[col] = raw[col] + clock
        logs.append(raw)
        mark: dict[str, Any] = {"t_start": clock, "t_end": float(raw["t_done_s"].max()) + 1e-6}
        if name == "calibration1":
            mark |= {"kind": "calibration", "round": 1, "for_run": "", "position": "", "block": 0,
                     "session": 1}  # fmt: skip
        else:
            req = _csv(f"requests_{name}.csv")
            mark |= {
                "t0": clock, "table": _table(req), "records": req[RECORD_COLUMNS],
                "load_before": [0.1, 0.1, 0.1], "load_after": [0.1, 0.1, 0.1],
                "contention": {"steal_share": 0.0, "other_cpu_share": 0.01, "own_cpu_share": 0.5,
                               "wall_s": mark["t_end"] - clock, "model_preemptions_per_s": None},
            }  # fmt: skip
            if name == "capacity":
                mark |= {"kind": "capacity", "token_limit": None}
            else:
                run = meta["runs"][name]
                mark |= {"kind": "judged", "run": name, "session": 1, "load": run["load"],
                         "rate_per_s": run["rate_per_s"], "block": 0}  # fmt: skip
        phases[name] = mark
        clock = mark["t_end"] + 10.0
    log = tmp / "steps-1.csv"
    pd.concat(logs, ignore_index=True).to_csv(log, index=False)
    Path(core_facts_path(log)).write_text(json.dumps(settings["engine_core"]))
    read = {k: v for k, v in settings.items()
            if k not in ("engine_core", "usable_kv_blocks", "usable_kv_tokens", "configured")}  # fmt: skip
    session = {"session": 1, "startup_s": 0.0, "phases": phases, "settings": read, "step_log": log}
    capacity = {"capacity": {k: meta["capacity"][k]
                             for k in ("capacity_per_s", "quantiles", "requests", "window_s")}}  # fmt: skip
    vllm = CONFIG["validation"]["vllm"]
    files = assemble_group(
        g, spec, g.settings(), [session], capacity, {"hardware_id": "test", "group": "fcfs"},
        {"seed": CONFIG["seed"]}, vllm,
    )  # fmt: skip
    return {"files": files, "meta": meta, "settings": settings}


def test_a_transformers_group_folder_is_assembled(assembled: dict[str, Any]) -> None:
    files, meta = assembled["files"], assembled["meta"]
    m = files["meta.json"]
    assert m["engine"] == ENGINE_NOTES["transformers"]
    assert files["group.json"]["engine_kind"] == "transformers"
    assert files["group.json"]["judged"] == ["load30"]
    s = files["settings.json"]
    assert s["engine"] == "transformers" and s["scheduler"] == "fifo"
    assert s["usable_kv_tokens"] == assembled["settings"]["usable_kv_tokens"]
    assert s["configured"]["max_requests_per_batch"] == 64
    run = m["runs"]["load30"]
    want = meta["runs"]["load30"]
    # the same requests and steps: the same latencies as the single run recorded (to the
    # precision its CSV files keep)
    for stat in ("mean", "p90"):
        assert run["jct_s"][stat] == pytest.approx(want["jct_s"][stat], rel=1e-6)
        assert run["ttft_s"][stat] == pytest.approx(want["ttft_s"][stat], rel=1e-6)
    assert run["preempted_requests"] == 0
    assert run["achieved_load"] == pytest.approx(
        run["measured_rate_per_s"] / meta["capacity"]["capacity_per_s"]
    )
    steps = files["steps_load30.csv"]
    assert len(steps) == len(_csv("steps_load30.csv"))
    # the calibration round was fitted: the law prices the run's iterations near their times
    assert abs(run["calibration_law_total_error"]) < 0.5
    assert "protocol" in m and m["protocol"]["calibration_rounds_run"][0]["round"] == 1
