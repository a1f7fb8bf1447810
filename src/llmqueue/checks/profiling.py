"""Checks of the ``profiling``-study sections of the config."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    """Nothing beyond the schema yet."""
