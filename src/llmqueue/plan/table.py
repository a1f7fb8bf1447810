"""A plan's table read back (``llmqueue plan --merge``; the rule ``plan`` of the workflow): one
strict reader of the rows :func:`llmqueue.plan.search.result_row` writes.

Every file must be a regular UTF-8 CSV (a byte-order mark is accepted) with the same header: the
configuration's columns, the goodput's, the SLO values' (``<metric>_<stat>_s``, ``attainment``)
and the run's; no column unknown, none twice, every row as wide as the header. Each value is
typed and bounded: counts are integers in their flag's range, names one of the known routers and
orders, ``goodput_bound`` one of ``=``, ``>=``, ``<``, ``met`` / ``too_short`` / ``pareto``
``True`` or ``False``, rates finite and in [0, :data:`~llmqueue.limits.MAX_RATE_PER_S`], times
non-negative (NaN or inf where the search left them so), and a row agrees with itself: the
goodput per replica is the goodput / replicas, a goodput of bound ``<`` is 0, and no goodput
lies above the row's saturation rate. Anything else is one :class:`~llmqueue.errors.InputError`
line naming the file, the data row (and its line) and the column, with what is allowed.
"""

from __future__ import annotations

import csv
import math
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError
from llmqueue.limits import MAX_BATCH, MAX_RATE_PER_S, MAX_SERVERS, MAX_TOKENS
from llmqueue.plan.slo import METRICS, STATS
from llmqueue.plan.space import MAX_KV_TOKENS
from llmqueue.policy import ORDERS, ROUTERS

__all__ = ["read_plan_tables", "REQUIRED", "OPTIONAL"]

BOUNDS = ("=", ">=", "<")
SLO_COLUMN = re.compile(rf"^({'|'.join(METRICS)})_({'|'.join(STATS)})_s$")

Parse = Callable[[str], Any]


def _int(lo: int, hi: float, *, empty: bool = False) -> tuple[Parse, str]:
    def parse(text: str) -> Any:
        if empty and text == "":
            return None
        if not re.fullmatch(r"[+]?\d+", text):
            raise ValueError
        v = int(text)
        if not lo <= v <= hi:
            raise ValueError
        return v

    return parse, f"an integer in [{lo}, {hi:g}]" + (" or empty" if empty else "")


def _float(lo: float, hi: float, *, nan: bool = False, inf: bool = False) -> tuple[Parse, str]:
    def parse(text: str) -> float:
        v = float(text)  # ValueError for text that is no number
        if math.isnan(v):
            if nan:
                return v
            raise ValueError
        if math.isinf(v) and not (inf and v > 0):
            raise ValueError
        if not lo <= v <= hi:
            raise ValueError
        return v

    extra = ", ".join(x for x, on in (("nan", nan), ("inf", inf)) if on)
    return parse, f"a number in [{lo:g}, {hi:g}]" + (f" or {extra}" if extra else "")


def _choice(names: Sequence[str]) -> tuple[Parse, str]:
    def parse(text: str) -> str:
        if text not in names:
            raise ValueError
        return text

    return parse, f"one of {', '.join(names)}"


def _bool() -> tuple[Parse, str]:
    def parse(text: str) -> bool:
        if text not in ("True", "False"):
            raise ValueError
        return text == "True"

    return parse, "True or False"


def _fraction() -> tuple[Parse, str]:
    num, _ = _float(0, 1, nan=True)

    def parse(text: str) -> float:
        v = math.nan if text == "" else num(text)
        if v == 0:
            raise ValueError
        return v

    return parse, "a fraction in (0, 1], empty or nan"


def _text() -> tuple[Parse, str]:
    return (lambda text: text), "text"


RATE = _float(0, MAX_RATE_PER_S)
TIME = _float(0, math.inf, nan=True, inf=True)

# the columns every plan table has, in the order result_row writes them
REQUIRED: dict[str, tuple[Parse, str]] = {
    "replicas": _int(1, MAX_SERVERS),
    "router": _choice(ROUTERS),
    "order": _choice(ORDERS),
    "max_batch": _int(1, MAX_BATCH),
    "max_batched_tokens": _int(1, MAX_TOKENS, empty=True),
    "kv_fraction": _fraction(),
    "kv_tokens": _int(1, MAX_KV_TOKENS),
    "block_size": _int(1, MAX_BATCH),
    "goodput_rate_per_s": RATE,
    "goodput_bound": _choice(BOUNDS),
    "goodput_per_replica_per_s": RATE,
    "met": _bool(),
    "saturation_rate_per_s": _float(0, math.inf, nan=True, inf=True),
    "pareto_latency_s": TIME,
}
# the columns a table may have besides (runs, its reason; newer tables: the run's length check;
# a merged table: the Pareto flag)
OPTIONAL: dict[str, tuple[Parse, str]] = {
    "in_system": _float(0, math.inf, nan=True),
    "too_short": _bool(),
    "runs": _int(0, 10**9),
    "why_not_higher": _text(),
    "pareto": _bool(),
}
SLO_VALUE = TIME  # a bound's value (s) or the attainment, NaN where not measured
ATTAINMENT = _float(0, 1, nan=True)


def _column(name: str) -> tuple[Parse, str] | None:
    if name in REQUIRED:
        return REQUIRED[name]
    if name in OPTIONAL:
        return OPTIONAL[name]
    if name == "attainment":
        return ATTAINMENT
    if SLO_COLUMN.match(name):
        return SLO_VALUE
    return None


def _rows(path: str, where: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(line, fields)]) of one CSV, refusing what is not a readable regular file."""
    from llmqueue.traces import path_kind

    what = path_kind(path)
    if what:
        raise InputError(f"{where}: {path!r} {what}; allowed: a plan's CSV table")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            lines = [(reader.line_num, row) for row in reader if row]
    except UnicodeDecodeError:
        raise InputError(f"{where}: {path}: not UTF-8 text; allowed: a plan's CSV table") from None
    except csv.Error as err:
        raise InputError(f"{where}: {path}: not a CSV table ({err})") from None
    except OSError as err:
        raise InputError(f"{where}: {path}: cannot be read ({err.strerror})") from None
    if not lines:
        raise InputError(f"{where}: {path} is empty; allowed: a plan's CSV table")
    return lines[0][1], lines[1:]


def _header(head: list[str], path: str, where: str) -> None:
    seen: set[str] = set()
    for name in head:
        if name in seen:
            raise InputError(f"{where}: {path}, header: column {name!r} appears twice")
        seen.add(name)
        if _column(name) is None:
            raise InputError(
                f"{where}: {path}, header: unknown column {name!r}; allowed: a plan's columns "
                f"({', '.join(REQUIRED)}, the SLO values <metric>_<stat>_s and attainment, "
                f"{', '.join(OPTIONAL)})"
            )
    missing = [c for c in REQUIRED if c not in seen]
    if missing:
        raise InputError(
            f"{where}: {path}: not a plan's table (no column {missing[0]!r}; its columns are "
            f"{head})"
        )


def _row(
    head: list[str], fields: list[str], path: str, n: int, line: int, where: str
) -> dict[str, Any]:
    at = f"{where}: {path}, data row {n} (line {line})"
    if len(fields) != len(head):
        raise InputError(
            f"{at}: {len(fields)} fields where the header has {len(head)} (a ragged row); "
            "allowed: one value per column"
        )
    row: dict[str, Any] = {}
    for name, text in zip(head, fields, strict=True):
        parse, allowed = _column(name)  # type: ignore[misc]
        try:
            row[name] = parse(text.strip() if name != "why_not_higher" else text)
        except (ValueError, OverflowError):
            raise InputError(f"{at}, column {name!r}: {text!r}; allowed: {allowed}") from None
    row.setdefault("in_system", math.nan)
    row.setdefault("too_short", False)
    g, sat, reps = row["goodput_rate_per_s"], row["saturation_rate_per_s"], row["replicas"]
    if row["goodput_bound"] == "<" and g != 0:
        raise InputError(
            f"{at}, column 'goodput_rate_per_s': {g:g} with bound '<' (no goodput); allowed: 0"
        )
    if not math.isclose(row["goodput_per_replica_per_s"], g / reps, rel_tol=1e-9, abs_tol=1e-12):
        raise InputError(
            f"{at}, column 'goodput_per_replica_per_s': {row['goodput_per_replica_per_s']:g}; "
            f"allowed: goodput_rate_per_s / replicas = {g / reps:g}"
        )
    if g > 0 and not math.isnan(sat) and g > sat * (1 + 1e-12):
        raise InputError(
            f"{at}, column 'goodput_rate_per_s': {g:g} above the row's saturation rate {sat:g}; "
            "allowed: a goodput at most the saturation rate (no steady state above it)"
        )
    return row


def read_plan_tables(paths: Sequence[str], *, where: str = "--merge") -> list[dict[str, Any]]:
    """Every row of the plan tables `paths`, in order (module docstring); every file with the
    same header; at least one row in all."""
    rows: list[dict[str, Any]] = []
    first: tuple[str, list[str]] | None = None
    for path in map(str, paths):
        head, body = _rows(path, where)
        head = [h.strip() for h in head]
        _header(head, path, where)
        if first is None:
            first = (path, head)
        elif head != first[1]:
            raise InputError(
                f"{where}: {path}, header: columns {head} differ from {first[1]} of {first[0]}; "
                "allowed: slices of one search (the same SLOs)"
            )
        for n, (line, fields) in enumerate(body, 1):
            rows.append(_row(head, fields, path, n, line, where))
    if not rows:
        shown = ", ".join(Path(p).name for p in paths)
        raise InputError(f"{where}: the files hold no configuration ({shown}: a header only)")
    return rows
