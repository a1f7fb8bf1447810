"""llmqueue.studies.ssjf.fig_ssjf_predictor draws on a small table (tests/data/plots/fig_ssjf_predictor/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_ssjf_predictor_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: the gain against Kendall's tau
    check_drawing("fig_ssjf_predictor", tmp_path, axes=1)
