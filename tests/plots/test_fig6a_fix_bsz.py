"""llmqueue.studies.batching.fig6a_fix_bsz draws on a small table (tests/data/plots/fig6a_fix_bsz/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig6a_fix_bsz_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: one panel per batch profile
    check_drawing("fig6a_fix_bsz", tmp_path, axes=2)
