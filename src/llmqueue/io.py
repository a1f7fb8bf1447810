"""Atomic writers shared by workflow scripts and the CLI.

Every output is written to a temporary file in the destination folder and moved into place with
`os.replace`, so a killed job never leaves a half-written file under its final name.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success move it onto `path`, else delete it."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=dest.suffix, dir=dest.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        # mkstemp creates the file 0600; give the result the usual permissions (0666 & ~umask)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp_path, 0o666 & ~umask)
        os.replace(tmp_path, dest)
    except BaseException:
        tmp_path.unlink(missing_ok=True)
        raise


def write_csv(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write a table with a fixed float format so identical inputs give identical bytes."""
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.10g", lineterminator="\n")


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write JSON with sorted keys (byte-stable)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_text(text: str, path: str | os.PathLike[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text())


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
