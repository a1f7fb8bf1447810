"""llmqueue.studies.multibin.fig_multibin_latency draws on a small table (tests/data/plots/fig_multibin_latency/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_multibin_latency_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: latency against the bins
    check_drawing("fig_multibin_latency", tmp_path, axes=1)
