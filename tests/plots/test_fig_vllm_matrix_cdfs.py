"""llmqueue.studies.validation.fig_vllm_matrix_cdfs draws on a small table (tests/data/plots/fig_vllm_matrix_cdfs/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_matrix_cdfs_draws_on_a_small_table(tmp_path: Path) -> None:
    # 4 axes: JCT and TTFT rows of the fixture's two groups
    check_drawing("fig_vllm_matrix_cdfs", tmp_path, axes=4)
