"""Command line of the profiling harness (runs as it is on a GPU machine with torch and transformers).

    llmqueue profile measure --device cuda --hardware-id h100 [--models M,..]
        [--parts timing,composition,fig2a,depth,step_law] [--fig2a-requests N] [--out DIR] [--config FILE]
    llmqueue profile step-law --device cuda --hardware-id h100 [--out DIR]
    llmqueue profile smoke [--out logs/profiling-smoke]      # tiny model, CPU, <= 60 s
    llmqueue profile roofline --model llama2-7b-chat --gpu a100-80gb [--batch B --context C]
    llmqueue profile kv-limit --model llama2-7b-chat --gpu a100-80gb [--tokens 1280]

``step-law`` writes ``step_law.csv`` (decode steps and prefills of config ``profiling.step_law``)
beside them and adds its run to ``meta.json``; on CUDA, ``measure`` runs it too (part ``step_law``,
in the default parts there), so one command measures everything a GPU folder holds. ``measure`` writes ``timing.csv``, ``e2e.csv`` (one row per run, a ``model`` column) and
``meta.json`` to ``data/profiling/<hardware-id>/`` (or --out), appending to other models' rows.
Bad input exits with code 2 and a one-line message.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from llmqueue.cli import add_command, flags
from llmqueue.errors import InputError
from llmqueue.limits import MAX_BATCH, MAX_TOKENS
from llmqueue.traces import read_table

PARTS = ("timing", "composition", "fig2a", "depth")
MAX_OVERHEAD_GIB = 1e6  # --overhead-gib: far above any GPU's memory (the answer is then 0)
STEP_PART = "step_law"  # the serving step law (config profiling.step_law), once, not per model


def load_config(path: str) -> dict[str, Any]:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise InputError(f"config file {path!r} does not exist")
    with open(p) as fh:
        cfg = yaml.safe_load(fh)
    if not isinstance(cfg, dict) or "profiling" not in cfg:
        raise InputError(f"{path}: no 'profiling' section")
    return cfg


def _write_meta(out: Path, entry: dict[str, Any]) -> None:
    from llmqueue.io import read_json, write_json

    path = out / "meta.json"
    meta = read_json(path) if path.exists() else {"runs": []}
    meta.update({k: entry[k] for k in ("hardware_id", "environment")})
    meta["runs"] = [
        r
        for r in meta.get("runs", [])
        if not (r["model"] == entry["run"]["model"] and r["parts"] == entry["run"]["parts"])
    ]
    meta["runs"].append(entry["run"])
    mark_superseded(meta["runs"])
    meta["note"] = entry["note"]
    write_json(meta, path)


def mark_superseded(runs: list[dict[str, Any]]) -> None:
    """In each run, list under ``superseded_parts`` the parts a later run of the same model
    re-measured (its rows in the CSVs were replaced)."""
    for i, r in enumerate(runs):
        later = {p for q in runs[i + 1 :] if q["model"] == r["model"] for p in q["parts"]}
        gone = [p for p in r["parts"] if p in later]
        if gone:
            r["superseded_parts"] = gone
        else:
            r.pop("superseded_parts", None)


def cmd_measure(args: argparse.Namespace) -> None:
    from llmqueue.hardware.models import resolve_device
    from llmqueue.profiling.meta import environment, loadavg, now_utc
    from llmqueue.profiling.sweeps import run_model_sweep
    from llmqueue.studies.profiling.checks import check_profiling_section

    cfg = load_config(args.config)
    prof = cfg["profiling"]
    check_profiling_section(prof)
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    resolve_device(args.device)  # CUDA asked for but absent -> InputError before anything runs
    plan = dict(prof["hardware"][kind])
    if args.fig2a_requests is not None:
        plan["fig2a_requests"] = args.fig2a_requests
    if args.repeats is not None:
        plan["repeats"] = args.repeats
    import yaml

    for item in args.set or []:
        key, eq, val = item.partition("=")
        if not eq or key not in plan:
            raise InputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(plan)}")
        plan[key] = yaml.safe_load(val)
    if args.set:
        check_profiling_section({**prof, "hardware": {**prof["hardware"], kind: plan}})
    models = args.models.split(",") if args.models else list(prof["models"])
    default = list(PARTS) + ([STEP_PART] if kind == "cuda" and "step_law" in prof else [])
    parts = args.parts.split(",") if args.parts else default
    bad = [p for p in parts if p not in (*PARTS, STEP_PART)]
    if bad:
        raise InputError(f"--parts: unknown {bad}; allowed: {', '.join((*PARTS, STEP_PART))}")
    step_law = STEP_PART in parts
    if step_law and "step_law" not in prof:
        raise InputError(f"--parts {STEP_PART}: {args.config} has no profiling.step_law section")
    parts = [p for p in parts if p != STEP_PART]
    from llmqueue.hardware.models import get_spec

    for m in models:
        get_spec(m)
    trace = read_table(cfg["data"]["azure_trace"]) if "fig2a" in parts else None
    out = Path(args.out or f"data/profiling/{args.hardware_id}")
    env = environment(args.device)
    note = (
        f"random-weight models (architecture shapes only), {plan['dtype']}, "
        f"{'full depth' if not plan.get('layers') else str(plan['layers']) + ' layer(s) of full width'}; "
        "timings on a shared machine are perturbed by other processes: see load_before/load_after"
    )
    if step_law:
        _step_law(cfg, args.device, out, args.hardware_id, [])
    for m in models if parts else []:
        t0, l0, d0 = time.perf_counter(), loadavg(), now_utc()
        run_model_sweep(
            m,
            prof,
            plan,
            args.device,
            out,
            trace,
            int(cfg.get("seed", 0)),
            parts,
            log=lambda s: print(s, flush=True),
        )
        run = {
            "model": m,
            "parts": parts,
            "started": d0,
            "finished": now_utc(),
            "wall_s": round(time.perf_counter() - t0, 1),
            "load_before": l0,
            "load_after": loadavg(),
            "plan": plan,
        }
        _write_meta(
            out, {"hardware_id": args.hardware_id, "environment": env, "run": run, "note": note}
        )
        print(f"{m}: done in {run['wall_s']} s -> {out}", flush=True)


def cmd_step_law(args: argparse.Namespace) -> None:
    """Time the serving step law (decode steps over batch x context, prefills) at full depth."""
    from llmqueue.hardware.models import resolve_device
    from llmqueue.studies.profiling.checks import check_profiling_section

    cfg = load_config(args.config)
    prof = cfg["profiling"]
    check_profiling_section(prof)
    if "step_law" not in prof:
        raise InputError(f"{args.config}: no profiling.step_law section")
    resolve_device(args.device)
    out = Path(args.out or f"data/profiling/{args.hardware_id}")
    _step_law(cfg, args.device, out, args.hardware_id, args.set or [])


def _step_law(
    cfg: dict[str, Any], device: str, out: Path, hardware_id: str, overrides: list[str]
) -> None:
    """Run config ``profiling.step_law`` (with KEY=VALUE `overrides`) into `out`/step_law.csv and
    record the run in `out`/meta.json."""
    from llmqueue.profiling.meta import environment, loadavg, now_utc
    from llmqueue.profiling.steplaw import run_step_law
    from llmqueue.studies.profiling.checks import check_profiling_section

    prof = cfg["profiling"]
    plan = dict(prof["step_law"])
    import yaml

    for item in overrides:
        key, eq, val = item.partition("=")
        if not eq or key not in plan:
            raise InputError(f"--set {item!r}: expected KEY=VALUE with KEY one of {sorted(plan)}")
        plan[key] = yaml.safe_load(val)
    if overrides:
        check_profiling_section({**prof, "step_law": plan})
    t0, l0, d0 = time.perf_counter(), loadavg(), now_utc()
    run_step_law(plan, device, out, int(cfg.get("seed", 0)), log=lambda s: print(s, flush=True))
    run = {
        "model": plan["model"],
        "parts": ["step_law"],
        "started": d0,
        "finished": now_utc(),
        "wall_s": round(time.perf_counter() - t0, 1),
        "load_before": l0,
        "load_after": loadavg(),
        "plan": plan,
    }
    note = (
        "random-weight models (architecture shapes only), full depth; step_law.csv: decode steps "
        "on a StaticCache filled with random KV and prefills into an empty cache"
    )
    path = out / "meta.json"
    if path.exists():
        from llmqueue.io import read_json

        note = read_json(path).get("note", note)
    _write_meta(
        out,
        {
            "hardware_id": hardware_id,
            "environment": environment(device),
            "run": run,
            "note": note,
        },
    )
    print(f"step law: done in {run['wall_s']} s -> {out}", flush=True)


def cmd_smoke(args: argparse.Namespace) -> None:
    """Tiny-config smoke profile: proves the harness runs end to end here (timings not used)."""
    from llmqueue.profiling.smoke import run_smoke

    cfg = load_config(args.config)
    run_smoke(cfg, Path(args.out), log=lambda s: print(s, flush=True))


def _check_names(args: argparse.Namespace, dtypes: tuple[str, ...]) -> None:
    """--model, --gpu and the dtype flags against the named specs, each error naming its flag."""
    from llmqueue.hardware.devices import GPU_SPECS
    from llmqueue.hardware.models import DTYPE_BYTES, MODEL_SPECS

    if args.model not in MODEL_SPECS:
        raise InputError(f"--model {args.model!r} unknown; known models: {sorted(MODEL_SPECS)}")
    if args.gpu not in GPU_SPECS:
        raise InputError(f"--gpu {args.gpu!r} unknown; known GPU specs: {sorted(GPU_SPECS)}")
    for dest in dtypes:
        value = getattr(args, dest)
        if value not in DTYPE_BYTES:
            flag = "--" + dest.replace("_", "-")
            raise InputError(f"{flag} {value!r} unknown; allowed: {sorted(DTYPE_BYTES)}")


def cmd_roofline(args: argparse.Namespace) -> None:
    from llmqueue.hardware.roofline import roofline

    _check_names(args, ("dtype",))
    r = roofline(args.model, args.gpu, args.dtype)
    res = {
        "model": args.model,
        "gpu": args.gpu,
        "dtype": args.dtype,
        "batch": args.batch,
        "context": args.context,
        "t2_decode_s": r.decode_time(args.batch, args.context),
        "t1_prefill_s": r.prefill_time(args.batch, args.input),
        "input_tokens": args.input,
        "verdict": "predicted (roofline)",
    }
    print(json.dumps(res, indent=2))


def cmd_kv(args: argparse.Namespace) -> None:
    from llmqueue.hardware.kvcache import kv_limit

    _check_names(args, ("weights_dtype", "kv_dtype"))
    r = kv_limit(
        args.model, args.gpu, args.tokens, args.weights_dtype, args.kv_dtype, args.overhead_gib
    )
    print(json.dumps(r.to_dict(), indent=2))


def register(subparsers: Any) -> None:
    ap = add_command(subparsers, "profile", __doc__)
    sub = ap.add_subparsers(dest="profile_command", required=True, parser_class=type(ap))
    m = sub.add_parser("measure", help="run the sweeps of the profiling config section")
    m.add_argument("--config", default="config/config.yaml")
    m.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    m.add_argument(
        "--hardware-id",
        required=True,
        help="folder name under data/profiling/, e.g. cpu-intel-xeon-2c, h100",
    )
    m.add_argument("--out", default=None)
    m.add_argument("--models", default=None, help="comma-separated subset of profiling.models")
    m.add_argument(
        "--parts",
        default=None,
        help=f"comma-separated subset of {','.join((*PARTS, STEP_PART))} (default: all; {STEP_PART} on CUDA only)",
    )
    m.add_argument("--fig2a-requests", type=flags.count(1, 10**6), default=None)
    m.add_argument("--repeats", type=flags.count(1, 10**6), default=None)
    m.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one key of the device plan (YAML value), e.g. --set throughput_batch_sizes=[1,4]; "
        "recorded in meta.json",
    )
    m.set_defaults(func=cmd_measure)
    sl = sub.add_parser("step-law", help="time the serving step law (profiling.step_law)")
    sl.add_argument("--config", default="config/config.yaml")
    sl.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    sl.add_argument("--hardware-id", required=True, help="folder name under data/profiling/")
    sl.add_argument("--out", default=None)
    sl.add_argument(
        "--set", action="append", metavar="KEY=VALUE", help="override one key of profiling.step_law"
    )
    sl.set_defaults(func=cmd_step_law)
    s = sub.add_parser("smoke", help="tiny-config smoke profile (CPU, <= 60 s)")
    s.add_argument("--config", default="config/config.yaml")
    s.add_argument("--out", default="logs/profiling-smoke")
    s.set_defaults(func=cmd_smoke)
    r = sub.add_parser("roofline", help="predicted t1/t2 on a named GPU spec")
    r.add_argument("--model", required=True)
    r.add_argument("--gpu", required=True)
    r.add_argument("--dtype", default="float16")
    r.add_argument("--batch", type=flags.count(1, MAX_BATCH), default=1,
                   help=f"sequences per step, in [1, {MAX_BATCH}]")  # fmt: skip
    r.add_argument("--context", type=flags.count(0, int(MAX_TOKENS)), default=0,
                   help=f"tokens of context per sequence, in [0, {MAX_TOKENS:g}]")  # fmt: skip
    r.add_argument("--input", type=flags.count(1, int(MAX_TOKENS)), default=128,
                   help=f"prompt tokens per sequence, in [1, {MAX_TOKENS:g}]")  # fmt: skip
    r.set_defaults(func=cmd_roofline)
    k = sub.add_parser("kv-limit", help="largest batch whose KV cache fits")
    k.add_argument("--model", required=True)
    k.add_argument("--gpu", required=True)
    k.add_argument("--tokens", type=flags.count(1, int(MAX_TOKENS), unit="tokens"), default=1280,
                   help=f"tokens per sequence (prompt + output), in [1, {MAX_TOKENS:g}]")  # fmt: skip
    k.add_argument("--weights-dtype", default="float16")
    k.add_argument("--kv-dtype", default="float16")
    k.add_argument("--overhead-gib", type=flags.number(0, MAX_OVERHEAD_GIB, unit="GiB"),
                   default=0.0, help=f"memory set aside besides weights and KV cache, GiB in "
                   f"[0, {MAX_OVERHEAD_GIB:g}]")  # fmt: skip
    k.set_defaults(func=cmd_kv)
    ap.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    args.func(args)
    return 0
