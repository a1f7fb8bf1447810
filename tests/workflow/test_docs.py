"""The documentation: a short README, working links, and tables generated from the results.

Runs on a fresh clone (no results/ directory) without running the pipeline. It checks the
committed pages: every generated block well formed and naming files that exist or that the
workflow writes; docs/results.md holding exactly the reference claims (ids, claim text, paper
value, unit); the README's headline counts and each study page's claim rows agreeing with
docs/results.md; the measured-figure blocks equal to what docs/measured.yaml renders; and no number
with a unit in the prose that is neither an input (config, schema, the paper's reference data)
nor a measurement recorded in docs/measured.yaml. Then llmqueue.docgen itself: rendering a
synthetic claims table, splicing (idempotent, atomic, errors naming the page and block) and the
workflow script end to end.
"""

from __future__ import annotations

import math
import re
import runpy
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from llmqueue import docgen, markdown
from llmqueue.claims import SCOPES, VERDICTS
from llmqueue.errors import InputError
from llmqueue.studies import rule_files

ROOT = Path(__file__).resolve().parents[2]
VENDORED = {"docs/equations.md", "docs/figures.md", "docs/companions.md"}
DOCS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))
PAGES = ["README.md", *DOCS]
# Pages written for this project (the vendored reference notes quote the paper as it is).
OWN_PAGES = [p for p in PAGES if p not in VENDORED] + ["config/README.md"]
REFERENCE = {
    p.parent.name: pd.read_csv(p, dtype=str, keep_default_na=False)
    for p in sorted((ROOT / "src" / "llmqueue" / "studies").glob("*/reference_claims.csv"))
}


def text(page: str) -> str:
    return (ROOT / page).read_text()


def blocks(page: str) -> dict[str, docgen.Block]:
    return {b.name: b for b in docgen.find_blocks(text(page), page)}


def results_rows() -> list[dict[str, str]]:
    return docgen.parse_claims_table(blocks("docs/results.md")["claims-table"].body)


# ---- the pages ----------------------------------------------------------------------------------
def test_readme_is_short() -> None:
    lines = text("README.md").count("\n")
    assert lines <= 200, f"README.md has {lines} lines; move detail into docs/ (at most 200)"


def _strip_code(md: str) -> str:
    md = re.sub(r"^```.*?^```", "", md, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", md)


LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", [*PAGES, "config/README.md"])
def test_every_relative_link_resolves(page: str) -> None:
    base = (ROOT / page).parent
    broken = []
    for target in LINK.findall(_strip_code(text(page))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor of the page itself
        path = (base / target.split("#", 1)[0]).resolve()
        if not path.exists() or ROOT not in (path, *path.parents):
            broken.append(target)
    assert not broken, f"{page}: links to missing files {broken}"


def _workflow_patterns() -> list[re.Pattern[str]]:
    """Every results/ path the workflow names, as a pattern ({wildcard} and f-string parts
    match any text)."""
    found = []
    for smk in [ROOT / "Snakefile", *(ROOT / f for f in rule_files())]:
        for lit in re.findall(r"""["']((?:results|logs)/[^"'\n]*)["']""", smk.read_text()):
            parts = re.split(r"\{[^{}]*\}", lit)
            found.append(re.compile(".+".join(re.escape(p) for p in parts)))
    return found


@pytest.mark.parametrize("page", PAGES)
def test_generated_blocks_are_well_formed(page: str) -> None:
    found = docgen.find_blocks(text(page), page)  # raises on unpaired or malformed markers
    patterns = _workflow_patterns()
    for b in found:
        assert b.body.strip(), f"{page}: generated block {b.name!r} is empty (run make reproduce)"
        for src in b.sources:
            if src.startswith("results/"):
                assert any(p.fullmatch(src) for p in patterns), (
                    f"{page}: block {b.name!r} names {src}, which no workflow rule writes"
                )
            else:
                assert (ROOT / src).is_file(), f"{page}: block {b.name!r} names missing {src}"


def test_the_pages_hold_their_generated_tables() -> None:
    assert {"claims-headline", "measured-commands"} <= set(blocks("README.md"))
    assert {"claims-scopes", "claims-by-claim", "claims-table"} <= set(blocks("docs/results.md"))
    for study in REFERENCE:
        assert f"{study}-claims" in blocks(f"docs/studies/{study}.md"), study
    # every study page exists for the studies the README lists
    for study in ("serving", "validation"):
        assert (ROOT / "docs" / "studies" / f"{study}.md").is_file()


# ---- the claims table against the reference -----------------------------------------------------
def test_results_table_holds_exactly_the_reference_claims() -> None:
    rows = results_rows()
    ref = {str(r["id"]): r for df in REFERENCE.values() for r in df.to_dict("records")}
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a claim id appears twice in docs/results.md"
    assert set(ref) <= set(ids), f"reference claims missing: {sorted(set(ref) - set(ids))}"
    for r in rows:
        base = docgen.claim_base(r["id"])
        assert base in ref, f"row {r['id']} judges no reference claim"
        want = ref[base]
        assert math.isclose(float(r["paper"]), float(want["paper"])), r["id"]
        assert r["verdict"] in VERDICTS, r["id"]
        assert r["scope"] in SCOPES, f"{r['id']}: scope {r['scope']!r} is not one of {SCOPES}"
        if r["id"] == base:  # the reference row itself: its text, unit and scope
            claim = str(want["claim"])
            assert r["claim"] == claim or r["claim"].startswith(claim + " ["), (
                f"{r['id']}: claim text differs from data/reference: {r['claim']!r}"
            )
            assert r["unit"] == want["unit"], r["id"]
            assert r["scope"] == want["scope"], r["id"]


def test_no_claim_row_has_an_empty_scope() -> None:
    """Every reference row and every row of docs/results.md names one of the scopes."""
    for study, df in REFERENCE.items():
        bad = df.loc[~df["scope"].isin(SCOPES), "id"].tolist()
        assert not bad, (
            f"src/llmqueue/studies/{study}/reference_claims.csv: rows {bad} have no scope of "
            f"{SCOPES}"
        )
    bad = [r["id"] for r in results_rows() if r["scope"] not in SCOPES]
    assert not bad, f"docs/results.md: rows {bad} have no scope"
    assert {r["scope"] for r in results_rows()} == set(SCOPES)  # every scope holds rows


def test_results_counts_agree_with_their_rows() -> None:
    body = blocks("docs/results.md")["claims-table"].body
    sections = re.split(r"^### ", body, flags=re.M)
    total = docgen.COUNTS.search(sections[0])
    assert total, "docs/results.md: no count of all rows"
    all_rows = results_rows()
    assert int(total["rows"]) == len(all_rows)
    studies = []
    for section in sections[1:]:
        study = section.split()[0]
        studies.append(study)
        counts = docgen.COUNTS.search(section)
        assert counts, f"docs/results.md: no count line for {study}"
        rows = docgen.parse_claims_table(section)
        assert int(counts["rows"]) == len(rows), study
        tally = docgen.verdict_counts(r["verdict"] for r in rows)
        for verdict, n in tally.items():
            assert int(counts[verdict]) == n, (study, verdict)
        names = docgen.reference_studies(REFERENCE)
        assert {names[docgen.claim_base(r["id"])] for r in rows} == {study}, study
    assert studies == docgen.study_order(REFERENCE)


def _results_frame() -> pd.DataFrame:
    return pd.DataFrame(results_rows(), columns=docgen.CLAIM_COLUMNS)


def test_readme_headline_counts_are_computed_from_the_rows() -> None:
    """The front page's counts by scope, and its sentence on the rows that test the paper's
    stated inputs, are those of the rows of docs/results.md, recounted here."""
    body = blocks("README.md")["claims-headline"].body
    rows = _results_frame()
    shown = {r["scope"]: r for r in docgen.parse_tables(body)[0]}
    assert list(shown) == [*SCOPES, "all"] and len(shown) <= 8
    for scope in SCOPES:
        mine = rows[rows["scope"] == scope]
        assert int(shown[scope]["rows"]) == len(mine), scope
        for verdict in VERDICTS:
            assert int(shown[scope][verdict]) == int((mine["verdict"] == verdict).sum()), (
                scope,
                verdict,
            )
    assert int(shown["all"]["rows"]) == len(rows)
    lead = docgen.HEADLINE.search(body)
    rep = rows[rows["scope"] == "replication"]
    assert lead, "README.md: no sentence on the rows that test the paper's stated inputs"
    assert int(lead["rows"]) == len(rep)
    assert int(lead["reproduced"]) == int((rep["verdict"] == "reproduced").sum())
    for cid in rep.loc[rep["verdict"] == "not_reproduced", "id"]:
        assert cid in body, f"README.md headline does not name the replication miss {cid}"
    # the headline is exactly what the renderer makes of these rows, on both pages
    assert body.strip() == docgen.render_claims_headline(rows, REFERENCE).strip()
    scopes = blocks("docs/results.md")["claims-scopes"].body.strip()
    assert scopes == docgen.render_claims_headline(rows, REFERENCE, results_link="#the-table")


def test_the_headline_check_catches_a_changed_count() -> None:
    rows = _results_frame()
    moved = rows.copy()
    i = moved.index[moved["scope"] == "replication"][0]
    moved.loc[i, "scope"] = "reading"
    assert docgen.render_claims_headline(moved, REFERENCE) != docgen.render_claims_headline(
        rows, REFERENCE
    )
    with pytest.raises(InputError, match="no scope"):
        docgen.render_claims_headline(rows.assign(scope=""), REFERENCE)


def test_per_claim_table_agrees_with_the_results_table() -> None:
    per = docgen.parse_tables(blocks("docs/results.md")["claims-by-claim"].body)[0]
    by_number: dict[str, list[dict[str, str]]] = {}
    for r in results_rows():
        by_number.setdefault(str(docgen.claim_number(r["id"])), []).append(r)
    shown = {row["claim"]: row for row in per}
    assert set(shown) == {*by_number, "all"}
    every = [r for rs in by_number.values() for r in rs]
    for number, rs in [*by_number.items(), ("all", every)]:
        row = shown[number]
        assert int(row["rows"]) == len(rs), number
        for verdict, n in docgen.verdict_counts(r["verdict"] for r in rs).items():
            assert int(row[verdict]) == n, (number, verdict)


@pytest.mark.parametrize("study", sorted(REFERENCE))
def test_study_pages_show_the_rows_of_the_results_table(study: str) -> None:
    page = f"docs/studies/{study}.md"
    shown = docgen.parse_tables(blocks(page)[f"{study}-claims"].body)[0]
    names = docgen.reference_studies(REFERENCE)
    want = [r for r in results_rows() if names[docgen.claim_base(r["id"])] == study]
    assert [r["id"] for r in shown] == [r["id"] for r in want], page
    for got, row in zip(shown, want, strict=True):
        for key in ("paper", "ours", "unit", "verdict", "scope", "note"):
            assert got[key] == row[key], (page, row["id"], key)


# ---- measured figures ---------------------------------------------------------------------------
MEASURED = yaml.safe_load((ROOT / "docs" / "measured.yaml").read_text())


def test_measured_blocks_are_rendered_from_measured_yaml() -> None:
    seen = 0
    for page in PAGES:
        for b in blocks(page).values():
            if b.sources == ("docs/measured.yaml",):
                group = b.name.removeprefix("measured-")
                assert b.body == docgen.render_measured(MEASURED, group), (page, b.name)
                seen += 1
    assert seen >= 5  # README's commands; reproduce.md's commands, rebuild, verify, benchmarks


NUMBER = r"\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?"
UNIT = (
    r"%|x\b|×|ms\b|s\b|min\b|minutes?\b|seconds?\b|hours?\b|us\b|µs\b|ns\b|MiB\b|GiB\b"
    r"|M/s\b|M requests/s|req/s\b|requests/s\b|tokens/s\b|GB/s\b|TB/s\b|GFLOP/s\b"
)
QUANTITY = re.compile(rf"(?<![\w.^/-])({NUMBER})(?:\s*(?:-|–|to|\.\.)\s*({NUMBER}))?\s?(?:{UNIT})")


def _numbers(path: Path) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(NUMBER, path.read_text())}


def _allowed_numbers() -> set[float]:
    """Inputs (the config, its schema, the paper's reference data) and measurements."""
    files = [
        ROOT / "config" / "config.yaml",
        *(ROOT / "workflow" / "schemas").glob("*.yaml"),
        *(ROOT / "src" / "llmqueue").rglob("schema.yaml"),
        *(ROOT / "data" / "reference").glob("*"),
        *(ROOT / "src" / "llmqueue").rglob("reference_claims.csv"),
        ROOT / "docs" / "measured.yaml",
    ]
    found: set[float] = set()
    for f in files:
        found |= _numbers(f)
    return found | {100 * x for x in found if x <= 1}  # fractions quoted as percentages


def prose_quantities(md: str) -> list[str]:
    """Numbers with a unit (a time, a rate, a share, a factor, a size) in `md`."""
    return [m.group(0) for m in QUANTITY.finditer(md)]


@pytest.mark.parametrize("page", OWN_PAGES)
def test_prose_numbers_are_inputs_or_measured(page: str) -> None:
    allowed = _allowed_numbers()
    prose = docgen.strip_blocks(text(page), page)
    bad = []
    for m in QUANTITY.finditer(prose):
        values = [float(g.replace(",", "")) for g in m.groups() if g]
        if not all(any(math.isclose(v, a, rel_tol=1e-9) for a in allowed) for v in values):
            bad.append(m.group(0))
    assert not bad, (
        f"{page}: numbers in the prose that are neither inputs nor recorded in "
        f"docs/measured.yaml (put them in a generated block or docs/measured.yaml): {bad}"
    )


def test_the_prose_check_finds_a_result_number() -> None:
    prose = "ours is 24.74 s, 7.6% off; the guard is 100 s; make test took 977 s"
    found = prose_quantities(prose)
    assert found == ["24.74 s", "7.6%", "100 s", "977 s"]
    allowed = _allowed_numbers()
    assert 24.74 not in allowed and 7.6 not in allowed
    assert 100 in allowed and 977 in allowed  # ssjf.guard_s; docs/measured.yaml


# ---- config/README.md ---------------------------------------------------------------------------
# Its tables are rendered from the schema (tests/core/test_schema.py), and the shipped config
# validates against the schema, which closes every section (tests/workflow/test_workflow_config.py):
# every key of config.yaml is documented.


# ---- llmqueue.docgen ----------------------------------------------------------------------------
def synthetic_claims() -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    reference = {
        "alpha": pd.DataFrame(
            {
                "id": ["1a", "1b"],
                "claim": ["a time | with a pipe", "a share <below> 5*2"],
                "paper": ["2.5", "40"],
                "unit": ["s", "%"],
                "tolerance": ["time", "fraction"],
                "scope": ["replication", "reading"],
            }
        ),
        "beta": pd.DataFrame(
            {
                "id": ["2a"],
                "claim": ["a predicate"],
                "paper": ["1"],
                "unit": ["predicate"],
                "tolerance": ["predicate"],
                "scope": ["extension"],
            }
        ),
    }
    claims = pd.DataFrame(
        {
            "id": ["1a", "1a-other", "1b", "2a"],
            "claim": [
                "a time | with a pipe [profile p]",
                "another reading",
                "a share <below> 5*2",
                "a predicate",
            ],
            "paper": ["2.5", "2.5", "40", "1"],
            "ours": ["2.51", "3", "none", "1"],
            "unit": ["s", "s", "%", "predicate"],
            "tolerance": ["rel=0.05", "rel=0.05", "rel=0.05", "exact"],
            "verdict": ["reproduced", "not_reproduced", "back_solved", "conditional"],
            "scope": ["replication", "other-hardware", "reading", "extension"],
            "note": ["", "a `note` with \\ backslash", "solved", "true"],
        }
    )[docgen.CLAIM_COLUMNS]
    return claims, reference


def page_with(*names: str, sources: str = "results/claims.csv") -> str:
    body = "\n".join(
        f"## {n}\n\n<!-- generated: {n} (from {sources}) -->\nold text\n<!-- end generated: {n} -->\n"
        for n in names
    )
    return f"# A page\n\nprose before\n\n{body}\nprose after\n"


def test_render_and_splice_a_synthetic_claims_table(tmp_path: Path) -> None:
    claims, reference = synthetic_claims()
    fragments = {
        "claims-table": docgen.Fragment(
            ("results/claims.csv", "data/reference/claims_alpha.csv"),
            docgen.render_claims_table(claims, reference),
        ),
        "claims-headline": docgen.Fragment(
            ("results/claims.csv",),
            docgen.render_claims_headline(claims, reference),
        ),
        "claims-by-claim": docgen.Fragment(
            ("results/claims.csv",),
            docgen.render_claims_by_claim(claims, reference, {1: "one", 2: "two"}),
        ),
    }
    page = tmp_path / "page.md"
    page.write_text(page_with("claims-table", "claims-headline", "claims-by-claim"))
    assert docgen.splice_file(page, fragments) is True
    once = page.read_text()
    mtime = page.stat().st_mtime_ns
    assert docgen.splice_file(page, fragments) is False  # idempotent: nothing to rewrite
    assert page.read_text() == once and page.stat().st_mtime_ns == mtime
    assert "old text" not in once and once.startswith("# A page\n\nprose before")
    assert once.endswith("prose after\n")
    assert (
        "<!-- generated: claims-table (from results/claims.csv, data/reference/claims_alpha.csv) -->"
        in once
    )

    rows = docgen.parse_claims_table(once)
    assert [r["id"] for r in rows] == list(claims["id"])
    for got, (_, want) in zip(rows, claims.iterrows(), strict=True):
        assert got == {c: " ".join(str(want[c]).split()) for c in docgen.CLAIM_COLUMNS}
    found = docgen.find_blocks(once, "page")
    per = docgen.parse_tables(found[2].body)[0]
    assert [
        (r["claim"], r["rows"], r["reproduced"], r["conditional"], r["back_solved"], r["scopes"])
        for r in per
    ] == [
        ("1", "3", "1", "0", "1", "replication: 1, reading: 1, other-hardware: 1"),
        ("2", "1", "0", "1", "0", "extension: 1"),
        ("all", "4", "1", "1", "1", ""),
    ]
    scopes = {r["scope"]: r for r in docgen.parse_tables(found[1].body)[0]}
    assert [scopes[s]["rows"] for s in SCOPES] == ["1", "1", "1", "1", "0", "0"]
    assert scopes["all"]["rows"] == "4" and scopes["replication"]["reproduced"] == "1"
    lead = docgen.HEADLINE.search(found[1].body)
    assert lead and (lead["rows"], lead["reproduced"]) == ("1", "1")
    assert docgen.COUNTS.search(once)["rows"] == "4"


def test_a_row_of_no_reference_claim_is_refused() -> None:
    claims, reference = synthetic_claims()
    claims.loc[len(claims)] = ["9z", "x", "1", "1", "s", "exact", "reproduced", "replication", ""]
    with pytest.raises(InputError, match="9z"):
        docgen.render_claims_table(claims, reference)


def test_missing_end_marker_names_the_file_and_block(tmp_path: Path) -> None:
    page = tmp_path / "broken.md"
    page.write_text("# x\n<!-- generated: the-block (from results/claims.csv) -->\nbody\n")
    frag = {"the-block": docgen.Fragment(("results/claims.csv",), "new")}
    with pytest.raises(InputError, match=r"broken\.md.*the-block"):
        docgen.splice_file(page, frag)
    assert page.read_text().endswith("body\n")  # left as it was


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("<!-- end generated: a -->\n", "without its begin"),
        ("<!-- generated: a (from x) -->\n<!-- end generated: b -->\n", "closes block 'a'"),
        (
            "<!-- generated: a (from x) -->\n<!-- generated: b (from x) -->\n",
            "inside block 'a'",
        ),
        (page_with("a") + page_with("a"), "appears twice"),
        ("<!-- generated: a -->\n", "malformed"),
        ("<!-- generated: a (from ) -->\n<!-- end generated: a -->\n", "malformed|empty"),
    ],
)
def test_malformed_blocks_are_input_errors(page: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        docgen.find_blocks(page, "page.md")


def test_a_block_nobody_renders_is_an_error_unless_kept() -> None:
    page = page_with("a", "b")
    frag = {"a": docgen.Fragment(("results/claims.csv",), "new a")}
    with pytest.raises(InputError, match=r"page\.md.*'b'"):
        docgen.splice_text(page, frag, "page.md")
    out = docgen.splice_text(page, frag, "page.md", keep={"b"})
    assert "new a" in out and out.count("old text") == 1


def test_a_headed_block_the_page_lacks_is_appended_then_filled() -> None:
    """A new study's config section: its block is appended after its heading, once."""
    page = page_with("a")
    frag = {
        "a": docgen.Fragment(("results/claims.csv",), "new a"),
        "b": docgen.Fragment(("config/config.yaml",), "new b"),
    }
    headed = {"b": "## b\n", "c": "## c (no fragment: not appended)"}
    out = docgen.splice_text(page, frag, "page.md", headed=headed)
    assert "new a" in out and out.index("## b") < out.index("new b")
    assert "## c" not in out
    assert docgen.splice_text(out, frag, "page.md", headed=headed) == out  # idempotent


CELL = st.text(
    alphabet=st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\n\r"),
    max_size=40,
)


@given(st.lists(CELL, min_size=1, max_size=5))
@settings(max_examples=200, deadline=None)
def test_table_cells_round_trip(cells: list[str]) -> None:
    header = [f"c{i}" for i in range(len(cells))]
    table = markdown.md_table(header, [[markdown.md_cell(c) for c in cells]])
    (parsed,) = docgen.parse_tables(table)
    assert list(parsed[0].values()) == [" ".join(c.split()) for c in cells]


@given(st.lists(st.text(alphabet="ab |*<>\\`-\n", max_size=30), min_size=1, max_size=3))
@settings(max_examples=100, deadline=None)
def test_splicing_is_idempotent(bodies: list[str]) -> None:
    names = [f"b{i}" for i in range(len(bodies))]
    frag = {
        n: docgen.Fragment(
            ("results/x.csv",), "\n".join(line for line in b.split("\n") if "<!--" not in line)
        )
        for n, b in zip(names, bodies, strict=True)
    }
    once = docgen.splice_text(page_with(*names), frag, "page.md")
    assert docgen.splice_text(once, frag, "page.md") == once
    assert [b.name for b in docgen.find_blocks(once, "page.md")] == names


def test_number_formats() -> None:
    assert markdown.fmt(24.7425) == "24.7"
    assert markdown.fmt(4479.2) == "4,479"
    assert markdown.fmt(0.000123456) == "0.000123"
    assert markdown.fmt(0) == "0" and markdown.fmt("") == "-" and markdown.fmt(float("nan")) == "-"
    assert markdown.fmt_int(121744.0) == "121,744"
    assert markdown.fmt_pct(0.01927) == "+1.9%" and markdown.fmt_pct(-0.135, sign=False) == "-13.5%"


def test_measured_entries_need_machine_date_and_load() -> None:
    entry = {"what": "x", "measured": "1 s", "machine": "m", "date": "d"}
    with pytest.raises(InputError, match="load"):
        docgen.render_measured({"g": [entry]}, "g")
    with pytest.raises(InputError, match="no group"):
        docgen.render_measured({"g": [entry]}, "h")


def test_the_workflow_script_renders_and_splices(tmp_path: Path) -> None:
    claims, reference = synthetic_claims()
    claims.to_csv(tmp_path / "claims.csv", index=False)
    refs = {}
    for study, df in reference.items():
        refs[study] = str(tmp_path / f"claims_{study}.csv")
        df.to_csv(refs[study], index=False)
    (tmp_path / "measured.yaml").write_text(
        yaml.safe_dump(
            {
                "commands": [
                    {"what": "w", "measured": "1 s", "machine": "m", "date": "d", "load": "l"}
                ]
            }
        )
    )
    page = tmp_path / "README.md"
    page.write_text(page_with("claims-table", "measured-commands", "off-study"))
    blocks_param = {
        "claims-table": {
            "kind": "claims_table",
            "inputs": {"claims": str(tmp_path / "claims.csv"), "reference": refs},
            "options": {},
        },
        "measured-commands": {
            "kind": "measured",
            "inputs": {"measured": str(tmp_path / "measured.yaml")},
            "options": {"group": "commands"},
        },
    }
    out = tmp_path / "results" / "docs" / "blocks.json"
    log = tmp_path / "logs" / "blocks.log"
    sm = SimpleNamespace(
        params=SimpleNamespace(blocks=blocks_param, skipped=["off-study"], pages=[str(page)]),
        output=[str(out)],
        log=[str(log)],
    )
    script = ROOT / "workflow" / "scripts" / "docs_blocks.py"
    runpy.run_path(str(script), init_globals={"snakemake": sm}, run_name="__main__")
    done = page.read_text()
    assert len(docgen.parse_claims_table(done)) == len(claims)
    assert "| w | 1 s | m, d, load l |" in done and "old text" in done  # the kept block
    assert f"rewrote {page}" in log.read_text()
    runpy.run_path(str(script), init_globals={"snakemake": sm}, run_name="__main__")
    assert page.read_text() == done and log.read_text() == "no page changed\n"
    assert set(pd.read_json(out, typ="series").index) == set(blocks_param)
