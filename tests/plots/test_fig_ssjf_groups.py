"""llmqueue.studies.ssjf.fig_ssjf_groups draws on a small table (tests/data/plots/fig_ssjf_groups/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_ssjf_groups_draws_on_a_small_table(tmp_path: Path) -> None:
    # 7 axes: two metric rows of three batching modes, and the predictors
    check_drawing("fig_ssjf_groups", tmp_path, axes=7)
