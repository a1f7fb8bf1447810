"""``llmqueue simulate``: one serving policy under an operator's own load, by the serving engine.

Examples::

    llmqueue simulate --tokens lognormal:mu=5,sigma=1,cap=2048 --load 0.8 --order spjf \\
        --predictor noisy:sigma=0.5 --latency a=0.02,b0=0.1 --json
    llmqueue simulate --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \\
        --rate 4 --batching continuous --max-batch 256 --kv-tokens auto --admission on_demand \\
        --profile llama2_7b_vidur_a100
    llmqueue simulate --tokens uniform:low=1,high=20 --batching multibin --bins 4 --batch 8 \\
        --servers 8 --predictor oracle --latency a=0.0366,b0=0 --max-rate --json

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
Where a formula applies (no batching, one server, Poisson arrivals, a steady state) ``wait``
also holds ``exact``: Pollaczek-Khinchine (FCFS) or Cobham's priority formula (SJF, SPJF; for a
predictor over token laws the formula's integral is evaluated by Monte Carlo, ``exact_se`` > 0).
Bad input exits 2 naming the flag and the allowed values, before any simulation.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from llmqueue.cli import add_command
from llmqueue.errors import InputError
from llmqueue.latency import BatchLatency, parse_linear_latency, parse_step_law
from llmqueue.policy import ADMISSIONS, BATCHING, ORDERS, Policy
from llmqueue.profiles import Latency, kv_tokens_of_fit, named_latency
from llmqueue.seeds import seed_sequence
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run as run_engine
from llmqueue.sim.exact import exact_wait
from llmqueue.sim.predictors import parse_predictor
from llmqueue.sim.workload import PoissonWorkload, ReplayWorkload, TraceWorkload, Workload
from llmqueue.tokens import parse_law

DEFAULT_CONFIG = "config/config.yaml"


def parse_batch_time(text: str) -> BatchLatency:
    """``k1=..,k2=..,k3=..,k4=..`` (s, s, s/token, s/token) -> BatchLatency (Eq. 18)."""
    vals: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, eq, val = item.partition("=")
        if not eq or key.strip() not in ("k1", "k2", "k3", "k4"):
            raise InputError(f"--batch-time {text!r}: expected k1=S,k2=S,k3=S,k4=S (all >= 0)")
        try:
            vals[key.strip()] = float(val)
        except ValueError:
            raise InputError(
                f"--batch-time {text!r}: {key.strip()}={val!r} is not a number"
            ) from None
    if set(vals) != {"k1", "k2", "k3", "k4"}:
        raise InputError(f"--batch-time {text!r}: give all four of k1, k2, k3, k4 (>= 0)")
    return BatchLatency(
        vals["k1"], vals["k2"], vals["k3"], vals["k4"], name="cli", source="--batch-time"
    )


def _positive_int(args: argparse.Namespace, name: str, minimum: int = 1) -> None:
    v = getattr(args, name)
    if v is not None and v < minimum:
        raise InputError(f"--{name.replace('_', '-')} must be an integer >= {minimum}, got {v}")


def _check_flags(args: argparse.Namespace) -> None:
    for name in ("max_batch", "batch", "bins", "servers", "max_batched_tokens", "block_size"):
        _positive_int(args, name)
    _positive_int(args, "warmup", 0)
    _positive_int(args, "seed", 0)
    if args.requests < 400:
        raise InputError(
            f"--requests must be >= 400 (10 x the 40 batch means), got {args.requests}"
        )
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
    if args.rate is not None and not (math.isfinite(args.rate) and args.rate > 0):
        raise InputError(f"--rate must be a finite arrival rate > 0 requests/s, got {args.rate}")
    if args.load is not None and not (0 < args.load < 1):
        raise InputError(f"--load must lie in (0, 1) (a fraction of the max rate), got {args.load}")
    if args.guard is not None and not (args.guard > 0):
        raise InputError(f"--guard must be > 0 s, got {args.guard}")
    if not (0 < args.kv_memory_fraction <= 1):
        raise InputError(f"--kv-memory-fraction must lie in (0, 1], got {args.kv_memory_fraction}")
    if args.flush is not None and not (args.flush > 0):
        raise InputError(f"--flush must be > 0 s, got {args.flush}")
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
        "bins": "multibin",
        "bin_edges": "multibin",
        "flush": "multibin",
    }
    for flag, kind in only.items():
        if getattr(args, flag) is not None and args.batching != kind:
            raise InputError(f"--{flag.replace('_', '-')} applies to --batching {kind}")
    if args.batch is not None and args.batching not in ("fixed", "multibin"):
        raise InputError("--batch K applies to --batching fixed or multibin (batches of exactly K)")
    if args.batching in ("fixed", "multibin") and args.batch is None:
        raise InputError(f"--batching {args.batching} needs --batch K (an integer >= 1)")
    if args.max_batch is not None and args.batching not in ("dynamic", "elastic", "continuous"):
        raise InputError("--max-batch applies to --batching dynamic, elastic or continuous")


def _predictor(args: argparse.Namespace) -> Any:
    if args.predictor is None:
        if args.order == "spjf" or args.batching == "multibin":
            raise InputError(
                "--predictor SPEC is needed by --order spjf and --batching multibin "
                "(oracle, noisy:sigma=S, buckets:k=K,acc=P, learned:PATH)"
            )
        return None
    return parse_predictor(args.predictor)


def _workload(args: argparse.Namespace, predictor: Any) -> Workload:
    kw = {"predictor": predictor} if predictor is not None else {}
    rate = args.rate if args.rate is not None else 1.0
    if args.tokens is not None:
        law = parse_law(args.tokens, ".")
        prompt = parse_law(args.prompt_tokens, ".") if args.prompt_tokens else None
        return PoissonWorkload(law, rate, prompt=prompt, **kw)
    if not Path(args.trace).is_file():
        raise InputError(f"--trace: file {args.trace!r} does not exist")
    if args.replay:
        return ReplayWorkload.from_csv(
            args.trace,
            timestamp_column=args.timestamp_column,
            prompt_column=args.prompt_column,
            output_column=args.output_column,
            rate_per_s=args.rate,
            **kw,
        )
    return TraceWorkload.from_csv(
        args.trace,
        rate,
        prompt_column=args.prompt_column,
        output_column=args.output_column,
        timestamp_column=args.timestamp_column,  # read only by a learned predictor's features
        **kw,
    )


def _latency(args: argparse.Namespace) -> tuple[Latency, dict[str, Any] | None]:
    if args.step:
        return parse_step_law(args.step), None
    if args.batch_time:
        return parse_batch_time(args.batch_time), None
    if args.latency:
        return parse_linear_latency(args.latency), None
    import yaml

    cfg_path = Path(args.config)
    if not cfg_path.is_file():
        raise InputError(f"--config: {args.config!r} does not exist (--profile NAME reads it)")
    config = yaml.safe_load(cfg_path.read_text()) or {}
    # fit.json files live under the project root: the folder above config/ (else here)
    here = cfg_path.resolve().parent
    root = here.parent if here.name == "config" else Path.cwd()
    return named_latency(config, args.profile, args.batching, root)


def _kv_tokens(args: argparse.Namespace, fit: dict[str, Any] | None) -> int | None:
    if args.kv_tokens is None or args.kv_tokens == "none":
        return None
    if args.kv_tokens == "auto":
        if fit is None:
            raise InputError("--kv-tokens auto needs --profile NAME (its model and GPU); or give N")
        return kv_tokens_of_fit(fit, memory_fraction=args.kv_memory_fraction)
    try:
        n = int(args.kv_tokens)
    except ValueError:
        raise InputError(
            f"--kv-tokens must be an integer >= 1, auto or none, got {args.kv_tokens!r}"
        ) from None
    if n < 1:
        raise InputError(f"--kv-tokens must be an integer >= 1, auto or none, got {n}")
    return n


def _policy(args: argparse.Namespace, kv: int | None) -> Policy:
    kw: dict[str, Any] = dict(order=args.order, guard_s=args.guard, servers=args.servers)
    kind = args.batching
    if kind in ("dynamic", "elastic", "continuous"):
        kw["bmax"] = args.max_batch
    if kind in ("fixed", "multibin"):
        kw["K"] = args.batch
    if kind == "continuous":
        bs = args.block_size or 1
        if kv is not None and kv % bs and args.kv_tokens == "auto":
            kv = kv // bs * bs  # the budget in whole blocks
        kw.update(
            kv_tokens=kv,
            admission=args.admission or "reserve",
            max_batched_tokens=args.max_batched_tokens,
            block_size=bs,
        )
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
    if isinstance(workload, PoissonWorkload):
        lo_out = max(1.0, float(workload.output.support[0]))
        lo_prompt = float(workload.prompt.support[0]) if workload.prompt is not None else 0.0
        smallest = lo_out + lo_prompt
    else:
        rows = workload.prompt_tokens + workload.output_tokens  # type: ignore[attr-defined]
        smallest = float(rows.min())
    if policy.kv_tokens < smallest:
        raise InputError(
            f"--kv-tokens {policy.kv_tokens} is below the smallest request (prompt + output = "
            f"{smallest:.0f} tokens): nothing could ever be served; allowed: >= {math.ceil(smallest)}"
        )


def simulate(args: argparse.Namespace) -> dict[str, Any]:
    """Everything the command prints, as one JSON-ready dict (module docstring)."""
    _check_flags(args)
    predictor = _predictor(args)
    workload = _workload(args, predictor)
    latency, fit = _latency(args)
    policy = _policy(args, _kv_tokens(args, fit))
    _check_fits(workload, policy)
    out: dict[str, Any] = {
        "policy": policy.kind,
        "order": policy.order,
        "servers": policy.servers,
        "latency": latency.name,
        "latency_source": latency.source,
    }
    if policy.kind == "continuous":
        out["kv_tokens"] = policy.kv_tokens
    if workload.total is not None and workload.total < 400 + min(args.warmup, workload.total // 10):
        raise InputError(
            f"--trace {args.trace}: {workload.total} rows; replaying needs at least 400 measured "
            "rows after the warm-up (10% of the rows at most)"
        )
    # separate random streams: the capacity burst, the run, the Monte Carlo of the formula
    streams = {k: seed_sequence(args.seed, k) for k in ("capacity", "run", "formula")}
    cap = None
    if args.load is not None or args.max_rate:
        cap = max_rate(
            workload, policy, latency, requests=args.capacity_requests, seed=streams["capacity"]
        )
        out["max_rate_per_s"] = cap.rate_per_s
        out["max_rate_method"] = cap.method
        if cap.note:
            out["max_rate_note"] = cap.note
    if args.load is not None:
        assert cap is not None
        workload = workload.at_rate(args.load * cap.rate_per_s)
    if args.rate is None and args.load is None and not args.replay:
        return out  # --max-rate only
    out["workload"] = workload.describe()
    out["rate_per_s"] = workload.rate_per_s
    if args.load is not None:
        out["load"] = args.load
    requests, warmup = args.requests, args.warmup
    if workload.total is not None:  # a replayed trace: its rows, warm-up first
        warmup = min(warmup, workload.total // 10)
        requests = min(requests, workload.total - warmup)
    exact = exact_wait(workload, policy, latency, seed=streams["formula"])
    res = run_engine(
        workload, policy, latency, requests=requests, warmup=warmup, seed=streams["run"]
    )
    out.update(res.to_json(exact))
    return out


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
        print(json.dumps(out, indent=2))
    else:
        _print_text(out)
    return 0


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "simulate", __doc__)
    g = p.add_argument_group("workload")
    g.add_argument("--rate", type=float, help="Poisson arrival rate (requests/s)")
    g.add_argument(
        "--load", type=float, help="arrival rate as a fraction of the max rate, in (0, 1)"
    )
    g.add_argument("--tokens", help="output-token law, e.g. lognormal:mu=5,sigma=1,cap=2048")
    g.add_argument("--prompt-tokens", help="prompt-token law (default: no prompt)")
    g.add_argument("--trace", help="CSV with prompt and output columns (joint rows)")
    g.add_argument("--replay", action="store_true", help="replay --trace at its own timestamps")
    g.add_argument("--prompt-column", default="ContextTokens")
    g.add_argument("--output-column", default="GeneratedTokens")
    g.add_argument("--timestamp-column", default="TIMESTAMP")
    g.add_argument("--predictor", help="oracle, noisy:sigma=S, buckets:k=K,acc=P, learned:PATH")
    g = p.add_argument_group("policy")
    g.add_argument("--order", choices=ORDERS, default="fcfs")
    g.add_argument(
        "--guard", type=float, metavar="S", help="starvation guard: serve by age after S s"
    )
    g.add_argument("--batching", choices=BATCHING, default="none")
    g.add_argument(
        "--max-batch", type=int, help="b_max (dynamic, elastic) or max_batch (continuous)"
    )
    g.add_argument("--batch", type=int, metavar="K", help="batch size K (fixed; B for multibin)")
    g.add_argument("--bins", type=int, help="multibin: number of bins k (default 1)")
    g.add_argument("--bin-edges", help="multibin: E1/E2/... tokens (default: equal-probability)")
    g.add_argument(
        "--flush", type=float, metavar="S", help="multibin: send a partly full bin after S s"
    )
    g.add_argument("--kv-tokens", help="continuous: KV budget in tokens per server, auto or none")
    g.add_argument(
        "--kv-memory-fraction",
        type=float,
        default=0.9,
        help="--kv-tokens auto: share of GPU memory for weights + KV (default 0.9, vLLM's)",
    )
    g.add_argument(
        "--admission", choices=ADMISSIONS, help="continuous: reserve (default) or on_demand"
    )
    g.add_argument(
        "--max-batched-tokens", type=int, help="continuous: tokens per iteration (chunked prefill)"
    )
    g.add_argument(
        "--block-size",
        type=int,
        help="continuous: KV cache in blocks of N tokens (paged; default 1)",
    )
    g.add_argument("--servers", type=int, default=1, help="identical servers sharing the queue")
    g = p.add_argument_group("time law (exactly one)")
    g.add_argument(
        "--profile",
        help="a named profile of --config (step_profiles, batch_profiles, latency_profiles)",
    )
    g.add_argument("--step", help="continuous: c0=S,c_tok=S,c_ctx=S (s, s/token, s/token)")
    g.add_argument("--batch-time", help="Eq. (18): k1=S,k2=S,k3=S,k4=S (s, s, s/token, s/token)")
    g.add_argument("--latency", help="one request: a=S_PER_TOKEN,b0=S (S = a N + b0)")
    g.add_argument(
        "--config", default=DEFAULT_CONFIG, help=f"config for --profile (default {DEFAULT_CONFIG})"
    )
    g = p.add_argument_group("run")
    g.add_argument(
        "--requests", type=int, default=1_000_000, help="measured requests (default 10^6)"
    )
    g.add_argument("--warmup", type=int, default=100_000, help="warm-up requests (default 10^5)")
    g.add_argument(
        "--max-rate", action="store_true", help="also print the highest sustainable rate"
    )
    g.add_argument("--capacity-requests", type=int, default=200_000, help=argparse.SUPPRESS)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--json", action="store_true")
    p.set_defaults(handler=_handler)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["simulate", *sys.argv[1:]]))
