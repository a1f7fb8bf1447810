"""Driver of the vLLM validation measurements (runs in the vLLM environment, ``make validate-vllm``).

    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate check-env
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate model   [--config FILE]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate measure [--config FILE] [--out DIR]
        [--requests N] [--warmup-requests W] [--capacity-requests C]

``measure`` makes the model if needed, starts vLLM once and runs, in this order: the warm-up
batches, the calibration batches, the capacity burst, then one Poisson run per load (rates =
load x measured capacity); then it writes the run folder
(``<validation.vllm.out>/vllm-cpu-<hardware-id>/``, see :mod:`llmqueue.validation.record`).
The overrides make short trial runs; the run folder's meta.json records them. Bad input exits
with code 2 and a one-line message; so does a missing or broken vLLM environment.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmqueue.cli import add_command
from llmqueue.errors import InputError
from llmqueue.profiling.meta import loadavg, now_utc

PINS = Path("envs/vllm-cpu.txt")
# Packages that vllm-cpu 0.32.0 declares but that break its start with torch 2.13.0+cpu.
MUST_BE_ABSENT = ("torchvision", "torchaudio", "torchcodec")


def log(msg: str) -> None:
    print(f"[validate-vllm {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load_section(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The whole config and its ``validation.vllm`` section, schema-checked and semantically
    checked."""
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError(f"config file {path!r} does not exist")
    cfg = yaml.safe_load(p.read_text())
    if not isinstance(cfg, dict) or "vllm" not in (cfg.get("validation") or {}):
        raise InputError(f"{path}: no 'validation.vllm' section")
    schema_path = Path("workflow/schemas/validation.schema.yaml")
    if schema_path.is_file():
        import jsonschema

        schema = yaml.safe_load(schema_path.read_text())
        errors = sorted(
            jsonschema.Draft202012Validator(schema).iter_errors(cfg["validation"]),
            key=lambda e: list(e.path),
        )
        if errors:
            e = errors[0]
            key = ".".join(["validation", *(str(k) for k in e.path)])
            raise InputError(f"{path}: {key}: {e.message}")
    from llmqueue.checks.validation import check_validation_section

    check_validation_section(cfg["validation"]["vllm"])
    return cfg, cfg["validation"]["vllm"]


def read_pins(path: Path = PINS) -> dict[str, str]:
    pins: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line and "==" in line:
            name, ver = line.split("==", 1)
            pins[name.strip().lower().replace("_", "-")] = ver.strip()
    return pins


def cmd_check_env(_: argparse.Namespace) -> None:
    """One line: the vLLM environment is usable, or what is wrong with it."""
    from importlib import metadata, util

    problems = []
    pins = read_pins() if PINS.is_file() else {}
    for name in ("vllm-cpu", "torch", "transformers", "numpy", "pandas", "scipy"):
        try:
            ver = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name} is not installed")
            continue
        if name in pins and pins[name] != ver:
            problems.append(f"{name} {ver} installed, envs/vllm-cpu.txt pins {pins[name]}")
    present = [n for n in MUST_BE_ABSENT if util.find_spec(n) is not None]
    if present:
        problems.append(f"{', '.join(present)} must be removed (they break vLLM with this torch)")
    if not problems:
        try:
            import vllm  # noqa: F401
            from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401
        except Exception as err:  # noqa: BLE001
            problems.append(f"import vllm failed: {type(err).__name__}: {err}")
    if problems:
        raise InputError(
            f"the vLLM environment ({sys.prefix}) is broken: {'; '.join(problems)}; rebuild it "
            "with: rm -rf .venv-vllm && make validate-vllm"
        )
    note = ""
    if cpu_bf16() is False:
        note = (
            "; warning: this CPU has no AVX-512 BF16 (nor AMX): the bfloat16 model runs about 16x "
            "slower than on the committed run's CPU (calibration about 8 min instead of 30 s)"
        )
    print(
        f"vLLM environment OK: vllm-cpu {metadata.version('vllm-cpu')}, "
        f"torch {metadata.version('torch')}{note}"
    )


def cpu_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool | None:
    """Whether the CPU has bfloat16 matrix instructions (avx512_bf16 or amx_bf16); None when the
    flags cannot be read (not Linux)."""
    try:
        text = Path(cpuinfo).read_text()
    except OSError:
        return None
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.split(":", 1)[1].split())
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def cmd_model(args: argparse.Namespace) -> None:
    from llmqueue.validation.model import make_model

    _, sec = load_section(args.config)
    m = sec["model"]
    make_model(m["shape"], m["dtype"], m["seed"], m["dir"], log=log)


def _overrides(args: argparse.Namespace, sec: dict[str, Any]) -> dict[str, int]:
    over = {}
    for key, val in (
        ("requests", args.requests),
        ("warmup_requests", args.warmup_requests),
        ("capacity_requests", args.capacity_requests),
    ):
        if val is not None:
            over[key] = int(val)
    if "requests" in over:
        sec["requests"] = over["requests"]
    if "warmup_requests" in over:
        sec["warmup_requests"] = over["warmup_requests"]
    if "capacity_requests" in over:
        sec["capacity"]["requests"] = over["capacity_requests"]
    return over


def cmd_measure(args: argparse.Namespace) -> None:
    import numpy as np

    from llmqueue.checks.validation import check_validation_section
    from llmqueue.studies.validation.calibration import calibration_batches
    from llmqueue.validation.engine import EngineSettings
    from llmqueue.validation.model import make_model
    from llmqueue.validation.record import cpu_name, hardware_id
    from llmqueue.validation.requests import read_trace_lengths
    from llmqueue.validation.steplog import core_facts_path

    cfg, sec = load_section(args.config)
    over = _overrides(args, sec)
    check_validation_section(sec)
    settings = EngineSettings.from_config(sec["engine"])
    cores = os.cpu_count() or 1
    hw = hardware_id(cpu_name(), cores) if sec["hardware_id"] == "auto" else sec["hardware_id"]
    out = Path(args.out or Path(sec["out"]) / f"vllm-cpu-{hw}")
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
                sec, settings, model_dir, step_log, plan, prompt, output, int(cfg.get("seed", 0))
            )
        )
        meta["finished"] = now_utc()
        meta["load_after"] = loadavg()
        meta["wall_s"] = round(time.monotonic() - t_start, 1)
        files = _assemble(sec, settings, session, step_log, meta, cfg, np)
        from llmqueue.validation.record import write_run_folder

        write_run_folder(out, files)
    finally:
        step_log.unlink(missing_ok=True)
        Path(core_facts_path(step_log)).unlink(missing_ok=True)
    log(f"done in {meta['wall_s']} s -> {out}")


async def _session(
    sec: dict[str, Any],
    settings: Any,
    model_dir: Path,
    step_log: Path,
    plan: dict[str, Any],
    prompt: Any,
    output: Any,
    root_seed: int,
) -> dict[str, Any]:
    """Start vLLM once and run warm-up, calibration, capacity and the loads; returns the client
    records and clock marks of every phase (the step log is read after the engine stops)."""
    import numpy as np
    import pandas as pd

    from llmqueue.seeds import seed_sequence
    from llmqueue.studies.validation.calibration import saturation_capacity
    from llmqueue.validation.client import check_complete, run_open_loop
    from llmqueue.validation.engine import (
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.validation.requests import build_request_table, prompt_token_ids

    vocab = int(sec["model"]["shape"]["vocab_size"])
    scale = float(sec["trace"]["scale"])

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", "prompts", key))
        return {
            r: prompt_token_ids(int(n), vocab, rng)
            for r, n in zip(table["request_id"], table["prompt_tokens"], strict=True)
        }

    def batch_table(b: Any, run: str) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "request_id": [f"{run}-{i:04d}" for i in range(b.batch)],
                "planned_s": [0.0] * b.batch,
                "prompt_tokens": [b.prompt_tokens] * b.batch,
                "output_tokens": [b.output_tokens] * b.batch,
            }
        )

    log(f"starting vLLM on {model_dir} (engine core in a child process)")
    t = time.monotonic()
    engine = open_async_engine(
        model_dir, sec["model"]["shape"], sec["model"]["dtype"], settings, step_log
    )
    res: dict[str, Any] = {"startup_s": round(time.monotonic() - t, 1), "phases": {}}
    try:
        from vllm.v1.core.sched.scheduler import Scheduler

        res["settings"] = read_settings(engine.vllm_config, Scheduler)
        log(f"engine up in {res['startup_s']} s: {res['settings']}")
        stream = make_stream(engine)

        async def batches(name: str, items: list[Any]) -> None:
            t_a, load_a = time.monotonic(), loadavg()
            tables = []
            for k, b in enumerate(items):
                tab = batch_table(b, f"{name}{k:02d}")
                _, rec = await run_open_loop(tab, stream, prompts_for(tab, f"{name}{k}"))
                check_complete(rec, f"{name} batch {k}")
                tables.append(rec.assign(batch_index=k, batch=b.batch))
            res["phases"][name] = {
                "t_start": t_a,
                "t_end": time.monotonic(),
                "load_before": load_a,
                "load_after": loadavg(),
                "records": pd.concat(tables, ignore_index=True),
            }
            log(f"{name}: {len(items)} batches in {time.monotonic() - t_a:.1f} s")

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
        close_engine(engine)
    return res


def _assemble(
    sec: dict[str, Any],
    settings: Any,
    session: dict[str, Any],
    step_log: Path,
    meta: dict[str, Any],
    cfg: dict[str, Any],
    np: Any,
) -> dict[str, Any]:
    """The run folder's files from the session and the engine's step log."""
    import pandas as pd

    from llmqueue.latency import fit_step_law
    from llmqueue.studies.validation.calibration import fit_calibration, fit_summary, slice_steps
    from llmqueue.validation.model import kv_bytes_per_token, param_count
    from llmqueue.validation.record import cpu_name, package_versions, request_rows
    from llmqueue.validation.steplog import core_facts_path

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
        from llmqueue.studies.validation.calibration import iteration_times

        t_it = iteration_times(st, float(sec["calibration"]["max_gap_s"]))
        in_situ = fit_step_law(st["decode_seqs"], st["prefill_tokens"], st["context_tokens"], t_it)
        fits[f"in_situ_{name}"] = fit_summary(in_situ, f"{name} iterations (diagnostic only)")
        # the calibration law's error on this run's own iterations
        pred = (
            fit.c0_s
            + fit.c_tok_s * (st["decode_seqs"] + st["prefill_tokens"])
            + fit.c_ctx_s * st["context_tokens"]
        )
        err = pred / t_it - 1.0
        m = rows[~rows["warmup"]]
        jct = m["finish_s"] - m["arrival_s"]
        ttft = m["first_token_s"] - m["arrival_s"]
        runs[name] = {
            "load": p["load"],
            "rate_per_s": p["rate_per_s"],
            "requests": int(len(rows)),
            "measured_requests": int(len(m)),
            "duration_s": float(rows["finish_s"].max()),
            "load_before": p["load_before"],
            "load_after": p["load_after"],
            "jct_s": _stats(jct, np),
            "ttft_s": _stats(ttft, np),
            "iterations": int(len(st)),
            "mean_running": float(st["running"].mean()),
            "max_running": int(st["running"].max()),
            "max_waiting": int(st["waiting"].max()),
            "max_kv_usage": float(st["kv_usage"].max()),
            "preemptions": int(st["preempted"].sum()),
            "busy_fraction": float(t_it.sum() / max(float(st["t_done_s"].max()), 1e-9)),
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
    dtype = sec["model"]["dtype"]
    meta.update(
        {
            "engine": "vLLM (CPU build), V1 engine, AsyncLLM in the client's process, engine core in a child process",
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
            "environment_variables": {
                "VLLM_CPU_OMP_THREADS_BIND": settings.omp_threads_bind,
                "VLLM_CPU_KVCACHE_SPACE": "unset (KV cache sized by num_gpu_blocks_override and kv_cache_memory_bytes)",
                "VLLM_ENABLE_V1_MULTIPROCESSING": os.environ.get(
                    "VLLM_ENABLE_V1_MULTIPROCESSING", "1 (default)"
                ),
            },
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


def _stats(x: Any, np: Any) -> dict[str, float]:
    a = np.asarray(x, dtype=float)
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "max": float(a.max()),
    }


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "check-env": cmd_check_env,
    "model": cmd_model,
    "measure": cmd_measure,
}


def register(subparsers: Any) -> None:
    parser = add_command(subparsers, "validate", __doc__)
    sub = parser.add_subparsers(dest="validate_command", required=True, parser_class=type(parser))
    sub.add_parser("check-env", help="is the vLLM environment usable (one line)")
    p_model = sub.add_parser("model", help="make the random-weight model")
    p_model.add_argument("--config", default="config/config.yaml")
    p_meas = sub.add_parser("measure", help="calibration, capacity and the Poisson loads")
    p_meas.add_argument("--config", default="config/config.yaml")
    p_meas.add_argument(
        "--out", default=None, help="run folder (default: <out>/vllm-cpu-<hardware-id>)"
    )
    p_meas.add_argument("--requests", type=int, default=None, help="requests per load (trial runs)")
    p_meas.add_argument("--warmup-requests", type=int, default=None)
    p_meas.add_argument("--capacity-requests", type=int, default=None)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    COMMANDS[args.validate_command](args)
    return 0
