"""The claims table: each of the paper's numbers beside the number we rebuilt.

Columns (figures.md, "How claims are recorded"): id, claim, paper, ours, unit, tolerance,
verdict, note. Verdicts: ``reproduced`` (independent inputs, within tolerance),
``not_reproduced`` (with the reason in the note), ``back_solved`` (a parameter was chosen to hit
this very number). Tolerances come from config and are set before anything is computed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass

import pandas as pd

from llmqueue.errors import InputError

CLAIM_COLUMNS = ["id", "claim", "paper", "ours", "unit", "tolerance", "verdict", "note"]
VERDICTS = ("reproduced", "not_reproduced", "back_solved")


@dataclass(frozen=True)
class Tolerance:
    """``rel`` (|ours - paper| <= value*|paper|), ``abs`` (|ours - paper| <= value), ``exact``."""

    kind: str
    value: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in ("rel", "abs", "exact"):
            raise InputError(f"tolerance kind must be rel, abs or exact, got {self.kind!r}")
        if not (self.value >= 0):
            raise InputError(f"tolerance value must be >= 0, got {self.value}")

    def holds(self, paper: float, ours: float) -> bool:
        if not (math.isfinite(paper) and math.isfinite(ours)):
            return False
        if self.kind == "exact":
            return ours == paper
        if self.kind == "abs":
            return abs(ours - paper) <= self.value + 1e-12
        return abs(ours - paper) <= self.value * abs(paper) + 1e-12

    def __str__(self) -> str:
        return "exact" if self.kind == "exact" else f"{self.kind}={self.value:g}"

    @classmethod
    def from_config(cls, spec: dict) -> Tolerance:
        return cls(str(spec["kind"]), float(spec.get("value", 0.0)))


@dataclass(frozen=True)
class ClaimRow:
    id: str
    claim: str
    paper: float | str
    ours: float | str
    unit: str
    tolerance: str
    verdict: str
    note: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            )


def judge(
    claim_id: str,
    claim: str,
    paper: float,
    ours: float,
    unit: str,
    tol: Tolerance,
    note: str = "",
    back_solved: bool = False,
    miss_reason: str = "",
    incomparable: str = "",
) -> ClaimRow:
    """Compare a computed number with the paper's under a tolerance fixed in advance.

    A row whose inputs were back-solved is ``back_solved`` whatever the numbers say; a miss
    is ``not_reproduced`` and its note carries `miss_reason`. `incomparable` names a reason the
    inputs cannot reproduce this number whatever the values (a different GPU than the paper's,
    figures.md): such a row is ``not_reproduced`` even within tolerance, with that reason.
    """
    ok = tol.holds(float(paper), float(ours))
    if back_solved:
        verdict = "back_solved"
    elif incomparable:
        verdict = "not_reproduced"
        within = "within" if ok else "outside"
        miss_reason = f"{incomparable} ({within} tolerance, which cannot turn the verdict)"
    else:
        verdict = "reproduced" if ok else "not_reproduced"
    if verdict == "not_reproduced" and miss_reason:
        note = f"{note}; {miss_reason}" if note else miss_reason
    return ClaimRow(claim_id, claim, paper, _round(ours), unit, str(tol), verdict, note)


def _round(x: float | str) -> float | str:
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.6g}")
    return x


def claims_frame(rows: Iterable[ClaimRow]) -> pd.DataFrame:
    df = pd.DataFrame([asdict(r) for r in rows], columns=CLAIM_COLUMNS)
    if df["id"].duplicated().any():
        dup = df.loc[df["id"].duplicated(), "id"].tolist()
        raise ValueError(f"duplicate claim ids: {dup}")
    return df


def _id_key(claim_id: str) -> tuple:
    import re

    parts = re.findall(r"\d+|\D+", str(claim_id))
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts)


def gather_claims(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate the per-study claim tables, check ids are unique, sort by id."""
    df = pd.concat(list(frames), ignore_index=True)
    if list(df.columns) != CLAIM_COLUMNS:
        raise ValueError(f"claims tables must have columns {CLAIM_COLUMNS}, got {list(df.columns)}")
    if df["id"].duplicated().any():
        raise ValueError(
            f"duplicate claim ids across studies: {df.loc[df['id'].duplicated(), 'id'].tolist()}"
        )
    bad = set(df["verdict"]) - set(VERDICTS)
    if bad:
        raise ValueError(f"unknown verdicts {bad}")
    order = sorted(range(len(df)), key=lambda i: _id_key(str(df["id"].iloc[i])))
    return df.iloc[order].reset_index(drop=True)
