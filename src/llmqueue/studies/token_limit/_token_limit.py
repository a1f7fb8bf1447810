"""Shared pieces of the Fig. 4 plots (token-limit study): labels of latency profiles."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd


def profile_label(name: str, params: Mapping[str, Any], table: pd.DataFrame) -> str:
    """'<kind> (a=.. ms/tok, b0=.. s)' for profile `name`; its verdict from params["verdicts"]."""
    a = float(table["a_s_per_token"].iloc[0])
    b0 = float(table["b0_s"].iloc[0])
    kind = (
        "back-solved"
        if params["verdicts"].get(name) == "back_solved"
        else ("Table I fit" if name == "table1_fit" else name)
    )
    return f"{kind} (a={a * 1000:.2f} ms/tok, b0={b0:.2f} s)"


def extra_tables(
    inputs: Mapping[str, Any], params: Mapping[str, Any], table: str
) -> list[tuple[str, pd.DataFrame]]:
    return [
        (p, inputs[f"{p}_{table}"])
        for p in params.get("extra_profiles", [])
        if f"{p}_{table}" in inputs
    ]


def limits_axis(ax: Any) -> None:
    ax.set_xlabel("max-token limit l (tokens)")
