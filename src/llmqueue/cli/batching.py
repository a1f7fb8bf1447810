"""``llmqueue batching``: delay of a batching LLM server for an operator's own load.

Examples::

    llmqueue batching --policy dynamic --tokens uniform:low=0,high=1000 --rate 0.1 \\
        --profile k1=0.01,k2=0.77,k3=5e-4,k4=0.02153 --simulate 200000 --json
    llmqueue batching --policy fixed --batch 8 --tokens lognormal:mu=7,sigma=0.7 --rate 0.1:0.5:0.1 \\
        --profile k1=0,k2=0,k3=3.1e-4,k4=2.48e-3
    llmqueue batching --policy fixed --optimal-batch --tokens lognormal:mu=7,sigma=0.7 --rate 0.43 \\
        --profile k1=0,k2=0,k3=3.1e-4,k4=2.48e-3

Prints the E[T_b] table (Eq. 18, 24, 26), Inoue's bound (16) for unbounded dynamic/elastic
batching, Eq. (25) for fixed K (fixed-T approximation), the exact chain and, with --simulate N,
the simulation with 95% CI and p50/p95/p99. wait = arrival -> batch start; response = arrival ->
own reply. Times in seconds, rates in requests/s.
"""

from __future__ import annotations

import argparse
import math
import sys

from llmqueue.analytic import batch_chain as bc
from llmqueue.analytic import batch_time as bt
from llmqueue.analytic import bulk
from llmqueue.cli import add_command, flags
from llmqueue.errors import InputError, UnstableError
from llmqueue.grids import parse_range
from llmqueue.io import strict_json
from llmqueue.latency import BatchLatency, parse_batch_time
from llmqueue.limits import MAX_RATE_PER_S, MAX_REQUESTS, MAX_TIME_S, MAX_TOKENS
from llmqueue.policy import Policy
from llmqueue.seeds import seed_sequence
from llmqueue.sim.settings import SimSettings
from llmqueue.studies.batching.tables import evaluate_point
from llmqueue.tokens import parse_law

MAX_CHAIN_BATCH = 1024  # batch sizes the exact chains and E[T_b] tables handle in seconds
MAX_KMAX = 64  # --optimal-batch solves one exact chain per K (64 of them: about a minute)


def parse_rates(text: str) -> tuple[list[float], bool]:
    """``--rate``: one rate or START:STOP:STEP (requests/s in (0, MAX_RATE_PER_S]; at most
    10000 points)."""
    rates, is_range = parse_range(text, "--rate", max_points=10_000)
    if not (rates[0] > 0 and rates[-1] <= MAX_RATE_PER_S and all(map(math.isfinite, rates))):
        raise InputError(f"--rate {text!r}: rates must lie in (0, {MAX_RATE_PER_S:g}] requests/s")
    return [float(r) for r in rates], is_range


def _policy(args: argparse.Namespace) -> Policy:
    if args.batch is not None and args.bmax is not None:
        raise InputError("give --batch K (fixed policy) or --bmax B (dynamic/elastic), not both")
    if args.policy == "fixed":
        if args.batch is None and not args.optimal_batch:
            raise InputError("--policy fixed needs --batch K (an integer >= 1) or --optimal-batch")
        if args.bmax is not None:
            raise InputError("--bmax applies to dynamic/elastic; fixed batching takes --batch K")
        return Policy("fixed", K=args.batch if args.batch is not None else 1)
    if args.batch is not None:
        raise InputError(
            f"--batch applies to --policy fixed; {args.policy} batching takes --bmax B"
        )
    return Policy(args.policy, bmax=args.bmax)


def _inoue_params(policy: Policy, profile: BatchLatency, law, fit_hi: int):
    if policy.kind == "fixed" or policy.bmax is not None:
        return None, ""
    lo, hi = law.support
    if policy.kind == "dynamic" and law.spec.startswith("uniform") and lo == 0:
        return bt.uniform_linear_bound(profile, hi), "Eq. (20) with m2 = high"
    return bt.fit_alpha_tau(
        profile, law, 1, fit_hi, elastic=policy.elastic
    ), f"least-squares fit of E[T_b], b = 1..{fit_hi}"


def _measures(
    formula: float, exact: float, sim: tuple | None, bound: float = math.nan
) -> dict[str, float]:
    """One JSON quantity: `bound`, `formula`, `exact` where they exist, then the simulation's
    mean, CI and quantiles (`sim` = (mean, ci95, (p50, p95, p99)))."""
    d = {
        key: val
        for key, val in (("bound", bound), ("formula", formula), ("exact", exact))
        if math.isfinite(val)
    }
    if sim is not None:
        mean, ci95, (p50, p95, p99) = sim
        d.update(sim=mean, sim_ci95=ci95, sim_p50=p50, sim_p95=p95, sim_p99=p99)
    return d


def evaluate(policy, profile, law, lam, args, model=None) -> dict:
    params, how = _inoue_params(policy, profile, law, args.fit_max_batch)
    sim = None
    if args.simulate:
        sim = SimSettings(args.simulate, max(1000, args.simulate // 20), args.sim_batches)
    pt = evaluate_point(
        policy,
        profile,
        law,
        lam,
        model=model,
        bound=params,
        sim=sim,
        seed=seed_sequence(args.seed),
    )
    if pt.unstable:
        return {"rate": lam, "unstable": True, "reason": pt.note}
    ex, s = pt.exact, pt.sim
    out: dict = {"rate": lam, "unstable": False}
    if policy.kind == "fixed":
        out["mean_batch_time"] = {
            "formula": bt.mean_batch_time(profile, law, policy.k),
            "batch": policy.k,
        }
    else:
        out["mean_batch_size"] = {"exact": ex.mean_batch if ex else math.nan}
        if s is not None:
            out["mean_batch_size"]["sim"] = s.mean_batch
    out["wait"] = _measures(
        pt.formula_wait,
        ex.wait if ex else math.nan,
        (s.wait.mean, s.wait.ci95, (s.wait.p50, s.wait.p95, s.wait.p99)) if s else None,
    )
    out["response"] = _measures(
        pt.formula_response,
        ex.response if ex else math.nan,
        (s.response.mean, s.response.ci95, (s.response.p50, s.response.p95, s.response.p99))
        if s and s.response
        else None,
        pt.bound_response,
    )
    if params is not None and math.isfinite(pt.bound_response):
        out["bound_inputs"] = {"alpha_b": params[0], "tau0": params[1], "from": how}
    if pt.metastable:
        out["metastable"] = True
    if pt.note:
        out["note"] = pt.note
    return out


def optimal_batch(profile, law, lam, kmax: int) -> dict:
    times = {k: bt.mean_batch_time(profile, law, k) for k in range(1, kmax + 1)}
    res: dict = {"rate": lam, "K_range": [1, kmax]}
    kw, vals_w = bulk.optimal_k(lam, times)
    kr, vals_r = bulk.optimal_k(lam, times, response=True)
    if kw is None or kr is None:
        raise UnstableError(
            f"--rate {lam:g}: every K in 1..{kmax} is unstable (lambda*E[T_K] >= K)"
        )
    res["formula_wait"], res["formula_response"] = kw, kr
    res["formula_wait_value"], res["formula_response_value"] = vals_w[kw], vals_r[kr]
    ex = {}
    for k in vals_w:
        pol = Policy("fixed", K=k)
        try:
            r = bc.solve(bc.model_for(pol, profile, law), lam, pol)
        except UnstableError:  # a K at the edge of stability: its chain does not settle
            continue
        ex[k] = (r.wait, r.response)
    if not ex:
        raise UnstableError(
            f"--rate {lam:g}: no K in 1..{kmax} has a steady state in the exact chain"
        )
    res["exact_wait"] = min(ex, key=lambda k: ex[k][0])
    res["exact_response"] = min(ex, key=lambda k: ex[k][1])
    res["exact_wait_value"] = ex[res["exact_wait"]][0]
    res["exact_response_value"] = ex[res["exact_response"]][1]
    res["note"] = (
        "formula = Eq. (25), fixed-T approximation T = E[T_K]; exact = chain with random batch times"
    )
    return res


def run(args: argparse.Namespace) -> int:
    try:
        law = parse_law(args.tokens, ".")
    except InputError as err:
        raise InputError(f"--tokens: {err}") from None
    profile = parse_batch_time(args.profile, "--profile")
    policy = _policy(args)
    rates, is_range = parse_rates(args.rate)
    if args.simulate is not None and args.simulate < 2 * args.sim_batches:
        raise InputError(f"--simulate N: N must be >= {2 * args.sim_batches} requests")
    if args.optimal_batch:
        if policy.kind != "fixed":
            raise InputError(
                "--optimal-batch searches the fixed batch size K: use it with --policy fixed"
            )
        rows = [optimal_batch(profile, law, lam, args.kmax) for lam in rates]
        out = (
            {"optimal_batch": rows[0]}
            if not is_range
            else {"rows": [{"optimal_batch": r} for r in rows]}
        )
        _emit(out, args)
        return 0
    b_tab = policy.k if policy.kind == "fixed" else (policy.bmax or 16)
    table = [
        {
            "b": b,
            "mean_batch_time": bt.mean_batch_time(profile, law, b),
            "elastic_mean_batch_time": bt.elastic_mean_batch_time(profile, law, b),
            "mu_b": bt.throughput(profile, law, b),
        }
        for b in range(1, min(b_tab, 64) + 1)
    ]
    model = bc.model_for(policy, profile, law)
    if not is_range:
        res = evaluate(policy, profile, law, rates[0], args, model)
        if res["unstable"]:
            raise UnstableError(f"--rate {rates[0]:g}: {res['reason']}")
        res["batch_time_table"] = table
        _emit(res, args)
        return 0
    _emit(
        {
            "rows": [evaluate(policy, profile, law, lam, args, model) for lam in rates],
            "batch_time_table": table,
        },
        args,
    )
    return 0


def _emit(obj: dict, args: argparse.Namespace) -> None:
    if args.json:
        print(strict_json(obj))
        return
    _print_text(obj)


def _fmt(v) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def _print_text(obj: dict, indent: str = "") -> None:
    for key, val in obj.items():
        if key == "batch_time_table":
            print(f"{indent}E[T_b] table (s; mu_b in requests/s):")
            print(f"{indent}   b   E[T_b] padded   E[T_b] elastic    mu_b")
            for r in val:
                print(
                    f"{indent}{r['b']:4d} {r['mean_batch_time']:14.5g} {r['elastic_mean_batch_time']:16.5g} {r['mu_b']:9.4g}"
                )
        elif key == "rows":
            for r in val:
                print(f"{indent}---")
                _print_text(r, indent + "  ")
        elif isinstance(val, dict):
            print(f"{indent}{key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in val.items()))
        else:
            print(f"{indent}{key}: {_fmt(val)}")


def register(subparsers) -> None:
    p = add_command(subparsers, "batching", __doc__)
    p.add_argument("--policy", choices=["dynamic", "fixed", "elastic"], required=True)
    p.add_argument(
        "--tokens",
        required=True,
        help=f"output-token law, e.g. lognormal:mu=7,sigma=0.7 (counts at most {MAX_TOKENS:g})",
    )
    p.add_argument(
        "--rate",
        required=True,
        help=f"arrival rate in (0, {MAX_RATE_PER_S:g}] requests/s, or a range START:STOP:STEP "
        "(at most 10,000 points)",
    )
    p.add_argument(
        "--profile",
        required=True,
        help=f"k1=..,k2=..,k3=..,k4=.. of Eq. (18) (s, s, s/token, s/token; each in "
        f"[0, {MAX_TIME_S:g}])",
    )
    p.add_argument(
        "--batch",
        type=flags.count(1, MAX_CHAIN_BATCH),
        help=f"fixed batch size K in [1, {MAX_CHAIN_BATCH}] (--policy fixed)",
    )
    p.add_argument(
        "--bmax",
        type=flags.count(1, MAX_CHAIN_BATCH),
        help=f"maximum batch size in [1, {MAX_CHAIN_BATCH}] for dynamic/elastic (default: none)",
    )
    p.add_argument(
        "--simulate",
        type=flags.count(1000, MAX_REQUESTS),
        metavar="N",
        help=f"also simulate N requests, N in [1000, {MAX_REQUESTS:g}]",
    )
    p.add_argument(
        "--sim-batches",
        type=flags.count(2, 1000),
        default=40,
        help="batch means for the CI, in [2, 1000] (default 40)",
    )
    p.add_argument("--seed", type=flags.seed, default=0, help="random seed in [0, 2**63)")
    p.add_argument("--optimal-batch", action="store_true", help="K* for the rate (--policy fixed)")
    p.add_argument(
        "--kmax",
        type=flags.count(1, MAX_KMAX),
        default=64,
        help=f"largest K searched by --optimal-batch, in [1, {MAX_KMAX}] (default 64)",
    )
    p.add_argument(
        "--fit-max-batch",
        type=flags.count(2, MAX_CHAIN_BATCH),
        default=32,
        help="b range 1..B of the least-squares (alpha_b, tau0) for the bound, B in "
        f"[2, {MAX_CHAIN_BATCH}] (default 32)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_handler)


def _handler(args: argparse.Namespace) -> int:
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["batching", *sys.argv[1:]]))
