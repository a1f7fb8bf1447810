"""The paper's Sec. III on vLLM: one request at a time with a max-token limit, measured against
Fig. 4a's closed form.

Left: the mean wait in queue W_q against the token limit l, the closed form (Eq. 1-5,
Pollaczek-Khinchine with clipped tokens at the runs' planned rate, the per-request law fitted on
the calibration requests, the trace's length law) as a line, vLLM's measured mean wait of each run
as a point with its 95% batch-means CI, and the serving simulator's replay of the same requests;
the run without a limit sits at the right end (l = the longest reply). Right: the same for the
mean JCT (wait + service). Data: ``llmqueue.studies.validation.matrix``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    curve: pd.DataFrame = inputs["curve"]
    closed: pd.DataFrame = inputs["closed"]
    table: pd.DataFrame = inputs["table"]
    group = params["group"]
    c = closed[closed["group"] == group]
    t = table[(table["group"] == group) & (table["variant"] == "prediction")]
    top = float(curve["token_limit"].max())
    fig, axes = style.new_figure((7.2, 2.8), ncols=2)
    for ax, key, label in ((axes[0], "wait", "mean wait in queue W_q (s)"),
                           (axes[1], "jct", "mean JCT (s)")):  # fmt: skip
        ok = np.isfinite(curve[f"exact_{key}_mean_s"].to_numpy(dtype=float))
        style.formula_line(
            ax, curve["token_limit"][ok], curve[f"exact_{key}_mean_s"][ok],
            "closed form, Eq. (1)-(5)", 0,
        )  # fmt: skip
        for k, (_, r) in enumerate(c.iterrows()):
            x = float(r["token_limit"]) if pd.notna(r["token_limit"]) else top
            ax.errorbar(
                [x], [r[f"measured_{key}_mean_s"]], yerr=[r[f"measured_{key}_mean_ci95_s"]],
                fmt="o", ms=4, mfc="none", color=style.color(1), capsize=2,
                label="vLLM, measured (95% CI)" if k == 0 else None,
            )  # fmt: skip
            pr = t[t["run"] == r["run"]]
            if len(pr):
                ax.plot([x], [pr.iloc[0][f"predicted_{key}_mean_s"]], "x", ms=5,
                        color=style.color(2), label="simulator replay" if k == 0 else None)  # fmt: skip
            ax.annotate(str(r["run"]), (x, r[f"measured_{key}_mean_s"]), fontsize=5.5,
                        xytext=(4, 4), textcoords="offset points")  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("token limit l (tokens; no limit at the right end)")
        ax.set_ylabel(label)
        ax.legend(fontsize=6, loc="upper left")
    rate = float(curve["rate_per_s"].iloc[0])
    style.source_note(
        fig,
        f"vLLM max_num_seqs 1, {rate:.3f} requests/s (planned), prompts of 64 tokens; per-request "
        f"law S = {1e3 * curve['request_law_a_s'].iloc[0]:.2f} ms x N + "
        f"{1e3 * curve['request_law_b0_s'].iloc[0]:.1f} ms from the calibration requests.",
    )
    return fig
