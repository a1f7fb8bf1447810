"""Smoke profile: the tiny model through the harness on CPU (<= 60 s), so `make reproduce` on a
CPU machine exercises the measurement path. Its timings are not used by any figure."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd


def run_smoke(cfg: Mapping[str, Any], out: Path, log: Callable[[str], None] = print) -> None:
    from llmqueue.hardware.models import build_model
    from llmqueue.io import write_csv, write_json
    from llmqueue.profiling.fits import rows_of
    from llmqueue.profiling.harness import generate_timed, time_point
    from llmqueue.profiling.meta import environment, loadavg, now_utc
    from llmqueue.profiling.sweeps import trace_requests
    from llmqueue.traces import read_table

    sm = cfg["profiling"]["smoke"]
    t0, l0 = time.perf_counter(), loadavg()
    model = build_model(sm["model"], "cpu", "float32", seed=int(cfg.get("seed", 0)))
    rows = []
    for b in sm["batch_sizes"]:
        pt = time_point(model, int(b), 16, int(sm["decode_steps"]), warmup=1, repeats=2)
        rows.append({"model": sm["model"], **pt.to_dict()})
        log(f"smoke b={b}: t1={pt.t1_s:.5f}s t2={pt.t2_s:.6f}s")
    trace = read_table(cfg["data"]["azure_trace"], "data.azure_trace")
    reqs = trace_requests(
        trace,
        int(sm["fig2a_requests"]),
        128,
        512,
        64,
        int(cfg.get("seed", 0)),
        cfg["profiling"]["fig2a"]["input_column"],
        cfg["profiling"]["fig2a"]["output_column"],
    )
    e2e = []
    for r in rows_of(reqs):
        g = generate_timed(model, [int(r.input_tokens)], int(r.output_tokens))
        assert g.tokens is None and len(g.step_s) == int(r.output_tokens) - 1
        e2e.append(
            {"input_tokens": r.input_tokens, "output_tokens": r.output_tokens, "total_s": g.total_s}
        )
    out.mkdir(parents=True, exist_ok=True)
    write_csv(pd.DataFrame(rows), out / "timing.csv")
    write_csv(pd.DataFrame(e2e), out / "e2e.csv")
    write_json(
        {
            "environment": environment("cpu"),
            "date": now_utc(),
            "wall_s": round(time.perf_counter() - t0, 2),
            "load_before": l0,
            "load_after": loadavg(),
            "note": "tiny-config smoke profile; timings are not used by any figure",
        },
        out / "meta.json",
    )
