"""The claims table: each of the paper's numbers beside the number we rebuilt.

Columns (docs/figures.md, "How claims are recorded"): id, claim, paper, ours, unit, tolerance,
verdict, scope, note. Verdicts: ``reproduced`` (within the tolerance fixed in config),
``not_reproduced`` (with the reason in the note), ``conditional`` (within the tolerance, but
computed under a back-solved profile whose parameters were solved from another number: it holds
only if those parameters are right), ``back_solved`` (a parameter was chosen to hit this very
number). Tolerances come from config and are set before anything is computed.

Scopes (:data:`SCOPES`) say what a row tests: ``replication`` (the paper's stated inputs),
``reading`` (a parameter the paper leaves open, set by the project; the row names it),
``extension`` (beyond the paper's protocol: other traces, loads, predictors, predicates),
``other-hardware`` (a GPU, or a model of one, other than the paper's), ``internal`` (the
project's simulator against its own closed form) and ``literature`` (another paper's published
number, in that paper's setting: the literature study, claim 12). Each reference row carries its scope
(``src/llmqueue/studies/<study>/reference_claims.csv``); a derived row (another profile, GPU or reading of the
same claim) names its own.

Every study builds its rows through one :class:`ClaimBook` (the study's reference rows from
``src/llmqueue/studies/<study>/reference_claims.csv`` and the config tolerances), so the verdict rule is written
once: a row is ``back_solved`` only when the profile it was computed under names the row's claim
in its ``solved_from`` (config); any other row under that profile is ``conditional`` within its
tolerance and ``not_reproduced`` outside it, and its note names the profile and what it was
solved from (docs/README.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from llmqueue.errors import InputError
from llmqueue.schema import with_defaults

CLAIM_COLUMNS = ["id", "claim", "paper", "ours", "unit", "tolerance", "verdict", "scope", "note"]
VERDICTS = ("reproduced", "not_reproduced", "conditional", "back_solved")
BOUND = "bound"  # the tolerance class of a reference row judged as a bound (:func:`judge_bound`)
SCOPES = ("replication", "reading", "extension", "other-hardware", "internal", "literature")
SCOPE_MEANING = {
    "replication": "the paper's stated inputs",
    "reading": "a parameter the paper leaves open, set by the project (the row names it)",
    "extension": "beyond the paper's protocol: other traces, loads, predictors or predicates",
    "other-hardware": "a GPU, or a model of one, other than the paper's",
    "internal": "the project's simulator against its own closed form",
    "literature": "another paper's published number, in that paper's setting",
}
# What a row that is not reproduced says, by its scope (the reasons of the headline, grouped).
MISS_MEANING = {
    "replication": "the paper's stated inputs give another number (or break a physical bound)",
    "reading": "the paper is underdetermined or inconsistent: no stated input fixes the number",
    "extension": "the claim does not carry beyond the paper's protocol",
    "other-hardware": "needs the paper's hardware, which the project does not have",
    "internal": "the simulator disagrees with its own closed form",
    "literature": "the engine cannot express the setting, or the published number differs",
}


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
        """Config ``claims.tolerances.<name>`` (a `value` left out: the schema's default)."""
        spec = with_defaults(spec, "claims.tolerances.<name>")
        return cls(str(spec["kind"]), float(spec["value"]))


def check_scope(claim_id: str, scope: str) -> str:
    """`scope` if it is one of :data:`SCOPES`; an :class:`InputError` naming the row otherwise."""
    if scope not in SCOPES:
        raise InputError(f"claim {claim_id}: scope must be one of {SCOPES}, got {scope!r}")
    return scope


@dataclass(frozen=True)
class ClaimRow:
    """One row of the claims table (:data:`CLAIM_COLUMNS`); `scope` is one of :data:`SCOPES`."""

    id: str
    claim: str
    paper: float | str
    ours: float | str
    unit: str
    tolerance: str
    verdict: str
    note: str
    scope: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(
                f"claim {self.id}: verdict must be one of {VERDICTS}, got {self.verdict!r}"
            )
        check_scope(self.id, self.scope)


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
    *,
    scope: str,
    conditional: bool = False,
    accept: Sequence[float] = (),
) -> ClaimRow:
    """Compare a computed number with the paper's under a tolerance fixed in advance.

    A row whose inputs were back-solved is ``back_solved`` whatever the numbers say; a miss
    is ``not_reproduced`` and its note carries `miss_reason`. `incomparable` names a reason the
    inputs cannot reproduce this number whatever the values (a different GPU than the paper's,
    docs/figures.md): such a row is ``not_reproduced`` even within tolerance, with that reason.
    `conditional`: the row was computed under a profile back-solved from another number, so a
    match is ``conditional`` (on that profile) rather than ``reproduced``. `accept`: values
    statistically indistinguishable from `ours` (the confidence set of a noisy optimum); the row
    matches when the tolerance holds for `ours` or any of them.
    """
    ok = any(tol.holds(float(paper), float(x)) for x in (ours, *accept))
    if back_solved:
        verdict = "back_solved"
    elif incomparable:
        verdict = "not_reproduced"
        within = "within" if ok else "outside"
        miss_reason = f"{incomparable} ({within} tolerance, which cannot turn the verdict)"
    elif ok:
        verdict = "conditional" if conditional else "reproduced"
    else:
        verdict = "not_reproduced"
    if verdict == "not_reproduced" and miss_reason:
        note = f"{note}; {miss_reason}" if note else miss_reason
    return ClaimRow(claim_id, claim, paper, _round(ours), unit, str(tol), verdict, note, scope)


def judge_bound(
    claim_id: str,
    claim: str,
    paper: float,
    bound: float,
    unit: str,
    note: str,
    *,
    scope: str,
    lower: bool = True,
) -> ClaimRow:
    """A bound row: the paper's number against a physical bound we computed (a roofline's
    lowest possible latency, a memory's largest possible count). It is ``reproduced`` when the
    published number respects the bound (paper >= bound for a lower bound, paper <= bound for an
    upper one) and ``not_reproduced`` when it breaks it; a bound is never compared for closeness.
    """
    if not (math.isfinite(paper) and math.isfinite(bound)):
        raise ValueError(f"claim {claim_id}: a bound row needs finite numbers")
    ok = paper >= bound if lower else paper <= bound
    kind = "lower bound: paper >= ours" if lower else "upper bound: paper <= ours"
    verdict = "reproduced" if ok else "not_reproduced"
    side = "respects" if ok else "breaks"
    full = f"{note}; the published number {side} this {kind.split(':')[0]}"
    return ClaimRow(claim_id, claim, paper, _round(bound), unit, kind, verdict, full, scope)


class SolvedProfile(Protocol):
    """What the claims need of a latency profile: its name and the claim ids (if any) one of its
    parameters was solved from (:class:`llmqueue.latency.LinearLatency`, ``BatchLatency``)."""

    @property
    def name(self) -> str: ...

    @property
    def solved_from(self) -> tuple[str, ...]: ...


def solved_note(profile: SolvedProfile, claim_id: str) -> str:
    """The note a row computed under a back-solved profile carries ("" for an independent one)."""
    if not profile.solved_from:
        return ""
    src = ", ".join(profile.solved_from)
    if claim_id in profile.solved_from:
        return (
            f"profile {profile.name} was solved from claim(s) {src}, this number among them: "
            "it matches by construction and proves nothing"
        )
    return (
        f"profile {profile.name} was back-solved from claim(s) {src}; this row is not one of "
        "them: the back-solving fixed the profile's parameters, not this number, so within its "
        f"tolerance the row is conditional (it holds only if {profile.name}'s parameters are "
        "right)"
    )


class ClaimBook:
    """A study's reference rows (``src/llmqueue/studies/<study>/reference_claims.csv``: id, claim, paper, unit,
    tolerance) and the config tolerances (``claims.tolerances``): judges our numbers into rows.

    ``judge(cid, ours, ...)`` looks up the paper's number, unit and tolerance class of reference
    row `cid`; the row's own id may differ (``row_id``, e.g. ``3b-back_solved``).
    """

    def __init__(
        self, reference: pd.DataFrame, tolerances: Mapping[str, Mapping[str, Any]]
    ) -> None:
        if "scope" not in reference.columns:
            raise InputError(
                f"the reference claims need a scope column (one of {SCOPES}); columns: "
                f"{list(reference.columns)}"
            )
        self._ref: dict[str, dict[str, Any]] = {
            str(r["id"]): {str(k): v for k, v in r.items()} for r in reference.to_dict("records")
        }
        for cid, r in self._ref.items():
            check_scope(cid, str(r["scope"]))
        self._tol = {str(k): Tolerance.from_config(dict(v)) for k, v in tolerances.items()}
        named = {str(r["tolerance"]) for r in self._ref.values()} - {BOUND}
        missing = sorted(named - set(self._tol))
        if missing:
            raise InputError(
                f"claims.tolerances has no class {missing} that the reference claims name; "
                f"defined: {sorted(self._tol)}"
            )

    def ids(self, prefix: str = "") -> list[str]:
        """Reference ids starting with `prefix`, in file order."""
        return [cid for cid in self._ref if cid.startswith(prefix)]

    def _row(self, cid: str) -> dict[str, Any]:
        try:
            return self._ref[cid]
        except KeyError:
            raise InputError(f"claim {cid!r} is not in the reference table") from None

    def claim(self, cid: str) -> str:
        return str(self._row(cid)["claim"])

    def paper(self, cid: str) -> float:
        return float(self._row(cid)["paper"])

    def unit(self, cid: str) -> str:
        return str(self._row(cid)["unit"])

    def tolerance(self, cid: str) -> Tolerance:
        """The tolerance of reference row `cid` (a bound row has none: :meth:`bound`)."""
        name = str(self._row(cid)["tolerance"])
        if name == BOUND:
            raise InputError(f"claim {cid} is a bound row: judge it with ClaimBook.bound")
        return self._tol[name]

    def scope(self, cid: str) -> str:
        """The scope of reference row `cid` (one of :data:`SCOPES`)."""
        return str(self._row(cid)["scope"])

    def not_expressed(self, cid: str, reason: str) -> ClaimRow:
        """Reference row `cid` as a row the engine does not express: ``not_reproduced``, no
        number of ours, `reason` in its note."""
        return ClaimRow(
            cid,
            self.claim(cid),
            self.paper(cid),
            "not expressed",
            self.unit(cid),
            str(self.tolerance(cid)),
            "not_reproduced",
            f"not expressed by the engine: {reason}",
            self.scope(cid),
        )

    def bound(
        self,
        cid: str,
        bound: float,
        note: str,
        *,
        row_id: str | None = None,
        claim: str | None = None,
        scope: str | None = None,
        lower: bool = True,
    ) -> ClaimRow:
        """Row `row_id` (default ``<cid>-bound``): the paper's number of `cid` against a physical
        bound (:func:`judge_bound`); scope defaults to the reference row's."""
        return judge_bound(
            row_id or f"{cid}-bound",
            self.claim(cid) if claim is None else claim,
            self.paper(cid),
            float(bound),
            self.unit(cid),
            note,
            scope=self.scope(cid) if scope is None else scope,
            lower=lower,
        )

    def tolerance_class(self, name: str) -> Tolerance:
        """A tolerance class of config ``claims.tolerances`` by name (e.g. ``same_delay``)."""
        try:
            return self._tol[name]
        except KeyError:
            raise InputError(
                f"claims.tolerances.{name} is missing; defined: {sorted(self._tol)}"
            ) from None

    def judge(
        self,
        cid: str,
        ours: float,
        note: str = "",
        *,
        row_id: str | None = None,
        claim: str | None = None,
        profile: SolvedProfile | None = None,
        miss: str = "",
        incomparable: str = "",
        scope: str | None = None,
        accept: Sequence[float] = (),
    ) -> ClaimRow:
        """Row `row_id` (default `cid`) for reference claim `cid`: ``back_solved`` when `profile`
        was solved from `cid`; ``conditional`` within the tolerance when `profile` was solved from
        other claims; otherwise judged by the tolerance (see :func:`judge`). `claim` replaces the
        reference claim text and `scope` the reference scope (defaults: the reference's)."""
        back = profile is not None and cid in profile.solved_from
        cond = profile is not None and bool(profile.solved_from) and not back
        if profile is not None and profile.solved_from:
            extra = solved_note(profile, cid)
            note = f"{note}; {extra}" if note else extra
        return judge(
            row_id or cid,
            self.claim(cid) if claim is None else claim,
            self.paper(cid),
            ours,
            self.unit(cid),
            self.tolerance(cid),
            note,
            back_solved=back,
            miss_reason=miss,
            incomparable=incomparable,
            scope=self.scope(cid) if scope is None else check_scope(row_id or cid, scope),
            conditional=cond,
            accept=accept,
        )


def solved_parameter_row(
    row_id: str,
    claim: str,
    target: float,
    hits: Sequence[float],
    unit: str,
    note: str,
    scope: str = "reading",
) -> ClaimRow:
    """A row for a parameter searched so that a model hits the paper's number (e.g. the gamma of
    g(r) = r^gamma giving l* = 1600): ``back_solved`` with the values found, or
    ``not_reproduced`` ("none") when no value on the searched grid reaches it. Its scope is a
    ``reading`` (a parameter the paper leaves open) unless `scope` says otherwise."""
    if len(hits) == 0:
        return ClaimRow(row_id, claim, target, "none", unit, "exact", "not_reproduced", note, scope)
    return ClaimRow(
        row_id,
        claim,
        target,
        ", ".join(f"{g:g}" for g in hits),
        unit,
        "exact",
        "back_solved",
        f"a value picked to hit the paper's number is back-solved; {note}",
        scope,
    )


def _round(x: float | str) -> float | str:
    if isinstance(x, float) and math.isfinite(x):
        return float(f"{x:.6g}")
    return x


def claims_frame(rows: Iterable[ClaimRow]) -> pd.DataFrame:
    """A study's rows as a table with :data:`CLAIM_COLUMNS` (ids unique)."""
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
    scopes = df["scope"].fillna("").astype(str)
    off = df.loc[~scopes.isin(SCOPES), "id"].tolist()
    if off:
        raise ValueError(f"claim rows {off} have no scope of {SCOPES}")
    order = sorted(range(len(df)), key=lambda i: _id_key(str(df["id"].iloc[i])))
    return df.iloc[order].reset_index(drop=True)


def reference_claims(base_dir: Path, study: str) -> dict[str, str]:
    """{claim id: tolerance class} of ``src/llmqueue/studies/<study>/reference_claims.csv`` ({} if absent)."""
    import csv

    path = Path(base_dir) / "src" / "llmqueue" / "studies" / study / "reference_claims.csv"
    if not path.is_file():
        return {}
    with path.open(newline="") as fh:
        return {row["id"]: row["tolerance"] for row in csv.DictReader(fh)}


def check_solved_from(
    section: str, profiles: Mapping[str, Any], claim_ids: Mapping[str, str]
) -> None:
    """Each back-solved profile names the claims it was solved from (ids of the reference table),
    and only a back-solved profile does."""
    for name, prof in (profiles or {}).items():
        solved = list(prof.get("solved_from") or [])
        back = prof.get("verdict") == "back_solved"
        if back != bool(solved):
            raise InputError(
                f"{section}.{name}: verdict back_solved needs solved_from (the claim ids its "
                f"parameters were solved from), and solved_from needs verdict back_solved; got "
                f"verdict {prof.get('verdict')!r}, solved_from {solved}"
            )
        unknown = [c for c in solved if c not in claim_ids]
        if unknown:
            raise InputError(
                f"{section}.{name}.solved_from: {unknown} are not claim ids of the reference "
                f"table; known: {sorted(claim_ids)}"
            )


def check_tolerance_classes(
    config: Mapping[str, Any], claim_ids: Mapping[str, str], extra: tuple[str, ...] = ()
) -> None:
    """Every tolerance class the reference claims (and the study code: `extra`) name exists in
    config ``claims.tolerances``; ``bound`` (``llmqueue.claims.BOUND``: a row judged as a bound,
    not by a tolerance) needs none."""
    tol = config["claims"]["tolerances"]
    for name in sorted({*claim_ids.values(), *extra} - {"bound"}):
        if name not in tol:
            raise InputError(
                f"claims.tolerances.{name} is missing (a tolerance class the claims use); "
                f"defined: {sorted(tol)}"
            )
