"""Generated documentation: Markdown tables rendered from result files, spliced into tracked pages.

A page (``README.md``, ``docs/*.md``) holds each generated table between two marker lines::

    <!-- generated: NAME (from PATH, PATH) -->
    ...rendered Markdown...
    <!-- end generated: NAME -->

The pipeline (``workflow/rules/docs.smk``) renders every block from the files it names (the
claims table, the study tables under ``results/``, committed measurements) with :func:`render`
and splices it in place with :func:`splice_file`, which rewrites a page atomically
(:mod:`llmqueue.io`) and only when a block's text changed. Numbers in the documentation thus come
from the files the pipeline writes, never from a hand-pasted copy.

The renderers are pure functions of tables (``pandas.DataFrame``) and parsed JSON/YAML objects;
reading and writing files is left to the workflow script, except the splice itself.
Formatting: :func:`fmt` gives significant digits (times in s, rates in requests/s as the column
headers say), :func:`fmt_pct` relative changes in percent.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue.claims import CLAIM_COLUMNS, MISS_MEANING, SCOPE_MEANING, SCOPES, VERDICTS
from llmqueue.errors import InputError
from llmqueue.io import write_text

NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
BEGIN = re.compile(rf"^<!-- generated: (?P<name>{NAME}) \(from (?P<sources>[^()]*)\) -->$")
END = re.compile(rf"^<!-- end generated: (?P<name>{NAME}) -->$")
# A line that looks like a marker but is not well formed (caught, never silently kept as text).
MARKERISH = re.compile(r"^<!--\s*(end\s+)?generated\b")


# ---- blocks and splicing ------------------------------------------------------------------------
@dataclass(frozen=True)
class Fragment:
    """One rendered block: the files it was rendered from and its Markdown body."""

    sources: tuple[str, ...]
    body: str


@dataclass(frozen=True)
class Block:
    """A generated block found in a page: its name, the sources its marker names, the line
    numbers (0-based) of its begin and end markers and the text between them."""

    name: str
    sources: tuple[str, ...]
    begin: int
    end: int
    body: str


def block_sources(inputs: Mapping[str, str | Sequence[str] | Mapping[str, str]]) -> tuple[str, ...]:
    """The files a block is rendered from, in order, from its inputs by role: a path, a list of
    paths, or {key: path}."""
    out: list[str] = []
    for spec in inputs.values():
        if isinstance(spec, str):
            out.append(spec)
        elif isinstance(spec, Mapping):
            out.extend(str(v) for v in spec.values())
        else:
            out.extend(str(v) for v in spec)
    return tuple(out)


def begin_marker(name: str, sources: Sequence[str]) -> str:
    """The begin marker line of block `name` rendered from `sources` (paths, in order)."""
    if not re.fullmatch(NAME, name):
        raise InputError(f"generated block name {name!r} must match {NAME}")
    if not sources or any(not s or re.search(r"[(),\s]", s) for s in sources):
        raise InputError(
            f"generated block {name!r}: sources must be one or more paths without spaces, "
            f"commas or parentheses, got {list(sources)}"
        )
    return f"<!-- generated: {name} (from {', '.join(sources)}) -->"


def end_marker(name: str) -> str:
    return f"<!-- end generated: {name} -->"


def find_blocks(text: str, where: str) -> list[Block]:
    """Every generated block of a page, in order. `where` names the page in errors.

    Raises InputError (naming the page, the block and the line) for a begin marker without its
    end marker, an end marker without a begin, nested or repeated blocks, or a malformed marker.
    """
    lines = text.split("\n")
    blocks: list[Block] = []
    seen: set[str] = set()
    open_name: str | None = None
    open_line = 0
    open_sources: tuple[str, ...] = ()
    for i, line in enumerate(lines):
        begin, end = BEGIN.match(line), END.match(line)
        if begin:
            name = begin["name"]
            if open_name is not None:
                raise InputError(
                    f"{where}:{i + 1}: block {name!r} begins inside block {open_name!r} "
                    f"(line {open_line + 1}), whose end marker {end_marker(open_name)!r} is missing"
                )
            if name in seen:
                raise InputError(f"{where}:{i + 1}: generated block {name!r} appears twice")
            sources = tuple(s.strip() for s in begin["sources"].split(","))
            if any(not s for s in sources):
                raise InputError(f"{where}:{i + 1}: block {name!r} names an empty source")
            open_name, open_line, open_sources = name, i, sources
        elif end:
            name = end["name"]
            if open_name is None:
                raise InputError(f"{where}:{i + 1}: end of block {name!r} without its begin marker")
            if name != open_name:
                raise InputError(
                    f"{where}:{i + 1}: end marker of block {name!r} closes block {open_name!r} "
                    f"(line {open_line + 1})"
                )
            body = "\n".join(lines[open_line + 1 : i])
            blocks.append(Block(open_name, open_sources, open_line, i, body))
            seen.add(open_name)
            open_name = None
        elif MARKERISH.match(line):
            raise InputError(f"{where}:{i + 1}: malformed generated-block marker {line!r}")
    if open_name is not None:
        raise InputError(
            f"{where}:{open_line + 1}: block {open_name!r} has no end marker "
            f"{end_marker(open_name)!r}"
        )
    return blocks


def splice_text(
    text: str, fragments: Mapping[str, Fragment], where: str, keep: Collection[str] = ()
) -> str:
    """`text` with every generated block replaced by its fragment (body and begin marker).

    Every block of the page must have a fragment (a marker nobody renders is an error naming the
    page and the block), except the blocks named in `keep` (those of a study the config leaves
    out), which stay as they are; fragments for blocks the page does not hold are ignored.
    """
    blocks = [b for b in find_blocks(text, where) if b.name not in keep]
    missing = [b.name for b in blocks if b.name not in fragments]
    if missing:
        raise InputError(
            f"{where}: no rendered fragment for generated block(s) {missing}; "
            f"rendered: {sorted(fragments)}"
        )
    lines = text.split("\n")
    out: list[str] = []
    pos = 0
    for b in blocks:
        frag = fragments[b.name]
        out.extend(lines[pos : b.begin])
        out.append(begin_marker(b.name, frag.sources))
        body = frag.body.strip("\n")
        if body:
            out.extend(body.split("\n"))
        out.append(end_marker(b.name))
        pos = b.end + 1
    out.extend(lines[pos:])
    return "\n".join(out)


def splice_file(
    path: str | Path, fragments: Mapping[str, Fragment], keep: Collection[str] = ()
) -> bool:
    """Splice `fragments` into the page at `path` in place; True when the file changed.

    The page is rewritten atomically (``llmqueue.io.write_text``) and only when its text
    changes, so a run with nothing new leaves the file (and its modification time) alone.
    """
    page = Path(path)
    if not page.is_file():
        raise InputError(f"{page}: page with generated blocks does not exist")
    old = page.read_text()
    new = splice_text(old, fragments, str(path), keep)
    if new == old:
        return False
    write_text(new, page)
    return True


def strip_blocks(text: str, where: str) -> str:
    """`text` without its generated blocks (markers and bodies): the hand-written prose."""
    lines = text.split("\n")
    keep = [True] * len(lines)
    for b in find_blocks(text, where):
        for i in range(b.begin, b.end + 1):
            keep[i] = False
    return "\n".join(line for line, k in zip(lines, keep, strict=True) if k)


# ---- Markdown helpers ---------------------------------------------------------------------------
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


def md_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub Markdown table. Header cells are written as given; body cells as given when
    already strings produced by a renderer (they may hold Markdown), else through :func:`md_cell`."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
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
    v = _float(x)
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


def _float(x: object) -> float:
    try:
        return float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def num(values: pd.Series) -> pd.Series:
    """A column read as text, as numbers (blank cells become NaN)."""
    return pd.to_numeric(values, errors="coerce")


def _true(x: object) -> bool:
    return str(x).strip().lower() in ("true", "1", "yes")


# ---- the claims table ---------------------------------------------------------------------------
COUNTS = re.compile(r"(?P<rows>\d+) rows: " + ", ".join(rf"(?P<{v}>\d+) {v}" for v in VERDICTS))
# The headline sentence of :func:`render_claims_headline` (parsed back by the docs tests).
HEADLINE = re.compile(
    r"Of the (?P<rows>\d+) rows that test the paper's stated inputs, (?P<reproduced>\d+) "
    r"(?:is|are) reproduced"
)


def claim_number(claim_id: str) -> int:
    """The claim number of a row id (``10e`` -> 10, ``1a-vidur-a100`` -> 1)."""
    m = re.match(r"\s*(\d+)", str(claim_id))
    if not m:
        raise InputError(f"claim id {claim_id!r} does not start with a claim number")
    return int(m.group(1))


def claim_base(claim_id: str) -> str:
    """The reference id a row was judged against (``3a-back_solved-gamma`` -> ``3a``)."""
    return str(claim_id).split("-", 1)[0]


def reference_studies(reference: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """{reference claim id: study} from ``{study: data/reference/claims_<study>.csv table}``."""
    out: dict[str, str] = {}
    for study, ref in reference.items():
        for cid in ref["id"].astype(str):
            if cid in out:
                raise InputError(f"claim {cid!r} is in the reference of {out[cid]} and {study}")
            out[cid] = study
    return out


def study_order(reference: Mapping[str, pd.DataFrame]) -> list[str]:
    """Studies in the order of their first claim number (profiling 1-2, token_limit 3-5, ...)."""
    return sorted(reference, key=lambda s: min(claim_number(c) for c in reference[s]["id"]))


def _claims_by_study(
    claims: pd.DataFrame, reference: Mapping[str, pd.DataFrame]
) -> dict[str, pd.DataFrame]:
    studies = reference_studies(reference)
    bases = claims["id"].astype(str).map(claim_base)
    unknown = sorted(set(bases) - set(studies))
    if unknown:
        raise InputError(
            f"results/claims.csv: rows {unknown} judge no claim of data/reference/claims_*.csv"
        )
    where = bases.map(studies)
    return {s: claims[where == s] for s in study_order(reference)}


def verdict_counts(verdicts: Iterable[str]) -> dict[str, int]:
    """{verdict: rows} for every verdict of :data:`llmqueue.claims.VERDICTS` (zeros included)."""
    counts = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        if v not in counts:
            raise InputError(f"unknown verdict {v!r}; known: {list(VERDICTS)}")
        counts[v] += 1
    return counts


def counts_line(counts: Mapping[str, int]) -> str:
    """``N rows: a reproduced, b not_reproduced, c back_solved`` (parsed back by :data:`COUNTS`)."""
    rows = sum(counts.values())
    return f"{rows} rows: " + ", ".join(f"{counts[v]} {v}" for v in VERDICTS)


def _claim_rows(rows: pd.DataFrame, columns: Sequence[str]) -> list[list[str]]:
    return [[md_cell(r[c]) for c in columns] for _, r in rows.iterrows()]


def render_claims_table(
    claims: pd.DataFrame, reference: Mapping[str, pd.DataFrame], headings: str = "###"
) -> str:
    """The whole claims table (every row of ``results/claims.csv``), one table per study in the
    order of the claim numbers, each under a heading with its count of verdicts."""
    parts = [f"All studies: {counts_line(verdict_counts(claims['verdict']))}."]
    for study, rows in _claims_by_study(claims, reference).items():
        numbers = sorted({claim_number(c) for c in reference[study]["id"]})
        span = f"{numbers[0]}" if len(numbers) == 1 else f"{numbers[0]}-{numbers[-1]}"
        parts.append(f"{headings} {study} (claim{'s' if len(numbers) > 1 else ''} {span})")
        parts.append(f"{counts_line(verdict_counts(rows['verdict']))}.")
        parts.append(md_table(CLAIM_COLUMNS, _claim_rows(rows, CLAIM_COLUMNS)))
    return "\n\n".join(parts)


def render_study_claims(
    claims: pd.DataFrame, reference: Mapping[str, pd.DataFrame], study: str
) -> str:
    """One study's rows of the claims table (id, paper, ours, unit, verdict, scope, note)."""
    rows = _claims_by_study(claims, reference).get(study)
    if rows is None:
        raise InputError(f"no reference claims for study {study!r}; studies: {sorted(reference)}")
    columns = ["id", "paper", "ours", "unit", "verdict", "scope", "note"]
    line = f"{counts_line(verdict_counts(rows['verdict']))}."
    return line + "\n\n" + md_table(columns, _claim_rows(rows, columns))


def scope_counts(claims: pd.DataFrame) -> dict[str, dict[str, int]]:
    """{scope: {verdict: rows}} for every scope of :data:`llmqueue.claims.SCOPES` (zeros
    included); a row with no scope, or another one, is an :class:`InputError`."""
    scopes = claims["scope"].fillna("").astype(str) if "scope" in claims else None
    if scopes is None or not scopes.isin(SCOPES).all():
        bad = [] if scopes is None else claims.loc[~scopes.isin(SCOPES), "id"].tolist()
        raise InputError(f"results/claims.csv: rows {bad or 'all'} have no scope of {SCOPES}")
    return {sc: verdict_counts(claims.loc[scopes == sc, "verdict"]) for sc in SCOPES}


def render_claims_headline(
    claims: pd.DataFrame,
    reference: Mapping[str, pd.DataFrame],
    titles: Mapping[int | str, str] | None = None,
    study_link: str = "docs/studies/{study}.md",
    results_link: str = "docs/results.md",
) -> str:
    """The front page's headline: of the rows that test the paper's stated inputs (scope
    ``replication``) how many are reproduced, with the ids of those that are not; then one row per
    scope with its verdict counts and what a row of that scope that is not reproduced means (the
    reasons, grouped). `reference` checks that every row judges a reference claim; `titles` and
    `study_link` belong to :func:`render_claims_by_claim`; `results_link` is where the reasons
    are (relative to the page)."""
    _claims_by_study(claims, reference)
    by_scope = scope_counts(claims)
    rep = by_scope["replication"]
    n_rep = sum(rep.values())
    scopes = claims["scope"].astype(str)
    missed = claims.loc[(scopes == "replication") & (claims["verdict"] == "not_reproduced"), "id"]
    verb = "is" if rep["reproduced"] == 1 else "are"
    lead = f"Of the {n_rep} rows that test the paper's stated inputs, {rep['reproduced']} {verb} reproduced"
    lead += (
        f"; not reproduced: {', '.join(str(c) for c in missed)} "
        f"([the claims table]({results_link}) gives each reason)."
        if len(missed)
        else "."
    )
    header = ["scope", "what it tests", "rows", *VERDICTS, "a row not reproduced means"]
    rows: list[list[str]] = []
    for sc in SCOPES:
        c = by_scope[sc]
        rows.append(
            [sc, SCOPE_MEANING[sc], str(sum(c.values()))]
            + [str(c[v]) for v in VERDICTS]
            + [MISS_MEANING[sc]]
        )
    total = verdict_counts(claims["verdict"])
    rows.append(["all", "", str(len(claims))] + [str(total[v]) for v in VERDICTS] + [""])
    return lead + "\n\n" + md_table(header, rows)


def render_claims_by_claim(
    claims: pd.DataFrame,
    reference: Mapping[str, pd.DataFrame],
    titles: Mapping[int | str, str],
    study_link: str = "studies/{study}.md",
) -> str:
    """Per claim number: what it says (`titles`), its study (linked), its rows, their verdicts
    and their scopes (``scope: rows``)."""
    studies = reference_studies(reference)
    by_number: dict[int, list[int]] = {}
    study_of: dict[int, str] = {}
    for i, cid in enumerate(claims["id"].astype(str)):
        n = claim_number(cid)
        by_number.setdefault(n, []).append(i)
        study_of[n] = studies[claim_base(cid)]
    titles_by_number = {int(k): v for k, v in titles.items()}
    header = ["claim", "what", "study", "rows", *VERDICTS, "scopes"]
    rows: list[list[str]] = []
    for n in sorted(by_number):
        sub = claims.iloc[by_number[n]]
        c = verdict_counts(sub["verdict"])
        study = study_of[n]
        link = f"[{study}]({study_link.format(study=study)})"
        what = md_text(titles_by_number.get(n, ""))
        tally = sub["scope"].astype(str).value_counts()
        scopes = ", ".join(f"{sc}: {int(tally[sc])}" for sc in SCOPES if sc in tally)
        rows.append([str(n), what, link, str(len(sub))] + [str(c[v]) for v in VERDICTS] + [scopes])
    total = verdict_counts(claims["verdict"])
    rows.append(["all", "", "", str(len(claims))] + [str(total[v]) for v in VERDICTS] + [""])
    return md_table(header, rows)


def parse_claims_table(text: str) -> list[dict[str, str]]:
    """The claim rows of a page holding :func:`render_claims_table` (all its tables' rows)."""
    return [row for table in parse_tables(text) for row in table if list(row) == CLAIM_COLUMNS]


# ---- measured figures (docs/measured.yaml) ------------------------------------------------------
MEASURED_FIELDS = ("what", "measured", "machine", "date", "load")


def render_measured(measured: Mapping[str, Any], group: str) -> str:
    """The measurements of one group of ``docs/measured.yaml``: what was measured, the figure,
    the target (where one was set), the machine, the date and the load around it."""
    entries = measured.get(group)
    if not isinstance(entries, list) or not entries:
        raise InputError(f"docs/measured.yaml: no group {group!r}; groups: {sorted(measured)}")
    with_target = any("target" in e for e in entries)
    header = ["what", "measured"] + (["target"] if with_target else []) + ["machine, date, load"]
    rows = []
    for i, e in enumerate(entries):
        missing = [k for k in MEASURED_FIELDS if k not in e]
        if missing:
            raise InputError(f"docs/measured.yaml: {group}[{i}] lacks {missing}")
        cells = [md_text(e["what"]), md_text(e["measured"])]
        if with_target:
            cells.append(md_text(e.get("target", "")))
        cells.append(md_text(f"{e['machine']}, {e['date']}, load {e['load']}"))
        rows.append(cells)
    return md_table(header, rows)


# ---- serving study ------------------------------------------------------------------------------
def render_serving_policies(
    capacity: pd.DataFrame, sweep: pd.DataFrame, near_load: float = 0.85
) -> str:
    """Every serving policy on one hardware law: its highest sustainable rate, its JCT at the
    lowest simulated rate and near `near_load` of its highest rate, and the KV utilisation there;
    then how far continuous batching's highest rate exceeds the best static former's."""
    header = [
        "policy",
        "spec",
        "time law",
        "highest sustainable rate (req/s)",
        "lowest rate (req/s): mean / p99 JCT (s)",
        f"near {fmt_pct(near_load, 0, sign=False)} of its highest rate (req/s): mean / p99 JCT (s)",
        "mean KV utilisation there",
    ]
    rows = []
    for _, cap in capacity.iterrows():
        runs = sweep[(sweep["policy"] == cap["policy"]) & ~sweep["unstable"].map(_true)]
        runs = runs.iloc[num(runs["rate_per_s"]).to_numpy().argsort(kind="stable")]
        if runs.empty:
            raise InputError(f"serving sweep: no stable run of policy {cap['policy']!r}")
        low = runs.iloc[0]
        near = runs.iloc[int((num(runs["load"]) - near_load).abs().to_numpy().argmin())]
        kv = _float(near.get("kv_utilisation"))
        rows.append(
            [
                md_cell(cap["policy"]),
                f"`{cap['spec']}`",
                md_cell(cap["latency"]),
                fmt(cap["max_rate_per_s"]),
                f"{fmt(low['rate_per_s'])}: {fmt(low['jct_mean_s'])} / {fmt(low['jct_p99_s'])}",
                f"{fmt(near['rate_per_s'])}: {fmt(near['jct_mean_s'])} / {fmt(near['jct_p99_s'])}",
                fmt_pct(kv, 0, sign=False) if math.isfinite(kv) else "-",
            ]
        )
    table = md_table(header, rows)
    cont = capacity[capacity["spec"].astype(str).str.startswith("continuous")]
    static = capacity[~capacity["spec"].astype(str).str.startswith("continuous")]
    if cont.empty or static.empty:
        return table
    best_c = cont.iloc[int(num(cont["max_rate_per_s"]).to_numpy().argmax())]
    best_s = static.iloc[int(num(static["max_rate_per_s"]).to_numpy().argmax())]
    ratio = float(best_c["max_rate_per_s"]) / float(best_s["max_rate_per_s"])
    return (
        f"{table}\n\nThe best continuous policy ({best_c['policy']}) sustains {fmt(ratio)} times "
        f"the highest rate of the best static former ({best_s['policy']})."
    )


# ---- SSJF study ---------------------------------------------------------------------------------
def render_ssjf_predictors(predictors: pd.DataFrame) -> str:
    """Each predictor's score on the held-out rows: accuracy over SSJF's five classes, Kendall's
    tau between predicted and true lengths, mean absolute error (tokens)."""
    rows = [
        [
            f"`{r['predictor']}`",
            md_cell(r["kind"]),
            fmt_int(r["n"]),
            fmt(r["accuracy"], 2),
            fmt(r["kendall_tau"], 2),
            fmt(r["mae_tokens"]),
        ]
        for _, r in predictors.iterrows()
    ]
    return md_table(
        ["predictor", "kind", "rows scored", "class accuracy", "Kendall tau", "MAE (tokens)"], rows
    )


def render_ssjf_gains(jct: pd.DataFrame, load: float) -> str:
    """Mean JCT of FCFS and each order's reduction of it at `load` (Poisson arrivals), per cost
    model and batching mode; the largest wait of FCFS and of the unguarded orders."""
    at = jct[(num(jct["load"]) - load).abs() < 1e-9]
    if at.empty:
        raise InputError(f"ssjf jct table: no rows at load {load}")
    orders = [p for p in dict.fromkeys(at["policy"]) if p != "FCFS"]
    header = ["setting", "mode", "FCFS mean JCT (s)"]
    header += [f"{p}: JCT reduction" for p in orders]
    header += [
        "largest wait (s): " + " / ".join(["FCFS", *[p for p in orders if "guard" not in p]])
    ]
    rows = []
    for (setting, mode), grp in at.groupby(["setting", "mode"], sort=False):
        by = {str(r["policy"]): r for _, r in grp.iterrows()}
        fcfs = by["FCFS"]
        base = _float(fcfs["jct_mean_s"])
        cells = [md_cell(setting), md_cell(mode), fmt(base)]
        for p in orders:
            r = by.get(p)
            if r is None or _true(r["unstable"]):
                cells.append("unstable")
            else:
                cells.append(fmt_pct(1 - _float(r["jct_mean_s"]) / base, sign=False))
        waits = [
            fmt(by[p]["wait_max_s"]) for p in ["FCFS", *orders] if "guard" not in p and p in by
        ]
        cells.append(" / ".join(waits))
        rows.append(cells)
    return md_table(header, rows)


def render_ssjf_starvation(starvation: pd.DataFrame) -> str:
    """Mean JCT against the largest wait of each order under each starvation guard."""
    rows = [
        [
            md_cell(r["policy"]),
            fmt_int(r["guard_s"]) if math.isfinite(_float(r["guard_s"])) else "none",
            fmt(r["jct_mean_s"]),
            fmt(r["wait_p99_s"]),
            fmt(r["wait_max_s"]),
        ]
        for _, r in starvation.iterrows()
    ]
    return md_table(
        ["order", "guard (s)", "mean JCT (s)", "p99 wait (s)", "largest wait (s)"], rows
    )


# ---- Multi-Bin study ----------------------------------------------------------------------------
def render_multibin_synthetic(synthetic: pd.DataFrame) -> str:
    """Theorem 4.2 against the simulated highest throughput at their synthetic setting."""
    rows = []
    for _, r in synthetic.iterrows():
        theorem, sim = _float(r["theorem_rate"]), _float(r["sim_rate"])
        rows.append(
            [
                fmt_int(r["bins"]),
                fmt(theorem, 6),
                f"{fmt(sim, 6)} ± {fmt(r['sim_rate_ci95'], 2)}",
                fmt_pct(sim / theorem - 1, 2),
            ]
        )
    return md_table(
        ["bins k", "Theorem 4.2", "simulated (95% CI)", "simulated / theorem - 1"], rows
    )


def render_multibin_llm(capacity: pd.DataFrame) -> str:
    """The simulated LLM: highest rate per number of bins (exact and simulated, bins by the true
    length), and the gain over the first k under each prediction-error probability p_e."""
    cap = capacity.copy()
    cap["pe"] = num(cap["pe"])
    cap["bins"] = num(cap["bins"])
    true = cap[cap["pe"] == 0].sort_values("bins")
    errors = sorted(p for p in cap["pe"].unique() if p > 0)
    header = ["bins k", "exact (req/s)", "simulated (req/s, 95% CI)", "gain, true bins"]
    header += [f"gain, p_e = {p:g}" for p in errors]
    rows = []
    for _, r in true.iterrows():
        cells = [
            fmt_int(r["bins"]),
            fmt(r["exact_rate_per_s"]),
            f"{fmt(r['sim_rate_per_s'])} ± {fmt(r['sim_rate_ci95_per_s'], 2)}",
            fmt_pct(r["sim_gain"], 0),
        ]
        for p in errors:
            m = cap[(cap["pe"] == p) & (cap["bins"] == r["bins"])]
            cells.append(fmt_pct(m["sim_gain"].iloc[0], 0) if not m.empty else "-")
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_learned(learned: pd.DataFrame) -> str:
    """Bins from the learned length predictor beside bins by the true length (same rows)."""
    kinds = list(dict.fromkeys(learned["bins_by"]))
    header = ["bins k"]
    for k in kinds:
        header += [f"{k}: bin accuracy", f"{k}: gain over one bin"]
    rows = []
    for bins in sorted(int(b) for b in num(learned["bins"]).unique()):
        cells = [str(bins)]
        for k in kinds:
            m = learned[(learned["bins_by"] == k) & (num(learned["bins"]) == bins)]
            if m.empty:
                cells += ["-", "-"]
            else:
                cells += [
                    fmt_pct(m["bin_accuracy"].iloc[0], 0, False),
                    fmt_pct(m["sim_gain"].iloc[0], 0),
                ]
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_latency(latency: pd.DataFrame) -> str:
    """Simulated mean latency per number of bins and load (with and without a flush timeout),
    and the largest gap to Lemma 5.1's lower bound."""
    lat = latency.copy()
    lat["flush"] = lat["flush_s"].map(lambda x: fmt_int(x) if math.isfinite(_float(x)) else "none")
    loads = sorted(num(lat["load"]).unique())
    header = ["flush timeout (s)", "bins k"]
    header += [f"load {x:g}: mean latency (s)" for x in loads]
    header += ["simulated / Lemma 5.1 - 1, largest"]
    rows = []
    for (flush, bins), grp in lat.groupby(["flush", "bins"], sort=False):
        cells = [flush, fmt_int(bins)]
        for x in loads:
            m = grp[(num(grp["load"]) - x).abs() < 1e-9]
            ok = not m.empty and not _true(m["unstable"].iloc[0])
            cells.append(fmt(m["sim_jct_mean_s"].iloc[0]) if ok else "unstable")
        gaps = num(grp["sim_jct_mean_s"]) / num(grp["bound_jct_mean_s"]) - 1
        cells.append(fmt_pct(gaps.max(), 1))
        rows.append(cells)
    return md_table(header, rows)


def render_multibin_vs_continuous(vs: pd.DataFrame) -> str:
    """Multi-Bin Batching against continuous batching on the same kernels: highest simulated
    rate and mean latency at each load (a fraction of the highest Multi-Bin rate)."""
    loads = sorted(num(vs["load"]).unique())
    header = ["policy", "time law", "highest rate (req/s)"]
    header += [f"load {x:g}: mean latency (s)" for x in loads]
    rows = []
    for (policy, law), grp in vs.groupby(["policy", "time_law_kind"], sort=False):
        rate = _float(grp["sim_rate_per_s"].iloc[0])
        cells = [md_cell(policy), md_cell(law), fmt(rate) if math.isfinite(rate) else "no limit"]
        for x in loads:
            m = grp[(num(grp["load"]) - x).abs() < 1e-9]
            ok = not m.empty and not _true(m["unstable"].iloc[0])
            cells.append(fmt(m["sim_jct_mean_s"].iloc[0]) if ok else "unstable")
        rows.append(cells)
    return md_table(header, rows)


# ---- validation against vLLM --------------------------------------------------------------------
def _load_label(r: pd.Series) -> str:
    x = _float(r["load"])
    return fmt_pct(x, 0, sign=False) if math.isfinite(x) else f"burst ({r['run']})"


def render_validation_comparison(comparison: pd.DataFrame) -> str:
    """Measured against predicted latency per load and metric (the prediction, not the
    diagnostic variants): mean and p90 with relative errors, correlations, target met."""
    pred = comparison[comparison["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        rate = _float(r["rate_per_s"])
        target = (
            "-"
            if str(r["within_target"]) in ("", "nan")
            else ("yes" if _true(r["within_target"]) else "no")
        )
        rows.append(
            [
                _load_label(r),
                fmt(rate) if math.isfinite(rate) else "all at t = 0",
                fmt_int(r["requests"]),
                str(r["metric"]).upper(),
                f"{fmt(r['measured_mean_s'])} / {fmt(r['predicted_mean_s'])} ({fmt_pct(r['mean_rel_error'])})",
                f"{fmt(r['measured_p90_s'])} / {fmt(r['predicted_p90_s'])} ({fmt_pct(r['p90_rel_error'])})",
                f"{fmt(r['pearson'])} / {fmt(r['spearman'])}",
                target,
            ]
        )
    header = [
        "load",
        "rate (req/s)",
        "requests",
        "metric",
        "mean (s): measured / predicted",
        "p90 (s): measured / predicted",
        "Pearson / Spearman",
        "target met",
    ]
    out = md_table(header, rows)
    if "c_qk_s" in pred and len(pred) and _float(pred["c_qk_s"].iloc[0]) > 0:
        r = pred.iloc[0]
        out += (
            f"\n\nStep law (packed, fitted on the calibration): c0 = {fmt(1e3 * _float(r['c0_s']))} ms, "
            f"c_tok = {fmt(1e3 * _float(r['c_tok_s']))} ms/token, c_ctx = {fmt(1e6 * _float(r['c_ctx_s']))} "
            f"us per context token, c_qk = {fmt(1e9 * _float(r['c_qk_s']))} ns per token x context token."
        )
    if "unmodelled_rules" in pred:
        bound = sorted({f"{_load_label(r)}: {r['unmodelled_rules']}" for _, r in pred.iterrows()
                        if str(r["unmodelled_rules"]) not in ("", "nan")})  # fmt: skip
        if bound:
            out += "\n\nUnmodelled scheduler rules that could have acted: " + "; ".join(bound) + "."
    return out


def render_validation_run(meta: Mapping[str, Any], fit: Mapping[str, Any]) -> str:
    """The committed vLLM measurement: machine, date, run time, load, engine, model, the
    calibration law and the measured capacity."""
    cal = fit["calibration"]
    versions = meta.get("versions", {})
    load_b, load_a = meta.get("load_before", []), meta.get("load_after", [])
    model = meta.get("model", {})
    rows = [
        ["machine", md_cell(f"{meta['cpu']}, {meta['cores']} cores ({meta['hardware_id']})")],
        ["finished", md_cell(meta["finished"])],
        ["run time (s)", fmt(meta["wall_s"], 4)],
        [
            "1-min load average before / after",
            f"{fmt(load_b[0], 2) if load_b else '-'} / {fmt(load_a[0], 2) if load_a else '-'}",
        ],
        ["engine", md_cell(meta["engine"])],
        ["versions", md_cell(", ".join(f"{k} {v}" for k, v in versions.items() if v))],
        [
            "model",
            md_cell(
                f"{model.get('architecture', '')}, {fmt_int(model.get('parameters'))} parameters"
                + (f", {model['dtype']}" if model.get("dtype") else "")
            ),
        ],
        [
            "linear step law on the calibration",
            md_cell(
                f"c0 = {fmt(1e3 * float(cal['c0_s']))} ms, c_tok = {fmt(1e3 * float(cal['c_tok_s']))} "
                f"ms/token, c_ctx = {fmt(1e6 * float(cal['c_ctx_s']))} us per context token; "
                f"R^2 {fmt(cal['r2'])} on {fmt_int(cal['n'])} iterations"
            ),
        ],
        ["measured capacity (req/s)", fmt(meta["capacity"]["capacity_per_s"])],
        ["requests per load (warm-up included)", fmt_int(meta["requests_per_load"])],
    ]
    return md_table(["", "committed run"], rows)


# ---- profiling study ----------------------------------------------------------------------------
# ---- the held-out validation matrix ---------------------------------------------------------------
_MATRIX_LABELS = {
    "jct_mean": "mean JCT",
    "jct_p50": "p50 JCT",
    "jct_p90": "p90 JCT",
    "jct_p99": "p99 JCT",
    "ttft_mean": "mean TTFT",
    "ttft_p90": "p90 TTFT",
    "tpot_mean": "mean TPOT",
}


def _abs_pct(x: object) -> str:
    v = _float(x)
    return "n/a" if not math.isfinite(v) else f"{100 * abs(v):.1f}%"


def render_validation_matrix(table: pd.DataFrame) -> str:
    """Every judged run of the matrix (the prediction): group, run, load planned / achieved,
    requests, mean JCT measured / predicted and the relative errors of the mean, p90 and p99 JCT,
    mean and p90 TTFT, mean TPOT, the per-request JCT correlation, the share preempted and the
    contention flags."""
    pred = table[table["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                f"{fmt(r['planned_load'], 2)} / {fmt(r['achieved_load'], 2)}",
                fmt_int(r["requests"]),
                f"{fmt(r['measured_jct_mean_s'])} / {fmt(r['predicted_jct_mean_s'])}",
                fmt_pct(r["jct_mean_rel_error"]),
                fmt_pct(r["jct_p90_rel_error"]),
                fmt_pct(r["jct_p99_rel_error"]),
                fmt_pct(r["ttft_mean_rel_error"]),
                fmt_pct(r["ttft_p90_rel_error"]),
                fmt_pct(r["tpot_mean_rel_error"]),
                fmt(r["jct_pearson"]),
                fmt_pct(r["preempted_share"], sign=False),
                md_cell(str(r["flags"]).replace("|", ", ") or "-"),
            ]
        )
    header = [
        "group / run",
        "load planned / achieved",
        "n",
        "mean JCT (s) measured / predicted",
        "mean JCT",
        "p90 JCT",
        "p99 JCT",
        "mean TTFT",
        "p90 TTFT",
        "mean TPOT",
        "JCT Pearson",
        "preempted",
        "flags",
    ]
    return md_table(header, rows)


def render_validation_matrix_summary(
    summary: pd.DataFrame, published: pd.DataFrame, targets: Mapping[str, float]
) -> str:
    """Per metric over all judged runs: the median and largest abs. error of the prediction and of
    the other variants' medians, the target; then the errors other simulators publish."""
    from dataclasses import asdict

    from llmqueue.studies.validation.matrix_spec import MatrixTargets

    targets = {**asdict(MatrixTargets()), **{k: float(v) for k, v in targets.items()}}
    pred = summary[summary["variant"] == "prediction"].set_index("metric")
    others = [v for v in dict.fromkeys(summary["variant"]) if v != "prediction"]
    runs_of = {v: int(num(summary[summary["variant"] == v]["runs"]).max()) for v in others}
    variant_label = {
        "in_situ_law": "in-situ law (diagnosis)",
        "run_speed": "law at the run's speed (diagnosis)",
        "warmup_speed": "law at the warm-up's speed",
        "window_speed": "law at each window's speed (diagnosis)",
        "probe_scaled": "law at the probe's speed before the run",
        "session_law": "law of the run's own session (diagnosis)",
    }
    target = {
        "jct_mean": f"median at most {100 * targets['jct_mean_median']:g}%, each at most "
        f"{100 * targets['jct_mean_max']:g}%",
        "jct_p90": f"median at most {100 * targets['jct_p90_median']:g}%",
        "ttft_mean": f"median at most {100 * targets['ttft_mean_median']:g}%",
    }
    rows = []
    for m, label in _MATRIX_LABELS.items():
        if m not in pred.index:
            continue
        r = pred.loc[m]
        cells = [label, fmt_int(r["runs"]), _abs_pct(r["median_abs_rel_error"]),
                 f"{_abs_pct(r['max_abs_rel_error'])} ({md_cell(r['worst_run'])})"]  # fmt: skip
        for v in others:
            o = summary[(summary["variant"] == v) & (summary["metric"] == m)]
            cells.append(_abs_pct(o.iloc[0]["median_abs_rel_error"]) if len(o) else "-")
        med, mx = _float(r["median_abs_rel_error"]), _float(r["max_abs_rel_error"])
        if m == "jct_mean":
            ok = med <= targets["jct_mean_median"] and mx <= targets["jct_mean_max"]
        elif m == "jct_p90":
            ok = med <= targets["jct_p90_median"]
        elif m == "ttft_mean":
            ok = med <= targets["ttft_mean_median"]
        else:
            ok = None
        cells.append("-" if ok is None else f"{target[m]}: {'met' if ok else 'missed'}")
        rows.append(cells)
    header = ["metric", "runs", "median abs. error", "largest abs. error (run)",
              *(f"median, {variant_label.get(v, v.replace('_', ' '))} ({runs_of[v]} runs)" for v in others),
              "target"]  # fmt: skip
    out = md_table(header, rows)
    prow = []
    for _, r in published.iterrows():
        lo, hi = _float(r["error_low"]), _float(r["error_high"])
        err = f"{100 * lo:g}%" if lo == hi else f"{100 * lo:g}-{100 * hi:g}%"
        prow.append([md_cell(r["simulator"]), md_cell(r["metric"]), md_cell(r["statistic"]), err,
                     md_cell(r["experiments"] or "-"), md_cell(r["against"]),
                     md_cell(r["source"])])  # fmt: skip
    head2 = ["simulator", "metric", "statistic", "error", "experiments", "against", "source"]
    return (
        out
        + "\n\nPublished by other simulators (their own engines and hardware):\n\n"
        + md_table(head2, prow)
    )


_VERDICT_VARIANTS = {
    "prediction": "prediction (calibration only)",
    "probe_scaled": "probe-scaled prediction",
    "run_speed": "law at the run's speed (diagnosis)",
}


def render_validation_matrix_targets(targets: pd.DataFrame) -> str:
    """Every target of the matrix (llmqueue.studies.validation.verdict): what is judged, on which
    variant, the statistic, its value against the limit, the detail and the verdict."""
    rows = []
    for _, r in targets.iterrows():
        unit = str(r["unit"])
        if unit == "fraction":
            value, limit = _abs_pct(r["value"]), f"{100 * _float(r['limit']):g}%"
        elif unit == "pp":
            value, limit = f"{_float(r['value']):.1f} pp", f"{_float(r['limit']):.1f} pp"
        else:
            value, limit = fmt_int(r["value"]), fmt_int(r["limit"])
        variant = _VERDICT_VARIANTS.get(str(r["variant"]), str(r["variant"]))
        rows.append([md_cell(r["target"]), md_cell(variant), md_cell(r["statistic"]), value,
                     limit, md_cell(r["detail"] if isinstance(r["detail"], str) and r["detail"] else "-"),
                     md_cell(r["verdict"])])  # fmt: skip
    return md_table(["target", "variant", "statistic", "value", "limit", "detail", "verdict"], rows)


def render_validation_matrix_speed(table: pd.DataFrame, window_s: float) -> str:
    """Per judged run: the prediction's step law on the run's own iterations (law / measured - 1
    of their total time: all, with prefill, decode-only), the spread of the engine's speed across
    the run's `window_s` windows, how often per second another thread took the model worker's core
    (its involuntary context switches), the engine's speed (measured / law) in the warm-up and over
    the run, and the mean-JCT error of the prediction, of the law at the warm-up's and at the run's
    speed, at each window's speed (the run replayed in work time) and of the in-situ law."""
    pred = table[table["variant"] == "prediction"]
    rows = []
    for _, r in pred.iterrows():
        run = table[(table["group"] == r["group"]) & (table["run"] == r["run"])]

        def err(variant: str, run: pd.DataFrame = run) -> str:
            x = run[run["variant"] == variant]
            return fmt_pct(x.iloc[0]["jct_mean_rel_error"]) if len(x) else "-"

        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                fmt(r["planned_load"], 2),
                fmt_pct(r["law_total_rel_error"]),
                fmt_pct(r["law_prefill_rel_error"]),
                fmt_pct(r["law_decode_rel_error"]),
                fmt_pct(r["speed_spread"], sign=False),
                fmt(r.get("model_preemptions_per_s", math.nan), 3),
                f"{fmt(r['warmup_speed_factor'], 3)} / {fmt(r['run_speed_factor'], 3)}",
                fmt_pct(r["jct_mean_rel_error"]),
                err("warmup_speed"),
                err("run_speed"),
                err("window_speed"),
                err("in_situ_law"),
            ]
        )
    header = ["run", "load", "law on the run's iterations: all", "with prefill", "decode-only",
              f"speed spread over {window_s:g}-s windows", "model core taken (/s)",
              "speed: warm-up / run",
              "mean JCT error", "at the warm-up's speed", "at the run's speed",
              "at each window's speed", "in-situ law"]  # fmt: skip
    return md_table(header, rows)


def render_validation_matrix_laws(table: pd.DataFrame) -> str:
    """Per judged run, the mean-JCT and mean-TTFT errors under each variant side by side (the
    prediction's law, the other calibration law, the paper's model, the in-situ law)."""
    variants = list(dict.fromkeys(table["variant"]))
    runs = table[table["variant"] == "prediction"][["group", "run", "planned_load"]]
    rows = []
    for _, r in runs.iterrows():
        cells = [md_cell(f"{r['group']} / {r['run']}"), fmt(r["planned_load"], 2)]
        for metric in ("jct_mean", "ttft_mean"):
            for v in variants:
                x = table[(table["group"] == r["group"]) & (table["run"] == r["run"])
                          & (table["variant"] == v)]  # fmt: skip
                cells.append(fmt_pct(x.iloc[0][f"{metric}_rel_error"]) if len(x) else "-")
        rows.append(cells)
    header = ["run", "load"]
    for metric in ("mean JCT", "mean TTFT"):
        header += [f"{metric}: {v.replace('_', ' ')}" for v in variants]
    return md_table(header, rows)


def render_validation_matrix_closed(closed: pd.DataFrame) -> str:
    """The paper's closed forms beside the measured mean wait and JCT (95% CIs)."""
    rows = []
    for _, r in closed.iterrows():
        bnd = _float(r.get("bound16_jct_mean_s", "nan"))
        rows.append(
            [
                md_cell(f"{r['group']} / {r['run']}"),
                fmt(r["rho"]),
                f"{fmt(r['measured_wait_mean_s'])} +- {fmt(r['measured_wait_mean_ci95_s'])}",
                f"{fmt(r['exact_wait_mean_s'])} ({fmt_pct(r['exact_wait_rel_error'])})",
                "yes" if _true(r["exact_wait_in_ci"]) else "no",
                f"{fmt(r['measured_jct_mean_s'])} +- {fmt(r['measured_jct_mean_ci95_s'])}",
                f"{fmt(r['exact_jct_mean_s'])} ({fmt_pct(r['exact_jct_rel_error'])})",
                "yes" if _true(r["exact_jct_in_ci"]) else "no",
                fmt(bnd) if math.isfinite(bnd) else "-",
            ]
        )
    header = ["run", "rho", "mean wait (s), measured (95% CI)", "closed form", "in CI",
              "mean JCT (s), measured (95% CI)", "closed form", "in CI", "bound (16)"]  # fmt: skip
    return md_table(header, rows)


_BLOCK_VARIANTS = {
    "prediction": "prediction (calibration only)",
    "probe_scaled": "probe-scaled prediction",
    "run_speed": "law at each run's speed (diagnosis)",
    "window_speed": "law at each window's speed (diagnosis)",
}


def render_validation_matrix_reductions(reductions: pd.DataFrame, blocks: pd.DataFrame) -> str:
    """SJF's and SSJF's mean-JCT reduction against FCFS: measured in alternating blocks
    (:func:`llmqueue.studies.validation.protocol.block_summary`), per order and variant of
    :data:`_BLOCK_VARIANTS`, the rounds, the measured mean reduction with its 95% CI over the
    rounds, the predicted one and the error of the means (points); then any run set against an
    FCFS run served before it (a matrix measured without the protocol)."""
    out = []
    if len(blocks):
        out.append(_blocks_table(blocks))
    if len(reductions):
        rows = [
            [
                md_cell(f"{r['group']} / {r['run']}"),
                md_cell(r["priority"]),
                fmt_pct(r["measured_reduction"], sign=False),
                fmt_pct(r["predicted_reduction"], sign=False),
                f"{_float(r['error_pp']):+.1f}",
            ]  # fmt: skip
            for _, r in reductions.iterrows()
        ]
        out.append(md_table(["run", "priority", "measured", "predicted", "error (points)"], rows))
    return "\n\n".join(out) or "No queue orders were measured against FCFS."


def _blocks_table(blocks: pd.DataFrame) -> str:
    rows = []
    for variant, label in _BLOCK_VARIANTS.items():
        for _, r in blocks[blocks["variant"] == variant].iterrows():
            ci = _float(r["measured_reduction_ci95"])
            rows.append([
                md_cell(r["priority"]), md_cell(label), fmt_int(r["rounds"]),
                f"{fmt_pct(r['measured_reduction'], sign=False)} +- "
                f"{fmt_pct(ci, sign=False) if math.isfinite(ci) else '-'}",
                fmt_pct(r["predicted_reduction"], sign=False),
                f"{_float(r['error_pp']):+.1f}",
            ])  # fmt: skip
    header = ["order", "variant", "rounds", "measured (95% CI over the rounds)", "predicted",
              "error (points)"]  # fmt: skip
    return md_table(header, rows)


def render_validation_matrix_spread(spread: pd.DataFrame) -> str:
    """Repeated runs: the measured values per session, their spread and the model's errors."""
    rows = [
        [
            md_cell(f"{r['group']} / {r['run']}"),
            _MATRIX_LABELS.get(str(r["metric"]), r["metric"]),
            md_cell(str(r["measured_s"]).replace("|", " / ")),
            fmt_pct(r["spread"], sign=False),
            md_cell(" / ".join(fmt_pct(e) for e in str(r["errors"]).split("|"))),
        ]  # fmt: skip
        for _, r in spread.iterrows()
    ]
    header = ["run", "metric", "measured per session (s)", "spread", "prediction error per session"]
    return md_table(header, rows)


def render_validation_matrix_noise(floor: pd.DataFrame, in_sigma: pd.DataFrame) -> str:
    """The repeats' noise floor: per configuration served in several engine sessions the spread
    (SD of the log) of the measured mean JCT, of the prediction's error, and of the error with
    each session predicted by its own session's calibration; then the pooled sigma the runs are
    judged in, the median and largest |error| in its units per group, and the groups whose
    repeats all err beyond 2 sigma on one side."""
    rows = [
        [
            md_cell(f"{r['group']} / {r['config_run']}"),
            fmt_int(r["sessions"]),
            fmt(r["sigma_measured"], 3),
            fmt(r["sigma_prediction"], 3),
            fmt(r["sigma_session_law"], 3),
        ]
        for _, r in floor.iterrows()
    ]
    head = ["configuration", "sessions", "sigma, measured", "sigma, prediction error",
            "sigma, error with its session's calibration"]  # fmt: skip
    sigma = _float(in_sigma["sigma"].iloc[0]) if len(in_sigma) else math.nan
    z = in_sigma.assign(a=num(in_sigma["error_sigma"]).abs())
    rows2 = [
        [md_cell(str(g)), fmt_int(len(part)), fmt(float(part["a"].median()), 3),
         fmt(float(part["a"].max()), 3),
         "yes" if bool(part["defect_group"].astype(str).str.lower().eq("true").any()) else "no"]
        for g, part in z.groupby("group", sort=False)
    ]  # fmt: skip
    head2 = ["group", "judged runs", "median abs. error (sigma)", "largest (sigma)",
             "repeats beyond 2 sigma on one side"]  # fmt: skip
    return (
        md_table(head, rows)
        + f"\n\nPooled sigma (log scale): {fmt(sigma, 3)}; each run's mean-JCT error in its units:\n\n"
        + md_table(head2, rows2)
    )


def render_validation_machine_speed(
    summary: pd.DataFrame, cycles: pd.DataFrame, meta: Mapping[str, Any]
) -> str:
    """The machine-speed run: per series its median, spread over the cycles and correlations with
    the model's compute and with the cycles' CPU steal; then what was run, for how long, at what
    load, and the steal in the slowest and the fastest third of the cycles."""
    rows = []
    for _, r in summary.iterrows():
        unit = "us" if str(r["series"]).endswith("_us") else "ms"
        rows.append(
            [
                md_cell(r["label"]),
                f"{fmt(r['median'])} {unit}",
                fmt_pct(r["cv"], sign=False),
                f"{_float(r['max_over_min']):.2f}",
                f"{_float(r['corr_model']):.2f}",
                f"{_float(r['corr_steal']):.2f}",
            ]
        )
    header = ["series", "median per cycle", "CV over cycles", "largest / smallest cycle",
              "correlation with the model's compute", "correlation with CPU steal"]  # fmt: skip
    ms = meta.get("machine_speed", {})
    k = meta.get("kernels", {})
    model = num(cycles["model_ms"])
    steal = num(cycles["steal_share"])
    third = max(1, len(cycles) // 3)
    order = model.sort_values().index
    steal_fast = float(steal.loc[order[:third]].mean())
    steal_slow = float(steal.loc[order[-third:]].mean())
    cont = meta.get("contention", {})
    load = meta.get("load_before") or [float("nan")]
    note = (
        f"{fmt_int(ms.get('cycles'))} cycles of {fmt_int(ms.get('batch'))} sequences decoding "
        f"{fmt_int(ms.get('output_tokens'))} tokens each, then the kernels "
        f"({fmt(_float(k.get('stream_bytes')) / 1e6)} MB streamed for {_float(ms.get('stream_s')):g} s, "
        f"{fmt_int(ms.get('compute_size'))}-square products for {_float(ms.get('compute_s')):g} s) "
        f"on CPUs {k.get('probe_cpus', '-')}; {meta.get('cpu', '-')}, {fmt_int(meta.get('cores'))} "
        f"cores; {fmt_int(meta.get('wall_s'))} s, load average {_float(load[0]):.2f} before; other processes "
        f"{fmt_pct(cont.get('other_cpu_share'), sign=False)} of the CPU, steal "
        f"{fmt_pct(cont.get('steal_share'), sign=False)} over the run (per cycle at most "
        f"{fmt_pct(num(cycles['other_cpu_share']).max(), sign=False)} and "
        f"{fmt_pct(steal.max(), sign=False)}; steal {fmt_pct(steal_slow, sign=False, digits=2)} on "
        f"average over the slowest third of the cycles, {fmt_pct(steal_fast, sign=False, digits=2)} "
        f"over the fastest); measured {str(meta.get('started', '-'))[:10]}."
    )
    return md_table(header, rows) + "\n\n" + note


def render_validation_matrix_engines(medians: pd.DataFrame) -> str:
    """Every engine's matrix side by side: per engine and machine, the median (and largest)
    absolute errors over its judged runs and the targets it met
    (:func:`llmqueue.studies.validation.matrix.markdown_engines`)."""
    from llmqueue.studies.validation.matrix import markdown_engines

    return markdown_engines(medians).rstrip("\n")


def render_validation_matrix_groups(metas: Mapping[str, Mapping[str, Any]]) -> str:
    """The committed matrix groups: engine shape, calibration law, capacity, run time, load."""
    rows = []
    for path, meta in metas.items():
        cal = (meta.get("calibration") or {}).get("batches", [])
        cap = (meta.get("capacity") or {}).get("capacity", {}).get("capacity_per_s")
        judged = [k for k, v in (meta.get("runs") or {}).items() if v.get("kind") == "judged"]
        la, lb = meta.get("load_after") or [], meta.get("load_before") or []
        model = meta.get("model") or {}
        rows.append(
            [
                md_cell(meta.get("group", Path(path).parent.name)),
                md_cell(f"{model.get('name', '')} ({fmt_int(model.get('parameters'))} parameters)"),
                fmt_int(len(cal)),
                fmt(cap) if cap is not None else "-",
                fmt_int(len(judged)),
                fmt(meta.get("wall_s"), 4),
                f"{fmt(lb[0], 2) if lb else '-'} / {fmt(la[0], 2) if la else '-'}",
                md_cell(meta.get("finished", "")),
            ]
        )
    header = ["group", "model", "calibration batches", "capacity (req/s)", "judged runs",
              "run time (s)", "1-min load before / after", "finished"]  # fmt: skip
    return md_table(header, rows)


def _source_model(path: str) -> tuple[str, str]:
    parts = Path(path).parts
    return (parts[-3], parts[-2]) if len(parts) >= 3 else (path, "")


def _line(batch: Mapping[str, Any], slope: str, intercept: str, fit: str) -> str:
    """One line of Eq. (18)'s batch law in ms, ``slope·b + intercept (R^2 r)``; ``-`` if absent."""
    if slope not in batch:
        return "-"
    r2 = batch.get(fit, {}).get("r2")
    tail = f" (R^2 {fmt(r2, 2)})" if r2 is not None else ""
    return f"{fmt(1e3 * _float(batch[slope]))}·b + {fmt(1e3 * _float(batch[intercept]))}{tail}"


def render_profiling_fits(fits: Mapping[str, Mapping[str, Any]]) -> str:
    """Every source's fits (``results/profiling/<source>/<model>/fit.json``): the single-request
    law S = a N + b0, Eq. (18)'s lines t1(b) = k1 b + k2 and t2(b) = k3 b + k4 with their R^2
    (where fitted), and for a fewer-layer CPU sweep its per-token time extrapolated to full depth."""
    header = [
        "source",
        "model",
        "verdict",
        "a (ms/token)",
        "b0 (s)",
        "R^2",
        "from",
        "t1(b) = k1·b + k2 (ms), R^2",
        "t2(b) = k3·b + k4 (ms), R^2",
        "full depth (s/token)",
    ]
    rows = []
    for path in sorted(fits):
        f = fits[path]
        source, model = _source_model(path)
        lin = f.get("linear", {})
        batch = f.get("batch", {})
        full = f.get("full_depth", {})
        rows.append(
            [
                md_cell(source),
                md_cell(model),
                md_cell(f.get("verdict", "")),
                fmt(1e3 * _float(lin.get("slope"))),
                fmt(lin.get("intercept")),
                fmt(lin.get("r2")),
                md_cell(lin.get("method", "Table I rows")),
                _line(batch, "k1", "k2", "t1_fit"),
                _line(batch, "k3", "k4", "t2_fit"),
                fmt(full.get("linear", {}).get("slope")) if full.get("valid") else "-",
            ]
        )
    return md_table(header, rows)


def render_profiling_step_laws(step_laws: pd.DataFrame) -> str:
    """The serving step laws step = c0 + c_tok (decodes + prefill tokens) + c_ctx context."""
    rows = [
        [
            f"`{r['name']}`",
            md_cell(r["verdict"]),
            fmt(1e3 * _float(r["c0_s"])),
            fmt(1e6 * _float(r["c_tok_s"])),
            fmt(1e9 * _float(r["c_ctx_s"])),
            fmt(r["r2"], 4),
            fmt_pct(r["max_abs_rel_residual"], 0, False),
            fmt_pct(r["median_abs_rel_residual"], 0, False),
        ]
        for _, r in step_laws.iterrows()
    ]
    header = [
        "step profile",
        "verdict",
        "c0 (ms)",
        "c_tok (us/token)",
        "c_ctx (ns/token)",
        "R^2",
        "worst point",
        "median point",
    ]
    return md_table(header, rows)


def render_profiling_decode(points: pd.DataFrame, quantity: str = "t2") -> str:
    """The measured decode step t2(b) (ms) of each measured source and model, by batch size."""
    q = points[(points["quantity"] == quantity) & (points["kind"] == "measured")]
    batches = sorted(int(b) for b in num(q["batch"]).unique())
    rows = []
    for (source, model), grp in q.groupby(["source", "model"], sort=False):
        by = {int(_float(b)): _float(v) for b, v in zip(grp["batch"], grp["value"], strict=True)}
        rows.append(
            [md_cell(source), md_cell(model)]
            + [fmt(1e3 * by[b]) if b in by else "" for b in batches]
        )
    return md_table(["source", "model", *[f"b = {b}" for b in batches]], rows)


def render_profiling_composition(check: pd.DataFrame) -> str:
    """The composition check T = t1 + (n - 1) t2 against full-length runs: median and worst
    relative error per source, model and kind of run."""
    rows = []
    for (source, model, kind), grp in check.groupby(["source", "model", "kind"], sort=False):
        err = num(grp["rel_error"])
        rows.append(
            [
                md_cell(source),
                md_cell(model),
                md_cell(kind),
                str(len(grp)),
                fmt_pct(err.median()),
                fmt_pct(err.abs().max(), sign=False),
            ]
        )
    header = ["source", "model", "full runs", "runs", "median error", "worst |error|"]
    return md_table(header, rows)


def render_profiling_runs(metas: Mapping[str, Mapping[str, Any]]) -> str:
    """The committed measurement runs (``data/profiling/<id>/meta.json``): device, software,
    and each run's model, parts, start, duration and load average before and after."""
    rows = []
    for path in sorted(metas):
        meta = metas[path]
        env = meta.get("environment", {})
        device = env.get("gpu") or f"{env.get('cpu', '')} ({env.get('cpu_count', '')} cores)"
        software = f"torch {env.get('torch', '')}, transformers {env.get('transformers', '')}"
        for run in meta.get("runs", []):
            before, after = run.get("load_before", []), run.get("load_after", [])
            rows.append(
                [
                    md_cell(meta.get("hardware_id", Path(path).parent.name)),
                    md_cell(device),
                    md_cell(software),
                    md_cell(run.get("model", "")),
                    md_cell(", ".join(run.get("parts", []))),
                    md_cell(str(run.get("started", ""))[:16].replace("T", " ")),
                    fmt(run.get("wall_s"), 3),
                    f"{fmt(before[0], 2) if before else '-'} / {fmt(after[0], 2) if after else '-'}",
                ]
            )
    header = [
        "folder",
        "device",
        "software",
        "model",
        "parts",
        "started (UTC)",
        "wall time (s)",
        "1-min load before / after",
    ]
    return md_table(header, rows)


# ---- llmqueue plan ------------------------------------------------------------------------------
PLAN_SLO_COLUMN = re.compile(r"(?P<metric>wait|ttft|tpot|jct)_(?P<stat>mean|p50|p90|p95|p99)_s")


def _plan_slo_columns(columns: Iterable[str]) -> list[str]:
    """The SLO value columns of a plan's table (``<metric>_<stat>_s``, ``attainment``), in order."""
    return [c for c in columns if PLAN_SLO_COLUMN.fullmatch(str(c)) or c == "attainment"]


def _plan_slo_label(column: str) -> str:
    m = PLAN_SLO_COLUMN.fullmatch(column)
    return f"{m['stat']} {m['metric'].upper()} (s)" if m else column


def _plan_value(column: str, value: object) -> str:
    return fmt_pct(value, 1, sign=False) if column == "attainment" else fmt(value)


PlanRow = Mapping[str, Any] | pd.Series  # a row of summary.json (parsed) or of plan.csv (text)


def _plan_carries(row: PlanRow) -> bool:
    """A configuration that meets the SLOs at some rate (as llmqueue.plan.summary counts them)."""
    return (
        str(row.get("goodput_bound")) != "<"
        and _float(row.get("goodput_rate_per_s")) > 0
        and _true(row.get("met"))
    )


def _plan_goodput(row: PlanRow) -> str:
    bound = str(row.get("goodput_bound", "="))
    value = fmt(row.get("goodput_rate_per_s"))
    return md_cell(value if bound in ("=", "", "None") else f"{bound} {value}")


def _plan_batched_tokens(value: object) -> str:
    """The token budget per iteration (chunked prefill); none: no chunking."""
    v = _float(value)
    return fmt_int(v) if math.isfinite(v) else "no chunking"


def _plan_config(row: PlanRow, with_kv: bool) -> str:
    """``12 x least_work, fcfs, max_batch 128, 2,048 batched tokens`` (and the KV budget)."""
    tokens = _plan_batched_tokens(row.get("max_batched_tokens"))
    text = (
        f"{fmt_int(row['replicas'])} x {row['router']}, {row['order']}, "
        f"max_batch {fmt_int(row['max_batch'])}, "
        + (f"{tokens} batched tokens" if tokens != "no chunking" else "no chunked prefill")
    )
    if with_kv:
        text += f", KV {fmt_int(row.get('kv_tokens'))} tokens"
    return md_cell(text)


def render_plan_summary(
    summary: Mapping[str, Any], plan: pd.DataFrame, top: int = 10, headroom: float = 0.8
) -> str:
    """``llmqueue plan``'s answer (``results/plan/summary.json``): the best configuration (highest
    goodput per replica) and the fewest replicas whose goodput reaches the target rate, each with
    its goodput (requests/s), the SLO values there (s) and the SLO that stops a higher rate; then,
    with ``top`` > 0, the `top` configurations of the whole table (``results/plan/plan.csv``) by
    goodput per replica (ties: the lower Pareto latency, then fewer replicas), with their SLO
    values and the p99 of the first SLO's metric at `headroom` x goodput."""
    slo = str(summary.get("slo", ""))
    slo_cols = _plan_slo_columns(plan.columns)
    with_kv = "kv_tokens" in plan.columns and plan["kv_tokens"].nunique() > 1
    target = summary.get("target_rate_per_s")
    head = f"{fmt_int(summary.get('configurations', len(plan)))} configurations; SLOs `{slo}`"
    if target is not None:
        head += f"; target {_float(target):g} requests/s"
    parts = [head + "."]

    answers: list[tuple[str, Mapping[str, Any] | None]] = [
        ("best: highest goodput per replica", summary.get("best"))
    ]
    if target is not None:
        question = f"fewest replicas for {_float(target):g} req/s"
        answers.append((question, summary.get("fewest_replicas")))
    header = [
        "question",
        "configuration",
        "goodput (req/s)",
        "per replica (req/s)",
        *[_plan_slo_label(c) for c in slo_cols],
        "what stops a higher rate",
    ]
    rows: list[list[str]] = []
    for question, row in answers:
        if row is None:
            rows.append([question, "none", "-", "-", *["-" for _ in slo_cols], "-"])
            continue
        rows.append(
            [
                question,
                _plan_config(row, with_kv),
                _plan_goodput(row),
                fmt(row.get("goodput_per_replica_per_s")),
                *[_plan_value(c, row.get(c)) for c in slo_cols],
                md_cell(row.get("why_not_higher") or "-"),
            ]
        )
    parts.append(md_table(header, rows))
    if summary.get("note"):
        parts.append(md_cell(summary["note"]) + ".")

    ok = plan[[_plan_carries(r) for _, r in plan.iterrows()]].copy()
    if top > 0 and not ok.empty:
        ok["_gpr"] = num(ok["goodput_per_replica_per_s"])
        lat = num(ok["pareto_latency_s"])
        ok["_lat"] = lat.where(lat.map(math.isfinite), math.inf)
        ok["_rep"] = num(ok["replicas"])
        ok = ok.sort_values(["_gpr", "_lat", "_rep"], ascending=[False, True, True], kind="stable")
        metric = slo.split(",")[0].split("=")[0].split("_")[0].strip().upper() or "latency"
        header = [
            "rank",
            "replicas",
            "router",
            "order",
            "max_batch",
            "batched tokens",
            *(["KV tokens"] if with_kv else []),
            "goodput (req/s)",
            "per replica (req/s)",
            *[_plan_slo_label(c) for c in slo_cols],
            f"p99 {metric} at {headroom:g} x goodput (s)",
            "Pareto front",
        ]
        rows = []
        for rank, (_, r) in enumerate(ok.head(top).iterrows(), start=1):
            rows.append(
                [
                    str(rank),
                    fmt_int(r["replicas"]),
                    md_cell(r["router"]),
                    md_cell(r["order"]),
                    fmt_int(r["max_batch"]),
                    _plan_batched_tokens(r.get("max_batched_tokens")),
                    *([fmt_int(r["kv_tokens"])] if with_kv else []),
                    _plan_goodput(r),
                    fmt(r["goodput_per_replica_per_s"]),
                    *[_plan_value(c, r[c]) for c in slo_cols],
                    fmt(r["pareto_latency_s"]),
                    "yes" if _true(r.get("pareto")) else "no",
                ]
            )
        shown = min(top, len(ok))
        parts.append(
            f"The {shown} configurations of highest goodput per replica, of {fmt_int(len(ok))} "
            "that meet the SLOs at some rate:"
        )
        parts.append(md_table(header, rows))
    return "\n\n".join(parts)


# ---- dispatch -----------------------------------------------------------------------------------
RENDERERS: dict[str, Callable[..., str]] = {
    "claims_table": render_claims_table,
    "claims_headline": render_claims_headline,
    "claims_by_claim": render_claims_by_claim,
    "study_claims": render_study_claims,
    "measured": render_measured,
    "serving_policies": render_serving_policies,
    "ssjf_predictors": render_ssjf_predictors,
    "ssjf_gains": render_ssjf_gains,
    "ssjf_starvation": render_ssjf_starvation,
    "multibin_synthetic": render_multibin_synthetic,
    "multibin_llm": render_multibin_llm,
    "multibin_learned": render_multibin_learned,
    "multibin_latency": render_multibin_latency,
    "multibin_vs_continuous": render_multibin_vs_continuous,
    "validation_comparison": render_validation_comparison,
    "validation_run": render_validation_run,
    "validation_matrix": render_validation_matrix,
    "validation_matrix_summary": render_validation_matrix_summary,
    "validation_matrix_closed": render_validation_matrix_closed,
    "validation_matrix_laws": render_validation_matrix_laws,
    "validation_matrix_speed": render_validation_matrix_speed,
    "validation_matrix_reductions": render_validation_matrix_reductions,
    "validation_matrix_spread": render_validation_matrix_spread,
    "validation_matrix_noise": render_validation_matrix_noise,
    "validation_matrix_targets": render_validation_matrix_targets,
    "validation_matrix_groups": render_validation_matrix_groups,
    "validation_matrix_engines": render_validation_matrix_engines,
    "validation_machine_speed": render_validation_machine_speed,
    "profiling_fits": render_profiling_fits,
    "profiling_step_laws": render_profiling_step_laws,
    "profiling_decode": render_profiling_decode,
    "profiling_composition": render_profiling_composition,
    "profiling_runs": render_profiling_runs,
    "plan_summary": render_plan_summary,
}


def render(kind: str, **inputs: Any) -> str:
    """Render one block of kind `kind` (a key of :data:`RENDERERS`) from its inputs."""
    try:
        renderer = RENDERERS[kind]
    except KeyError:
        raise InputError(
            f"unknown generated-block kind {kind!r}; known: {sorted(RENDERERS)}"
        ) from None
    return renderer(**inputs)
