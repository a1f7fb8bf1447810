"""llmqueue.studies.literature.fig_literature_orders draws on a small table (tests/data/plots/fig_literature_orders/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_literature_orders_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: exponential sizes (with the one-bit advice) and Weibull sizes
    check_drawing("fig_literature_orders", tmp_path, axes=2)
