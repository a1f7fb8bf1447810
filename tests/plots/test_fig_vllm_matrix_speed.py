"""llmqueue.studies.validation.fig_vllm_matrix_speed draws on a small table (tests/data/plots/fig_vllm_matrix_speed/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_matrix_speed_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: one panel per group of the fixture (fcfs, priority; the grid's third hidden)
    check_drawing("fig_vllm_matrix_speed", tmp_path, axes=2)
