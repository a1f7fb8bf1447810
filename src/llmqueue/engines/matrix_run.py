"""The validation matrix's measurement (``llmqueue validate matrix``): every group's engine
sessions, then its folder assembled from the client's records and the engine's step logs; on
vLLM's CPU build (the default) or on transformers' continuous batching (``--engine transformers``,
groups ``validation.transformers.matrix``, folder ``matrix-transformers-<hardware-id>``).

Per group (:mod:`llmqueue.engines.groups`): one engine start for its warm-up batches,
calibration, capacity bursts and judged runs, then one fresh engine start per repeat session for
the runs named in ``repeat``; per run, CPU contention before and after
(:mod:`llmqueue.engines.contention`). A group's folder
``<matrix.out>/matrix-<hardware-id>/<group>/`` is written whole when the group is done
(:func:`llmqueue.engines.record.write_run_folder`), so an interrupted matrix resumes group by
group; :func:`assemble_group` is the pure part (sessions in, files out), tested without vLLM.
The overrides (:data:`OVERRIDES`) make short smoke runs; meta.json records them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.engines.batches import run_batches
from llmqueue.engines.environment import cpu_bf16
from llmqueue.engines.groups import GroupSpec, MatrixSpec, read_matrix, select_groups
from llmqueue.engines.protocol import (
    Step,
    group_probe,
    plan_summary,
    probe_name,
    session_plan,
)
from llmqueue.engines.record import (
    child_folder,
    log,
    resolve_hardware_id,
    run_summary,
    write_run_folder,
)
from llmqueue.engines.requests import PRIORITY_ORDERS
from llmqueue.errors import InputError
from llmqueue.profiling.meta import loadavg, now_utc
from llmqueue.schema import with_defaults

__all__ = [
    "OVERRIDES",
    "checked_overrides",
    "matrix_spec",
    "apply_overrides",
    "read_predictions",
    "measure_matrix",
    "measure_group",
    "assemble_group",
]

# the smoke-run overrides of ``llmqueue validate`` (flags --requests, ...; ``measure`` has the
# first three): key -> (smallest allowed, what it counts)
OVERRIDES: Mapping[str, tuple[int, str]] = {
    "requests": (20, "requests per run"),
    "warmup_requests": (0, "warm-up requests per run"),
    "capacity_requests": (10, "requests of a capacity burst"),
    "calibration_batches": (1, "calibration batches"),
    "repeat_sessions": (0, "fresh-engine repeat sessions"),
}


def checked_overrides(given: Mapping[str, int | None]) -> dict[str, int]:
    """The overrides given (None: not given), each checked against its smallest value in
    :data:`OVERRIDES` (an InputError naming the flag); an unknown key is an error."""
    over: dict[str, int] = {}
    for key, val in given.items():
        if key not in OVERRIDES:
            raise InputError(f"unknown override {key!r}; known: {list(OVERRIDES)}")
        if val is None:
            continue
        lo, what = OVERRIDES[key]
        if val < lo:
            raise InputError(f"--{key.replace('_', '-')} ({what}) must be >= {lo}, got {val}")
        over[key] = int(val)
    return over


def matrix_spec(cfg: Mapping[str, Any], sec: Mapping[str, Any], engine: str = "vllm") -> MatrixSpec:
    """Config ``validation.vllm.matrix`` (with `engine` transformers: the groups of
    ``validation.transformers.matrix``) read (:func:`llmqueue.engines.groups.read_matrix`) with
    the data section's traces and the learned predictor's training fraction."""
    train = float(with_defaults(cfg.get("ssjf") or {}, "ssjf")["train_fraction"])
    hf = (cfg.get("validation") or {}).get("transformers")
    return read_matrix(sec, cfg.get("data") or {}, train, engine=engine, transformers=hf)


def apply_overrides(
    groups: Sequence[GroupSpec], given: Mapping[str, int | None]
) -> tuple[list[GroupSpec], dict[str, int]]:
    """The groups with the smoke-run overrides `given` applied (:data:`OVERRIDES`: fewer
    requests, calibration batches, repeat sessions; None: not given; checked by
    :func:`checked_overrides`); returns them and the overrides that were given."""
    over = checked_overrides(given)
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
            runs.append(dataclasses.replace(r, requests=n, warmup=w))
        cal = (
            g.calibration[: over["calibration_batches"]]
            if "calibration_batches" in over
            else g.calibration
        )
        sessions = over.get("repeat_sessions", g.repeat_sessions)
        g2 = dataclasses.replace(
            g, runs=tuple(runs), calibration=tuple(cal),
            capacity_requests=over.get("capacity_requests", g.capacity_requests),
            repeat=g.repeat if sessions > 0 else (), repeat_sessions=max(sessions, 1),
        )  # fmt: skip
        out.append(g2)
    return out, over


def read_predictions(path: str) -> Any:
    """The learned predictor's predictions file (trace_row, predicted_tokens, held_out) as an
    array by trace row (NaN where none), and the held-out mask."""
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


def measure_matrix(
    cfg: dict[str, Any], sec: dict[str, Any], names: str, given: Mapping[str, int | None], *,
    out: str | None = None, redo: bool = False, check: bool = False, engine: str = "vllm",
) -> Path:  # fmt: skip
    """Measure the groups `names` of `engine`'s validation matrix (module docstring) into
    ``<out>/<group>/`` (default ``<matrix.out>/matrix-<hardware-id>``, or
    ``matrix-transformers-<hardware-id>``); with `check` only check them. Every group's inputs
    are checked before the first engine starts."""
    from llmqueue.engines.engine import require_cpus
    from llmqueue.engines.groups import matrix_section
    from llmqueue.engines.requests import candidate_rows, read_trace_lengths

    spec = matrix_spec(cfg, sec, engine)
    groups, over = apply_overrides(select_groups(spec, names), given)
    hw = resolve_hardware_id(sec)
    where = matrix_section(engine)
    root = Path(out) if out else child_folder(spec.out, f"{spec.folder}-{hw}", f"{where}.out")

    def check_cpus(g: GroupSpec) -> None:
        if g.engine_kind == "vllm":  # the transformers engine is one process, not pinned
            require_cpus(g.settings())

    # everything a group needs, checked before the first engine starts
    inputs: dict[str, Any] = {}
    if check:
        for g in groups:
            check_cpus(g)
            read_trace_lengths(g.trace.file, g.trace.input_column, g.trace.output_column)
        print(
            f"validation matrix ({engine}): groups {', '.join(g.name for g in groups)} OK -> {root}"
        )
        return root
    for g in groups:
        check_cpus(g)
        prompt, output = read_trace_lengths(
            g.trace.file, g.trace.input_column, g.trace.output_column
        )
        rows = candidate_rows(len(prompt), g.trace.rows, g.trace.train_fraction)
        preds = None
        if any(PRIORITY_ORDERS[r.priority].needs_prediction for r in g.runs):
            preds, held = read_predictions(spec.predictions)
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
        if done and not redo:
            log(f"group {g.name}: {root / g.name} is complete, skipped (--redo measures it again)")
        else:
            todo.append(g)
    log(f"groups to measure: {', '.join(g.name for g in todo) or 'none'} -> {root}")
    for g in todo:
        t = time.monotonic()
        files = measure_group(g, spec, inputs[g.name], cfg, sec, hw, over)
        write_run_folder(child_folder(root, g.name, f"{where}.groups"), files)
        log(f"group {g.name}: done in {time.monotonic() - t:.0f} s -> {root / g.name}")
    return root


def measure_group(
    g: Any, spec: Any, data: Any, cfg: dict[str, Any], sec: dict[str, Any], hw: str,
    over: dict[str, int],
) -> dict[str, Any]:  # fmt: skip
    """Every engine session of one group; returns the group folder's files."""
    from llmqueue.engines.calibration import CalibrationBatch
    from llmqueue.engines.model import make_model

    settings = g.settings()
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
    warmup = [CalibrationBatch(*b) for b in sec["warmup_batches"]]
    plan = session_plan(g, spec.protocol, seed=root_seed)
    meta["plan"] = plan_summary(plan)
    sessions: list[dict[str, Any]] = []
    t_start = time.monotonic()
    tables: dict[str, Any] = {}
    capacity: dict[str, Any] = {}
    logs: list[Path] = []
    try:
        for k, steps in enumerate(plan, start=1):
            step_log = work / f"steps-{g.name}-{k}-{os.getpid()}.csv"
            step_log.unlink(missing_ok=True)
            logs.append(step_log)
            res = asyncio.run(
                _group_session(
                    g, k, settings, model_dir, step_log, warmup, steps, data, root_seed, tables,
                    capacity, spec.gate_for(g),
                )
            )  # fmt: skip
            res["step_log"] = step_log
            sessions.append(res)
        meta["finished"] = now_utc()
        meta["load_after"] = loadavg()
        meta["wall_s"] = round(time.monotonic() - t_start, 1)
        return assemble_group(g, spec, settings, sessions, capacity, meta, cfg, sec)
    finally:
        for f in logs:
            f.unlink(missing_ok=True)
            from llmqueue.engines.steplog import core_facts_path

            Path(core_facts_path(f)).unlink(missing_ok=True)


async def _group_session(
    g: Any, session: int, settings: Any, model_dir: Path, step_log: Path, warmup: list[Any],
    steps: list[Step], data: Any, root_seed: int, tables: dict[str, Any],
    capacity: dict[str, Any], gate: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """One engine start: warm-up batches, then the session's `steps`
    (:func:`llmqueue.engines.protocol.session_plan`): calibration rounds, capacity bursts,
    probes and judged runs, in order. `tables` and `capacity` are filled by session 1 and read by
    the repeats (the same request tables, the same planned times). Controlled batches wait behind
    `gate` when one is given (``MatrixSpec.gate_for``: batch-queue groups)."""
    import numpy as np
    import pandas as pd

    from llmqueue.engines.calibration import CalibrationBatch, saturation_capacity
    from llmqueue.engines.client import check_complete, run_open_loop
    from llmqueue.engines.contention import contention, snapshot
    from llmqueue.engines.engines import open_engine
    from llmqueue.engines.groups import planned_rate
    from llmqueue.engines.placement import involuntary_switches, preemption_rate
    from llmqueue.engines.requests import group_table, run_table, table_prompts
    from llmqueue.seeds import seed_sequence

    prompt, output, rows, preds = data
    vocab = int(g.model.shape["vocab_size"])
    max_len = settings.max_model_len

    def prompts_for(table: pd.DataFrame, key: str) -> dict[str, list[int]]:
        rng = np.random.default_rng(seed_sequence(root_seed, "validation", g.name, "prompts", key))
        return table_prompts(table, vocab, rng)

    log(f"group {g.name}, session {session}: starting {g.engine_kind} ({g.scheduler} scheduler)")
    t = time.monotonic()
    engine = open_engine(
        g.engine_kind, model_dir, g.model.shape, g.model.dtype, settings, step_log,
        scheduler=g.scheduler,
    )  # fmt: skip
    res: dict[str, Any] = {
        "session": session,
        "startup_s": round(time.monotonic() - t, 1),
        "phases": {},
    }
    try:
        res["settings"] = engine.settings
        log(f"engine up in {res['startup_s']} s: {res['settings']}")
        stream = engine.stream
        model_cpus = engine.model_cpus

        def switches() -> int | None:
            return involuntary_switches(os.getpid(), model_cpus) if model_cpus else None

        async def batches(name: str, items: list[Any], extra: dict[str, Any]) -> None:
            res["phases"][name] = {
                **await run_batches(stream, name, items, prompts_for, f"{g.name} ", gate, log=log),
                **extra,
            }

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

        await batches("warmup", warmup, {"kind": "warmup"})
        for step in steps:
            if step.kind in ("calibration", "probe"):
                await batches(
                    step.name, [CalibrationBatch(*b) for b in step.batches],
                    {"kind": step.kind, "round": step.round, "for_run": step.table,
                     "position": step.position, "block": step.block, "session": session},
                )  # fmt: skip
            elif step.kind == "capacity":
                name, lim = step.name, step.token_limit
                rng = np.random.default_rng(
                    seed_sequence(root_seed, "validation", g.name, "capacity")
                )
                base = group_table(
                    prompt, output, rows, g.capacity_requests, 1.0, g.trace.scale, max_len, 0, rng,
                    name, g.trace.prompt_tokens,
                )  # fmt: skip
                tab = run_table(base, name, lim)
                tab["planned_s"] = 0.0
                await serve(name, tab, {"kind": "capacity", "token_limit": lim})
                cap = saturation_capacity(res["phases"][name]["records"], 0.1, 0.9)
                capacity[name] = cap
                log(f"{g.name} {name}: {cap['capacity_per_s']:.3f} requests/s")
            elif session == 1:
                r = g.run(step.run)
                rate = planned_rate(r.load, capacity["capacity"]["capacity_per_s"])
                key = step.table
                if key not in tables:
                    rng = np.random.default_rng(
                        seed_sequence(root_seed, "validation", g.name, "table", key)
                    )
                    tables[key] = group_table(
                        prompt, output, rows, r.requests, rate, g.trace.scale, max_len, r.warmup,
                        rng, key, g.trace.prompt_tokens,
                    )  # fmt: skip
                tab = run_table(tables[key], step.name, r.token_limit, r.priority, preds)
                tables[step.name] = tab
                log(
                    f"{g.name} {step.name}: {len(tab)} requests at {rate:.3f}/s "
                    f"(~{tab['planned_s'].iloc[-1]:.0f} s), priority {r.priority}, token limit "
                    f"{r.token_limit}"
                )
                await serve(
                    step.name, tab,
                    {"kind": "judged", "run": r.name, "load": r.load, "rate_per_s": rate,
                     "session": 1, "block": step.block},
                )  # fmt: skip
            else:
                r = g.run(step.run)
                tab = tables[r.name].copy()
                rep = step.name
                tab["request_id"] = [
                    x.replace(f"{r.name}-", f"{rep}-", 1) for x in tab["request_id"]
                ]
                rate = planned_rate(r.load, capacity["capacity"]["capacity_per_s"])
                log(f"{g.name} {rep}: {r.name} again on a fresh engine")
                await serve(
                    rep, tab,
                    {"kind": "judged", "run": r.name, "load": r.load, "rate_per_s": rate,
                     "session": session, "block": 0},
                )  # fmt: skip
    finally:
        engine.close()
    return res


def phase_kind(name: str, phase: Mapping[str, Any]) -> str:
    """What a recorded phase of an engine session is: ``warmup``, ``calibration``, ``probe``,
    ``capacity`` or ``judged`` (its ``kind``; phases recorded before the protocol carry none and
    are told by name and contents)."""
    if "kind" in phase:
        return str(phase["kind"])
    if name == "warmup":
        return "warmup"
    if name == "calibration":
        return "calibration"
    if "table" in phase:
        return "capacity" if name.startswith("capacity") else "judged"
    raise InputError(f"recorded phase {name!r} has no kind")


def assemble_group(
    g: GroupSpec, spec: MatrixSpec, settings: Any, sessions: list[dict[str, Any]], capacity: dict[str, Any],
    meta: dict[str, Any], cfg: dict[str, Any], sec: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """A group folder's files from its sessions and their step logs."""
    import numpy as np
    import pandas as pd

    from llmqueue.engines.calibration import (
        calibration_rows,
        fit_calibration,
        fit_calibration_rows,
        fit_summary,
        iteration_times,
        slice_steps,
    )  # fmt: skip
    from llmqueue.engines.contention import drift, flags
    from llmqueue.engines.engines import ENGINE_NOTES
    from llmqueue.engines.model import kv_bytes_per_token, param_count, resolve_dtype
    from llmqueue.engines.record import (
        cpu_name,
        engine_admission,
        package_versions,
        request_rows,
    )
    from llmqueue.engines.requests import MATRIX_COLUMNS
    from llmqueue.engines.steplog import core_facts_path

    max_gap = float(sec["calibration"]["max_gap_s"])
    gate = spec.gate_for(g)
    files: dict[str, Any] = {}
    runs: dict[str, Any] = {}
    fits: dict[str, Any] = {}
    session_settings = []
    logs: list[pd.DataFrame] = []
    for ses in sessions:
        log_path = ses["step_log"]
        if not log_path.is_file():
            raise InputError(
                f"the engine wrote no step log ({log_path}): was the probe scheduler used?"
            )
        logs.append(pd.read_csv(log_path, keep_default_na=False, na_values=[""]))
        facts = Path(core_facts_path(log_path))
        if not facts.is_file():
            raise InputError(f"the engine core wrote no scheduler facts ({facts})")
        core = json.loads(facts.read_text())
        read = dict(ses["settings"])
        read["engine_core"] = core
        read["usable_kv_blocks"] = int(core["kv_blocks_free_at_start"])
        read["usable_kv_tokens"] = int(core["kv_blocks_free_at_start"]) * int(core["block_size"])
        session_settings.append(read)

    # the calibration: every round of every session, pooled (each round's iteration times
    # counted within the round)
    rounds = [
        (ses["session"], name, p, steps)
        for ses, steps in zip(sessions, logs, strict=True)
        for name, p in ses["phases"].items()
        if phase_kind(name, p) == "calibration"
    ]
    if not rounds:
        raise InputError(f"group {g.name}: no calibration phase was recorded")
    parts = []
    for session, _name, p, steps in rounds:
        part = calibration_rows(slice_steps(steps, p["t_start"], p["t_end"], p["t_start"]), max_gap)
        if len(rounds) > 1 or p.get("round"):
            part.insert(0, "round", int(p.get("round", 0)))
            part.insert(0, "session", int(session))
        parts.append(part)
    fit, cal_rows = fit_calibration_rows(pd.concat(parts, ignore_index=True))
    files["calibration_steps.csv"] = cal_rows
    fits["calibration"] = fit_summary(fit, "calibration batches (used for prediction)")
    if "session" in cal_rows:
        for k, part in cal_rows.groupby("session"):
            own = fit_calibration_rows(part.drop(columns=["fitted_s", "rel_residual"]))[0]
            fits[f"calibration_session{k}"] = fit_summary(
                own, f"calibration rounds of engine session {k} (noise diagnosis only)"
            )
    law = fit
    log(
        f"{g.name} step law ({len(rounds)} calibration round(s)): c0 = {1e3 * fit.c0_s:.2f} ms, "
        f"c_tok = {1e3 * fit.c_tok_s:.3f} ms/token, c_ctx = {1e6 * fit.c_ctx_s:.3f} us/token, "
        f"R^2 = {fit.r2:.4f}"
    )
    marks = [(p["t_start"], p["t_end"]) for _, _, p, _ in rounds]
    calibration_rounds = [
        {"session": int(ses), "name": name, "round": int(p.get("round", 0)),
         "t_start": p["t_start"], "t_end": p["t_end"], "wall_s": round(p["t_end"] - p["t_start"], 1)}
        for ses, name, p, _ in rounds
    ]  # fmt: skip
    span_s = max(b for _, b in marks) - min(a for a, _ in marks)

    # the probes beside the judged runs, each iteration with the probe it belongs to
    probes = []
    for ses, steps in zip(sessions, logs, strict=True):
        for name, p in ses["phases"].items():
            if phase_kind(name, p) != "probe":
                continue
            part = slice_steps(steps, p["t_start"], p["t_end"], p["t_start"])
            part.insert(0, "probe", name)
            part.insert(1, "session", int(ses["session"]))
            part.insert(2, "run", str(p["for_run"]))
            part.insert(3, "position", str(p["position"]))
            probes.append(part)
    if probes:
        files["probe_steps.csv"] = pd.concat(probes, ignore_index=True)

    for ses, steps in zip(sessions, logs, strict=True):
        for name, p in ses["phases"].items():
            kind = phase_kind(name, p)
            if kind not in ("capacity", "judged"):
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
            if kind == "capacity":
                runs[name] = {"kind": "capacity", "token_limit": p["token_limit"],
                              "contention": p["contention"], **capacity[name]}  # fmt: skip
                continue
            t_it = iteration_times(st, max_gap)
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
                **run_summary(p, rows, st, t_it),
                "measured_rate_per_s": rate_meas,
                "capacity_table": cap_name,
                "achieved_load": rate_meas / cap,
                "preempted_requests": len(pre_ids),
                "preempted_share": len(pre_ids) / len(rows),
                "contention": rec,
                "calibration_law_total_error": float(pred.sum() / t_it.sum() - 1.0),
            }
            if probes:
                runs[name]["block"] = int(p.get("block", 0))
                runs[name]["probe_before"] = probe_name(name, "before")
                runs[name]["probe_after"] = probe_name(name, "after")
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
    judged = [n for n, r in runs.items() if r["kind"] == "judged"]
    files["group.json"] = {**g.summary(), "judged": judged, "capacity": capacity}
    shape, dtype = g.model.shape, resolve_dtype(g.model.dtype)
    meta.update({
        "engine": ENGINE_NOTES[g.engine_kind],
        "versions": {"python": platform.python_version(), **package_versions()},
        "cpu": cpu_name(), "cores": os.cpu_count(), "cpu_bfloat16_instructions": cpu_bf16(),
        "platform": platform.platform(),
        "model": {
            "name": g.model.name,
            "architecture": "LlamaForCausalLM, random weights (transformers LlamaConfig + save_pretrained)",
            "shape": dict(shape), "dtype": dtype, "config_dtype": g.model.dtype, "seed": g.model.seed,
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
        **_protocol_meta(spec, g, calibration_rounds, span_s),
        "contention_thresholds": dict(spec.contention),
        "seed": int(cfg.get("seed", 0)),
        "note": "times in seconds from each run's start on the machine's monotonic clock",
    })  # fmt: skip
    files["meta.json"] = meta
    return files


def _protocol_meta(
    spec: MatrixSpec, g: GroupSpec, rounds: list[dict[str, Any]], span_s: float
) -> dict[str, Any]:
    """What meta.json records of the protocol (nothing without one): its settings, the group's
    probe, every calibration round's session and clock marks, their span and whether it reached
    the least span the protocol asks (flag ``calibration_span`` otherwise)."""
    p = spec.protocol
    if p is None:
        return {}
    short = span_s < p.calibration_min_span_s
    if short:
        log(
            f"{g.name}: the calibration rounds span {span_s:.0f} s, below "
            f"protocol.calibration_min_span_s {p.calibration_min_span_s:.0f} s (flagged)"
        )
    return {
        "protocol": {
            **dataclasses.asdict(p),
            "probe": dataclasses.asdict(group_probe(g, p)),
            "calibration_rounds_run": rounds,
            "calibration_span_s": round(span_s, 1),
            "flags": ["calibration_span"] if short else [],
        }
    }


def _same_settings(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("max_num_seqs", "max_num_batched_tokens", "num_kv_blocks", "block_size",
            "enable_chunked_prefill", "scheduling_policy", "scheduler_cls", "usable_kv_tokens")  # fmt: skip
    return all(a.get(k) == b.get(k) for k in keys)
