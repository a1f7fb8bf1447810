"""The one plotting style every figure shares: fonts, palette, markers, how sim and formula look.

Simulations are markers with 95% confidence bars (or bands); closed forms are lines; points
where the queue is unstable are left out and marked with a grey span.
"""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from numpy.typing import ArrayLike  # noqa: E402

PALETTE = sns.color_palette("colorblind", 10)
SINGLE = (3.5, 2.7)  # inches: one column of a two-column paper
WIDE = (7.2, 2.8)

_RC = {
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 6.5,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "lines.linewidth": 1.3,
    "lines.markersize": 3.5,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
    "figure.dpi": 150,
    "savefig.dpi": 200,
    "savefig.bbox": "tight",
    "pdf.fonttype": 42,
    "svg.hashsalt": "llmqueue",
    "path.simplify": False,
}


def apply_style() -> None:
    """Set the shared seaborn/matplotlib style (idempotent)."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, rc=_RC)


def new_figure(
    size: tuple[float, float] = SINGLE, ncols: int = 1, nrows: int = 1, **kw: Any
) -> tuple[Figure, Any]:
    apply_style()
    fig, axes = plt.subplots(nrows, ncols, figsize=size, layout="constrained", **kw)
    return fig, axes


def color(i: int) -> Any:
    return PALETTE[i % len(PALETTE)]


def formula_line(ax: Axes, x: ArrayLike, y: ArrayLike, label: str, i: int = 0, **kw: Any) -> None:
    """A closed form or exact numeric solution: a line (solid unless `kw` gives ls/linestyle)."""
    if "ls" not in kw and "linestyle" not in kw:
        kw["linestyle"] = "-"
    ax.plot(x, y, color=color(i), label=label, **kw)


def sim_points(
    ax: Axes,
    x: ArrayLike,
    y: ArrayLike,
    ci: ArrayLike | None,
    label: str,
    i: int = 0,
    marker: str = "o",
    band: bool = False,
) -> None:
    """A simulation: markers with 95% CI bars (or a shaded band when points are dense)."""
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(ya)
    if ci is None:
        ax.plot(xa[ok], ya[ok], marker, color=color(i), label=label, mfc="none", ls="none")
        return
    ca = np.asarray(ci, float)
    if band:
        ax.fill_between(xa[ok], (ya - ca)[ok], (ya + ca)[ok], color=color(i), alpha=0.25, lw=0)
        ax.plot(
            xa[ok], ya[ok], marker, color=color(i), label=f"{label} (95% CI)", mfc="none", ls="none"
        )
    else:
        ax.errorbar(
            xa[ok],
            ya[ok],
            yerr=ca[ok],
            fmt=marker,
            color=color(i),
            mfc="none",
            capsize=1.5,
            elinewidth=0.8,
            label=f"{label} (95% CI)",
        )


def mark_unstable(
    ax: Axes, x: ArrayLike, unstable: ArrayLike, label: str = "unstable (ρ ≥ 1)"
) -> None:
    """Shade the x range where the queue has no steady state (no numbers are drawn there)."""
    xa, ua = np.asarray(x, float), np.asarray(unstable, bool)
    if ua.any():
        ax.axvspan(xa[ua].min(), xa[ua].max(), color="0.85", zorder=0, label=label)


def mark_optimum(ax: Axes, x: float, y: float, label: str, i: int = 0) -> None:
    ax.plot([x], [y], "*", color=color(i), ms=9, mec="k", mew=0.5, label=label, zorder=5)


def source_note(fig: Figure, text: str) -> None:
    """A small provenance line under the figure (profile, run length, seeds)."""
    fig.text(0.01, -0.02, text, fontsize=5, color="0.35", ha="left", va="top", wrap=True)
