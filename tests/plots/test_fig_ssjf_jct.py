"""llmqueue.studies.ssjf.fig_ssjf_jct draws on a small table (tests/data/plots/fig_ssjf_jct/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_ssjf_jct_draws_on_a_small_table(tmp_path: Path) -> None:
    # 6 axes: mean and p99 JCT rows of three batching modes (panel poisson_ssjf_cost)
    check_drawing("fig_ssjf_jct", tmp_path, axes=6)
