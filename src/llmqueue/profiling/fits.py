"""Fits of the profiling study, written to ``results/profiling/<source>/<model>/fit.json``.

Contract (read by the token-limit and batching studies):
- ``linear``: S = a*N + b0 (Eq. 3; Fig. 2a, Table I) as {slope, intercept, r2, slope_ci95,
  intercept_ci95, n}; x = output tokens of the request, y = end-to-end latency (s).
- ``batch``: {k1, k2, k3, k4} (s) with t1(b) = k1*b + k2 (first token) and t2(b) = k3*b + k4 (each
  later token), Eq. (18), with the fit statistics under ``t1_fit`` / ``t2_fit``. A negative
  least-squares coefficient is clipped to 0 in ``batch`` (the batching study rejects negative
  times) and the raw value stays in the fit statistics; ``clipped`` lists which.
- ``step`` (and, for a GPU that timed CUDA-graph decode steps, ``step_graph``): the serving step
  law step = c0 + c_tok (decode_seqs + prefill_tokens) + c_ctx context_tokens (:class:`StepLaw`)
  as {c0_s, c_tok_s, c_ctx_s, ci95, r2, n, rel_residuals, clipped, points, description}: fitted to
  a measured ``step_law.csv``, to a measured Table I / Fig. 2b grid, or to a model source's own
  t1(b, s), t2(b, c) on config ``profiling.step_law``'s grid. ``step_missing`` says why a source
  has none.
- ``label`` (where the numbers come from), ``verdict`` ("measured", "measured-kernels",
  "predicted", "reference"), ``description``.

Every model source (roofline, kernel profile) offers ``prefill_time(b, s)`` (t1),
``decode_time(b, c)`` (t2) and ``request_time(s, n, b)``; :func:`model_source_fit_json` turns any
of them into the same fit.json.

Measured data are read with :func:`read_measured`, which turns a missing or corrupt CSV into an
:class:`~llmqueue.errors.InputError` naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.hardware.models import get_spec
from llmqueue.latency_fits import fit_linear_latency, fit_step_law

__all__ = [
    "read_measured",
    "batch_fit",
    "linear_fit_e2e",
    "depth_fit",
    "interp_point",
    "composed_time",
    "composition_check",
    "measured_fit_json",
    "roofline_fit_json",
    "kernel_fit_json",
    "model_source_fit_json",
    "hardware_label",
    "read_step_law",
    "step_fit",
    "measured_step_fits",
    "timing_step_points",
    "source_step_points",
    "linear_fit_composed",
]

_TIMING_REQ = [
    "model",
    "layers",
    "full_layers",
    "batch",
    "input_tokens",
    "t1_s",
    "t2_s",
    "t2_mean_s",
    "grid",
]
_E2E_REQ = ["model", "layers", "kind", "batch", "input_tokens", "output_tokens", "total_s"]
# the columns of one step-law point (step_law.csv, or derived from a timing grid), and what a
# step_law.csv must hold: the same plus the model
_STEP_POINT_COLS = [
    "kind",
    "mode",
    "batch",
    "tokens_per_seq",
    "decode_seqs",
    "prefill_tokens",
    "context_tokens",
    "time_s",
]
_STEP_REQ = ["model", *_STEP_POINT_COLS]


def _read_csv(path: Path, required: Sequence[str], numeric: Sequence[str]) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"profiling data file {str(path)!r} does not exist")
    try:
        df = pd.read_csv(path)
    except Exception as err:  # noqa: BLE001  (pandas raises several kinds)
        raise InputError(
            f"profiling data file {str(path)!r} is not a readable CSV: {err}"
        ) from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(
            f"profiling data file {str(path)!r} lacks columns {missing} (has {list(df.columns)})"
        )
    if df.empty:
        raise InputError(f"profiling data file {str(path)!r} has no rows")
    for c in numeric:
        vals = pd.to_numeric(df[c], errors="coerce")
        if vals.isna().any() or (vals < 0).any():
            bad = int((vals.isna() | (vals < 0)).sum())
            raise InputError(
                f"profiling data file {str(path)!r}: column {c!r} has {bad} missing, non-numeric or "
                "negative values (times and counts must be >= 0)"
            )
        df[c] = vals
    return df


def read_measured(folder: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(timing, e2e, meta) of a committed measurement folder ``data/profiling/<hardware-id>/``."""
    folder = Path(folder)
    timing = _read_csv(
        folder / "timing.csv",
        _TIMING_REQ,
        ["layers", "batch", "input_tokens", "t1_s", "t2_s", "t2_mean_s"],
    )
    e2e = _read_csv(
        folder / "e2e.csv",
        _E2E_REQ,
        ["layers", "batch", "input_tokens", "output_tokens", "total_s"],
    )
    mpath = folder / "meta.json"
    if not mpath.is_file():
        raise InputError(f"profiling meta file {str(mpath)!r} does not exist")
    try:
        meta = json.loads(mpath.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"profiling meta file {str(mpath)!r} is not valid JSON: {err}") from None
    return timing, e2e, meta


def read_step_law(folder: str | Path) -> pd.DataFrame | None:
    """``step_law.csv`` of a measurement folder (``python -m llmqueue profile step-law``), or
    None when the folder has none."""
    path = Path(folder) / "step_law.csv"
    if not path.exists():
        return None
    return _read_csv(
        path,
        _STEP_REQ,
        ["batch", "tokens_per_seq", "decode_seqs", "prefill_tokens", "context_tokens", "time_s"],
    )


def is_gpu_source(meta: Mapping[str, Any]) -> bool:
    """True when a measurement's ``meta.json`` says it ran on CUDA."""
    return str(meta.get("environment", {}).get("device", "cpu")).startswith("cuda")


def hardware_label(meta: Mapping[str, Any]) -> str:
    env = meta.get("environment", {})
    if is_gpu_source(meta):
        return f"measured on {env.get('gpu', 'GPU')}"
    return f"measured on CPU {env.get('cpu', '?')} ({env.get('cpu_count', '?')} cores)"


def rows_of(df: pd.DataFrame) -> list[Any]:
    """Rows as named tuples (typed Any: columns are known only at run time)."""
    return list(df.itertuples(index=False))


def _fit_dict(x: Any, y: Any) -> dict[str, Any]:
    return fit_linear_latency(np.asarray(x, float), np.asarray(y, float)).to_dict()


def _nonneg_linear(fit: dict[str, Any]) -> dict[str, Any]:
    """A fit for the ``linear`` contract: a negative intercept is clipped to 0 (LinearLatency needs
    b0 >= 0); the raw value stays in ``intercept_raw`` and ``clipped`` says so."""
    out = dict(fit)
    out["intercept_raw"] = fit["intercept"]
    out["clipped"] = fit["intercept"] < 0
    out["intercept"] = max(0.0, float(fit["intercept"]))
    return out


def batch_fit(
    timing: pd.DataFrame, model: str, input_tokens: int, layers: int | None = None
) -> dict[str, Any]:
    """k1..k4 of Eq. (18) from the timing rows of `model` at `input_tokens` (t2: median step time)."""
    rows = timing[
        (timing["model"] == model)
        & (timing["input_tokens"] == input_tokens)
        & (timing["grid"] != "depth")
    ]
    if layers is not None:
        rows = rows[rows["layers"] == layers]
    rows = rows.sort_values("batch")
    if rows["batch"].nunique() < 2:
        raise InputError(
            f"{model}: need timing rows at >= 2 batch sizes with input {input_tokens}, got {len(rows)}"
        )
    f1 = _fit_dict(rows["batch"], rows["t1_s"])
    f2 = _fit_dict(rows["batch"], rows["t2_s"])
    raw = {"k1": f1["slope"], "k2": f1["intercept"], "k3": f2["slope"], "k4": f2["intercept"]}
    clipped = [k for k, v in raw.items() if v < 0]
    out: dict[str, Any] = {k: max(0.0, float(v)) for k, v in raw.items()}
    out.update(
        {
            "t1_fit": f1,
            "t2_fit": f2,
            "clipped": clipped,
            "input_tokens": int(input_tokens),
            "batch_sizes": rows["batch"].astype(int).tolist(),
        }
    )
    return out


def linear_fit_e2e(e2e: pd.DataFrame, model: str) -> dict[str, Any]:
    """S = a*N + b0 over the end-to-end Fig. 2a runs of `model` (N = output tokens)."""
    rows = e2e[(e2e["model"] == model) & (e2e["kind"] == "fig2a")]
    if len(rows) < 3:
        raise InputError(f"{model}: need >= 3 Fig. 2a end-to-end runs, got {len(rows)}")
    return _nonneg_linear(_fit_dict(rows["output_tokens"], rows["total_s"]))


def depth_fit(
    timing: pd.DataFrame, model: str, depth_point: Mapping[str, int], tolerance: float
) -> dict[str, Any]:
    """Time vs number of layers at the depth point: t = c0 + c1 * layers for t1 and t2.

    ``linear_ok`` is true when every point lies within `tolerance` (relative) of the line.
    """
    b, s = int(depth_point["batch"]), int(depth_point["input_tokens"])
    rows = timing[
        (timing["model"] == model) & (timing["batch"] == b) & (timing["input_tokens"] == s)
    ]
    rows = rows.sort_values("layers").drop_duplicates("layers", keep="last")
    if rows["layers"].nunique() < 3:
        raise InputError(
            f"{model}: the depth check needs >= 3 depths at batch {b}, input {s}; got {rows['layers'].tolist()}"
        )
    out: dict[str, Any] = {
        "batch": b,
        "input_tokens": s,
        "layers": rows["layers"].astype(int).tolist(),
        "tolerance": tolerance,
    }
    ok = True
    for q in ("t1_s", "t2_s"):
        f = _fit_dict(rows["layers"], rows[q])
        pred = f["intercept"] + f["slope"] * rows["layers"].to_numpy(float)
        resid = float(np.max(np.abs(rows[q].to_numpy(float) - pred) / pred))
        f["max_rel_residual"] = resid
        f["values"] = rows[q].astype(float).tolist()
        ok = ok and resid <= tolerance and f["slope"] > 0
        out[q.removesuffix("_s")] = f
    out["linear_ok"] = bool(ok)
    return out


def interp_point(
    timing: pd.DataFrame, model: str, batch: int, input_tokens: float, layers: int
) -> tuple[float, float]:
    """(t1, t2) at (batch, input) from the grid, linear in input between measured inputs (clamped)."""
    rows = timing[
        (timing["model"] == model)
        & (timing["batch"] == batch)
        & (timing["layers"] == layers)
        & (timing["grid"] != "depth")
    ]
    rows = (
        rows.groupby("input_tokens", as_index=False)[["t1_s", "t2_s"]]
        .median()
        .sort_values("input_tokens")
    )
    if rows.empty:
        raise InputError(f"{model}: no timing rows at batch {batch} with {layers} layer(s)")
    x = rows["input_tokens"].to_numpy(float)
    return float(np.interp(input_tokens, x, rows["t1_s"])), float(
        np.interp(input_tokens, x, rows["t2_s"])
    )


def linear_fit_composed(
    timing: pd.DataFrame, model: str, layers: int, pairs: Sequence[Sequence[int]]
) -> dict[str, Any]:
    """S = a*N + b0 over Table I's cells at input 128, each composed as T = t1 + (n - 1) t2 from
    the short-decode grid at batch 1: the law of a source that ran no end-to-end Fig. 2a requests
    (``method`` says so; it is never drawn as a Fig. 2a fit)."""
    outs = sorted({int(n) for s, n in pairs if int(s) == 128})
    t1, t2 = interp_point(timing, model, 1, 128.0, layers)
    fit = _nonneg_linear(_fit_dict(outs, [composed_time(t1, t2, n) for n in outs]))
    fit["method"] = (
        f"composed: T = t1(128) + (n - 1) t2(128) at batch 1 for n in {outs} (short decodes); no "
        "end-to-end Fig. 2a runs in this source"
    )
    return fit


def step_fit(points: pd.DataFrame, description: str) -> dict[str, Any]:
    """fit.json ``step`` entry: :func:`~llmqueue.latency_fits.fit_step_law` on `points` (one iteration per
    row: decode_seqs, prefill_tokens, context_tokens, time_s), the points themselves and what they
    are (`description`)."""
    f = fit_step_law(
        points["decode_seqs"], points["prefill_tokens"], points["context_tokens"], points["time_s"]
    ).to_dict()
    f["description"] = description
    f["points"] = {
        c: [v if isinstance(v, str) else float(v) for v in points[c]]
        for c in _STEP_POINT_COLS
        if c in points
    }
    return f


def source_step_points(src: Any, plan: Mapping[str, Any], context_limit: int) -> pd.DataFrame:
    """A model source's own iterations on config ``profiling.step_law``'s grid: decode steps
    t2(b, c) at (decode_seqs b, context b c) and prefills t1(b, p) at (prefill b p, context b p)."""
    from llmqueue.profiling.steplaw import decode_points

    rows = [
        ("decode", b, c, b, 0, b * c, src.decode_time(b, c))
        for b, c in decode_points(
            plan["decode_batch_sizes"],
            plan["decode_contexts"],
            int(plan["max_kv_tokens"]),
            context_limit,
        )
    ]
    rows += [
        ("prefill", int(b), int(p), 0, int(b) * int(p), int(b) * int(p), src.prefill_time(b, p))
        for b, p in plan["prefill_points"]
    ]
    df = pd.DataFrame(
        rows,
        columns=[
            "kind",
            "batch",
            "tokens_per_seq",
            "decode_seqs",
            "prefill_tokens",
            "context_tokens",
            "time_s",
        ],
    )
    df.insert(1, "mode", "model")
    return df


def timing_step_points(timing: pd.DataFrame, model: str, layers: int) -> pd.DataFrame:
    """Iterations read off a Table I / Fig. 2b timing grid (no ``step_law.csv``): each t2_s row a
    decode step of b sequences at context input + decode_steps / 2 each (the median step), each
    t1_s row a prefill of b prompts (prefill + first token)."""
    rows = timing[
        (timing["model"] == model) & (timing["layers"] == layers) & (timing["grid"] != "depth")
    ]
    out = []
    for r in rows_of(rows):
        b, s = int(r.batch), int(r.input_tokens)
        steps = int(getattr(r, "decode_steps", 0) or 0)
        out.append(("decode", "eager", b, s, b, 0, b * (s + steps / 2), float(r.t2_s)))
        out.append(("prefill", "eager", b, s, 0, b * s, b * s, float(r.t1_s)))
    return pd.DataFrame(out, columns=_STEP_POINT_COLS)


def measured_step_fits(
    step: pd.DataFrame | None, timing: pd.DataFrame, model: str, layers: int, label: str
) -> dict[str, Any]:
    """``step`` / ``step_graph`` entries of a measured source.

    With a ``step_law.csv`` (`step`): ``step`` from its eager rows (decode steps on a static cache
    and prefills), ``step_graph`` from its CUDA-graph decode rows (decode only: c_tok comes from
    decode sequences, no prefill was timed in a graph). Without one: ``step`` from the timing grid
    (:func:`timing_step_points`, a copying DynamicCache, at the measured depth).
    """
    out: dict[str, Any] = {}
    mine = step[step["model"] == model] if step is not None else None
    if mine is not None and not mine.empty:
        eager = mine[mine["mode"] == "eager"]
        graph = mine[mine["mode"] == "graph"]
        if len(eager) >= 4:
            out["step"] = step_fit(
                eager,
                f"{label}: step_law.csv eager rows ({int((eager['kind'] == 'decode').sum())} decode steps on a "
                f"static KV cache, {int((eager['kind'] == 'prefill').sum())} prefills), least squares",
            )
        if len(graph) >= 4:
            out["step_graph"] = step_fit(
                graph,
                f"{label}: step_law.csv decode steps replayed from a captured CUDA graph ({len(graph)} "
                "points; decode only, so c_tok is the per-sequence cost of a decode step)",
            )
        return out
    if mine is not None and mine.empty:
        out["step_missing"] = f"step_law.csv has no rows for {model}"
    pts = timing_step_points(timing, model, layers)
    try:
        out["step"] = step_fit(
            pts,
            f"{label}: the Table I / Fig. 2b timing grid ({layers} layer(s); decode t2 at context input + "
            "steps / 2, prefill t1), least squares; a DynamicCache copied each step",
        )
        out.pop("step_missing", None)
    except InputError as err:
        out["step_missing"] = f"no step law from the timing grid: {err}"
    return out


def composed_time(t1: float, t2: float, output_tokens: int) -> float:
    """T = t1 + (n - 1) * t2: the first token comes with t1, each later one takes t2 (Eq. 18)."""
    return t1 + (output_tokens - 1) * t2


def composition_check(timing: pd.DataFrame, e2e: pd.DataFrame, model: str) -> pd.DataFrame:
    """Every full-length run of `model` beside t1 + (n - 1) t2 from the short-decode grid."""
    out = []
    for r in rows_of(e2e[e2e["model"] == model]):
        try:
            t1, t2 = interp_point(timing, model, int(r.batch), float(r.input_tokens), int(r.layers))
        except InputError:
            continue
        comp = composed_time(t1, t2, int(r.output_tokens))
        out.append(
            {
                "model": model,
                "kind": r.kind,
                "batch": int(r.batch),
                "input_tokens": int(r.input_tokens),
                "output_tokens": int(r.output_tokens),
                "measured_s": float(r.total_s),
                "composed_s": comp,
                "rel_error": comp / float(r.total_s) - 1.0,
            }
        )
    return pd.DataFrame(
        out,
        columns=[
            "model",
            "kind",
            "batch",
            "input_tokens",
            "output_tokens",
            "measured_s",
            "composed_s",
            "rel_error",
        ],
    )


def _summary(cc: pd.DataFrame) -> dict[str, Any]:
    if cc.empty:
        return {"runs": 0}
    e = cc["rel_error"].to_numpy(float)
    return {
        "runs": int(len(e)),
        "median_rel_error": float(np.median(e)),
        "max_abs_rel_error": float(np.max(np.abs(e))),
    }


def depth_source(model: str, depth_models: Sequence[str]) -> str | None:
    """The model whose depth check `model` uses: its own, else LLaMA-2-7B's when checked (Chinese-
    Alpaca-2-7B has LLaMA-2-7B's blocks; only its vocabulary differs), else none."""
    if model in depth_models:
        return model
    return "llama2-7b-chat" if "llama2-7b-chat" in depth_models else None


def measured_fit_json(
    source: str,
    model: str,
    timing: pd.DataFrame,
    e2e: pd.DataFrame,
    meta: Mapping[str, Any],
    profiling: Mapping[str, Any],
    depth_from: str | None = None,
    depth_tolerance: float = 0.1,
    step: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """fit.json of a measured source: Fig. 2a linear fit, Eq. (18) batch fit, composition check,
    the serving step law (from `step`, a ``step_law.csv``, when given), and (CPU, fewer layers) the
    depth check and the extrapolation to full depth.

    A source without end-to-end Fig. 2a runs gets no Fig. 2a fit: its ``linear`` is composed from
    the short-decode grid (:func:`linear_fit_composed`, ``linear.method`` says so) and
    ``fig2a_runs`` is 0."""
    spec = get_spec(model)
    mine = timing[timing["model"] == model]
    if mine.empty:
        raise InputError(f"{source}: no timing rows for model {model!r}")
    layers = int(mine.loc[mine["grid"] != "depth", "layers"].mode().iloc[0])
    label = hardware_label(meta)
    depth_note = (
        "full depth" if layers == spec.layers else f"{layers} of {spec.layers} layers, full width"
    )
    f2b = profiling["fig2b"]
    n_fig2a = int(((e2e["model"] == model) & (e2e["kind"] == "fig2a")).sum())
    if n_fig2a >= 3:
        lin = linear_fit_e2e(e2e, model)
        lin["method"] = f"least squares over {n_fig2a} end-to-end Fig. 2a runs"
    else:
        lin = linear_fit_composed(timing, model, layers, profiling["table1_pairs"])
    out: dict[str, Any] = {
        "source": source,
        "model": model,
        "verdict": "measured",
        "label": f"{label}, {depth_note}",
        "hardware": meta.get("environment", {}),
        "layers": layers,
        "full_layers": spec.layers,
        "description": (
            f"random-weight {model} ({spec.note}); {depth_note}; linear: {lin['method']}; batch: "
            f"t1(b), t2(b) (median step) at input {f2b['timing_input_tokens']}"
        ),
        "fig2a_runs": n_fig2a,
        "linear": lin,
        "batch": batch_fit(timing, model, int(f2b["timing_input_tokens"]), layers),
        "composition": _summary(composition_check(timing, e2e, model)),
        **measured_step_fits(step, timing, model, layers, f"{label}, {depth_note}"),
    }
    if layers != spec.layers:
        dmodel = depth_from or model
        dp = profiling["hardware"]["cpu"]["depth_point"]
        d = depth_fit(timing, dmodel, dp, depth_tolerance)
        d["from_model"] = dmodel
        out["depth"] = d
        full = spec.layers
        # t2 (decode): add the per-layer cost of the missing layers; t1 (prefill, layer dominated): scale by the
        # ratio of the depth line at full depth to the line at the sweep depth.
        add_t2 = (full - layers) * d["t2"]["slope"]
        r_t1 = (d["t1"]["intercept"] + full * d["t1"]["slope"]) / (
            d["t1"]["intercept"] + layers * d["t1"]["slope"]
        )
        lin, bat = out["linear"], out["batch"]
        out["full_depth"] = {
            "method": (
                f"t2 + ({full} - {layers}) x per-layer t2 slope; t1 x {r_t1:.3f} (depth line at {full} vs "
                f"{layers} layers); per-layer costs from {dmodel} at batch {d['batch']}, input {d['input_tokens']}"
            ),
            "valid": d["linear_ok"],
            "t1_ratio": r_t1,
            "t2_added_s": add_t2,
            "linear": {"slope": lin["slope"] + add_t2, "intercept": lin["intercept"] * r_t1},
            "batch": {
                "k1": bat["k1"] * r_t1,
                "k2": bat["k2"] * r_t1,
                "k3": bat["k3"],
                "k4": bat["k4"] + add_t2,
            },
            "label": f"{label}, extrapolated from {layers} to {full} layers (never a GPU stand-in)",
        }
    return out


def model_source_fit_json(
    src: Any, model: str, gpu: str, profiling: Mapping[str, Any]
) -> dict[str, Any]:
    """The laws of a model source (`src` offers request_time, prefill_time, decode_time; a
    :class:`~llmqueue.hardware.roofline.Roofline` or a
    :class:`~llmqueue.profiling.kernels.KernelProfile`) on GPU spec `gpu`: ``linear`` = least
    squares of its Table I times at input 128; ``batch`` = Eq. (18) fits of t1(b) at the Fig. 2b
    input and t2(b) at ``roofline.decode_context_tokens``, b = 1..min(KV limit, 64); ``step`` = the
    step law fitted to its own t1, t2 on ``profiling.step_law``'s batch/context/prefill grid (when
    configured; contexts beyond `model`'s window are left out)."""
    from llmqueue.hardware.kvcache import kv_limit

    roof = profiling["roofline"]
    f2b = profiling["fig2b"]
    outs = sorted({int(n) for s, n in profiling["table1_pairs"] if int(s) == 128})
    lin = _nonneg_linear(_fit_dict(outs, [src.request_time(128, n) for n in outs]))
    lin["method"] = f"least squares of the source's Table I times at input 128, outputs {outs}"
    seq = int(f2b["throughput_input_tokens"]) + int(f2b["throughput_output_tokens"])
    kv = kv_limit(model, gpu, seq, roof["dtype"], roof["dtype"]).max_batch
    bmax = max(2, min(kv, 64))
    bs = np.arange(1, bmax + 1)
    s_in, ctx = int(f2b["timing_input_tokens"]), int(roof["decode_context_tokens"])
    t1 = [src.prefill_time(float(b), s_in) for b in bs]
    t2 = [src.decode_time(float(b), ctx) for b in bs]
    f1, f2 = _fit_dict(bs, t1), _fit_dict(bs, t2)
    raw = {"k1": f1["slope"], "k2": f1["intercept"], "k3": f2["slope"], "k4": f2["intercept"]}
    out: dict[str, Any] = {
        "t2_batch1_s": src.decode_time(1, 0),
        "kv_limit": {"sequence_tokens": seq, "max_batch": kv},
        "linear": lin,
        "batch": {
            **{k: max(0.0, v) for k, v in raw.items()},
            "t1_fit": f1,
            "t2_fit": f2,
            "clipped": [k for k, v in raw.items() if v < 0],
            "input_tokens": s_in,
            "decode_context_tokens": ctx,
            "batch_sizes": [1, bmax],
        },
        "batch_note": f"t1(b) at input {s_in}, t2(b) at context {ctx}, b = 1..{bmax} (KV limit at {seq} tokens: {kv})",
    }
    plan = profiling.get("step_law")
    if plan:
        pts = source_step_points(src, plan, get_spec(model).context)
        out["step"] = step_fit(
            pts,
            f"the source's own t2(b, c) at {int((pts['kind'] == 'decode').sum())} decode points and t1(b, p) at "
            f"{int((pts['kind'] == 'prefill').sum())} prefill points of profiling.step_law's grid, least squares",
        )
    else:
        out["step_missing"] = "no profiling.step_law grid in the config"
    return out


def roofline_fit_json(model: str, gpu: str, profiling: Mapping[str, Any]) -> dict[str, Any]:
    """fit.json of a roofline-predicted source (``roofline-<gpu>``): :func:`model_source_fit_json`
    of the roofline (predicted)."""
    from llmqueue.hardware.roofline import roofline

    roof = profiling["roofline"]
    r = roofline(model, gpu, roof["dtype"], roof["bandwidth_efficiency"], roof["flops_efficiency"])
    laws = model_source_fit_json(r, model, gpu, profiling)
    label = f"roofline-predicted {r.gpu.label}"
    return {
        "source": f"roofline-{gpu}",
        "model": model,
        "verdict": "predicted",
        "label": label,
        "description": (
            f"{label} ({roof['dtype']}, {roof['bandwidth_efficiency']:g} x peak bandwidth): weights read once "
            "per step, KV cache read per token; no framework overhead (a lower bound). linear: least squares "
            f"of predicted Table I times at input 128; batch: {laws.pop('batch_note')}"
        ),
        "gpu": r.gpu.to_dict(),
        **laws,
    }


def kernel_fit_json(
    kp: Any, meta: Mapping[str, Any], profiling: Mapping[str, Any]
) -> dict[str, Any]:
    """fit.json of a kernel-profile source (:class:`~llmqueue.profiling.kernels.KernelProfile`,
    verdict ``measured-kernels``): linear layers measured by others, attention and LM head by the
    roofline; ``parts`` says which is which, ``linear_part`` holds the per-token-count sums."""
    gpu = kp.roof.gpu.name
    laws = model_source_fit_json(kp, kp.model.name, gpu, profiling)
    who = str(meta.get("measured_by", "others"))
    hw = str(meta.get("hardware", {}).get("gpu", gpu)).split(" (")[0]
    label = f"kernels measured by others on an {hw} ({kp.name}) + roofline attention"
    t = kp.table
    return {
        "source": kp.name,
        "model": kp.model.name,
        "verdict": "measured-kernels",
        "label": label,
        "description": (
            f"{label}: linear layers = {kp.model.layers} x the block's kernel medians + embedding at n tokens, "
            f"measured by {who}, interpolated in n; attention (KV read) and LM head roofline-predicted on "
            f"{kp.roof.gpu.label}; no sampling or framework overhead (a measured lower bound). batch: "
            f"{laws.pop('batch_note')}"
        ),
        "measured_by": who,
        "hardware": meta.get("hardware", {}),
        "provenance": meta.get("source", {}),
        "date_measured": meta.get("date_measured", "unknown"),
        "gpu": kp.roof.gpu.to_dict(),
        "tensor_parallel": kp.tensor_parallel,
        "parts": kp.parts(),
        "t_linear_batch1_s": float(kp.linear_time(1)),
        "linear_part": {
            "tokens": t["tokens"].astype(int).tolist(),
            "raw_s": [float(v) for v in t["raw_s"]],
            "monotone_s": [float(v) for v in t["linear_s"]],
        },
        **laws,
    }


def finite(x: Any) -> bool:
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
