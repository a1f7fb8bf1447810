"""The single run (``llmqueue validate measure``): one engine start for warm-up batches,
calibration batches, a capacity burst and one Poisson run per load, on vLLM's CPU build
(``--engine vllm``, the default) or on Hugging Face transformers' continuous batching
(``--engine transformers``, :mod:`llmqueue.engines.hf_engine`, settings
``validation.transformers.engine``); the workload (model, trace, calibration, capacity, loads) is
``validation.vllm``'s for both.

The rates are the configured loads times the capacity the burst measured. The run folder
(``<validation.vllm.out>/<engine>-cpu-<hardware-id>/``, :mod:`llmqueue.engines.record`) is
assembled from the client's records and the engine's step log once the engine has stopped, and
written whole. The engine's package is imported only when a run starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import time
from pathlib import Path
from typing import Any

from llmqueue.engines.batches import run_batches
from llmqueue.engines.environment import ENGINE_ENVS, cpu_bf16
from llmqueue.engines.record import (
    child_folder,
    log,
    resolve_hardware_id,
    run_summary,
    write_run_folder,
)
from llmqueue.errors import InputError
from llmqueue.profiling.meta import loadavg, now_utc

__all__ = ["ENGINES", "engine_settings", "measure_single"]

# the engines a single run may measure (``llmqueue validate measure --engine``)
ENGINES = tuple(ENGINE_ENVS)


def engine_settings(cfg: dict[str, Any], sec: dict[str, Any], engine: str) -> Any:
    """The checked settings of `engine`: ``validation.vllm.engine`` (vLLM) or
    ``validation.transformers.engine``; one-line InputError naming the key."""
    if engine == "vllm":
        from llmqueue.engines.engine import EngineSettings

        return EngineSettings.from_config(sec["engine"])
    if engine == "transformers":
        from llmqueue.engines.hf_engine import HFEngineSettings

        hf = (cfg.get("validation") or {}).get("transformers")
        if not isinstance(hf, dict) or "engine" not in hf:
            raise InputError(
                "validation.transformers.engine: missing (the transformers engine's settings)"
            )
        return HFEngineSettings.from_config(hf["engine"])
    raise InputError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def measure_single(
    cfg: dict[str, Any], sec: dict[str, Any], over: dict[str, int], out: Path | None = None,
    engine: str = "vllm",
) -> Path:  # fmt: skip
    """The single run (module docstring) on `engine` into `out` (default
    ``<out>/<engine>-cpu-<hardware-id>``); `sec` is the checked ``validation.vllm`` section with
    the overrides `over` applied."""
    import numpy as np

    from llmqueue.engines.calibration import calibration_batches
    from llmqueue.engines.model import make_model
    from llmqueue.engines.requests import read_trace_lengths
    from llmqueue.engines.steplog import core_facts_path

    settings = engine_settings(cfg, sec, engine)
    if engine == "vllm":
        from llmqueue.engines.engine import require_cpus

        require_cpus(settings)
    hw = resolve_hardware_id(sec)
    out = (
        Path(out) if out else child_folder(sec["out"], f"{engine}-cpu-{hw}", "validation.vllm.out")
    )
    prompt, output = read_trace_lengths(
        cfg["data"]["azure_trace"], sec["trace"]["input_column"], sec["trace"]["output_column"]
    )
    plan = {
        "warmup": calibration_batches(
            sec["warmup_batches"], settings.max_model_len, settings.max_num_seqs
        )
        if sec["warmup_batches"]
        else [],
        "calibration": calibration_batches(
            sec["calibration"]["batches"], settings.max_model_len, settings.max_num_seqs
        ),
    }
    m = sec["model"]
    model_dir = make_model(m["shape"], m["dtype"], m["seed"], m["dir"], log=log)
    work = Path("results/validation")
    work.mkdir(parents=True, exist_ok=True)
    step_log = work / f"steps-{os.getpid()}.csv"
    step_log.unlink(missing_ok=True)
    meta: dict[str, Any] = {
        "hardware_id": hw,
        "started": now_utc(),
        "load_before": loadavg(),
        "overrides": over,
    }
    t_start = time.monotonic()
    try:
        session = asyncio.run(
            _session(
                sec, settings, model_dir, step_log, plan, prompt, output, int(cfg.get("seed", 0)),
                engine,
            )
        )  # fmt: skip
        meta["finished"] = now_utc()
        meta["load_after"] = loadavg()
        meta["wall_s"] = round(time.monotonic() - t_start, 1)
        files = _assemble(sec, settings, session, step_log, meta, cfg, np, engine)
        write_run_folder(out, files)
    finally:
        step_log.unlink(missing_ok=True)
        Path(core_facts_path(step_log)).unlink(missing_ok=True)
    log(f"done in {meta['wall_s']} s -> {out}")
    return out


async def _session(
    sec: dict[str, Any],
    settings: Any,
    model_dir: Path,
    step_log: Path,
    plan: dict[str, Any],
    prompt: Any,
    output: Any,
    root_seed: int,
    engine: str = "vllm",
) -> dict[str, Any]:
    """Start the engine once and run warm-up, calibration, capacity and the loads; returns the
    client records and clock marks of every phase (the step log is read after the engine stops)."""
    import numpy as np
    import pandas as pd

    from llmqueue.engines.calibration import saturation_capacity
    from llmqueue.engines.client import check_complete, run_open_loop
    from llmqueue.engines.requests import build_request_table, table_prompts
    from llmqueue.seeds import seed_sequence

    vocab = int(sec["model"]["shape"]["vocab_size"])
    scale = float(sec["trace"]["scale"])

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", "prompts", key))
        return table_prompts(table, vocab, rng)

    from llmqueue.engines.engines import open_engine

    t = time.monotonic()
    opened = open_engine(
        engine, model_dir, sec["model"]["shape"], sec["model"]["dtype"], settings, step_log
    )
    stream = opened.stream
    res: dict[str, Any] = {"startup_s": round(time.monotonic() - t, 1), "phases": {}}
    try:
        res["settings"] = opened.settings
        log(f"engine up in {res['startup_s']} s: {res['settings']}")

        async def batches(name: str, items: list[Any]) -> None:
            res["phases"][name] = await run_batches(stream, name, items, prompts_for, "", log=log)

        if plan["warmup"]:
            await batches("warmup", plan["warmup"])
        await batches("calibration", plan["calibration"])

        # Capacity: a burst of requests from the validation length law, all at t = 0.
        cap = sec["capacity"]
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", "capacity"))
        tab = build_request_table(
            prompt, output, cap["requests"], 1.0, scale, settings.max_model_len, 0, rng, "capacity"
        )
        tab["planned_s"] = 0.0
        t_a, load_a = time.monotonic(), loadavg()
        t0, rec = await run_open_loop(tab, stream, prompts_for(tab, "capacity"))
        check_complete(rec, "capacity burst")
        capacity = saturation_capacity(rec, *cap["quantiles"])
        res["capacity"] = capacity
        res["phases"]["capacity"] = {
            "t_start": t_a,
            "t_end": time.monotonic(),
            "t0": t0,
            "load_before": load_a,
            "load_after": loadavg(),
            "table": tab,
            "records": rec,
        }
        log(f"capacity: {capacity['capacity_per_s']:.3f} requests/s ({cap['requests']} requests)")

        for load in sec["loads"]:
            run = f"load{round(100 * load):02d}"
            rate = float(load) * capacity["capacity_per_s"]
            rng = np.random.default_rng(seed_sequence(root_seed, "validation", "load", float(load)))
            tab = build_request_table(
                prompt,
                output,
                sec["requests"],
                rate,
                scale,
                settings.max_model_len,
                sec["warmup_requests"],
                rng,
                run,
            )
            prompts = prompts_for(tab, run)
            log(f"{run}: {len(tab)} requests at {rate:.3f}/s (~{tab['planned_s'].iloc[-1]:.0f} s)")
            t_a, load_a = time.monotonic(), loadavg()
            t0, rec = await run_open_loop(tab, stream, prompts)
            check_complete(rec, run)
            res["phases"][run] = {
                "t_start": t_a,
                "t_end": time.monotonic(),
                "t0": t0,
                "load": float(load),
                "rate_per_s": rate,
                "load_before": load_a,
                "load_after": loadavg(),
                "table": tab,
                "records": rec,
            }
            late = (rec["arrival_s"] - rec["planned_s"]).max()
            log(
                f"{run}: done in {time.monotonic() - t_a:.1f} s (client lateness <= {1e3 * late:.1f} ms)"
            )
    finally:
        opened.close()
    return res


def _assemble(
    sec: dict[str, Any],
    settings: Any,
    session: dict[str, Any],
    step_log: Path,
    meta: dict[str, Any],
    cfg: dict[str, Any],
    np: Any,
    engine: str = "vllm",
) -> dict[str, Any]:
    """The run folder's files from the session and the engine's step log."""
    import pandas as pd

    from llmqueue.engines.calibration import fit_calibration, fit_summary, slice_steps
    from llmqueue.engines.engines import ENGINE_NOTES, engine_environment_record
    from llmqueue.engines.model import kv_bytes_per_token, param_count, resolve_dtype
    from llmqueue.engines.record import cpu_name, package_versions, request_rows
    from llmqueue.engines.steplog import core_facts_path
    from llmqueue.latency_fits import fit_step_law

    if not step_log.is_file():
        raise InputError(
            f"the engine wrote no step log ({step_log}): was the probe scheduler used?"
        )
    steps = pd.read_csv(step_log)
    ph = session["phases"]
    files: dict[str, Any] = {}

    cal = ph["calibration"]
    cal_steps = slice_steps(steps, cal["t_start"], cal["t_end"], cal["t_start"])
    fit, cal_rows = fit_calibration(cal_steps, float(sec["calibration"]["max_gap_s"]))
    files["calibration_steps.csv"] = cal_rows
    fits: dict[str, Any] = {
        "calibration": fit_summary(fit, "calibration batches (used for prediction)")
    }
    log(
        f"step law: c0 = {1e3 * fit.c0_s:.2f} ms, c_tok = {1e3 * fit.c_tok_s:.3f} ms/token, "
        f"c_ctx = {1e6 * fit.c_ctx_s:.3f} us/token, R^2 = {fit.r2:.4f}"
    )

    cap = ph["capacity"]
    cap_steps = slice_steps(steps, cap["t_start"], cap["t_end"], cap["t0"])
    files["requests_capacity.csv"] = request_rows(cap["table"], cap["records"], cap_steps)
    files["steps_capacity.csv"] = cap_steps

    runs: dict[str, Any] = {}
    for name, p in ph.items():
        if not name.startswith("load"):
            continue
        st = slice_steps(steps, p["t_start"], p["t_end"], p["t0"])
        rows = request_rows(p["table"], p["records"], st)
        files[f"requests_{name}.csv"] = rows
        files[f"steps_{name}.csv"] = st
        from llmqueue.engines.calibration import iteration_times

        t_it = iteration_times(st, float(sec["calibration"]["max_gap_s"]))
        in_situ = fit_step_law(st["decode_seqs"], st["prefill_tokens"], st["context_tokens"], t_it)
        fits[f"in_situ_{name}"] = fit_summary(in_situ, f"{name} iterations (diagnostic only)")
        # the calibration law's error on this run's own iterations
        pred = fit.law().step(st["decode_seqs"], st["prefill_tokens"], st["context_tokens"])
        err = pred / t_it - 1.0
        runs[name] = {
            **run_summary(p, rows, st, t_it),
            "calibration_law_error_on_iterations": {
                "median": float(np.median(err)),
                "p5_p95": [float(np.percentile(err, 5)), float(np.percentile(err, 95))],
                "total_time": float(pred.sum() / t_it.sum() - 1.0),
            },
        }
        log(
            f"{name}: JCT mean {runs[name]['jct_s']['mean']:.3f} s p90 {runs[name]['jct_s']['p90']:.3f} s, "
            f"TTFT mean {runs[name]['ttft_s']['mean']:.3f} s, max running {runs[name]['max_running']}, "
            f"max KV {runs[name]['max_kv_usage']:.2f}, preemptions {runs[name]['preemptions']}"
        )
    files["calibration_fit.json"] = fits

    settings_read = dict(session["settings"])
    settings_read["configured"] = settings.to_dict()
    facts_path = Path(core_facts_path(step_log))
    if not facts_path.is_file():
        raise InputError(f"the engine core wrote no scheduler facts ({facts_path})")
    core = json.loads(facts_path.read_text())
    settings_read["engine_core"] = core
    # the KV capacity requests can use: free blocks at start (vLLM keeps one null block aside)
    settings_read["usable_kv_blocks"] = int(core["kv_blocks_free_at_start"])
    settings_read["usable_kv_tokens"] = int(core["kv_blocks_free_at_start"]) * int(
        core["block_size"]
    )
    files["settings.json"] = settings_read

    shape = sec["model"]["shape"]
    dtype = resolve_dtype(sec["model"]["dtype"])
    meta.update(
        {
            "engine": ENGINE_NOTES[engine],
            "versions": {"python": platform.python_version(), **package_versions()},
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "cpu_bfloat16_instructions": cpu_bf16(),
            "platform": platform.platform(),
            "model": {
                "architecture": "LlamaForCausalLM, random weights (transformers LlamaConfig + save_pretrained)",
                "shape": shape,
                "dtype": dtype,
                "seed": sec["model"]["seed"],
                "parameters": param_count(shape),
                "kv_bytes_per_token": kv_bytes_per_token(shape, dtype),
            },
            "engine_settings": session["settings"],
            "environment_variables": engine_environment_record(engine, settings),
            "trace": {
                "file": cfg["data"]["azure_trace"],
                "scale": sec["trace"]["scale"],
                "note": "prompt and output lengths drawn i.i.d. from the Azure conversation trace, both "
                "times scale, rounded, >= 1, prompt clipped so prompt + output <= max_model_len",
            },
            "startup_s": session["startup_s"],
            "calibration": {
                "batches": sec["calibration"]["batches"],
                "max_gap_s": sec["calibration"]["max_gap_s"],
                "warmup_batches": sec["warmup_batches"],
                "wall_s": round(cal["t_end"] - cal["t_start"], 1),
                "load_before": cal["load_before"],
                "load_after": cal["load_after"],
            },
            "capacity": {
                **session["capacity"],
                "wall_s": round(cap["t_end"] - cap["t_start"], 1),
                "load_before": cap["load_before"],
                "load_after": cap["load_after"],
            },
            "loads": sec["loads"],
            "requests_per_load": sec["requests"],
            "warmup_requests": sec["warmup_requests"],
            "runs": runs,
            "seed": int(cfg.get("seed", 0)),
            "note": "times in seconds from each run's start on the machine's monotonic clock; "
            "timings on a shared 2-core machine are perturbed by other processes: see the load averages",
        }
    )
    files["meta.json"] = meta
    return files
