"""llmqueue.studies.validation.fig_vllm_matrix_errors draws on a small table (tests/data/plots/fig_vllm_matrix_errors/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_matrix_errors_draws_on_a_small_table(tmp_path: Path) -> None:
    # 4 axes: errors per metric, speed, variants and reductions
    check_drawing("fig_vllm_matrix_errors", tmp_path, axes=4)
