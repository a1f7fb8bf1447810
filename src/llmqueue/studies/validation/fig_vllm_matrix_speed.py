"""The engine's speed through the validation matrix's sessions: why calibrated predictions miss.

One panel per group. Every point is one window (config ``validation.matrix_compare.
speed_window_s``) of one phase of an engine session: the median, over the window's iterations, of
the measured iteration time over the time the prediction's step law (fitted on the group's
calibration only) gives for the same batch (1: the engine ran exactly as calibrated; 1.1: 10%
slower). Phases are laid back to back in the order they ran: the calibration (grey), the capacity
bursts (light grey), then the judged runs (one colour each, named at the top with their mean-JCT
error); a repeat's fresh engine session follows after a break. A steady machine would keep every
point near 1; the band marks +-3% (the median mean-JCT target). Data:
``llmqueue.studies.validation.matrix.speed_timeline``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from llmqueue import figstyle as style

BAND = 0.03  # the +-3% band drawn around 1 (the median mean-JCT target of the matrix)
SESSION_GAP = 0.15  # break between engine sessions, as a fraction of the group's session-1 span


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    tl: pd.DataFrame = inputs["timelines"]
    table: pd.DataFrame = inputs["table"]
    pred = table[table["variant"] == "prediction"]
    groups = list(dict.fromkeys(tl["group"]))
    ncols = 3
    nrows = int(np.ceil(len(groups) / ncols))
    fig, axes = style.new_figure((7.2, 2.3 * nrows), ncols=ncols, nrows=nrows, squeeze=False)
    lo = min(0.8, float(tl["speed"].min()) - 0.02)
    hi = max(1.2, float(tl["speed"].max()) + 0.02)
    for k, g in enumerate(groups):
        ax = axes[k // ncols, k % ncols]
        d = tl[tl["group"] == g]
        span1 = float((d.loc[d["session"] == 1, "t_s"] + d["window_s"].iloc[0]).max())
        shift = {
            s: (0.0 if s == 1 else span1 * (1 + SESSION_GAP) * (s - 1))
            for s in sorted(d["session"].unique())
        }
        ax.axhspan(1 - BAND, 1 + BAND, color="0.9", lw=0, zorder=0)
        ax.axhline(1.0, color="0.3", lw=0.6, zorder=1)
        # alternating blocks (<run>_b<k>) are coloured by their run, labelled once with the
        # median error of the run's blocks; any other judged run by itself
        runs = pred[pred["group"] == g].set_index("run")
        blocks = (
            runs["block"].fillna(0).astype(int) if "block" in runs else pd.Series(0, runs.index)
        )

        def run_of(phase: str, runs: pd.DataFrame = runs, blocks: pd.Series = blocks) -> str:
            return str(runs.at[phase, "config_run"]) if blocks.get(phase, 0) > 0 else phase

        judged = list(dict.fromkeys(run_of(p) for p in dict.fromkeys(d["phase"])
                                    if d.loc[d["phase"] == p, "kind"].iloc[0] == "judged"))  # fmt: skip
        labelled: set[str] = set()
        for phase, x in d.groupby("phase", sort=False):
            kind = x["kind"].iloc[0]
            t = (x["t_s"] + x["session"].map(shift) + x["window_s"] / 2) / 60.0
            if kind == "judged":
                run = run_of(phase)
                c = style.color(judged.index(run))
                if run != phase:  # a block
                    mine = blocks[blocks > 0].index
                    err = runs.loc[mine][runs.loc[mine, "config_run"] == run]["jct_mean_rel_error"]
                    text = f"{run} blocks (median {100 * float(err.median()):+.0f}%)"
                elif phase in runs.index:
                    text = f"{run} ({100 * float(runs.at[phase, 'jct_mean_rel_error']):+.0f}%)"
                else:
                    text = run
                label = None if run in labelled else text
                labelled.add(run)
            else:
                c = "0.45" if kind == "calibration" else "0.7"
                label = None if kind in labelled else kind
                labelled.add(kind)
            ax.plot(t, x["speed"], "o-", ms=2.2, lw=0.7, color=c, label=label, zorder=3)
        for s in shift:
            if s > 1:
                ax.axvline(shift[s] / 60.0 - span1 * SESSION_GAP / 120.0, color="0.5", lw=0.6,
                           ls=":")  # fmt: skip
        ax.set_ylim(lo, hi)
        ax.set_title(g, fontsize=7)
        ax.tick_params(labelsize=5.5)
        if k % ncols == 0:
            ax.set_ylabel("measured / calibrated step time", fontsize=6.5)
        if k // ncols == nrows - 1:
            ax.set_xlabel("engine time, phases back to back (min)", fontsize=6.5)
        ax.legend(fontsize=4.8, loc="upper left", ncols=2, framealpha=0.85)
    for k in range(len(groups), nrows * ncols):
        axes[k // ncols, k % ncols].set_visible(False)
    fig.suptitle(
        f"The engine's speed against its calibration, {params['window_s']:g}-s windows "
        "(judged runs: mean-JCT error of the prediction; dotted: a fresh engine session)",
        fontsize=7,
    )
    return fig
