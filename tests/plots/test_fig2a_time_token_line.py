"""llmqueue.studies.profiling.fig2a_time_token_line draws on a small table (tests/data/plots/fig2a_time_token_line/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig2a_time_token_line_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: the A100 panel and the one measured CPU panel of the fixture
    check_drawing("fig2a_time_token_line", tmp_path, axes=2)
