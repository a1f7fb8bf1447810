"""The study registry (llmqueue.studies.STUDIES) against the files each record names, and every
study's files against the registry: a study is registered once and the rest follows from it."""

from __future__ import annotations

import csv
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

from llmqueue.errors import InputError
from llmqueue.schema import sections
from llmqueue.studies import SHARED_RULES, STUDIES, Study, claim_titles, docs_modules, study

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "workflow" / "rules"
ROOT_SCHEMA = "workflow/schemas/config.schema.yaml"


def snakefile_includes() -> list[str]:
    text = (ROOT / "Snakefile").read_text()
    return re.findall(r'^\s*include:\s*"workflow/rules/(\w+)\.smk"', text, flags=re.M)


@pytest.mark.parametrize("s", STUDIES, ids=lambda s: s.name)
def test_each_registered_study_has_its_files(s: Study) -> None:
    for rules in s.rule_files:
        assert (ROOT / rules).is_file(), rules
    assert importlib.util.find_spec(s.package) is not None, s.package
    # its rule files sit in its package's folder
    folder = Path(importlib.util.find_spec(s.package).origin).parent  # type: ignore[arg-type]
    assert all((ROOT / r).parent == folder for r in s.rule_files), s.rule_files
    assert (ROOT / "docs" / "studies" / f"{s.name}.md").is_file()
    # its config section: its own schema in its folder, which the root one names nowhere
    assert s.schema == ROOT / s.folder / "schema.yaml", f"config section {s.name!r} has no schema"
    assert s.name in sections()
    assert s.name not in yaml.safe_load(ROOT.joinpath(ROOT_SCHEMA).read_text())["properties"]
    # its figures are declared under its name, in its own rule files
    declared = {
        name
        for rules in s.rule_files
        for name in re.findall(r'study="(\w+)"', (ROOT / rules).read_text())
    }
    assert declared <= {s.name}, (s.name, declared)


def test_every_rule_file_is_a_studys_or_shared_and_included_once() -> None:
    # workflow/rules holds the shared ones only; every other rule file is a study's, registered
    assert {p.stem for p in RULES.glob("*.smk")} == set(SHARED_RULES)
    owned = [r for s in STUDIES for r in s.rule_files]
    assert len(owned) == len(set(owned)), "a rule file registered twice"
    found = {str(p.relative_to(ROOT)) for p in (ROOT / "src").rglob("*.smk")}
    assert found == set(owned), found ^ set(owned)
    # the Snakefile names only the shared files; the studies' come from the registry's loop
    assert set(snakefile_includes()) == set(SHARED_RULES)
    assert "for _study in STUDIES" in (ROOT / "Snakefile").read_text()


def test_every_study_package_is_registered() -> None:
    packages = {
        f"llmqueue.studies.{p.name}"
        for p in (ROOT / "src/llmqueue/studies").iterdir()
        if p.is_dir() and (p / "__init__.py").is_file()
    }
    assert packages <= {s.package for s in STUDIES}, packages - {s.package for s in STUDIES}
    assert len({s.name for s in STUDIES}) == len(STUDIES)


def test_claim_numbers_are_the_reference_tables() -> None:
    """A study's claim numbers are those its reference rows use (ids '6a', '10a1' -> 6, 10)."""
    for s in STUDIES:
        path = ROOT / s.reference_claims
        if not path.is_file():
            assert not s.claims, f"{s.name} has claim titles but no reference table"
            continue
        with path.open(newline="") as fh:
            numbers = {int(re.match(r"\d+", row["id"]).group()) for row in csv.DictReader(fh)}
        assert numbers == set(s.claims), (s.name, numbers, set(s.claims))
    titles = claim_titles()
    assert list(titles) == sorted(titles) and len(titles) == sum(len(s.claims) for s in STUDIES)


def test_lookup_by_name() -> None:
    assert study("ssjf").claims and study("plan").package == "llmqueue.plan"
    with pytest.raises(KeyError, match="catalogued"):
        study("nope")


def test_the_docs_generator_reads_every_registered_studys_docs_module() -> None:
    """docgen imports the studies' docs modules by name (so the import graph, and with it the docs
    job's code inputs, sees them); the registry says which exist: the two must agree."""
    from llmqueue import docgen

    have = {f"{s.package}.docs" for s in STUDIES if importlib.util.find_spec(f"{s.package}.docs")}
    have |= {s.docs for s in STUDIES if s.docs is not None}  # a module its record names
    assert {m.__name__ for m in docgen.STUDY_DOCS} == have == set(docs_modules())


def test_every_config_check_module_is_a_registered_studys() -> None:
    """check_config runs ``<package>.checks`` of each registered study: a ``checks`` module in a
    study package the registry does not name would never run, and each has its ``check``."""
    packages = {s.package for s in STUDIES}
    found = {
        "llmqueue." + ".".join(p.parent.relative_to(ROOT / "src/llmqueue").parts)
        for p in (ROOT / "src/llmqueue").glob("**/checks.py")
    }
    assert found <= packages, found - packages
    assert all(callable(importlib.import_module(f"{m}.checks").check) for m in found)


def test_every_catalogued_package_declares_its_record() -> None:
    """Each study's ``STUDY`` literal is what the catalogue read (its claims, its order)."""
    for s in STUDIES:
        record = importlib.import_module(s.package).STUDY
        assert {int(k): v for k, v in record.get("claims", {}).items()} == dict(s.claims)
        assert record.get("follows") == s.follows
    assert STUDIES[0].follows is None
    assert all(b.follows in {a.name for a in STUDIES[:i]} for i, b in enumerate(STUDIES) if i)


def _init(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name / "__init__.py"
    path.parent.mkdir()
    path.write_text(body)
    return path


def test_a_bad_record_is_an_input_error_naming_its_file(tmp_path: Path) -> None:
    from llmqueue import catalog

    for i, body in enumerate(['STUDY = {"rulez": []}\n', "STUDY = dict(rules=[])\n"]):
        init = _init(tmp_path, f"s{i}", body)
        with pytest.raises(InputError, match=f"{init}: STUDY"):
            catalog.read_study(f"s{i}", f"x.s{i}", init)
    assert catalog.read_study("bare", "x.bare", _init(tmp_path, "bare", '"""doc"""\n')).rules == (
        "bare",
    )


def test_the_order_follows_the_records_and_refuses_unknowns_and_cycles() -> None:
    from llmqueue.catalog import ordered

    def s(name: str, follows: str | None = None) -> Study:
        return Study(name, (name,), f"x.{name}", follows=follows)

    order = ordered([s("c", "a"), s("b", "a"), s("a"), s("d", "c")])
    assert [x.name for x in order] == ["a", "b", "c", "d"]
    with pytest.raises(InputError, match="'b' follows 'zz', which is no study"):
        ordered([s("a"), s("b", "zz")])
    with pytest.raises(InputError, match="cycle"):
        ordered([s("a", "b"), s("b", "a")])
