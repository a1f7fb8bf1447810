"""The serving model against vLLM: measured vs predicted JCT and TTFT per request.

Top row JCT, bottom row TTFT: one panel per Poisson load with the empirical CDFs of the
measured (vLLM, client side) and predicted (serving simulator replaying the same requests)
times, then a per-request scatter of predicted against measured for all loads (log-log, the
diagonal = exact). Measured requests only (warm-up rows left out); the prediction only (no
diagnostic variant). Data: ``llmqueue.studies.validation.compare_run``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from llmqueue import figstyle as style

METRICS = (("jct", "JCT (s)"), ("ttft", "TTFT (s)"))


def _ecdf(ax: Axes, x: np.ndarray, i: int, ls: str, label: str) -> None:
    xs = np.sort(x)
    ax.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", color=style.color(i), ls=ls,
            label=label)  # fmt: skip


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    pred: pd.DataFrame = inputs["predictions"]
    comp: pd.DataFrame = inputs["comparison"]
    settings: Mapping[str, Any] = inputs["settings"]
    main = comp[comp["variant"] == "prediction"]
    loads = main[np.isfinite(main["load"].to_numpy(dtype=float))].drop_duplicates("run")
    runs = list(loads["run"])
    p = pred[(pred["variant"] == "prediction") & ~pred["warmup"].astype(bool)]
    ncols = len(runs) + 1
    fig, axes = style.new_figure((7.2, 4.6), ncols=ncols, nrows=2)
    for row, (metric, label) in enumerate(METRICS):
        sc = axes[row, -1]
        lo, hi = math.inf, 0.0
        for i, run in enumerate(runs):
            info = loads[loads["run"] == run].iloc[0]
            err = main[(main["run"] == run) & (main["metric"] == metric)].iloc[0]
            x = p[p["run"] == run]
            meas = x[f"measured_{metric}_s"].to_numpy(dtype=float)
            prd = x[f"predicted_{metric}_s"].to_numpy(dtype=float)
            ax = axes[row, i]
            _ecdf(ax, meas, i, "-", "vLLM (measured)")
            _ecdf(ax, prd, i, "--", "simulator (predicted)")
            ax.set_xscale("log")
            ax.set_xlabel(label)
            ax.set_ylim(0, 1.02)
            if i == 0:
                ax.set_ylabel("fraction of requests")
            ax.set_title(f"{100 * info['load']:.0f}% load, {info['rate_per_s']:.2f} req/s")
            ax.text(
                0.97,
                0.04,
                f"mean {100 * err['mean_rel_error']:+.1f}%\np90 {100 * err['p90_rel_error']:+.1f}%",
                transform=ax.transAxes,
                ha="right",
                va="bottom",
                fontsize=6.5,
            )
            sc.plot(meas, prd, "o", ms=2.2, mfc="none", mew=0.6, color=style.color(i),
                    label=f"{100 * info['load']:.0f}% (r = {err['pearson']:.3f})")  # fmt: skip
            lo, hi = min(lo, meas.min(), prd.min()), max(hi, meas.max(), prd.max())
        sc.plot([lo, hi], [lo, hi], "-", color="0.3", lw=0.8)
        sc.set_xscale("log")
        sc.set_yscale("log")
        sc.set_xlabel(f"measured {label}")
        sc.set_ylabel(f"predicted {label}")
        sc.set_title("per request")
        sc.legend(loc="upper left", fontsize=5.5, handletextpad=0.1, borderaxespad=0.3)
    handles = [
        Line2D([], [], color="0.2", ls="-", label="vLLM (measured)"),
        Line2D([], [], color="0.2", ls="--", label="simulator (predicted)"),
        Line2D([], [], color="0.3", lw=0.8, label="scatter: predicted = measured"),
    ]
    fig.legend(handles=handles, loc="outside upper center", ncols=3)
    law = main.iloc[0]
    style.source_note(
        fig,
        f"{params['run']}: vLLM {settings.get('max_num_seqs')} seqs, "
        f"{settings.get('max_num_batched_tokens')} tokens/iteration, "
        f"{settings.get('usable_kv_tokens')} KV tokens in blocks of {settings.get('block_size')}; "
        f"step law from the calibration run only: c0 = {1e3 * law['c0_s']:.1f} ms, "
        f"c_tok = {1e3 * law['c_tok_s']:.3f} ms/token, c_ctx = {1e6 * law['c_ctx_s']:.1f} us/token; "
        f"{int(law['requests'])} measured requests per load (warm-up left out).",
    )
    return fig
