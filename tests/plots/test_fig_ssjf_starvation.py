"""llmqueue.studies.ssjf.fig_ssjf_starvation draws on a small table (tests/data/plots/fig_ssjf_starvation/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_ssjf_starvation_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: mean wait against the largest and the p99 wait
    check_drawing("fig_ssjf_starvation", tmp_path, axes=2)
