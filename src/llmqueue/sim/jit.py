"""How the simulators' compiled event loops are built.

The loops allocate nothing (every array comes from the Python driver), so they are compiled
without Numba's runtime reference counting: otherwise every array handed to an inlined helper
(the queue order, the recorder, the time law) costs a pair of atomic increments and decrements,
which made continuous batching 2-3x slower. ``_nrt`` is Numba's own flag for this; should such a
loop ever allocate an array, its compilation fails with an error instead of running wrongly.
"""

from __future__ import annotations

from numba import njit

__all__ = ["kernel"]

kernel = njit(cache=True, nogil=True, _nrt=False)  # type: ignore[call-overload]
