"""llmqueue.studies.batching.fig6b_dy_bmax draws on a small table (tests/data/plots/fig6b_dy_bmax/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig6b_dy_bmax_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: one panel per batch profile
    check_drawing("fig6b_dy_bmax", tmp_path, axes=2)
