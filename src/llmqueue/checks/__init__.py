"""Semantic checks of the whole config, run by the Snakefile right after schema validation.

The JSON schema catches unknown keys, wrong types and ranges; these checks catch what a schema
cannot: malformed token-law specs, missing trace files or columns, profile names that do not
exist. Each study owns one module here. All raise :class:`llmqueue.errors.InputError` naming the
key and the allowed values, before any job starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def check_config(config: Mapping[str, Any], base_dir: str | Path) -> None:
    from llmqueue.checks import batching, profiling, token_limit

    token_limit.check(config, Path(base_dir))
    batching.check(config, Path(base_dir))
    profiling.check(config, Path(base_dir))
