"""Fig. 4c: fraction of lost users pi vs limit l, impatient users (M/G/1+D, Eq. 6-8)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from matplotlib.figure import Figure

from llmqueue.studies.token_limit._impatient import plot_impatient


def plot(inputs: Mapping[str, Any], params: Mapping[str, Any]) -> Figure:
    return plot_impatient(inputs, params, "loss", "fraction of lost users π")
