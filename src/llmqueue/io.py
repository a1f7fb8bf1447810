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


def _finite(obj: Any) -> Any:
    """`obj` with every non-finite float (NaN, +-inf) as None and numpy values as Python ones."""
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_finite(v) for v in obj.tolist()]
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        x = float(obj)
        return x if math.isfinite(x) else None
    return obj


def strict_json(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text (RFC 8259): a number that is not finite is ``null``, never the bare
    ``NaN`` or ``Infinity`` Python would write."""
    return json.dumps(_finite(obj), indent=indent, allow_nan=False)


def check_output_path(path: str | os.PathLike[str], where: str) -> Path:
    """Refuse, before any long work, an output path that cannot be written: a directory, a file
    in a folder that does not exist, or one this user may not write (InputError naming `where`)."""
    from llmqueue.errors import InputError

    p = Path(path)
    if p.is_dir():
        raise InputError(f"{where}: {str(p)!r} is a directory; give a file path")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{where}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"{where}: {str(p)!r} cannot be written (permissions)")
    return p
