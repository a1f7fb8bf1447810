"""Every plot module of the studies (a module of a study package with a top-level ``plot``, found
by :func:`figure_case.plot_modules`) is drawn by the suite: by its drawing test here,
``tests/plots/test_<module>.py``, on its fixture ``tests/data/plots/<module>/``, or, where the
module carries its own small table (``example() -> (inputs, params)``, as a study that keeps
everything in its package does), on that table here; no fixture is left behind by a module that
is gone."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from figure_case import DATA, PNG_MAGIC, ROOT, data_artists, plot_modules
from matplotlib.figure import Figure

TESTS = ROOT / "tests" / "plots"
MODULES = plot_modules()


def has_example(dotted: str) -> bool:
    return callable(getattr(importlib.import_module(dotted), "example", None))


def test_every_plot_module_has_a_drawing_test_and_a_fixture() -> None:
    assert MODULES, "no plot module found in the study packages"
    missing = []
    for m, dotted in sorted(MODULES.items()):
        if has_example(dotted):
            continue
        test = TESTS / f"test_{m}.py"
        if not test.is_file():
            missing.append(f"{test.relative_to(ROOT)} (a test drawing the figure)")
        elif f'check_drawing("{m}"' not in test.read_text():
            missing.append(f'{test.relative_to(ROOT)}: calls check_drawing("{m}", ...)')
        for need in ("params.json", "inputs"):
            if not (DATA / m / need).exists():
                missing.append(f"{(DATA / m / need).relative_to(ROOT)} (the fixture)")
    assert not missing, (
        "plot modules without a drawing test (or an example() table):\n" + "\n".join(missing)
    )


@pytest.mark.parametrize("name", sorted(m for m, d in MODULES.items() if has_example(d)))
def test_a_plot_module_draws_its_own_example(name: str, tmp_path: Path) -> None:
    """The module's example table, drawn as the pipeline draws it: every visible axes holds
    data and the PNG is written."""
    module = importlib.import_module(MODULES[name])
    inputs, params = module.example()
    fig = module.plot(inputs, params)
    assert isinstance(fig, Figure), f"{name}.plot returned {type(fig).__name__}"
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert shown and all(data_artists(ax) for ax in shown), f"{name}: an axes is empty"
    png = tmp_path / f"{name}.png"
    fig.savefig(png, format="png", dpi=60)
    assert png.read_bytes().startswith(PNG_MAGIC)


def test_every_fixture_belongs_to_a_plot_module() -> None:
    stale = sorted(d.name for d in DATA.iterdir() if d.is_dir() and d.name not in MODULES)
    assert not stale, f"fixtures in {DATA.relative_to(ROOT)} of no plot module: {stale}"
