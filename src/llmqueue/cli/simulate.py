"""``llmqueue simulate``: one serving policy under an operator's own load, by the serving engine.

Examples::

    llmqueue simulate --tokens lognormal:mu=5,sigma=1,cap=2048 --load 0.8 --order spjf \\
        --predictor noisy:sigma=0.5 --latency a=0.02,b0=0.1 --json
    llmqueue simulate --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \\
        --rate 4 --batching continuous --max-batch 256 --kv-tokens auto --admission on_demand \\
        --profile llama2_7b_vidur_a100
    llmqueue simulate --tokens uniform:low=1,high=20 --batching multibin --bins 4 --batch 8 \\
        --servers 8 --predictor oracle --latency a=0.0366,b0=0 --max-rate --json
    llmqueue simulate --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \
        --rate 20 --batching continuous --max-batch 128 --kv-tokens auto --admission on_demand \
        --profile llama2_7b_vidur_a100 --replicas 4 --router jsq

A workload is Poisson arrivals at ``--rate`` (requests/s) or ``--load`` (a fraction of the
policy's highest sustainable rate) with output tokens from ``--tokens LAW`` (and prompt tokens
from ``--prompt-tokens LAW``), or joint (prompt, output) rows of ``--trace PATH``; ``--replay``
replays the trace at its own timestamps (time-scaled to ``--rate`` / ``--load`` if given).
Predictions (``--predictor``) order the queue under ``--order spjf`` and choose the bin under
``--batching multibin``. The time law: ``--profile NAME`` (a config ``step_profiles`` entry for
continuous batching, ``batch_profiles`` or ``latency_profiles`` otherwise; its fit.json is built
by ``make reproduce``) or explicit ``--step c0=S,c_tok=S,c_ctx=S`` (continuous),
``--batch-time k1=..,k2=..,k3=..,k4=..`` (Eq. 18) or ``--latency a=..,b0=..`` (S = a N + b0).

Output: wait (arrival -> service start), ttft (arrival -> first token) and jct (arrival -> last
token), each mean with its 95% CI and p50/p90/p99 (s), throughput, mean batch, KV utilisation,
preemptions, rejections, and ``unstable`` when the queue grows without bound (no means then).
Servers: ``--servers C`` puts one queue in front of C servers; ``--replicas C --router NAME`` gives
each of C replicas its own queue, an arrival going to the replica the router picks (round_robin,
random, jsq, least_work, least_kv, power_of_d with ``--router-d``; :mod:`llmqueue.sim.router`).
Where a formula applies (no batching, Poisson arrivals, a steady state) ``wait`` also holds
``exact``: Pollaczek-Khinchine (FCFS) or Cobham's priority formula (SJF, SPJF; for a predictor over
token laws the formula's integral is evaluated by Monte Carlo, ``exact_se`` > 0) for one server
or random routing (c queues at rate lambda / c); Erlang C (central queue) and E_c/M/1 (round
robin) for exponential service.
Bad input exits 2 naming the flag and the allowed values, before any simulation.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from llmqueue.cli import add_command, flags, inputs
from llmqueue.errors import InputError
from llmqueue.io import strict_json
from llmqueue.limits import (
    MAX_BATCH,
    MAX_ENGINE_ENTRIES,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
    MAX_SERVERS,
    MAX_TIME_S,
    MAX_TOKENS,
    product,
)
from llmqueue.plan.space import POWER_D
from llmqueue.policy import (
    ADMISSIONS,
    BATCHING,
    DEFAULT_ORDER,
    FORMER_RECORDS,
    GUARD_FACTOR_FORMERS,
    KV_ACCOUNTINGS,
    ORDERS,
    QUEUE_ORDERS,
    ROUTED_FORMERS,
    ROUTERS,
    TIMEOUT_FORMERS,
    Policy,
    batch_former,
    predictions_needed,
    queue_order,
    router,
)
from llmqueue.seeds import seed_sequence
from llmqueue.sim.capacity import check_capacity_rows, exact_rate, max_rate
from llmqueue.sim.engine import run as run_engine
from llmqueue.sim.exact import exact_wait
from llmqueue.sim.workload import Workload

MAX_BINS = 1024
MAX_SLOTS = MAX_ENGINE_ENTRIES  # servers x batch (or x block size): one per-server engine table


def _check_flags(args: argparse.Namespace) -> None:
    """What the flags' own types (their ranges) cannot see: which flags go together, and the
    memory the engine keeps per server and per batch (the product of two sizes)."""
    if args.replicas is not None and args.servers != 1:
        raise InputError(
            "--servers C is one queue in front of C servers and --replicas C a queue per replica "
            "behind --router: give one"
        )
    if args.router != "central" and args.replicas is None:
        raise InputError(f"--router {args.router} routes to --replicas C (C >= 1): give it")
    if args.router_d is not None and args.router != "power_of_d":
        raise InputError("--router-d goes with --router power_of_d")
    if args.router != "central" and args.batching not in ROUTED_FORMERS:
        raise InputError(
            f"--router {args.router} applies to --batching {', '.join(ROUTED_FORMERS)} "
            "(the others have one shared queue: --servers)"
        )
    if router(args.router).reads_cache and not args.prefix_caching:
        raise InputError(
            f"--router {args.router} scores replicas by the prompt blocks they hold cached: give "
            "--prefix-caching"
        )
    if args.router == "least_kv" and args.batching != "continuous":
        raise InputError("--router least_kv needs --batching continuous (the KV tokens held)")
    if args.router_d is not None and args.replicas is not None and args.router_d > args.replicas:
        raise InputError(
            f"--router-d {args.router_d} samples more replicas than --replicas {args.replicas}"
        )
    if args.kv_accounting not in (None, KV_ACCOUNTINGS[0]) and args.batching != "continuous":
        raise InputError(
            f"--kv-accounting {args.kv_accounting} applies to --batching continuous with "
            "--admission on_demand"
        )
    _check_sizes(args)
    if (args.tokens is None) == (args.trace is None):
        raise InputError("give exactly one of --tokens LAW (with --prompt-tokens) or --trace PATH")
    if args.prompt_tokens is not None and args.trace is not None:
        raise InputError("--prompt-tokens goes with --tokens; a --trace has its own prompt column")
    if args.replay and args.trace is None:
        raise InputError("--replay replays a --trace PATH at its timestamps")
    if args.rate is not None and args.load is not None:
        raise InputError("give --rate (requests/s) or --load (fraction of the max rate), not both")
    if args.rate is None and args.load is None and not args.replay and not args.max_rate:
        raise InputError("give --rate R (requests/s > 0) or --load RHO (0 < RHO < 1)")
    laws = [f for f in ("profile", "step", "batch_time", "latency") if getattr(args, f)]
    if len(laws) != 1:
        raise InputError(
            "give exactly one time law: --profile NAME, --step c0=..,c_tok=..,c_ctx=.. "
            "(continuous), --batch-time k1=..,k2=..,k3=..,k4=.. (Eq. 18) or --latency a=..,b0=.."
        )
    cont = args.batching == "continuous"
    if cont and (args.batch_time or args.latency):
        raise InputError("--batching continuous prices iterations: give --step or --profile NAME")
    if not cont and args.step:
        raise InputError(
            f"--step is the continuous-batching law; --batching {args.batching} takes "
            "--batch-time, --latency or --profile NAME"
        )
    only = {
        "kv_tokens": "continuous",
        "admission": "continuous",
        "max_batched_tokens": "continuous",
        "block_size": "continuous",
        "kv_margin": "continuous",
        "batch_queue": "continuous",
        "no_chunked_prefill": "continuous",
        "prefix_caching": "continuous",
        "bins": "multibin",
        "bin_edges": "multibin",
        "flush": "multibin",
    }
    for flag, kind in only.items():
        if getattr(args, flag) is not None and args.batching != kind:
            raise InputError(f"--{flag.replace('_', '-')} applies to --batching {kind}")
    exact_k = [f.name for f in FORMER_RECORDS if f.size == "K"]
    if args.batch is not None and args.batching not in exact_k:
        raise InputError(
            f"--batch K applies to --batching {' or '.join(exact_k)} (batches of exactly K)"
        )
    if args.batching in exact_k and args.batch is None:
        raise InputError(f"--batching {args.batching} needs --batch K (an integer >= 1)")
    if args.batch_timeout is not None and (
        args.batching not in TIMEOUT_FORMERS or args.servers != 1 or args.replicas is not None
    ):
        raise InputError(
            f"--batch-timeout applies to --batching {', '.join(TIMEOUT_FORMERS)} on one server "
            "(no --servers, no --replicas)"
        )
    if args.preempt_limit is not None and not queue_order(args.order).preemptive:
        preemptive = ", ".join(o.name for o in QUEUE_ORDERS if o.preemptive)
        raise InputError(f"--preempt-limit applies to a preemptive --order ({preemptive})")
    if args.guard_factor is not None and args.batching not in GUARD_FACTOR_FORMERS:
        raise InputError(f"--guard-factor applies to --batching {', '.join(GUARD_FACTOR_FORMERS)}")
    if (
        args.guard_factor is not None
        and not queue_order(args.order).by_arrival
        and args.guard is None
    ):
        raise InputError("--guard-factor is the guard's second trigger: give --guard S too")
    if args.prefix_caching:
        _check_prefix_flags(args)
    if args.max_batch is not None and args.batching not in (
        "dynamic", "elastic", "continuous", "rebatch",
    ):  # fmt: skip
        raise InputError(
            "--max-batch applies to --batching dynamic, elastic, continuous or rebatch"
        )


def _check_prefix_flags(args: argparse.Namespace) -> None:
    """--prefix-caching is vLLM's automatic prefix caching: on-demand KV in a finite pool, a
    non-preemptive order, and a trace replayed in order whose rows carry prompt block ids."""
    if args.admission != "on_demand":
        raise InputError("--prefix-caching is vLLM's: it needs --admission on_demand")
    if args.kv_tokens is None:
        raise InputError("--prefix-caching needs --kv-tokens N|auto (the block pool's size)")
    if queue_order(args.order).preemptive:
        raise InputError(
            f"--prefix-caching takes a non-preemptive --order (fcfs, sjf, spjf), got {args.order}"
        )
    if args.trace is None or not args.replay:
        raise InputError(
            "--prefix-caching needs --trace PATH --replay (requests in the trace's order, each "
            "with its prompt's block ids, e.g. --trace-format mooncake's hash_ids)"
        )
    if args.load is not None or args.max_rate:
        raise InputError(
            "--prefix-caching: --load and --max-rate measure a saturated queue of rows drawn at "
            "random, whose prompts share nothing; give --rate (or the trace's own) with --replay"
        )


def _check_sizes(args: argparse.Namespace) -> None:
    """The memory of the engine's per-server tables, before anything is allocated: servers (or
    replicas) x the batch cap, servers x the KV block size (continuous batching keeps a table of
    block phases per server) and bins x batch each hold at most MAX_SLOTS entries of 8 bytes."""
    servers = (
        ("--replicas", args.replicas) if args.replicas is not None else ("--servers", args.servers)
    )
    per_server = (
        ("--max-batch", args.max_batch) if args.max_batch is not None else ("--batch", args.batch)
    )
    sizes = [
        ((servers, per_server), "batch slots", "several tables"),
        ((servers, ("--block-size", args.block_size)), "KV-block entries", "one table"),
        ((("--bins", args.bins), ("--batch", args.batch)), "bin slots", "one table"),
    ]
    for factors, what, tables in sizes:
        if all(v is not None for _, v in factors):
            entries = math.prod(int(v) for _, v in factors)
            product(
                factors,
                MAX_SLOTS,
                what,
                estimate=f"{tables} of {_gib(8 * entries)}",
            )


def _gib(n_bytes: float) -> str:
    return f"{n_bytes / 2**30:.3g} GiB" if n_bytes >= 2**30 else f"{n_bytes / 2**20:.3g} MiB"


def _policy(args: argparse.Namespace, kv: int | None) -> Policy:
    kw: dict[str, Any] = dict(order=args.order, guard_s=args.guard, servers=args.servers)
    if args.replicas is not None:
        kw.update(replicas=args.replicas, router=args.router)
    if args.router_d is not None:
        kw["router_d"] = args.router_d
    elif args.router == "power_of_d" and args.replicas is not None:
        kw["router_d"] = min(POWER_D, args.replicas)  # as llmqueue plan: d at most the replicas
    kind = args.batching
    size = batch_former(kind).size
    if size == "bmax":
        kw["bmax"] = args.max_batch
    if args.batch_timeout is not None:
        kw["batch_timeout_s"] = args.batch_timeout
    if args.guard_factor is not None:
        kw["guard_factor"] = args.guard_factor
    if args.preempt_limit is not None:
        kw["preempt_limit"] = args.preempt_limit
    if size == "K":
        kw["K"] = args.batch
    if kind == "continuous":
        bs = args.block_size or 1
        if kv is not None and kv % bs:
            if args.kv_tokens != "auto":
                raise InputError(
                    f"--kv-tokens {kv}: not a whole number of blocks of --block-size {bs} "
                    f"tokens; allowed: a multiple of {bs}"
                )
            kv = kv // bs * bs  # the budget in whole blocks
        kw.update(
            kv_tokens=kv,
            admission=args.admission or "reserve",
            max_batched_tokens=args.max_batched_tokens,
            block_size=bs,
        )
        if args.batch_queue:
            kw["batch_queue"] = True
        if args.prefix_caching:
            kw["prefix_caching"] = True
        if args.no_chunked_prefill:
            if args.max_batched_tokens is None:
                raise InputError("--no-chunked-prefill needs --max-batched-tokens (the budget)")
            kw["chunked_prefill"] = False
        if args.kv_margin is not None:
            if kw["admission"] != "per_chunk":
                raise InputError("--kv-margin applies to --admission per_chunk")
            kw["kv_margin"] = args.kv_margin
        if args.kv_accounting is not None and args.kv_accounting != KV_ACCOUNTINGS[0]:
            if kw["admission"] != "on_demand":
                raise InputError(
                    f"--kv-accounting {args.kv_accounting} applies to --admission on_demand"
                )
            kw["kv_accounting"] = args.kv_accounting
    if kind == "multibin":
        kw["bins"] = args.bins if args.bins is not None else 1
        if args.bin_edges is not None:
            try:
                kw["bin_edges"] = tuple(float(x) for x in args.bin_edges.split("/"))
            except ValueError:
                raise InputError(
                    f"--bin-edges {args.bin_edges!r}: expected E1/E2/... tokens"
                ) from None
        kw["flush_s"] = args.flush
    return Policy(kind, **kw)


def _check_fits(workload: Workload, policy: Policy) -> None:
    """A KV budget below the smallest request can serve nothing: refuse it before simulating."""
    if policy.kind != "continuous" or policy.kv_tokens is None:
        return
    smallest = inputs.smallest_request(workload)
    if policy.kv_tokens < smallest:
        raise InputError(
            f"--kv-tokens {policy.kv_tokens} is below the smallest request (prompt + output = "
            f"{smallest:.0f} tokens): nothing could ever be served; allowed: >= {math.ceil(smallest)}"
        )


def simulate(args: argparse.Namespace) -> dict[str, Any]:
    """Everything the command prints, as one JSON-ready dict (module docstring)."""
    _check_flags(args)
    inputs.check_export(args.export)
    inputs.check_outputs(
        [("--export", args.export[1] if args.export else None)], [("--trace", args.trace)]
    )
    needed = predictions_needed(orders=[args.order], formers=[args.batching], routers=[args.router])
    predictor = inputs.predictor_from(args, needed)
    workload = inputs.workload_from(args, predictor)
    if args.prefix_caching and getattr(workload, "blocks", None) is None:
        raise InputError(
            f"--prefix-caching: --trace {args.trace} has no prompt block ids (the mooncake "
            "format's hash_ids); without them nothing is shared"
        )
    ids = getattr(workload, "blocks", None) if args.prefix_caching else None
    if ids is not None and ids.block_tokens % (args.block_size or 1):
        raise InputError(
            f"--block-size {args.block_size}: the block ids of --trace {args.trace} name blocks of "
            f"{ids.block_tokens} tokens; allowed: a divisor of {ids.block_tokens}"
        )
    latency, fit = inputs.latency_from(args, args.batching)
    policy = _policy(args, inputs.kv_tokens_from(args.kv_tokens, args.kv_memory_fraction, fit))
    _check_fits(workload, policy)
    out: dict[str, Any] = {
        "policy": policy.kind,
        "order": policy.order,
        "servers": policy.servers,
        "router": policy.router,
        "latency": latency.name,
        "latency_source": latency.source,
    }
    if policy.router == "power_of_d":
        out["router_d"] = policy.router_d
        if args.router_d is None and policy.router_d < POWER_D:
            out["router_d_note"] = (
                f"--router-d: the default d = {POWER_D} lowered to --replicas {policy.replicas} "
                "(llmqueue plan does the same)"
            )
    if policy.kind == "continuous":
        out["kv_tokens"] = policy.kv_tokens
    workload.check_replay_rows(args.warmup, f"--trace {args.trace}")
    # separate random streams: the capacity burst, the run, the Monte Carlo of the formula
    streams = {k: seed_sequence(args.seed, k) for k in ("capacity", "run", "formula")}
    cap = None
    if args.load is not None or args.max_rate:
        if exact_rate(workload, policy, latency) is None:
            check_capacity_rows(
                workload, f"--trace {args.trace}", "--load" if args.load else "--max-rate"
            )
        cap = max_rate(
            workload, policy, latency, requests=args.capacity_requests, seed=streams["capacity"]
        )
        out["max_rate_per_s"] = cap.rate_per_s
        out["max_rate_method"] = cap.method
        if cap.note:
            out["max_rate_note"] = cap.note
    if args.load is not None:
        assert cap is not None
        workload = inputs.at_rate(workload, args.load * cap.rate_per_s, "--load")
    if args.rate is None and args.load is None and not args.replay:
        return out  # --max-rate only
    out["workload"] = workload.describe()
    out["rate_per_s"] = workload.rate_per_s
    if args.load is not None:
        out["load"] = args.load
    requests, warmup = workload.run_sizes(args.requests, args.warmup)
    # the exact capacity where one exists, else the saturated queue's when it was measured
    # (--max-rate, --load): at or above it there is no steady state, whatever a finite run shows
    capacity = exact_rate(workload, policy, latency) or cap
    if capacity is not None and workload.rate_per_s >= capacity.rate_per_s:
        # no steady state: nothing to simulate, no mean to print
        out.update(_no_steady_state(workload.rate_per_s, capacity))
        return out
    if args.export:
        inputs.export_workload(
            workload, args.export, seed=streams["run"], requests=requests + warmup
        )
        out["export"] = args.export[1]
    exact = exact_wait(workload, policy, latency, seed=streams["formula"])
    res = run_engine(
        workload, policy, latency, requests=requests, warmup=warmup, seed=streams["run"]
    )
    out.update(res.to_json(exact))
    warning = _far_from_exact(res, exact)
    if warning:
        out["warning"] = warning
    return out


def _no_steady_state(rate: float, capacity: Any) -> dict[str, Any]:
    """The result of a load at or above the exact capacity: unstable, every statistic null."""
    return {
        "wait": None,
        "ttft": None,
        "jct": None,
        "tpot": None,
        "unstable": True,
        "note": (
            f"the arrival rate {rate:.6g}/s is at or above the highest sustainable rate "
            f"{capacity.rate_per_s:.6g}/s ({capacity.method}): the queue grows without bound"
        ),
    }


def _far_from_exact(res: Any, exact: Any) -> str:
    """A warning when the simulated mean wait sits far below a known exact value (by more than
    4 of its CIs and 5%): the run has not reached the steady state (near rho = 1 the relaxation
    time grows like 1/(1 - rho)^2), so its numbers are not the queue's."""
    if exact is None or res.unstable or res.wait is None:
        return ""
    sim, ci = float(res.wait.mean), float(res.wait.ci95)
    gap = exact.wait_s - sim
    tol = max(4.0 * math.hypot(ci, exact.se_s), 0.05 * exact.wait_s)
    if math.isfinite(sim) and gap > tol:
        return (
            f"the simulated mean wait {sim:.4g} s sits far below the exact {exact.wait_s:.4g} s: "
            "the run is too short to reach the steady state at this load; raise --requests "
            "and --warmup, or lower the load"
        )
    return ""


def _fmt(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _print_text(out: dict[str, Any]) -> None:
    for key, val in out.items():
        if isinstance(val, dict):
            print(f"{key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in val.items()))
        else:
            print(f"{key}: {_fmt(val)}")


def _handler(args: argparse.Namespace) -> int:
    out = simulate(args)
    if args.json:
        print(strict_json(out))
    else:
        _print_text(out)
    return 0


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "simulate", __doc__)
    g = p.add_argument_group("workload")
    g.add_argument(
        "--rate",
        type=flags.number(0, MAX_RATE_PER_S, lo_open=True, unit="requests/s"),
        help=f"Poisson arrival rate, requests/s in {flags.help_range(0, MAX_RATE_PER_S, True)}",
    )
    g.add_argument(
        "--load",
        type=flags.number(0, 1, lo_open=True, hi_open=True),
        help="arrival rate as a fraction of the highest sustainable rate, in (0, 1)",
    )
    inputs.add_workload_flags(g)
    g = p.add_argument_group("policy")
    g.add_argument("--order", choices=ORDERS, default=DEFAULT_ORDER)
    g.add_argument(
        "--guard",
        type=flags.number(0, MAX_TIME_S, lo_open=True, unit="s"),
        metavar="S",
        help=f"starvation guard: serve by age after S s, S in (0, {MAX_TIME_S:g}]",
    )
    g.add_argument("--batching", choices=BATCHING, default="none")
    g.add_argument(
        "--batch-timeout",
        type=flags.number(0, MAX_TIME_S, unit="s"),
        metavar="S",
        help="dynamic, elastic, rebatch (one server): a batch not full waits up to S s for "
        "arrivals (SSJF's simulator)",
    )
    g.add_argument(
        "--preempt-limit",
        type=flags.number(0, 1, lo_open=True),
        metavar="F",
        help="a preemptive --order: a request that has had F times its (predicted) size of "
        "service is no longer preempted, F in (0, 1] (TRAIL's limited preemption)",
    )
    g.add_argument(
        "--guard-factor",
        type=flags.number(0, 1e9, lo_open=True),
        metavar="X",
        help="the starvation guard also serves by age once the longest wait exceeds X times its "
        "run time (SSJF's 10; with --guard under sjf/spjf)",
    )
    g.add_argument(
        "--max-batch",
        type=flags.count(1, MAX_BATCH),
        help=f"b_max (dynamic, elastic, rebatch) or max_batch (continuous), in [1, {MAX_BATCH}]; "
        f"--servers (or --replicas) x --max-batch at most {MAX_SLOTS:,}",
    )
    g.add_argument(
        "--batch",
        type=flags.count(1, MAX_BATCH),
        metavar="K",
        help=f"batch size K (fixed; B for multibin), in [1, {MAX_BATCH}]; --servers x --batch "
        f"and --bins x --batch at most {MAX_SLOTS:,}",
    )
    g.add_argument(
        "--bins",
        type=flags.count(1, MAX_BINS),
        help=f"multibin: number of bins k in [1, {MAX_BINS}] (default 1)",
    )
    g.add_argument("--bin-edges", help="multibin: E1/E2/... tokens (default: equal-probability)")
    g.add_argument(
        "--flush",
        type=flags.number(0, MAX_TIME_S, lo_open=True, unit="s"),
        metavar="S",
        help=f"multibin: send a partly full bin after S s, S in (0, {MAX_TIME_S:g}]",
    )
    g.add_argument("--kv-tokens", help="continuous: KV budget in tokens per server, auto or none")
    g.add_argument(
        "--kv-memory-fraction",
        type=flags.number(0, 1, lo_open=True),
        default=0.9,
        help="--kv-tokens auto: share of GPU memory for weights + KV, in (0, 1] (default 0.9, "
        "vLLM's)",
    )
    g.add_argument(
        "--admission", choices=ADMISSIONS,
        help="continuous: reserve (default), on_demand (vLLM) or per_chunk (transformers' FIFO "
        "scheduler: KV per prompt chunk, starved requests reset to the back; order fcfs)",
    )  # fmt: skip
    g.add_argument(
        "--kv-margin",
        type=flags.number(0, 1, hi_open=True),
        help="--admission per_chunk: the free share of the KV under which a step takes no prompt "
        "chunk after its first request, in [0, 1) (transformers' safety_margin; default 0)",
    )
    g.add_argument(
        "--kv-accounting", choices=KV_ACCOUNTINGS,
        help="--admission on_demand: the KV a sequence holds while it makes output token j: vllm "
        "(default, prompt + j - 1) or dong (prompt + j, Dong and Cao, arXiv 2604.11001)",
    )  # fmt: skip
    g.add_argument(
        "--max-batched-tokens",
        type=flags.count(1, int(MAX_TOKENS)),
        help=f"continuous: tokens per iteration (chunked prefill), in [1, {MAX_TOKENS:g}]",
    )
    g.add_argument(
        "--batch-queue",
        action="store_true",
        default=None,
        help="continuous: admit only at an iteration boundary where nothing runs, up to "
        "--max-batch at once (whole batches, FasterTransformer-style; not work-conserving)",
    )
    g.add_argument(
        "--no-chunked-prefill",
        action="store_true",
        default=None,
        help="continuous, with --max-batched-tokens: admit a prompt only when it fits the "
        "iteration's remaining token budget whole (vLLM's enable_chunked_prefill=False)",
    )
    g.add_argument(
        "--prefix-caching",
        action="store_true",
        default=None,
        help="continuous, --admission on_demand, --kv-tokens: vLLM's automatic prefix caching "
        "(each server's KV a block pool that keeps finished prompts' blocks for later requests "
        "with the same leading block ids); needs --trace PATH --replay with block ids "
        "(--trace-format mooncake)",
    )
    g.add_argument(
        "--block-size",
        type=flags.count(1, MAX_BATCH),
        help=f"continuous: KV cache in blocks of N tokens (paged; default 1), N in [1, {MAX_BATCH}]; "
        f"--servers (or --replicas) x --block-size at most {MAX_SLOTS:,}",
    )
    g.add_argument(
        "--servers",
        type=flags.count(1, MAX_SERVERS),
        default=1,
        help=f"identical servers sharing the queue, in [1, {MAX_SERVERS}]; times --max-batch, "
        f"--batch or --block-size at most {MAX_SLOTS:,} (the engine's per-server tables)",
    )
    g.add_argument(
        "--replicas",
        type=flags.count(1, MAX_SERVERS),
        help=f"engine replicas behind --router, each with its own queue, in [1, {MAX_SERVERS}]; "
        f"times --max-batch or --block-size at most {MAX_SLOTS:,}",
    )
    g.add_argument(
        "--router",
        choices=ROUTERS,
        default="central",
        help="how arrivals reach the replicas: central (one shared queue, default), round_robin, "
        "random, jsq, least_work, least_kv, power_of_d, prefix_affinity, prefix_score, "
        "prefix_index (the last three with --prefix-caching)",
    )
    g.add_argument(
        "--router-d",
        type=flags.count(1, MAX_SERVERS),
        help="power_of_d: replicas sampled per arrival (default 2)",
    )
    g = p.add_argument_group("time law (exactly one)")
    inputs.add_law_flags(g)
    g = p.add_argument_group("run")
    g.add_argument(
        "--requests",
        type=flags.count(400, MAX_REQUESTS),
        default=1_000_000,
        help=f"measured requests, in [400, {MAX_REQUESTS:g}] (default 10^6)",
    )
    g.add_argument(
        "--warmup",
        type=flags.count(0, MAX_REQUESTS),
        default=100_000,
        help="warm-up requests (default 10^5)",
    )
    g.add_argument(
        "--max-rate", action="store_true", help="also print the highest sustainable rate"
    )
    g.add_argument(
        "--capacity-requests",
        type=flags.count(1000, 10**8),
        default=200_000,
        help=argparse.SUPPRESS,
    )
    g.add_argument("--seed", type=flags.seed, default=0, help="random seed in [0, 2**63)")
    g.add_argument("--json", action="store_true")
    p.set_defaults(handler=_handler)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["simulate", *sys.argv[1:]]))
