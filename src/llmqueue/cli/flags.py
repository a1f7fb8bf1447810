"""Typed flags of the CLI: every number a flag takes is checked against its range when argparse
reads it (the bounds of :mod:`llmqueue.limits`), so bad input ends as one line naming the flag
(``llmqueue simulate: error: argument --rate: value must be a number in (0, 1e+09]
requests/s, got 'inf'``) before anything runs. Ranges are written into each flag's help.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from llmqueue import limits
from llmqueue.errors import InputError

__all__ = ["number", "count", "seed", "help_range"]


def help_range(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> str:
    return limits.interval(lo, hi, lo_open, hi_open)


def number(
    lo: float, hi: float, *, lo_open: bool = False, hi_open: bool = False, unit: str = ""
) -> Callable[[str], float]:
    """An argparse type: a finite number in the range (``lo_open``/``hi_open``: the end itself
    excluded)."""

    def convert(text: str) -> float:
        try:
            return limits.number(
                text, "value", lo=lo, hi=hi, lo_open=lo_open, hi_open=hi_open, unit=unit
            )
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = "number"
    return convert


def count(lo: int, hi: int, *, unit: str = "") -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi] (``1e5`` reads as 100000)."""

    def convert(text: str) -> int:
        try:
            return limits.integer(text, "value", lo=lo, hi=hi, unit=unit)
        except InputError as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    convert.__name__ = "integer"
    return convert


seed = count(0, limits.MAX_SEED)
