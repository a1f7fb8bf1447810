"""Sweeps of the profiling study (paper Sec. II-B, II-C), driven by the ``profiling`` config section.

One plan per device kind (``hardware.cpu`` / ``hardware.cuda`` in config). Per model:

1. timing grid (``timing.csv``): t1 and t2 with short decodes at
   - batch 1 and every input length of Table I (Table I is composed as t1 + (n - 1) * t2),
   - the Fig. 2b bottom grid: input ``fig2b.timing_input_tokens`` (64) and every batch size,
   - the Fig. 2b top grid: input ``fig2b.throughput_input_tokens`` (256), its batch sizes;
2. composition checks (``e2e.csv``, kind ``composition``): full-length runs to compare with t1 + (n-1) t2;
3. Fig. 2a (``e2e.csv``, kind ``fig2a``): requests drawn (seeded) from the Azure trace with
   output < ``fig2a.max_output_tokens``, inputs capped so input + output fits the context (and at
   ``max_input_tokens`` on CPU), each measured END TO END (never composed);
4. depth check (CPU): the depth point at 1/2/4 layers (``timing.csv`` rows with ``layers`` > 1).

Rows are written after every point (atomically), so a stopped sweep keeps what it measured.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.hardware.models import get_spec
from llmqueue.profiling.fits import rows_of

__all__ = ["trace_requests", "timing_points", "run_model_sweep", "TIMING_COLUMNS", "E2E_COLUMNS"]

TIMING_COLUMNS = [
    "model",
    "layers",
    "full_layers",
    "dtype",
    "batch",
    "input_tokens",
    "decode_steps",
    "repeats",
    "t1_s",
    "t2_s",
    "t2_mean_s",
    "total_s",
    "t1_spread_s",
    "t2_spread_s",
    "grid",
]
E2E_COLUMNS = [
    "model",
    "layers",
    "full_layers",
    "dtype",
    "kind",
    "request",
    "trace_row",
    "batch",
    "input_tokens",
    "output_tokens",
    "total_s",
    "t1_s",
    "t2_mean_s",
]


def trace_requests(
    trace: pd.DataFrame,
    n: int,
    max_output: int,
    context: int,
    max_input: int | None,
    seed: int,
    input_column: str = "ContextTokens",
    output_column: str = "GeneratedTokens",
) -> pd.DataFrame:
    """Draw `n` requests (without replacement, seeded) among trace rows with 1 <= output < max_output.

    Inputs are capped at ``context - output`` (the model's window) and at `max_input` if given;
    both original and capped lengths are kept.
    """
    for col in (input_column, output_column):
        if col not in trace.columns:
            raise InputError(f"trace has no column {col!r}; columns: {list(trace.columns)}")
    out = pd.to_numeric(trace[output_column], errors="coerce")
    inp = pd.to_numeric(trace[input_column], errors="coerce")
    ok = (out >= 1) & (out < max_output) & (inp >= 1)
    idx = np.flatnonzero(ok.to_numpy())
    if idx.size < n:
        raise InputError(
            f"trace has only {idx.size} rows with 1 <= output < {max_output}; {n} requested"
        )
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    pick = np.sort(rng.choice(idx, size=n, replace=False))
    o = out.to_numpy()[pick].astype(int)
    i = inp.to_numpy()[pick].astype(int)
    cap = context - o
    if max_input is not None:
        cap = np.minimum(cap, max_input)
    return pd.DataFrame(
        {
            "trace_row": pick,
            "input_tokens_trace": i,
            "input_tokens": np.minimum(i, cap),
            "output_tokens": o,
        }
    )


def timing_points(
    profiling: Mapping[str, Any], plan: Mapping[str, Any]
) -> list[tuple[int, int, str]]:
    """(batch, input_tokens, grid) of the timing grid, deduplicated; grid names which figure uses it."""
    pts: dict[tuple[int, int], list[str]] = {}
    for inp in sorted({int(p[0]) for p in profiling["table1_pairs"]}):
        pts.setdefault((1, inp), []).append("table1")
    f2b = profiling["fig2b"]
    for b in plan["batch_sizes"]:
        pts.setdefault((int(b), int(f2b["timing_input_tokens"])), []).append("fig2b_bottom")
    for b in plan["throughput_batch_sizes"]:
        pts.setdefault((int(b), int(f2b["throughput_input_tokens"])), []).append("fig2b_top")
    return [(b, s, "+".join(g)) for (b, s), g in sorted(pts.items())]


class _Table:
    """A CSV that is rewritten atomically after each appended row; rows of other models are kept."""

    def __init__(
        self, path: Path, columns: Sequence[str], replace: Callable[[pd.DataFrame], pd.Series]
    ):
        self.path, self.columns = path, list(columns)
        if path.exists():
            old = pd.read_csv(path)
            self.rows = old[~replace(old)].to_dict(orient="records")
        else:
            self.rows = []

    def add(self, row: Mapping[str, Any]) -> None:
        from llmqueue.io import write_csv

        self.rows.append({c: row.get(c) for c in self.columns})
        write_csv(pd.DataFrame(self.rows, columns=self.columns), self.path)


def run_model_sweep(
    model_name: str,
    profiling: Mapping[str, Any],
    plan: Mapping[str, Any],
    device: str,
    out_dir: Path,
    trace: pd.DataFrame | None,
    seed: int,
    parts: Sequence[str] = ("timing", "composition", "fig2a", "depth"),
    log: Callable[[str], None] = print,
) -> None:
    """Measure one model per `plan` and append its rows to ``out_dir/timing.csv`` and ``e2e.csv``."""
    import torch

    from llmqueue.hardware.models import build_model
    from llmqueue.profiling.harness import generate_timed, time_point

    spec = get_spec(model_name)
    layers = plan.get("layers") or spec.layers
    dtype = plan["dtype"]
    out_dir.mkdir(parents=True, exist_ok=True)

    def drop_timing(d: pd.DataFrame) -> pd.Series:
        mine = d["model"].eq(model_name)
        depth_rows = d["grid"].eq("depth")
        return mine & ((~depth_rows & ("timing" in parts)) | (depth_rows & ("depth" in parts)))

    timing = _Table(out_dir / "timing.csv", TIMING_COLUMNS, drop_timing)
    e2e = _Table(
        out_dir / "e2e.csv",
        E2E_COLUMNS,
        lambda d: (
            d["model"].eq(model_name)
            & d["kind"].isin([p for p in parts if p in ("composition", "fig2a")])
        ),
    )
    base = {"model": model_name, "full_layers": spec.layers, "dtype": dtype}

    def timed(model: Any, n_layers: int, b: int, s: int, grid: str) -> None:
        t0 = time.perf_counter()
        pt = time_point(
            model,
            b,
            s,
            int(plan["decode_steps"]),
            int(plan["warmup"]),
            int(plan["repeats"]),
            seed=seed,
        )
        timing.add({**base, "layers": n_layers, **pt.to_dict(), "grid": grid})
        log(
            f"{model_name} L={n_layers} b={b} in={s}: t1={pt.t1_s:.4f}s t2={pt.t2_s:.5f}s ({time.perf_counter() - t0:.1f}s)"
        )

    need_main = any(p in parts for p in ("timing", "composition", "fig2a"))
    if need_main:
        t0 = time.perf_counter()
        model = build_model(model_name, device, dtype, layers=layers, seed=seed)
        log(
            f"built {model_name} with {layers} layers ({dtype}, {device}) in {time.perf_counter() - t0:.1f}s"
        )
        if "timing" in parts:
            for b, s, grid in timing_points(profiling, plan):
                timed(model, layers, b, s, grid)
        if "composition" in parts:
            for k, (b, s, n) in enumerate(plan.get("composition_runs", [])):
                generate_timed(model, [int(s)] * int(b), 2, seed=seed + 500)
                r = generate_timed(model, [int(s)] * int(b), int(n), seed=seed + 600 + k)
                e2e.add(
                    {
                        **base,
                        "layers": layers,
                        "kind": "composition",
                        "request": k,
                        "trace_row": -1,
                        "batch": b,
                        "input_tokens": s,
                        "output_tokens": n,
                        "total_s": r.total_s,
                        "t1_s": r.t1_s,
                        "t2_mean_s": r.t2_mean_s,
                    }
                )
                log(f"{model_name} composition b={b} in={s} out={n}: {r.total_s:.3f}s")
        if "fig2a" in parts:
            if trace is None:
                raise InputError("Fig. 2a needs the Azure trace (profiling config: fig2a)")
            f2a = profiling["fig2a"]
            reqs = trace_requests(
                trace,
                int(plan["fig2a_requests"]),
                int(f2a["max_output_tokens"]),
                spec.context,
                plan.get("max_input_tokens"),
                seed,
                f2a["input_column"],
                f2a["output_column"],
            )
            generate_timed(model, [int(reqs["input_tokens"].iloc[0])], 2, seed=seed + 700)
            for k, row in enumerate(rows_of(reqs)):
                r = generate_timed(
                    model, [int(row.input_tokens)], int(row.output_tokens), seed=seed + 800 + k
                )
                e2e.add(
                    {
                        **base,
                        "layers": layers,
                        "kind": "fig2a",
                        "request": k,
                        "trace_row": int(row.trace_row),
                        "batch": 1,
                        "input_tokens": int(row.input_tokens),
                        "output_tokens": int(row.output_tokens),
                        "total_s": r.total_s,
                        "t1_s": r.t1_s,
                        "t2_mean_s": r.t2_mean_s,
                    }
                )
                log(
                    f"{model_name} fig2a {k}: in={row.input_tokens} out={row.output_tokens}: {r.total_s:.3f}s"
                )
        del model
        gc.collect()
    if "depth" in parts and model_name in plan.get("depth_models", []):
        dp = plan["depth_point"]
        # All depths are built first and timed in interleaved rounds (1, 2, 4, 1, 2, 4, ...), so a
        # burst of load from other processes falls on every depth alike instead of bending the line;
        # per depth, medians over the rounds.
        depths = [int(n) for n in plan.get("depth_layers", [])]
        models = {}
        for n_layers in depths:
            t0 = time.perf_counter()
            models[n_layers] = build_model(model_name, device, dtype, layers=n_layers, seed=seed)
            log(f"built {model_name} with {n_layers} layers in {time.perf_counter() - t0:.1f}s")
        rounds = int(plan.get("depth_rounds", plan["repeats"]))
        per: dict[int, list[Any]] = {n: [] for n in depths}
        for rnd in range(rounds):
            for n_layers in depths:
                pt = time_point(
                    models[n_layers],
                    int(dp["batch"]),
                    int(dp["input_tokens"]),
                    int(plan["decode_steps"]),
                    warmup=1 if rnd == 0 else 0,
                    repeats=1,
                    seed=seed + rnd,
                )
                per[n_layers].append(pt)
        for n_layers, pts in per.items():
            t1s, t2s = [p.t1_s for p in pts], [p.t2_s for p in pts]
            row = {
                **base,
                "layers": n_layers,
                "batch": int(dp["batch"]),
                "input_tokens": int(dp["input_tokens"]),
                "decode_steps": int(plan["decode_steps"]),
                "repeats": rounds,
                "t1_s": float(np.median(t1s)),
                "t2_s": float(np.median(t2s)),
                "t2_mean_s": float(np.median([p.t2_mean_s for p in pts])),
                "total_s": float(np.median([p.total_s for p in pts])),
                "t1_spread_s": max(t1s) - min(t1s),
                "t2_spread_s": max(t2s) - min(t2s),
                "grid": "depth",
            }
            timing.add(row)
            log(
                f"{model_name} depth L={n_layers}: t1={row['t1_s']:.4f}s t2={row['t2_s']:.5f}s ({rounds} rounds)"
            )
        del models
        gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
