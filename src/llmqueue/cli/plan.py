"""``llmqueue plan``: which serving configuration carries your load within your latency targets.

Examples::

    llmqueue plan --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \\
        --profile llama2_7b_vidur_a100 --slo ttft_p99=2,tpot_p99=0.1 --target-rate 40 \\
        --replicas 1:8 --router jsq,round_robin --max-batch 64,128,256 --order fcfs,spjf \\
        --predictor noisy:sigma=0.5 --csv plan.csv --figure plan_pareto
    llmqueue plan --tokens lognormal:mu=5,sigma=1,cap=2048 --prompt-tokens uniform:low=100,high=2000 \\
        --step c0=0.0125,c_tok=4e-5,c_ctx=1.5e-7 --kv-tokens 200000 \\
        --slo ttft=2,tpot=0.1,attainment=0.9 --rate 5:40 --replicas 2,4

Every configuration of the search space (the product of ``--replicas``, ``--router``,
``--order``, ``--max-batch``, ``--max-batched-tokens`` and the KV budget: ``--kv-fraction`` of the
GPU's memory with a ``--profile``, or ``--kv-tokens``; lists ``A,B,C`` or ranges ``LO:HI``,
``LO:HI:+K``, ``LO:HI:xK``; :mod:`llmqueue.plan.space`) runs continuous batching with vLLM's
on-demand paged KV cache (blocks of ``--block-size``) on the serving engine, and gets its goodput:
the highest arrival rate at which it meets every SLO (``--slo``; :mod:`llmqueue.plan.slo`), found
by bisection on the rate (``--rate max``, the default), within ``--rate LO:HI``, or only checked
at ``--rate R`` (:mod:`llmqueue.plan.search`). The report: each configuration's goodput and
goodput per replica with the SLO values there, the best configuration (highest goodput per
replica), the fewest replicas whose goodput reaches ``--target-rate`` (or that meet the SLOs at
``--rate R``), and the Pareto front of goodput per replica against the p99 of the first SLO's
metric at ``--headroom`` x goodput (``--figure``). As a table, ``--json`` or ``--csv``; the same
seed gives the same numbers on any number of ``--workers``.

A search too large for one machine: ``--slice K/N`` evaluates every N-th configuration from the
K-th and writes its rows (``--csv``, or ``--json``; one of them is required); ``--merge A.csv
B.csv ...`` reads the slices back and reports on all of them (give it the slices' ``--rate`` and
``--headroom``; the Snakemake rules ``plan_slice`` and ``plan`` do this, on a cluster through
``--profile profiles/slurm``; docs/cli.md). ``--merge`` reads the tables through one strict
reader (:mod:`llmqueue.plan.table`: a one-line error names the file, the row and the column). Bad
input, an output path that cannot be written (``--csv``, ``--figure``, ``--export``) or one file
given for two outputs, a KV budget below the smallest request and a replayed trace too short to
measure a saturation rate on exit 2 naming the flag before any simulation; a space of more than
10^6 configurations is refused with its count; SLOs that no configuration meets are reported as
such (at ``--rate R``, a configuration that misses them there has goodput 0 at R). No goodput
above a configuration's saturation rate is reported in any mode, and runs too short to tell
(``--warmup``, ``--requests``) are flagged in the rows and the report's warning
(:mod:`llmqueue.plan.search`).
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from typing import Any

from llmqueue.cli import add_command, flags, inputs
from llmqueue.errors import InputError
from llmqueue.latency import StepLaw
from llmqueue.limits import MAX_BATCH, MAX_REQUESTS, MAX_SERVERS, MAX_TIME_S, MAX_TOKENS
from llmqueue.plan.spec import RUN_DEFAULTS
from llmqueue.policy import DEFAULT_ORDER, ORDERS, ROUTERS, predictions_needed

MAX_SLOTS = 1 << 22  # replicas x max batch of one configuration (the engine's per-server arrays)


def _space(args: argparse.Namespace, fit: dict[str, Any] | None) -> Any:
    from llmqueue.plan.space import SearchSpace, parse_fractions, parse_ints, parse_names

    replicas = parse_ints(args.replicas, "--replicas", lo=1, hi=MAX_SERVERS, geometric=False)
    batch = parse_ints(args.max_batch, "--max-batch", lo=1, hi=MAX_BATCH, geometric=True)
    mbt = parse_ints(
        args.max_batched_tokens,
        "--max-batched-tokens",
        lo=1,
        hi=int(MAX_TOKENS),
        geometric=True,
        allow_none=True,
    )
    routers = parse_names(args.router, "--router", ROUTERS)
    orders = parse_names(args.order, "--order", ORDERS)
    if (
        max(r for r in replicas if r is not None) * max(b for b in batch if b is not None)
        > MAX_SLOTS
    ):
        raise InputError(
            f"--replicas x --max-batch must be at most {MAX_SLOTS:,} (the engine keeps arrays of "
            "that many entries per run)"
        )
    bs = args.block_size
    if args.kv_tokens is not None:
        if args.kv_fraction is not None:
            raise InputError("give --kv-tokens N,... or --kv-fraction F,..., not both")
        toks = parse_ints(args.kv_tokens, "--kv-tokens", lo=bs, hi=int(inputs.MAX_KV_TOKENS),
                          geometric=True)  # fmt: skip
        kv = tuple((math.nan, int(t)) for t in toks if t is not None)
    else:
        from llmqueue.profiles import kv_tokens_of_fit

        if fit is None:
            raise InputError("--kv-fraction needs --profile NAME (its model and GPU); or give "
                             "--kv-tokens N,...")  # fmt: skip
        fracs = parse_fractions(args.kv_fraction or "0.9", "--kv-fraction")
        kv = tuple((f, kv_tokens_of_fit(fit, memory_fraction=f)) for f in fracs)
        for f, t in kv:
            if t < bs:
                raise InputError(
                    f"--kv-fraction {f:g}: the weights already fill that share of the GPU's "
                    "memory, so the KV cache gets no block; give a larger fraction"
                )
    return SearchSpace(
        tuple(int(r) for r in replicas if r is not None),
        routers,
        orders,
        tuple(int(b) for b in batch if b is not None),
        mbt,
        kv,
        bs,
    )


def _check_fits(workload: Any, space: Any, args: argparse.Namespace) -> None:
    """A KV budget below the smallest request serves nothing (no saturation rate to measure, no
    goodput to find): refused naming the flag that gave it, with the least it needs."""
    smallest = inputs.smallest_request(workload)
    for frac, tokens in space.kv:
        if tokens < smallest:
            flag = f"--kv-tokens {tokens}" if math.isnan(frac) else (
                f"--kv-fraction {frac:g} (a KV budget of {tokens} tokens)"
            )  # fmt: skip
            raise InputError(
                f"{flag} is below the smallest request (prompt + output = {smallest:.0f} tokens): "
                f"nothing could ever be served; allowed: >= {math.ceil(smallest)} tokens"
            )


def _check(args: argparse.Namespace) -> None:
    if args.merge:
        return
    if args.slo is None:
        raise InputError("--slo is required: e.g. --slo ttft_p99=2,tpot_p99=0.1")
    if (args.tokens is None) == (args.trace is None):
        raise InputError("give exactly one of --tokens LAW (with --prompt-tokens) or --trace PATH")
    if args.prompt_tokens is not None and args.trace is not None:
        raise InputError("--prompt-tokens goes with --tokens; a --trace has its own prompt column")
    if args.replay and args.trace is None:
        raise InputError("--replay replays a --trace PATH at its timestamps")
    if args.batch_time or args.latency:
        raise InputError("plan searches continuous batching: give --step or --profile NAME")
    if bool(args.step) == bool(args.profile):
        raise InputError(
            "give exactly one time law: --profile NAME or --step c0=..,c_tok=..,c_ctx=.."
        )


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse, before any work, an output that cannot be written: ``--csv``, ``--figure``'s
    PATH.pdf and PATH.png."""
    from llmqueue.io import check_output_path

    if args.csv:
        check_output_path(args.csv, "--csv")
    if args.figure:
        for ext in ("pdf", "png"):
            check_output_path(f"{args.figure}.{ext}", "--figure")
    read = [("--trace", args.trace), *(("--merge", p) for p in args.merge or ())]
    outputs = [("--csv", args.csv), ("--export", args.export[1] if args.export else None)]
    if args.figure:
        outputs += [("--figure", f"{args.figure}.{x}") for x in ("pdf", "png")]
    inputs.check_outputs(outputs, read)


def _slice(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    k, sep, n = text.partition("/")
    try:
        ki, ni = int(k), int(n)
    except ValueError:
        ki, ni = -1, 0
    if not sep or not (ni >= 1 and 0 <= ki < ni):
        raise InputError(f"--slice {text!r}: K/N with 0 <= K < N")
    return ki, ni


class _Progress:
    """A progress bar on stderr (a terminal, or --progress): configurations done, elapsed time."""

    def __init__(self, total: int, on: bool) -> None:
        self.total, self.on = total, on
        self.t0 = time.monotonic()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if not self.on or (now - self.last < 0.2 and done < total):
            return
        self.last = now
        width = 30
        fill = int(width * done / max(total, 1))
        print(
            f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} configurations, "
            f"{now - self.t0:.1f} s",
            end="\n" if done == total else "",
            file=sys.stderr,
            flush=True,
        )


def _read_csv(paths: list[str]) -> list[dict[str, Any]]:
    """The rows of plan tables (``--merge``), through :func:`llmqueue.plan.table.read_plan_table`:
    every column typed and in range, one-line errors naming the file, the row and the column."""
    from llmqueue.plan.table import read_plan_tables

    return read_plan_tables(paths, where="--merge")


def _write_csv(rows: list[dict[str, Any]], path: str) -> None:
    import io

    from llmqueue.io import check_output_path, write_text

    check_output_path(path, "--csv")
    cols = list(rows[0]) if rows else []
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if v is None else v) for k, v in r.items()})
    write_text(buf.getvalue(), path)


def _report(rows: list[dict[str, Any]], args: argparse.Namespace, one_rate: bool) -> dict[str, Any]:
    from llmqueue.plan.summary import best, fewest_replicas, pareto_front

    front = pareto_front(rows)
    for r, f in zip(rows, front, strict=True):
        r["pareto"] = f
    out: dict[str, Any] = {"configurations": len(rows)}
    b = best(rows)
    out["best"] = b
    target = args.target_rate
    if one_rate and target is None:
        target = float(args.rate)
    if target is not None:
        out["target_rate_per_s"] = target
        out["fewest_replicas"] = fewest_replicas(rows, target, one_rate)
    if b is None:
        out["note"] = "no configuration meets the SLOs at any rate tried"
    elif target is not None and out["fewest_replicas"] is None:
        out["note"] = f"no configuration carries {target:g} requests/s within the SLOs"
    short = _too_short(rows)
    if short:
        out["warning"] = short
    out["rows"] = rows
    return out


def _too_short(rows: list[dict[str, Any]]) -> str:
    """The warning for rows whose runs were too short to tell (llmqueue.plan.search.too_short),
    naming the flags and the sizes that would do; "" when none was."""
    from llmqueue.plan.search import MEASURED_TURNS, WARMUP_TURNS, sizes_needed

    short = [r for r in rows if r.get("too_short")]
    if not short:
        return ""
    most = max(float(r["in_system"]) for r in short)
    req, warm = sizes_needed(most)
    return (
        f"{len(short)} of {len(rows)} configurations ran too short to tell their goodput (up to "
        f"{most:.4g} requests in the system there; a warm-up of {WARMUP_TURNS}x and a measured "
        f"run of {MEASURED_TURNS}x that needed): raise --warmup to {warm} and --requests to {req} "
        "(their too_short column says which)"
    )


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return "-" if math.isnan(v) else f"{v:.4g}"
    return "-" if v is None else str(v)


def _print_table(out: dict[str, Any], top: int) -> None:
    rows = sorted(out["rows"], key=lambda r: -float(r["goodput_per_replica_per_s"]))
    slo_cols = [c for c in out["rows"][0] if c.endswith("_s") and c.split("_")[0] in
                ("wait", "ttft", "tpot", "jct")] + (["attainment"] if "attainment" in out["rows"][0] else [])  # fmt: skip
    cols = ["replicas", "router", "order", "max_batch", "max_batched_tokens", "kv_tokens",
            "goodput_rate_per_s", "goodput_per_replica_per_s", *slo_cols, "pareto_latency_s", "pareto"]  # fmt: skip
    head = {"max_batched_tokens": "chunk", "goodput_rate_per_s": "goodput/s",
            "goodput_per_replica_per_s": "per replica", "pareto_latency_s": "p99@headroom"}  # fmt: skip
    table = [[head.get(c, c) for c in cols]]
    for r in rows[:top]:
        g = _fmt(r["goodput_rate_per_s"])
        if r["goodput_bound"] != "=":
            g = f"{r['goodput_bound']}{_fmt(r['goodput_rate_per_s'])}"
        table.append([g if c == "goodput_rate_per_s" else _fmt(r.get(c)) for c in cols])
    widths = [max(len(row[i]) for row in table) for i in range(len(cols))]
    for row in table:
        print("  ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)))
    if len(rows) > top:
        print(f"... {len(rows) - top} more (--top N, --csv PATH)")

    def line(r: dict[str, Any] | None) -> str:
        if r is None:
            return "none"
        return (
            f"{r['replicas']} x {r['router']} {r['order']} max_batch={r['max_batch']} "
            f"chunk={_fmt(r['max_batched_tokens'])} kv={r['kv_tokens']}: goodput "
            f"{_fmt(r['goodput_rate_per_s'])}/s ({_fmt(r['goodput_per_replica_per_s'])}/s per replica)"
        )

    print(f"best (goodput per replica): {line(out['best'])}")
    if "target_rate_per_s" in out:
        print(f"fewest replicas for {out['target_rate_per_s']:g}/s: {line(out['fewest_replicas'])}")
    if "note" in out:
        print(out["note"])
    if "warning" in out:
        print(f"warning: {out['warning']}")


def plan(args: argparse.Namespace) -> dict[str, Any]:
    """Everything the command reports, as one JSON-ready dict (module docstring)."""
    from llmqueue.plan.search import PlanRun, parse_rate, search
    from llmqueue.plan.slo import parse_slo
    from llmqueue.sim.capacity import check_capacity_rows

    _check(args)
    _check_outputs(args)
    rates = parse_rate(args.rate)
    one_rate = rates.mode == "one"
    if args.merge:
        rows = _read_csv(args.merge)
        out = _report(rows, args, one_rate)
        return out
    slo = parse_slo(args.slo)
    part = _slice(args.slice)
    if part is not None and not (args.csv or args.json):
        raise InputError("--slice K/N writes its rows with --csv PATH or --json: give one")
    if part is not None and args.figure:
        raise InputError(
            "--figure draws the whole search: give it to --merge of the slices, not to --slice"
        )
    inputs.check_export(args.export)
    export_rate = args.target_rate if args.target_rate is not None else (
        rates.lo if one_rate else None
    )  # fmt: skip
    if args.export and export_rate is None:
        raise InputError("--export writes the load at --target-rate R (or at --rate R): give one")
    needed = predictions_needed(orders=args.order.split(","), routers=args.router.split(","))
    predictor = inputs.predictor_from(args, needed, formers=False)
    latency, fit = inputs.latency_from(args, "continuous")
    if not isinstance(latency, StepLaw):
        raise InputError(f"--profile {args.profile}: plan needs a step profile (step_profiles)")
    space = _space(args, fit)
    # the workload at a nominal rate; every run time-scales it to the rate it tries
    workload = inputs.workload_from(argparse.Namespace(**{**vars(args), "rate": None}), predictor)
    _check_fits(workload, space, args)
    check_capacity_rows(workload, f"--trace {args.trace}", "plan")
    configs = list(space.configs()) if part is None else space.slice(*part)
    if args.export and export_rate is not None:
        req, warm = PlanRun(requests=args.requests, warmup=args.warmup).sizes(workload)
        inputs.export_workload(
            workload.at_rate(export_rate), args.export, seed=args.seed, requests=req + warm
        )
    run = PlanRun(
        requests=args.requests,
        warmup=args.warmup,
        seed=args.seed,
        rel_tol=args.tolerance,
        headroom=args.headroom,
        guard_s=args.guard,
        max_load=args.max_load,
    )
    show = args.progress or (sys.stderr.isatty() and len(configs) > 1)
    t0 = time.monotonic()
    rows = search(
        workload, configs, latency, slo, rates, run,
        workers=args.workers, progress=_Progress(len(configs), show),
    )  # fmt: skip
    elapsed = time.monotonic() - t0
    out = _report(rows, args, one_rate) if part is None else {"rows": rows}
    head = {
        "slo": slo.describe(),
        "rate": rates.describe(),
        "workload": workload.describe(),
        "latency": latency.name,
        "space_size": space.size,
        "slice": args.slice,
        "elapsed_s": elapsed,
        "configurations_per_s": len(configs) / elapsed if elapsed > 0 else math.nan,
        "workers": args.workers or os.cpu_count(),
    }
    return {**head, **out}


def _handler(args: argparse.Namespace) -> int:
    out = plan(args)
    if args.csv:
        _write_csv(out["rows"], args.csv)
    if args.figure:
        from llmqueue.plan.fig_plan_pareto import plot_rows

        plot_rows(out["rows"], args.figure, title=out.get("slo", ""), headroom=args.headroom)
    if args.json:
        from llmqueue.io import strict_json

        print(strict_json(out))
    elif "best" in out:
        _print_table(out, args.top)
    else:
        print(f"{len(out['rows'])} configurations of slice {args.slice} -> {args.csv}")
    return 0


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "plan", __doc__)
    g = p.add_argument_group("workload")
    inputs.add_workload_flags(g)
    g.add_argument(
        "--rate",
        default="max",
        help="max (the highest rate meeting the SLOs, default), LO:HI (searched in a range) or R "
        "(the SLOs checked at R requests/s)",
    )
    g.add_argument(
        "--target-rate",
        type=flags.number(0, 1e9, lo_open=True, unit="requests/s"),
        help="report the fewest replicas whose goodput reaches this rate (requests/s)",
    )
    g = p.add_argument_group("service-level objectives")
    g.add_argument("--slo", help="ttft_p99=2,tpot_p99=0.1 (bounds) or ttft=2,tpot=0.1,"
                   "attainment=0.9 (per-request deadlines); s")  # fmt: skip
    g = p.add_argument_group("search space (lists A,B or ranges LO:HI, LO:HI:+K, LO:HI:xK)")
    g.add_argument("--replicas", default="1", help="replicas (LO:HI: every integer; default 1)")
    g.add_argument("--router", default="central", help=f"routers: {', '.join(ROUTERS)}")
    g.add_argument("--order", default=DEFAULT_ORDER, help=f"queue orders: {', '.join(ORDERS)}")
    g.add_argument("--max-batch", default="256", help="max running requests per replica "
                   "(LO:HI doubles; default 256, vLLM's)")  # fmt: skip
    g.add_argument("--max-batched-tokens", default="2048", help="tokens per iteration (chunked "
                   "prefill; none: no chunking; default 2048)")  # fmt: skip
    g.add_argument("--kv-fraction", help="share of GPU memory for weights + KV with --profile "
                   "(default 0.9, vLLM's)")  # fmt: skip
    g.add_argument("--kv-tokens", help="KV budget per replica in tokens (instead of --kv-fraction)")
    g.add_argument(
        "--block-size",
        type=flags.count(1, MAX_BATCH),
        default=16,
        help="KV cache block, tokens (default 16, vLLM's)",
    )
    g.add_argument(
        "--guard",
        type=flags.number(0, MAX_TIME_S, lo_open=True, unit="s"),
        metavar="S",
        help="sjf/spjf starvation guard: serve by age after S s",
    )
    g = p.add_argument_group("time law (one)")
    inputs.add_law_flags(g)
    g = p.add_argument_group("run")
    g.add_argument(
        "--requests",
        type=flags.count(400, MAX_REQUESTS),
        default=RUN_DEFAULTS["requests"],
        help="measured requests per run (a replayed trace: at most its rows; default "
        f"{RUN_DEFAULTS['requests']})",
    )
    g.add_argument(
        "--warmup",
        type=flags.count(0, MAX_REQUESTS),
        default=RUN_DEFAULTS["warmup"],
        help=f"warm-up requests per run (default {RUN_DEFAULTS['warmup']})",
    )
    g.add_argument(
        "--tolerance",
        type=flags.number(0.001, 0.5),
        default=RUN_DEFAULTS["tolerance"],
        help="bisection's relative tolerance on the goodput, in [0.001, 0.5] (default "
        f"{RUN_DEFAULTS['tolerance']:g})",
    )
    g.add_argument(
        "--headroom",
        type=flags.number(0, 1, lo_open=True),
        default=RUN_DEFAULTS["headroom"],
        help="the Pareto latency is measured at this fraction of the goodput (default "
        f"{RUN_DEFAULTS['headroom']:g})",
    )
    g.add_argument(
        "--max-load",
        type=flags.number(0, 1, lo_open=True),
        default=RUN_DEFAULTS["max_load"],
        help="--rate max searches up to this fraction of the saturation rate (default "
        f"{RUN_DEFAULTS['max_load']:g})",
    )
    g.add_argument("--seed", type=flags.seed, default=0, help="random seed in [0, 2**63)")
    g.add_argument(
        "--workers",
        type=flags.count(1, 1024),
        help="threads (default: the machine's cores)",
    )
    g.add_argument("--slice", metavar="K/N", help="evaluate configurations K, K+N, K+2N, ... "
                   "(their rows: --csv or --json)")  # fmt: skip
    g.add_argument("--merge", nargs="+", metavar="CSV", help="report on the rows of plan CSVs")
    g = p.add_argument_group("output")
    g.add_argument("--json", action="store_true")
    g.add_argument("--csv", help="write every configuration's row to this CSV")
    g.add_argument("--figure", help="write the Pareto figure to PATH.pdf and PATH.png")
    g.add_argument("--top", type=flags.count(1, 10**6), default=20, help="table rows shown")
    g.add_argument("--progress", action="store_true", help="a progress bar even off a terminal")
    p.set_defaults(handler=_handler)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["plan", *sys.argv[1:]]))
