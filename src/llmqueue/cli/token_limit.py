"""``llmqueue token-limit``: delay and loss under a max-token limit, for an operator's own load.

Examples::

    llmqueue token-limit --tokens lognormal:mu=7,sigma=0.7 --rate 0.025 --latency a=0.023,b0=0.186 --limit 1600
    llmqueue token-limit --tokens trace:data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv:GeneratedTokens \\
        --rate 0.2 --latency a=0.023,b0=0.186 --limit 100:1000:50 --patience 60 --json

Patient users (no --patience): rho, E[S], E[S^2] and W_q by Pollaczek-Khinchine (Eq. 1-5).
Impatient users (--patience tau): the lost fraction pi, the mean wait of served users W_qs and of
everyone E[W], by the paper's approximation (Eq. 6-9, "formula") and the exact M/G/1+D solution.
--simulate N adds a simulation of N requests with 95% CI and p50/p95/p99 of the wait.
A range --limit START:STOP:STEP prints the curve and the optimum of F1 (patient) or F2.
Sizes: a range holds at most 100,000 points; with --patience, its points x the exact solution's
grid cells (up to 5.6e9 a point) at most 5e11 in all (about 88 points at long patience, 160 at
tau = 60 s, lambda <= 0.4/s); with --simulate N, points x N at most 1e9 requests.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

import numpy as np

from llmqueue.cli import add_command, flags
from llmqueue.errors import InputError
from llmqueue.io import strict_json
from llmqueue.limits import (
    MAX_EXACT_CELLS,
    MAX_RATE_PER_S,
    MAX_REQUESTS,
    MAX_SIMULATED,
    MAX_TIME_S,
    MAX_TOKENS,
)

MAX_COST = 1e9  # F2's cost of a lost user: any larger weight only flips the optimum to no limit
MAX_GAMMA = 10.0  # r^gamma stays finite for every r <= MAX_TOKENS

_DEFAULT_ALPHA = {"patient": 119 / 120, "impatient": 0.95}
MAX_POINTS = 100_000  # points of a --limit range
# the grid schedule of llmqueue.analytic.impatience.exact_mg1d at the defaults exact_token_limit
# uses: first grid, finest grid, the most arrivals within one patience it solves
_GRID_STEP_S, _MAX_GRID, _MAX_ARRIVALS = 0.02, 1 << 16, (1 << 16) // 8
_S_PER_CELL = 4e-10  # one core (a 65,536-cell grid in about 1.8 s), for the estimate in messages


def register(sub: Any) -> None:
    p = add_command(sub, "token-limit", __doc__)
    p.add_argument(
        "--tokens",
        required=True,
        help="token law spec, e.g. lognormal:mu=7,sigma=0.7 or trace:PATH:COLUMN "
        f"(counts at most {MAX_TOKENS:g})",
    )
    p.add_argument(
        "--rate",
        required=True,
        type=flags.number(0, MAX_RATE_PER_S, lo_open=True, unit="requests/s"),
        help=f"arrival rate lambda, requests/s in {flags.help_range(0, MAX_RATE_PER_S, True)}",
    )
    p.add_argument(
        "--latency",
        required=True,
        help=f"S = a*N + b0 as a=SECONDS_PER_TOKEN,b0=SECONDS (each in [0, {MAX_TIME_S:g}])",
    )
    p.add_argument(
        "--limit",
        required=True,
        help=f"max-token limit l in (0, {MAX_TOKENS:g}] tokens, or a range START:STOP:STEP "
        f"(at most {MAX_POINTS:,} points; with --patience, points x the exact solution's grid "
        f"cells at most {MAX_EXACT_CELLS:.0e}: about 88 points at long patience; with --simulate "
        f"N, points x N at most {MAX_SIMULATED:.0e} requests)",
    )
    p.add_argument(
        "--patience",
        type=flags.number(0, MAX_TIME_S, lo_open=True, unit="s"),
        help=f"patience tau in {flags.help_range(0, MAX_TIME_S, True)} s: impatient users "
        "leave after tau",
    )
    p.add_argument(
        "--simulate",
        type=flags.count(1000, MAX_REQUESTS, unit="requests"),
        metavar="N",
        help=f"also simulate N requests after warm-up, N in [1000, {MAX_REQUESTS:g}]; "
        f"N x --limit points at most {MAX_SIMULATED:g}",
    )
    p.add_argument(
        "--warmup",
        type=flags.count(0, MAX_REQUESTS, unit="requests"),
        help="requests discarded before measuring (default N/20)",
    )
    p.add_argument("--seed", type=flags.seed, default=0, help="random seed in [0, 2**63)")
    p.add_argument(
        "--alpha",
        type=flags.number(0, 1, lo_open=True),
        help="objective weight alpha in (0, 1] (default 119/120 patient, 0.95 impatient)",
    )
    p.add_argument(
        "--cost",
        type=flags.number(0, MAX_COST),
        default=4.0,
        help=f"cost c of a lost user in F2, in [0, {MAX_COST:g}] (default 4)",
    )
    p.add_argument(
        "--gamma",
        type=flags.number(0, MAX_GAMMA, lo_open=True),
        default=1.0,
        help=f"utility g(r) = r^gamma, gamma in (0, {MAX_GAMMA:g}] (default 1)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=run)


def _parse_limits(text: str) -> tuple[np.ndarray, bool]:
    from llmqueue.grids import parse_range

    limits, is_range = parse_range(text, "--limit", max_points=MAX_POINTS)
    if not (limits[0] > 0 and limits[-1] <= MAX_TOKENS and np.all(np.isfinite(limits))):
        raise InputError(f"--limit must lie in (0, {MAX_TOKENS:g}] tokens, got {text!r}")
    return limits, is_range


def _validate(args: argparse.Namespace) -> None:
    """What the flags' own types cannot see: the warm-up against the run."""
    if args.warmup is not None and args.simulate is None:
        raise InputError("--warmup goes with --simulate N")


def exact_cells(rate_per_s: float, patience_s: float) -> int:
    """The most cells the exact M/G/1+D solution of one limit can solve (its renewal grids of n
    cells cost n^2 each: the first grid max(8, min(tau/h, N/4), 2 lambda tau), doubled until the
    loss converges or the grid passes N/2; here: never converging), as
    :func:`llmqueue.analytic.impatience.exact_mg1d` schedules them (h = 0.02 s, N = 65,536).
    0 beyond lambda * tau = 8192, which that solution refuses at once."""
    if rate_per_s * patience_s > _MAX_ARRIVALS:
        return 0
    n = max(
        8,
        min(math.ceil(patience_s / _GRID_STEP_S), _MAX_GRID // 4),
        math.ceil(2.0 * rate_per_s * patience_s),
    )
    cells = n * n
    while True:
        n *= 2
        cells += n * n
        if n * 2 > _MAX_GRID:
            return cells


def _check_work(args: argparse.Namespace, points: int) -> None:
    """The work of the whole command, before any of it: the simulated requests of every point and
    the exact M/G/1+D grids of every point (InputError of one line: the estimate and the limit)."""
    # the measured requests: one point takes --simulate's own range
    if args.simulate is not None and points * args.simulate > MAX_SIMULATED:
        raise InputError(
            f"--limit {args.limit} with --simulate {args.simulate}: {points:,} points x "
            f"{args.simulate:,} requests = {points * args.simulate:.3g} simulated requests "
            f"(besides each point's warm-up); at most {MAX_SIMULATED:.3g} in all: give at most "
            f"{max(1, MAX_SIMULATED // args.simulate):,} --limit points or a smaller --simulate"
        )
    if args.patience is not None:
        cells = exact_cells(args.rate, args.patience)
        total = points * cells
        if total > MAX_EXACT_CELLS:
            hours = total * _S_PER_CELL / 3600
            raise InputError(
                f"--limit {args.limit} with --patience {args.patience:g}: {points:,} points x "
                f"up to {cells:.3g} cells of the exact M/G/1+D grid = {total:.3g} cells "
                f"(roughly {hours:.2g} h on one core); at most {MAX_EXACT_CELLS:.3g} in all: "
                f"give at most {max(1, MAX_EXACT_CELLS // cells):,} --limit points or a "
                "shorter --patience"
            )


def _simulate(
    args: argparse.Namespace, law: Any, latency: Any, limit: float, mean_s: float, index: int
) -> Any:
    from llmqueue.seeds import seed_sequence
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.token_limit.tables import simulate_point

    n = int(args.simulate)
    warm = args.warmup if args.warmup is not None else n // 20
    return simulate_point(
        law,
        latency,
        args.rate,
        limit,
        args.patience,
        SimSettings(n, warm, min(40, max(5, n // 1000))),
        seed_sequence(args.seed, "cli-token-limit", index),
    )


def _point(
    args: argparse.Namespace, law: Any, latency: Any, limit: float, index: int, in_range: bool
) -> dict[str, Any]:
    from llmqueue.analytic.impatience import de_kok_tijms, exact_token_limit
    from llmqueue.analytic.mg1 import token_limit_curve

    c = token_limit_curve(law, latency, args.rate, [limit])
    es, es2, rho = float(c.mean_service_s[0]), float(c.second_moment_s2[0]), float(c.rho[0])
    out: dict[str, Any] = {
        "limit": limit,
        "rho": {"formula": rho},
        "mean_service": {"formula": es},
        "second_moment": {"formula": es2},
        "p_below_limit": float(law.prob_below(limit)),
    }
    if args.patience is None:
        if c.unstable[0]:
            if not in_range:
                raise InputError(
                    f"rho = lambda*E[S] = {rho:.4g} >= 1 at limit {limit:g} (lambda = {args.rate:g}/s, E[S] = {es:.4g} s): "
                    "patient users have no steady state; lower --rate or --limit, or give --patience"
                )
            out["unstable"] = True
            return out
        out["unstable"] = False
        out["wq"] = {"formula": float(c.wq_s[0])}
        if args.simulate:
            s = _simulate(args, law, latency, limit, es, index)
            out["wq"].update(
                _sim_fields(s.wait.mean, s.wait.ci95, (s.wait.p50, s.wait.p95, s.wait.p99))
            )
        return out
    out["unstable"] = False
    exact = exact_token_limit(law, latency, args.rate, args.patience, limit)
    try:
        approx, _ = de_kok_tijms(law, latency, args.rate, args.patience, limit)
        formula: dict[str, float] = {
            "loss": approx.loss,
            "wqs": approx.wqs_s,
            "w_all": approx.w_all_s,
        }
    except InputError:  # c^2 outside [0, 1]: the interpolation does not apply
        formula = {}
    for key, ex in (("loss", exact.loss), ("wqs", exact.wqs_s), ("w_all", exact.w_all_s)):
        out[key] = {"exact": ex}
        if key in formula:
            out[key]["formula"] = formula[key]
    if args.simulate:
        s = _simulate(args, law, latency, limit, es, index)
        sw = s.served_wait
        out["loss"].update(_sim_fields(s.loss.mean, s.loss.ci95))
        out["wqs"].update(_sim_fields(sw.mean, sw.ci95, (sw.p50, sw.p95, sw.p99)))
        out["w_all"].update(
            _sim_fields(s.wait.mean, s.wait.ci95, (s.wait.p50, s.wait.p95, s.wait.p99))
        )
    return out


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _sim_fields(
    mean: float, ci95: float, quantiles: tuple[float, float, float] | None = None
) -> dict[str, float | None]:
    """The `sim`, `sim_ci95` (and `sim_p50/p95/p99`) entries of one JSON quantity; a number
    that is not finite (a quantile beyond the histogram) is null."""
    out = {"sim": _num(mean), "sim_ci95": _num(ci95)}
    if quantiles is not None:
        p50, p95, p99 = quantiles
        out.update(sim_p50=_num(p50), sim_p95=_num(p95), sim_p99=_num(p99))
    return out


def _optimum(args: argparse.Namespace, law: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from llmqueue.analytic.tradeoff import (
        argmax_on_grid,
        expected_utility,
        objective_impatient,
        objective_patient,
    )

    limits = np.array([r["limit"] for r in rows])
    eu = expected_utility(law, limits, args.gamma)
    scenario = "patient" if args.patience is None else "impatient"
    alpha = args.alpha if args.alpha is not None else _DEFAULT_ALPHA[scenario]
    if scenario == "patient":
        wq = np.array([r["wq"]["formula"] if not r["unstable"] else math.nan for r in rows])
        obj = objective_patient(eu, wq, alpha)
        name = "F1 = alpha*E[U] - (1-alpha)*W_q"
    else:
        obj = objective_impatient(
            eu,
            [r["wqs"]["exact"] for r in rows],
            [r["loss"]["exact"] for r in rows],
            alpha,
            args.cost,
        )
        name = "F2 = alpha*E[U] - (1-alpha)*W_qs - c*pi (exact M/G/1+D)"
    for r, u, f in zip(rows, eu, obj, strict=True):
        r["utility"] = float(u)
        r["objective"] = float(f) if np.isfinite(f) else None
    o = argmax_on_grid(limits, obj)
    return {
        "limit": o.limit,
        "objective": o.value,
        "at_grid_edge": o.at_edge,
        "objective_name": name,
        "alpha": alpha,
        "gamma": args.gamma,
        "cost": args.cost if scenario == "impatient" else None,
    }


def run(args: argparse.Namespace) -> int:
    from llmqueue.latency import parse_linear_latency
    from llmqueue.tokens import parse_law

    _validate(args)
    limits, is_range = _parse_limits(args.limit)
    _check_work(args, len(limits))
    try:
        law = parse_law(args.tokens)
    except InputError as err:
        raise InputError(f"--tokens: {err}") from None
    latency = parse_linear_latency(args.latency)
    rows = [_point(args, law, latency, float(lim), i, is_range) for i, lim in enumerate(limits)]
    if is_range:
        result: dict[str, Any] = {"rows": rows, "optimum": _optimum(args, law, rows)}
    else:
        result = rows[0]
    result_meta = {
        "tokens": args.tokens,
        "rate": args.rate,
        "latency": {"a": latency.a_s_per_token, "b0": latency.b0_s},
        "patience": args.patience,
    }
    if args.json:
        print(strict_json({**result_meta, **result}))
    else:
        _print_text(result_meta, rows, result.get("optimum"))
    return 0


def _fmt(d: dict[str, Any] | None, key: str) -> str:
    if not d or key not in d or d[key] is None:
        return "-"
    v = d[key]
    if key == "sim" and "sim_ci95" in d:
        return f"{v:.4g} +- {d['sim_ci95']:.2g}"
    return f"{v:.4g}"


def _print_text(
    meta: dict[str, Any], rows: list[dict[str, Any]], optimum: dict[str, Any] | None
) -> None:
    out = sys.stdout
    print(
        f"tokens {meta['tokens']}, lambda = {meta['rate']:g}/s, S = {meta['latency']['a']:g}*N + {meta['latency']['b0']:g} s"
        + (f", patience {meta['patience']:g} s" if meta["patience"] else ", patient users"),
        file=out,
    )
    if meta["patience"] is None:
        print(
            f"{'limit':>8} {'rho':>7} {'E[S] s':>8} {'E[S^2]':>10} {'W_q s':>9} {'W_q sim':>18} {'p95 s':>8} {'p99 s':>8}",
            file=out,
        )
        for r in rows:
            if r["unstable"]:
                print(
                    f"{r['limit']:>8g} {r['rho']['formula']:>7.3f}   unstable (rho >= 1)", file=out
                )
                continue
            w = r["wq"]
            print(
                f"{r['limit']:>8g} {r['rho']['formula']:>7.3f} {r['mean_service']['formula']:>8.3f} "
                f"{r['second_moment']['formula']:>10.4g} {w['formula']:>9.4g} {_fmt(w, 'sim'):>18} "
                f"{_fmt(w, 'sim_p95'):>8} {_fmt(w, 'sim_p99'):>8}",
                file=out,
            )
    else:
        print(
            f"{'limit':>8} {'rho':>7} {'pi approx':>9} {'pi exact':>9} {'pi sim':>18} {'W_qs exact':>10} "
            f"{'W_qs sim':>18} {'E[W] exact':>10} {'E[W] sim':>18}",
            file=out,
        )
        for r in rows:
            print(
                f"{r['limit']:>8g} {r['rho']['formula']:>7.3f} {_fmt(r['loss'], 'formula'):>9} {_fmt(r['loss'], 'exact'):>9} "
                f"{_fmt(r['loss'], 'sim'):>18} {_fmt(r['wqs'], 'exact'):>10} {_fmt(r['wqs'], 'sim'):>18} "
                f"{_fmt(r['w_all'], 'exact'):>10} {_fmt(r['w_all'], 'sim'):>18}",
                file=out,
            )
    if optimum:
        print(
            f"optimum: l* = {optimum['limit']:g} tokens, {optimum['objective_name']} = {optimum['objective']:.5g}"
            + (" (at the edge of the range)" if optimum["at_grid_edge"] else ""),
            file=out,
        )
