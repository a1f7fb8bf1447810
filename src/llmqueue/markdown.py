"""Markdown for the generated documentation and the study reports: one table renderer
(:func:`md_table`), its cell escaping and parsing, and the number formats every generated table
uses (:func:`fmt`: significant digits, never an exponent; :func:`fmt_int`: counts;
:func:`fmt_pct`: fractions as percentages).

Pure functions of values; no file is read or written here (:mod:`llmqueue.docgen` splices the
rendered blocks into the pages).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence

import pandas as pd

__all__ = [
    "md_cell",
    "md_text",
    "md_uncell",
    "md_table",
    "split_row",
    "parse_tables",
    "fmt",
    "fmt_int",
    "fmt_pct",
    "as_float",
    "num",
    "is_true",
]


def md_cell(value: object) -> str:
    """One table cell: whitespace collapsed to single spaces; ``\\``, ``|``, ``*`` and `` ` ``
    escaped, ``<`` written as ``&lt;`` (so ``<gpu-id>`` is shown, not taken for a tag);
    :func:`md_uncell` inverts it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    text = " ".join(str(value).split())
    text = re.sub(r"([\\|*`])", r"\\\1", text.replace("&", "&amp;"))
    return text.replace("<", "&lt;")


def md_text(value: object) -> str:
    """Markdown written by hand (``docs/measured.yaml``, titles) as one table cell: whitespace
    collapsed, ``|`` escaped; backticks and the rest kept as Markdown."""
    return re.sub(r"(?<!\\)\|", r"\\|", " ".join(str(value).split()))


def md_uncell(cell: str) -> str:
    """The text of a cell written by :func:`md_cell`."""
    return html.unescape(re.sub(r"\\([\\|*`])", r"\1", cell.strip()))


def md_table(
    header: Sequence[str], rows: Iterable[Sequence[object]], align: str | None = None
) -> str:
    """A GitHub Markdown table. Header cells are written as given; body cells as given when
    already strings produced by a renderer (they may hold Markdown), else through :func:`md_cell`.
    `align`: one letter per column, ``l`` (the default) or ``r`` (right-aligned, ``---:``)."""
    if align is None:
        align = "l" * len(header)
    if len(align) != len(header) or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r}: one of l or r per column, {len(header)} columns")
    rule = "".join("---:|" if a == "r" else "---|" for a in align)
    lines = ["| " + " | ".join(header) + " |", "|" + rule]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"row {list(row)} has {len(row)} cells, header {len(header)}")
        cells = [c if isinstance(c, str) else md_cell(c) for c in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def split_row(line: str) -> list[str]:
    """The raw cells of one Markdown table row (escaped pipes stay inside their cell)."""
    inner = line.strip()
    if not (inner.startswith("|") and inner.endswith("|") and len(inner) > 1):
        raise ValueError(f"not a table row: {line!r}")
    cells: list[str] = []
    cell: list[str] = []
    chars = iter(inner[1:])
    for ch in chars:
        if ch == "\\":
            cell.append(ch + next(chars, ""))
        elif ch == "|":
            cells.append("".join(cell).strip())
            cell = []
        else:
            cell.append(ch)
    if "".join(cell).strip():
        raise ValueError(f"table row does not end with '|': {line!r}")
    return cells


def parse_tables(text: str) -> list[list[dict[str, str]]]:
    """Every Markdown table in `text`: a list of rows, each {header: unescaped cell text}."""
    tables: list[list[dict[str, str]]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        if (
            lines[i].lstrip().startswith("|")
            and i + 1 < len(lines)
            and re.fullmatch(r"\s*\|(\s*:?-+:?\s*\|)+\s*", lines[i + 1])
        ):
            header = [md_uncell(c) for c in split_row(lines[i])]
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = [md_uncell(c) for c in split_row(lines[i])]
                rows.append(dict(zip(header, cells, strict=True)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def fmt(x: object, digits: int = 3) -> str:
    """`x` with `digits` significant digits, never in exponent form, thousands separated;
    ``-`` when missing (:func:`fmt_int` for counts)."""
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-" if x is None or str(x) == "" else str(x)
    if not math.isfinite(v):
        return "-"
    if v == 0:
        return "0"
    mag = math.floor(math.log10(abs(v)))
    decimals = max(digits - 1 - mag, 0)
    return f"{v:,.{decimals}f}"


def fmt_int(x: object) -> str:
    """A count (requests, bins, seconds of a setting) as a whole number, thousands separated."""
    v = as_float(x)
    return f"{round(v):,}" if math.isfinite(v) else "-"


def fmt_pct(x: object, digits: int = 1, sign: bool = True) -> str:
    """A fraction `x` as a percentage with `digits` decimals (``+1.9%``); ``-`` when missing."""
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    if not math.isfinite(v):
        return "-"
    return f"{100 * v:{'+' if sign else ''}.{digits}f}%"


def as_float(x: object) -> float:
    """`x` as a float; NaN when it is not a number."""
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def num(values: pd.Series) -> pd.Series:
    """A column read as text, as numbers (blank cells become NaN)."""
    return pd.to_numeric(values, errors="coerce")


def is_true(x: object) -> bool:
    """A cell read as text (``true``, ``1``, ``yes``) as a bool."""
    return str(x).strip().lower() in ("true", "1", "yes")
