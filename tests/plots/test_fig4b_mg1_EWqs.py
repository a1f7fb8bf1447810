"""llmqueue.studies.token_limit.fig4b_mg1_EWqs draws on a small table (tests/data/plots/fig4b_mg1_EWqs/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig4b_mg1_EWqs_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: W_qs against the limit
    check_drawing("fig4b_mg1_EWqs", tmp_path, axes=1)
