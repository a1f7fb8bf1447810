"""llmqueue.studies.token_limit.fig4a_mg1_EW draws on a small table (tests/data/plots/fig4a_mg1_EW/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig4a_mg1_EW_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: W_q against the limit
    check_drawing("fig4a_mg1_EW", tmp_path, axes=1)
