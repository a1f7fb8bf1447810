"""Every figure module of llmqueue.plots (``fig*.py``) has its drawing test here,
``tests/plots/test_<module>.py``, and its fixture, ``tests/data/plots/<module>/``; no fixture
is left behind by a module that is gone."""

from __future__ import annotations

from figure_case import DATA, ROOT

PLOTS = ROOT / "src" / "llmqueue" / "plots"
TESTS = ROOT / "tests" / "plots"


def test_every_plot_module_has_a_drawing_test_and_a_fixture() -> None:
    modules = sorted(p.stem for p in PLOTS.glob("fig*.py"))
    assert modules, f"no fig*.py module found in {PLOTS}"
    missing = []
    for m in modules:
        test = TESTS / f"test_{m}.py"
        if not test.is_file():
            missing.append(f"{test.relative_to(ROOT)} (a test drawing the figure)")
        elif f'check_drawing("{m}"' not in test.read_text():
            missing.append(f'{test.relative_to(ROOT)}: calls check_drawing("{m}", ...)')
        for need in ("params.json", "inputs"):
            if not (DATA / m / need).exists():
                missing.append(f"{(DATA / m / need).relative_to(ROOT)} (the fixture)")
    assert not missing, "plot modules without a drawing test:\n" + "\n".join(missing)


def test_every_fixture_belongs_to_a_plot_module() -> None:
    modules = {p.stem for p in PLOTS.glob("fig*.py")}
    stale = sorted(d.name for d in DATA.iterdir() if d.is_dir() and d.name not in modules)
    assert not stale, f"fixtures in {DATA.relative_to(ROOT)} of no plot module: {stale}"
