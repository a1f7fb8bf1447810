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
reading and writing files is left to the workflow script, except the splice itself. This module
holds the splicer, the claims and measured-figure blocks and the dispatch (:data:`RENDERERS`).
Each study's renderers live in its package's ``docs`` module (:data:`STUDY_DOCS`, from the
study registry :data:`llmqueue.studies.STUDIES`), a function ``render_<kind>`` for the blocks of
each kind. Every table goes through
:func:`llmqueue.markdown.md_table` with the formats of :mod:`llmqueue.markdown`
(:func:`~llmqueue.markdown.fmt`: significant digits, times in s and rates in requests/s as the
column headers say; :func:`~llmqueue.markdown.fmt_pct`: relative changes in percent).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from llmqueue import schema
from llmqueue.claims import CLAIM_COLUMNS, MISS_MEANING, SCOPE_MEANING, SCOPES, VERDICTS
from llmqueue.errors import InputError
from llmqueue.io import write_text
from llmqueue.markdown import (
    md_cell,
    md_table,
    md_text,
    parse_tables,
)
from llmqueue.studies import docs_modules

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


def with_missing_blocks(
    text: str, headed: Mapping[str, str], fragments: Mapping[str, Fragment], where: str
) -> str:
    """`text` with an empty block appended at its end, after its prose (`headed`: {block name:
    the Markdown before it}), for each block of `headed` that has a fragment and that the page
    does not hold yet (a new study's config section in ``config/README.md``); splicing fills it."""
    have = {b.name for b in find_blocks(text, where)}
    out = text
    for name, prose in headed.items():
        if name not in have and name in fragments:
            begin = begin_marker(name, fragments[name].sources)
            body = "\n".join([prose.strip("\n"), "", begin, end_marker(name)])
            out = out.rstrip("\n") + "\n\n" + body + "\n"
    return out


def splice_text(
    text: str,
    fragments: Mapping[str, Fragment],
    where: str,
    keep: Collection[str] = (),
    headed: Mapping[str, str] | None = None,
) -> str:
    """`text` with every generated block replaced by its fragment (body and begin marker).

    Every block of the page must have a fragment (a marker nobody renders is an error naming the
    page and the block), except the blocks named in `keep` (those of a study the config leaves
    out), which stay as they are; fragments for blocks the page does not hold are ignored, except
    those of `headed`, which are appended first (:func:`with_missing_blocks`).
    """
    if headed:
        text = with_missing_blocks(text, headed, fragments, where)
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
    path: str | Path,
    fragments: Mapping[str, Fragment],
    keep: Collection[str] = (),
    headed: Mapping[str, str] | None = None,
) -> bool:
    """Splice `fragments` into the page at `path` in place (:func:`splice_text`); True when the
    file changed.

    The page is rewritten atomically (``llmqueue.io.write_text``) and only when its text
    changes, so a run with nothing new leaves the file (and its modification time) alone.
    """
    page = Path(path)
    if not page.is_file():
        raise InputError(f"{page}: page with generated blocks does not exist")
    old = page.read_text()
    new = splice_text(old, fragments, str(path), keep, headed)
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
    """{reference claim id: study} from ``{study: src/llmqueue/studies/<study>/reference_claims.csv table}``."""
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
            f"results/claims.csv: rows {unknown} judge no claim of src/llmqueue/studies/*/reference_claims.csv"
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


# ---- dispatch -----------------------------------------------------------------------------------
# The blocks of this module, then every study's: each function ``render_<kind>`` defined in a
# study's ``docs`` module renders the blocks of that kind; a kind is declared once.
def render_config_table(schemas: Mapping[str, Any], section: str) -> str:
    """config/README.md's table of config section `section`, from the schema files (`schemas`:
    {path: parsed YAML}, the root ``config.schema.yaml`` first; :mod:`llmqueue.schema`)."""
    root = next(iter(schemas))
    return schema.render_config_table(section, root, docs={Path(p): d for p, d in schemas.items()})


_OWN: dict[str, Callable[..., str]] = {
    "config_table": render_config_table,
    "claims_table": render_claims_table,
    "claims_headline": render_claims_headline,
    "claims_by_claim": render_claims_by_claim,
    "study_claims": render_study_claims,
    "measured": render_measured,
}
# every registered study's renderers (llmqueue.studies.STUDIES; the docs rule adds these modules
# to its code inputs, as the import graph does not see an import by name)
STUDY_DOCS = tuple(importlib.import_module(m) for m in docs_modules())


def _renderers() -> dict[str, Callable[..., str]]:
    out = dict(_OWN)
    for module in STUDY_DOCS:
        for name, fn in vars(module).items():
            if not (
                name.startswith("render_") and getattr(fn, "__module__", "") == module.__name__
            ):
                continue
            kind = name.removeprefix("render_")
            if kind in out:
                raise InputError(f"generated-block kind {kind!r} is declared twice")
            out[kind] = fn
    return out


RENDERERS: dict[str, Callable[..., str]] = _renderers()


def render(kind: str, **inputs: Any) -> str:
    """Render one block of kind `kind` (a key of :data:`RENDERERS`) from its inputs."""
    try:
        renderer = RENDERERS[kind]
    except KeyError:
        raise InputError(
            f"unknown generated-block kind {kind!r}; known: {sorted(RENDERERS)}"
        ) from None
    return renderer(**inputs)
