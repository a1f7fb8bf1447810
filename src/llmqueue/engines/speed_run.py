"""The machine-speed run (``llmqueue validate machine-speed``, config
``validation.vllm.machine_speed``): does the engine's speed follow the machine's?

The engine starts once with the model worker timing its forward passes
(:mod:`llmqueue.engines.worker`); after the warm-up batches it runs ``cycles`` cycles of one
batch decoded to the end followed by the two fixed kernels of :mod:`llmqueue.engines.speedprobe`
on the driver's core, with CPU steal and other processes' share per cycle. The folder
``<out>/machine-speed-<hardware-id>/`` holds ``cycles.csv`` (:data:`CYCLE_COLUMNS`),
``steps.csv``, ``model_steps.csv``, ``settings.json`` and ``meta.json``; the study reads it
(:mod:`llmqueue.studies.validation.machine_speed`).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.engines.batches import run_batches
from llmqueue.engines.record import child_folder, log, resolve_hardware_id
from llmqueue.errors import InputError
from llmqueue.profiling.meta import loadavg, now_utc

__all__ = ["CYCLE_COLUMNS", "check_machine_speed", "measure_machine_speed"]

# what cycles.csv holds per cycle
CYCLE_COLUMNS = [
    "cycle",
    "t_start_s",
    "t_end_s",
    "stream_s",
    "compute_s",
    "steal_share",
    "other_cpu_share",
]


def check_machine_speed(
    sec: Mapping[str, Any], *, cycles: int | None = None
) -> tuple[dict[str, Any], Any, dict[str, int]]:
    """Config ``validation.vllm.machine_speed`` checked against the engine settings (one line
    naming the key or flag): the batch within max_num_seqs, a request within max_model_len, the
    batch's KV blocks within the cache, `cycles` (flag ``--cycles``) in 3..1000. Returns the
    section with the override applied, the engine settings and the overrides."""
    from llmqueue.engines.engine import EngineSettings

    ms = dict(sec.get("machine_speed") or {})
    if not ms:
        raise InputError("config: no 'validation.vllm.machine_speed' section")
    over: dict[str, int] = {}
    if cycles is not None:
        if not 3 <= cycles <= 1000:
            raise InputError(f"--cycles must be in 3..1000, got {cycles}")
        over["cycles"] = ms["cycles"] = int(cycles)
    settings = EngineSettings.from_config(sec["engine"])
    if ms["batch"] > settings.max_num_seqs:
        raise InputError(
            f"validation.vllm.machine_speed.batch: {ms['batch']} exceeds the engine's "
            f"max_num_seqs {settings.max_num_seqs} (allowed: 1..{settings.max_num_seqs})"
        )
    settings.check_batch(
        ms["batch"], ms["prompt_tokens"], ms["output_tokens"], "validation.vllm.machine_speed"
    )
    return ms, settings, over


def measure_machine_speed(
    cfg: Mapping[str, Any], sec: Mapping[str, Any], *, cycles: int | None = None,
    out: str | None = None,
) -> Path:  # fmt: skip
    """The machine-speed run (module docstring) into `out` (default
    ``<machine_speed.out>/machine-speed-<hardware-id>``); `cycles` overrides the configured
    count (3..1000). Every setting is checked before the model is made or the engine starts."""
    from llmqueue.engines.calibration import calibration_batches
    from llmqueue.engines.engine import require_cpus
    from llmqueue.engines.model import make_model
    from llmqueue.engines.record import (
        cpu_name,
        package_versions,
        write_run_folder,
    )
    from llmqueue.engines.steplog import core_facts_path

    ms, settings, over = check_machine_speed(sec, cycles=cycles)
    require_cpus(settings)
    cores = os.cpu_count() or 1
    hw = resolve_hardware_id(sec)
    folder = (
        Path(out)
        if out
        else child_folder(ms["out"], f"machine-speed-{hw}", "validation.vllm.machine_speed.out")
    )
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
        write_run_folder(folder, files)
    finally:
        for f in (step_log, model_log):
            f.unlink(missing_ok=True)
        Path(core_facts_path(step_log)).unlink(missing_ok=True)
    log(f"machine speed: done in {meta['wall_s']} s -> {folder}")
    return folder


async def _speed_session(
    ms: dict[str, Any], settings: Any, m: dict[str, Any], model_dir: Path, step_log: Path,
    model_log: Path, warmup: list[Any], root_seed: int,
) -> dict[str, Any]:  # fmt: skip
    """One engine start: warm-up batches, then the cycles (batch, probes); returns the cycles'
    clock marks and probe times, the settings read back and the probes' sizes."""
    import numpy as np
    import pandas as pd
    import torch

    from llmqueue.engines.calibration import CalibrationBatch
    from llmqueue.engines.contention import contention, snapshot
    from llmqueue.engines.engine import (
        bind_host,
        close_engine,
        make_stream,
        open_async_engine,
        read_settings,
    )
    from llmqueue.engines.requests import table_prompts
    from llmqueue.engines.speedprobe import compute_probe, make_kernels, stream_probe
    from llmqueue.seeds import seed_sequence

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
