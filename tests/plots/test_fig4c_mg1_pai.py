"""llmqueue.studies.token_limit.fig4c_mg1_pai draws on a small table (tests/data/plots/fig4c_mg1_pai/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig4c_mg1_pai_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: the lost fraction against the limit
    check_drawing("fig4c_mg1_pai", tmp_path, axes=1)
