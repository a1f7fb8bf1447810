"""llmqueue.studies.token_limit.fig4d_tradeoff draws on a small table (tests/data/plots/fig4d_tradeoff/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig4d_tradeoff_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: F1 (patient) and F2 (impatient)
    check_drawing("fig4d_tradeoff", tmp_path, axes=2)
