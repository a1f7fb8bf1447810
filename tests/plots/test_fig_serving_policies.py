"""llmqueue.studies.serving.fig_serving_policies draws on a small table (tests/data/plots/fig_serving_policies/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_serving_policies_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: mean and p99 JCT
    check_drawing("fig_serving_policies", tmp_path, axes=2)
