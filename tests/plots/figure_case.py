"""Draw one plot module of a study on its small fixture, as the pipeline does.

A module's fixture, ``tests/data/plots/<module>/``, holds a few rows per curve of the tables its
plot rule reads (``inputs/<name>.csv``; ``inputs/<name>.json`` for a JSON input) and the rule's
params less ``module`` (``params.json``). :func:`load_case` reads them as
``workflow/scripts/plot_figure.py`` reads a rule's inputs (CSV -> DataFrame, JSON -> dict);
:func:`check_drawing` calls ``plot(inputs, params)``, saves the figure as a PNG and checks what
was drawn. Imported by the ``test_<module>.py`` files beside it (pytest puts their folder on
``sys.path``).
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.container import BarContainer  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "plots"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PNG_DPI = 60  # the drawing code is the same at any resolution; fewer pixels, a faster test


def plot_modules() -> dict[str, str]:
    """{name: dotted module} of every plot module of the studies (a module of a study package,
    or of ``llmqueue.plan``, with a top-level ``plot`` function), by the module's own name
    (``__init__`` for a package drawing its own figure: keyed by the package's name)."""
    import ast

    found: dict[str, str] = {}
    src = ROOT / "src"
    paths = [*(src / "llmqueue/studies").glob("*/*.py"), *(src / "llmqueue/plan").glob("*.py")]
    for path in sorted(paths):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.FunctionDef) and n.name == "plot" for n in tree.body):
            parts = path.relative_to(src).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            assert parts[-1] not in found, f"two plot modules named {parts[-1]!r}"
            found[parts[-1]] = ".".join(parts)
    return found


def load_case(module: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(inputs, params) of `module`'s fixture, read as plot_figure.py reads a rule's inputs."""
    folder = DATA / module
    inputs: dict[str, Any] = {}
    for path in sorted((folder / "inputs").iterdir()):
        if path.suffix == ".csv":
            inputs[path.stem] = pd.read_csv(path)
        elif path.suffix == ".json":
            inputs[path.stem] = json.loads(path.read_text())
        else:
            raise AssertionError(f"{path}: a fixture input is a .csv or a .json file")
    assert inputs, f"{folder}/inputs holds no table"
    params = json.loads((folder / "params.json").read_text())
    assert "module" not in params, "params.json holds the plot's params less `module`"
    return inputs, params


def data_artists(ax: Axes) -> int:
    """How many artists on `ax` draw data: lines and collections with points (not the empty
    legend proxies ``ax.plot([], [])``), and bars."""
    lines = [ln for ln in ax.get_lines() if np.asarray(ln.get_xdata()).size]
    collections = [
        c for c in ax.collections if len(c.get_paths()) or np.asarray(c.get_offsets()).size
    ]
    bars = [p for c in ax.containers if isinstance(c, BarContainer) for p in c]
    return len(lines) + len(collections) + len(bars)


def check_drawing(module: str, tmp_path: Path, *, axes: int) -> Figure:
    """Draw `module` on its fixture and save it as a PNG in `tmp_path`; check that the figure
    has `axes` visible axes, each with something drawn on it, and that the PNG was written.
    Returns the figure, already closed (its artists can still be read)."""
    inputs, params = load_case(module)
    plot = importlib.import_module(plot_modules()[module]).plot
    fig = plot(inputs, params)
    try:
        assert isinstance(fig, Figure), f"{module}.plot returned {type(fig).__name__}"
        png = tmp_path / f"{module}.png"
        fig.savefig(png, format="png", dpi=PNG_DPI)
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == axes, f"{module}: {len(shown)} axes drawn, expected {axes}"
        empty = [i for i, ax in enumerate(shown) if data_artists(ax) == 0]
        assert not empty, f"{module}: nothing drawn on axes {empty} of {len(shown)}"
        data = png.read_bytes()
        assert len(data) > len(PNG_MAGIC) and data.startswith(PNG_MAGIC), f"{png}: not a PNG"
    finally:
        plt.close(fig)
    return fig
