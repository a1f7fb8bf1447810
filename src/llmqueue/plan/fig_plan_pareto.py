"""``llmqueue plan``'s Pareto figure: each configuration's goodput per replica (the highest rate
meeting every SLO, over its replicas) against the p99 of the SLOs' first metric at a fraction of
that goodput (the headroom an operator runs at); the Pareto front (no other configuration has both
more goodput per replica and less latency) joined by a line, the best configuration
(:func:`llmqueue.plan.summary.best`) ringed.
Colour: the router; marker: the queue order; configurations of goodput 0, or that miss the SLOs
(``met`` false: at ``--rate R``), are left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from llmqueue import figstyle as style
from llmqueue.io import atomic_path
from llmqueue.plan.summary import best

MARKERS = ("o", "s", "^", "D", "v")


def plot(inputs: dict, params: dict):  # type: ignore[no-untyped-def]
    df = inputs["plan"].copy()
    met = df["met"].astype(str).str.lower() == "true"  # bools, or a CSV's text
    df = df[(df["goodput_rate_per_s"] > 0) & (df["goodput_bound"] != "<") & met]
    fig, ax = style.new_figure(style.SINGLE)
    routers = sorted(df["router"].unique()) if len(df) else []
    orders = sorted(df["order"].unique()) if len(df) else []
    for i, router in enumerate(routers):
        for j, order in enumerate(orders):
            part = df[(df["router"] == router) & (df["order"] == order)]
            if part.empty:
                continue
            ax.scatter(
                part["pareto_latency_s"],
                part["goodput_per_replica_per_s"],
                s=10,
                marker=MARKERS[j % len(MARKERS)],
                color=style.color(i),
                alpha=0.75,
                lw=0,
                label=f"{router}, {order}",
            )
    front = df[df["pareto"].astype(bool)].sort_values("pareto_latency_s")
    if len(front):
        ax.step(
            front["pareto_latency_s"],
            front["goodput_per_replica_per_s"],
            where="post",
            color="0.2",
            lw=0.8,
            label="Pareto front",
        )
    top = best(df.to_dict("records")) if len(df) else None
    if top is not None:
        ax.scatter(
            [top["pareto_latency_s"]],
            [top["goodput_per_replica_per_s"]],
            s=60,
            facecolors="none",
            edgecolors="k",
            lw=0.8,
            label=(
                f"best: {int(top['replicas'])} x max_batch {int(top['max_batch'])}, "
                f"{top['router']}, {top['order']}"
            ),
        )
    metric = params.get("metric", "first SLO metric")
    ax.set_xlabel(f"p99 {metric} at {params.get('headroom', 0.8):g} x goodput (s)")
    ax.set_ylabel("goodput per replica (requests/s)")
    if len(df):
        ax.legend(loc="best", fontsize=5.5)
    else:
        ax.text(0.5, 0.5, "no configuration meets the SLOs", ha="center", transform=ax.transAxes)
    style.source_note(fig, params.get("note", ""))
    return fig


def plot_rows(
    rows: Sequence[dict[str, Any]], path: str, *, title: str = "", headroom: float = 0.8
) -> None:
    """Draw a plan's rows (``llmqueue plan --figure PATH``) to PATH.pdf and PATH.png; `headroom`:
    the fraction of the goodput the Pareto latency was measured at (``--headroom``)."""
    df = pd.DataFrame(list(rows))
    metric = "latency"
    slo_cols = [c for c in df.columns if c.endswith("_s") and c.split("_")[0] in
                ("wait", "ttft", "tpot", "jct")]  # fmt: skip
    if slo_cols:
        metric = slo_cols[0].split("_")[0].upper()
    params = {"metric": metric, "headroom": headroom, "note": f"SLOs: {title}" if title else ""}
    fig = plot({"plan": df}, params)
    for key in ("pdf", "png"):
        with atomic_path(f"{path}.{key}") as tmp:
            fig.savefig(tmp, format=key, metadata={"CreationDate": None} if key == "pdf" else None)
