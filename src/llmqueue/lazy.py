"""Deferred imports for modules that are slow to import and not always needed."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class _LazyModule:
    """Stands in for a module; imports it on the first attribute access."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)


def lazy_module(name: str) -> Any:
    """A proxy for module `name`, imported when first used."""
    return _LazyModule(name)
