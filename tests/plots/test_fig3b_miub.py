"""llmqueue.studies.batching.fig3b_miub draws on a small table (tests/data/plots/fig3b_miub/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig3b_miub_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: one panel per batch profile (paper_k8, table1_consistent)
    check_drawing("fig3b_miub", tmp_path, axes=2)
