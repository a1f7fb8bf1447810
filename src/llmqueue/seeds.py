"""Deterministic random streams: one numpy SeedSequence per sweep point.

The stream of a point depends only on the root seed (config ``seed``) and the point's own keys
(study, scenario, grid value), never on the order points run in, so a sweep split across jobs or
cores gives byte-identical results.
"""

from __future__ import annotations

import zlib

import numpy as np


def seed_sequence(root: int, *keys: str | int | float) -> np.random.SeedSequence:
    """SeedSequence(root, spawn_key=keys); strings and floats are hashed stably (CRC-32)."""
    spawn: list[int] = []
    for key in keys:
        if isinstance(key, bool | np.bool_):
            spawn.append(int(key))
        elif isinstance(key, int | np.integer):
            spawn.append(int(key))
        else:
            spawn.append(zlib.crc32(repr(key if isinstance(key, str) else float(key)).encode()))
    return np.random.SeedSequence(int(root), spawn_key=tuple(spawn))
