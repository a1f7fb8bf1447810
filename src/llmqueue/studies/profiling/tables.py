"""Figure data and Table I of the profiling study (pure functions on parsed inputs).

Every row names its ``source`` (paper / roofline-<gpu> / <kernel profile> / <hardware-id>) and a
``label`` saying what it is: "paper (A100, Table I)", "roofline-predicted A100-80GB", "kernels
measured by others on an NVIDIA A100 (vidur-a100) + roofline attention", "measured on CPU ...".
A measured source without end-to-end Fig. 2a runs (``fit_json["fig2a_runs"] == 0``) has no Fig. 2a
points and no Fig. 2a line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from llmqueue.profiling.fits import (
    composed_time,
    composition_check,
    hardware_label,
    interp_point,
    rows_of,
)

__all__ = [
    "fig2a_data",
    "fig2b_data",
    "table1_frame",
    "table1_markdown",
    "table1_notes",
    "composition_frame",
]

PAPER_LABEL = "paper (A100, Table I)"


def _full_depth_t(fit: Mapping[str, Any], t1: float, t2: float) -> tuple[float, float]:
    fd = fit.get("full_depth")
    if not fd:
        return t1, t2
    return t1 * fd["t1_ratio"], t2 + fd["t2_added_s"]


def fig2a_data(
    table1: pd.DataFrame,
    paper_fit: Mapping[str, Any],
    roofline: Sequence[Mapping[str, Any]],
    measured: Mapping[str, tuple[pd.DataFrame, Mapping[str, Any], Sequence[Mapping[str, Any]]]],
    max_output: int,
    kernels: Sequence[Mapping[str, Any]] = (),
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Points (end-to-end runs; paper Table I rows at input 128) and lines (fits) of Fig. 2a;
    kernel-profile fits on an A100 (`kernels`) are lines of the A100 panel."""
    pts, lines = [], []
    rows = table1[table1["input_tokens"] == 128].drop_duplicates()
    for r in rows_of(rows):
        pts.append(
            {
                "source": "paper",
                "label": PAPER_LABEL,
                "model": "llama2-7b-chat",
                "panel": "A100",
                "output_tokens": int(r.output_tokens),
                "latency_s": float(r.latency_s),
                "kind": "paper",
            }
        )
    lin = paper_fit["linear"]
    lines.append(
        {
            "source": "paper",
            "label": "paper Table I fit (input 128)",
            "model": "llama2-7b-chat",
            "panel": "A100",
            "slope": lin["slope"],
            "intercept": lin["intercept"],
            "r2": lin["r2"],
            "n": lin["n"],
            "kind": "reference",
        }
    )
    # the A100 panel: only A100 predictions beside the paper's A100 numbers
    a100 = [(f, "predicted") for f in roofline if str(f["source"]).startswith("roofline-a100")]
    a100 += [
        (f, "measured-kernels")
        for f in kernels
        if str(f.get("gpu", {}).get("name", "")).startswith("a100")
    ]
    for f, kind in a100:
        lin = f["linear"]
        lines.append(
            {
                "source": f["source"],
                "label": f["label"],
                "model": f["model"],
                "panel": "A100",
                "slope": lin["slope"],
                "intercept": lin["intercept"],
                "r2": lin["r2"],
                "n": lin["n"],
                "kind": kind,
            }
        )
    for hw, (e2e, meta, fits) in measured.items():
        label = hardware_label(meta)
        for f in fits:
            model = f["model"]
            sub = e2e[(e2e["model"] == model) & (e2e["kind"] == "fig2a")]
            if sub.empty:
                continue  # no end-to-end Fig. 2a runs in this source: no points, no Fig. 2a fit
            for r in rows_of(sub):
                pts.append(
                    {
                        "source": hw,
                        "label": f["label"],
                        "model": model,
                        "panel": hw,
                        "output_tokens": int(r.output_tokens),
                        "latency_s": float(r.total_s),
                        "kind": "measured",
                    }
                )
            lin = f["linear"]
            lines.append(
                {
                    "source": hw,
                    "label": f"{label}: fit",
                    "model": model,
                    "panel": hw,
                    "slope": lin["slope"],
                    "intercept": lin["intercept"],
                    "r2": lin["r2"],
                    "n": lin["n"],
                    "kind": "measured",
                }
            )
    return pd.DataFrame(pts), pd.DataFrame(lines)


def _eq18_lines(
    source: str, panel: str, fit: Mapping[str, Any], bmin: int, bmax: int, kind: str
) -> list[dict[str, Any]]:
    """The two Eq. (18) fit lines of one fit.json, t1(b) = k1 b + k2 and t2(b) = k3 b + k4, as
    Fig. 2b line rows over batch sizes ``bmin..bmax``."""
    b = fit["batch"]
    return [
        {
            "source": source,
            "panel": panel,
            "label": fit["label"],
            "model": fit["model"],
            "quantity": q,
            "slope": b[k_s],
            "intercept": b[k_i],
            "r2": b[fk]["r2"],
            "bmin": bmin,
            "bmax": bmax,
            "kind": kind,
        }
        for q, k_s, k_i, fk in (("t1", "k1", "k2", "t1_fit"), ("t2", "k3", "k4", "t2_fit"))
    ]


def fig2b_data(
    roofline: Sequence[Mapping[str, Any]],
    measured: Mapping[str, tuple[pd.DataFrame, Mapping[str, Any], Sequence[Mapping[str, Any]]]],
    profiling: Mapping[str, Any],
    roofline_gpu: str,
    kernels: Mapping[str, tuple[Any, Mapping[str, Any]]] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig. 2b points: tokens/s at input 256 / output 1024 (composed T = t1 + (n - 1) t2 from measured
    t1(b), t2(b) at input 256) and t1(b), t2(b) at input 64; lines: the Eq. (18) fits.

    ``panel`` says which column a row belongs to: each measured source its own, the roofline of
    `roofline_gpu` one, and the kernel profiles (`kernels`: name -> (KernelProfile, fit.json))
    drawn in the roofline's column (same GPU), with their t1(b), t2(b) as points."""
    from llmqueue.hardware.roofline import roofline as make_roofline

    f2b = profiling["fig2b"]
    s_tp, n_tp, s_t = (
        int(f2b["throughput_input_tokens"]),
        int(f2b["throughput_output_tokens"]),
        int(f2b["timing_input_tokens"]),
    )
    ctx = int(profiling["roofline"]["decode_context_tokens"])
    pts, lines = [], []
    for hw, (timing, _meta, fits) in measured.items():
        for f in fits:
            model, layers = f["model"], f["layers"]
            sub = timing[
                (timing["model"] == model)
                & (timing["layers"] == layers)
                & (timing["grid"] != "depth")
            ]
            for r in rows_of(sub[sub["input_tokens"] == s_tp]):
                T = composed_time(float(r.t1_s), float(r.t2_s), n_tp)
                pts.append(
                    {
                        "source": hw,
                        "panel": hw,
                        "label": f["label"],
                        "model": model,
                        "quantity": "throughput",
                        "batch": int(r.batch),
                        "value": int(r.batch) * n_tp / T,
                        "kind": "measured (composed)",
                    }
                )
            for r in rows_of(sub[sub["input_tokens"] == s_t]):
                for q, col in (("t1", "t1_s"), ("t2", "t2_s")):
                    pts.append(
                        {
                            "source": hw,
                            "panel": hw,
                            "label": f["label"],
                            "model": model,
                            "quantity": q,
                            "batch": int(r.batch),
                            "value": float(getattr(r, col)),
                            "kind": "measured",
                        }
                    )
            sizes = f["batch"]["batch_sizes"]
            lines.extend(_eq18_lines(hw, hw, f, min(sizes), max(sizes), "measured fit"))
    roof_panel = f"roofline-{roofline_gpu}"
    for name, (kp, f) in (kernels or {}).items():
        model = f["model"]
        bmax = min(int(f["kv_limit"]["max_batch"]), 64)
        for bb in range(1, bmax + 1):
            T = kp.request_time(s_tp, n_tp, bb)
            pts.append(
                {
                    "source": name,
                    "panel": roof_panel,
                    "label": f["label"],
                    "model": model,
                    "quantity": "throughput",
                    "batch": bb,
                    "value": bb * n_tp / T,
                    "kind": "measured-kernels",
                }
            )
            for q, val in (("t1", kp.prefill_time(bb, s_t)), ("t2", kp.decode_time(bb, ctx))):
                pts.append(
                    {
                        "source": name,
                        "panel": roof_panel,
                        "label": f["label"],
                        "model": model,
                        "quantity": q,
                        "batch": bb,
                        "value": val,
                        "kind": "measured-kernels",
                    }
                )
        lines.extend(_eq18_lines(name, roof_panel, f, 1, bmax, "measured-kernels"))
    for f in roofline:
        if f["source"] != roof_panel:
            continue
        model = f["model"]
        r = make_roofline(
            model,
            roofline_gpu,
            profiling["roofline"]["dtype"],
            profiling["roofline"]["bandwidth_efficiency"],
            profiling["roofline"]["flops_efficiency"],
        )
        bmax = min(int(f["kv_limit"]["max_batch"]), 64)
        for bb in range(1, bmax + 1):
            T = r.request_time(s_tp, n_tp, bb)
            pts.append(
                {
                    "source": f["source"],
                    "panel": roof_panel,
                    "label": f["label"],
                    "model": model,
                    "quantity": "throughput",
                    "batch": bb,
                    "value": bb * n_tp / T,
                    "kind": "predicted",
                }
            )
        lines.extend(_eq18_lines(f["source"], roof_panel, f, 1, bmax, "predicted"))
    return pd.DataFrame(pts), pd.DataFrame(lines)


def composition_frame(
    measured_timing: Mapping[str, tuple[pd.DataFrame, pd.DataFrame]], models: Sequence[str]
) -> pd.DataFrame:
    frames = []
    for hw, (timing, e2e) in measured_timing.items():
        for m in models:
            cc = composition_check(timing, e2e, m)
            cc.insert(0, "source", hw)
            frames.append(cc)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def table1_frame(
    table1: pd.DataFrame,
    roofline: Sequence[Mapping[str, Any]],
    profiling: Mapping[str, Any],
    measured: Mapping[str, tuple[pd.DataFrame, Mapping[str, Any]]],
    kernels: Mapping[str, Any] | None = None,
) -> pd.DataFrame:
    """Table I (LLaMA-2-7B-chat) beside roofline predictions, kernel-profile times and measured
    composed times.

    Kernel columns ``<name>_kernels_s`` (`kernels`: name -> KernelProfile of LLaMA-2-7B): t1 + the
    n - 1 decode steps at growing context, kernels measured by others plus roofline attention.
    Measured columns: T = t1(s) + (n - 1) t2(s) from the short-decode grid at batch 1 (composed, as the
    issue allows for Table I), at the measured depth and extrapolated to full depth.
    """
    from llmqueue.hardware.roofline import roofline as make_roofline

    rp = profiling["roofline"]
    out = table1.copy()
    out.insert(0, "row", range(1, len(out) + 1))
    out = out.rename(columns={"latency_s": "paper_a100_s"})
    for f in roofline:
        if f["model"] != "llama2-7b-chat":
            continue
        gpu = f["source"].removeprefix("roofline-")
        r = make_roofline(
            "llama2-7b-chat", gpu, rp["dtype"], rp["bandwidth_efficiency"], rp["flops_efficiency"]
        )
        out[f"{f['source']}_predicted_s"] = [
            r.request_time(int(s), int(n))
            for s, n in zip(out["input_tokens"], out["output_tokens"], strict=True)
        ]
    for name, kp in (kernels or {}).items():
        if kp.model.name != "llama2-7b-chat":
            continue
        out[f"{name}_kernels_s"] = [
            kp.request_time(int(s), int(n))
            for s, n in zip(out["input_tokens"], out["output_tokens"], strict=True)
        ]
    for hw, (timing, fit) in measured.items():
        layers = int(fit["layers"])
        vals, full = [], []
        for s, n in zip(out["input_tokens"], out["output_tokens"], strict=True):
            t1, t2 = interp_point(timing, "llama2-7b-chat", 1, float(s), layers)
            vals.append(composed_time(t1, t2, int(n)))
            t1f, t2f = _full_depth_t(fit, t1, t2)
            full.append(composed_time(t1f, t2f, int(n)))
        if layers != fit["full_layers"]:
            out[f"{hw}_{layers}layer_composed_s"] = vals
            # extrapolated only when the depth check found time linear in layers
            valid = bool(fit.get("full_depth", {}).get("valid"))
            out[f"{hw}_full_depth_extrapolated_s"] = full if valid else [float("nan")] * len(full)
        else:
            out[f"{hw}_composed_s"] = vals
    return out


def table1_notes(
    fits: Mapping[str, Mapping[str, Any]],
    labels: Mapping[str, str],
    kernel_fits: Mapping[str, Mapping[str, Any]] | None = None,
    gpu: Mapping[str, bool] | None = None,
) -> list[str]:
    """The notes under Table I: what each column is; per kernel-profile source (its fit.json in
    `kernel_fits`) what is measured and what not; per measured source `hw` (its LLaMA-2-7B fit
    ``fits[hw]``, hardware label ``labels[hw]``, ``gpu[hw]`` True for a GPU) the depth it ran at,
    its depth check and (GPU) its composition check."""
    notes = [
        "paper_a100_s: the paper's Table I (LLaMA-2-7B-chat, NVIDIA A100; (128, 512) appears twice, as in the paper).",
        "roofline-<gpu>_predicted_s: PREDICTED by the roofline (fp16 weights read once per token, KV cache read; no "
        "framework overhead), a lower bound, never a measurement; T = t1 + sum of n - 1 decode steps.",
    ]
    for name, f in (kernel_fits or {}).items():
        notes.append(
            f"{name}_kernels_s: {f['label']}, never this project's measurement: linear layers = "
            f"{f['parts']['linear_layers']}; attention and LM head {f['parts']['attention'].split(':')[0]}; "
            f"not counted: {f['parts']['not_counted']}. t_linear at 1 token {1e3 * f['t_linear_batch1_s']:.2f} ms, "
            f"decode step t2(1) {1e3 * f['t2_batch1_s']:.2f} ms. T = t1 + sum of n - 1 decode steps; a measured "
            f"lower bound on an eager server ({f['parts']['monotone_fit']})."
        )
    for hw, f in fits.items():
        d = f.get("depth", {})
        if d:
            depth = (
                f"depth check at batch {d['batch']}, input {d['input_tokens']}, layers {d['layers']}: max relative "
                f"residual t1 {d['t1']['max_rel_residual']:.0%}, t2 {d['t2']['max_rel_residual']:.0%} (tolerance "
                f"{d['tolerance']:.0%}); "
                + (
                    f"extrapolated to full depth: {f['full_depth']['method']}"
                    if d["linear_ok"]
                    else "time NOT linear in layers within tolerance on this shared machine, so no full-depth "
                    "extrapolation is given (n/a)"
                )
            )
        else:
            depth = "full depth"
        if (gpu or {}).get(hw):
            comp = f.get("composition", {})
            if comp.get("runs"):
                depth += (
                    f"; composition check against {comp['runs']} full-length runs: median error "
                    f"{comp['median_rel_error']:+.0%}, worst {comp['max_abs_rel_error']:.0%}"
                    + (
                        " (the composition FAILS on this host: the long runs took far longer per token than "
                        "the short decodes; eager decoding there is CPU/launch-bound)"
                        if comp["max_abs_rel_error"] > 0.2
                        else ""
                    )
                )
            if not f.get("fig2a_runs"):
                depth += "; no end-to-end Fig. 2a runs were measured on it"
        notes.append(
            f"{hw}_*: {labels[hw]}, random-weight model, {f['layers']} of {f['full_layers']} layers, composed as "
            f"T = t1(s) + (n - 1) t2(s) from short decodes at batch 1; {depth}. A CPU or another GPU never stands "
            "in for the A100."
        )
    return notes


def table1_markdown(df: pd.DataFrame, notes: Sequence[str]) -> str:
    cols = list(df.columns)
    lines = [
        "# Table I: LLaMA-2-7B-chat latency (s) by (input, output) tokens",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in rows_of(df):
        cells = []
        for v in r:
            if isinstance(v, (float, np.floating)):
                cells.append(f"{v:.3f}" if np.isfinite(v) else "n/a")
            else:
                cells.append(str(v))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"
