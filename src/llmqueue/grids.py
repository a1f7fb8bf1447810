"""Inclusive arithmetic grids: the one builder behind every sweep axis (l, lambda, gamma, ...).

Config grids are ``{start, stop, step}`` mappings, CLI grids ``START:STOP:STEP`` strings; both end
here, so a grid has the same points wherever it is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from llmqueue.errors import InputError

__all__ = ["arithmetic_grid", "grid_from_config", "parse_range"]


def arithmetic_grid(
    start: float, stop: float, step: float, *, what: str = "grid", max_points: int | None = None
) -> NDArray[np.float64]:
    """start, start + step, ..., up to stop inclusive (stop is kept when it lies within 1e-9 steps
    of a grid point), rounded to 10 decimals so that 0.1 + 2*0.1 prints as 0.3.

    Raises InputError (naming `what`) unless start, stop, step are finite, step > 0 and
    stop >= start, or when the grid would hold more than `max_points` points.
    """
    values = (float(start), float(stop), float(step))
    if not all(math.isfinite(v) for v in values):
        raise InputError(f"{what}: start, stop and step must be finite numbers, got {values}")
    start, stop, step = values
    if not step > 0:
        raise InputError(f"{what}: a range START:STOP:STEP needs STEP > 0, got {step:g}")
    if stop < start:
        raise InputError(
            f"{what}: a range START:STOP:STEP needs STOP ({stop:g}) >= START ({start:g})"
        )
    n = int(math.floor((stop - start) / step + 1e-9)) + 1
    if max_points is not None and n > max_points:
        raise InputError(f"{what}: {n} points; at most {max_points}")
    return np.round(start + step * np.arange(n), 10)


def grid_from_config(spec: Mapping[str, Any], what: str = "grid") -> NDArray[np.float64]:
    """The grid of a config mapping ``{start, stop, step}``."""
    return arithmetic_grid(spec["start"], spec["stop"], spec["step"], what=what)


def parse_range(
    text: str, what: str, *, max_points: int | None = None
) -> tuple[NDArray[np.float64], bool]:
    """A CLI value: one number, or ``START:STOP:STEP``. Returns (points, is_range)."""
    parts = text.split(":")
    try:
        values = [float(v) for v in parts]
    except ValueError:
        raise InputError(f"{what} {text!r}: expected a number or START:STOP:STEP") from None
    if len(values) == 1:
        return np.array(values), False
    if len(values) != 3:
        raise InputError(f"{what} {text!r}: a range is START:STOP:STEP")
    return arithmetic_grid(*values, what=f"{what} {text!r}", max_points=max_points), True
