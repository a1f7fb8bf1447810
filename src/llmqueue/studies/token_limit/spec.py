"""The token-limit study's config read into grids (shared by the config checks and the rules)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from llmqueue.grids import grid_from_config


def gamma_grid(tradeoff: Mapping[str, Any]) -> np.ndarray:
    """The gammas of config ``token_limit.tradeoff.gamma_sweep``; without one, the fixed gamma."""
    sweep = tradeoff.get("gamma_sweep")
    if not sweep:
        return np.array([float(tradeoff["gamma"])])
    return grid_from_config(sweep, "token_limit.tradeoff.gamma_sweep")
