"""The tests mirror the library (tests/README.md): every folder of tests/ is a package of
src/llmqueue/ or one of the named folders, no test file sits at the top of tests/, and test-file
names are unique (pytest's default import mode imports each by its bare name)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
SRC = ROOT / "src" / "llmqueue"
# the folders that are no package of the library: tests of llmqueue/<module>.py, and of the
# workflow, docs, layout and environments, and the drawing tests of every study's plot modules
NAMED = {"core", "workflow", "plots"}
FIXTURES = "data"  # fixtures, not tests


def folders() -> list[Path]:
    """Every folder under tests/ holding code, fixtures and caches left out."""
    return sorted(
        p
        for p in TESTS.rglob("*")
        if p.is_dir()
        and p.relative_to(TESTS).parts[0] != FIXTURES
        and not any(part.startswith((".", "__")) for part in p.relative_to(TESTS).parts)
    )


def modules() -> list[Path]:
    """Every Python file under tests/, fixtures left out."""
    return sorted(p for d in [TESTS, *folders()] for p in d.glob("*.py"))


def test_every_test_folder_is_a_package_of_the_library_or_a_named_one() -> None:
    found = folders()
    assert {p.name for p in found} >= {"sim", "studies", "workflow"}, "the scan found no folder"
    stray = []
    for path in found:
        rel = path.relative_to(TESTS)
        if rel.parts[0] in NAMED:
            if len(rel.parts) > 1:
                stray.append(f"{rel}/ (a folder inside {rel.parts[0]}/)")
        elif not (SRC.joinpath(*rel.parts) / "__init__.py").is_file():
            stray.append(f"{rel}/ (no package src/llmqueue/{rel.as_posix()}/)")
    assert not stray, f"test folders that mirror nothing (tests/README.md): {stray}"


def test_no_test_file_sits_at_the_top_of_tests() -> None:
    top = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert not top, f"move {top} into the folder of the package they test (tests/README.md)"
    assert (TESTS / "conftest.py").is_file() and (TESTS / "worktree.py").is_file()


def test_test_modules_have_unique_names_and_no_package_files() -> None:
    by_name: dict[str, list[str]] = defaultdict(list)
    for path in modules():
        by_name[path.name].append(path.relative_to(ROOT).as_posix())
    assert len(by_name) > 50, "the scan found too few modules"
    twice = {n: paths for n, paths in by_name.items() if len(paths) > 1 and n != "conftest.py"}
    assert not twice, f"module names used twice under tests/ (rename one): {twice}"
    assert "__init__.py" not in by_name, "tests/ folders are no Python packages (tests/README.md)"
