"""llmqueue.studies.multibin.fig_multibin_vs_continuous draws on a small table (tests/data/plots/fig_multibin_vs_continuous/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_multibin_vs_continuous_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: (a) capacity and (b) latency
    check_drawing("fig_multibin_vs_continuous", tmp_path, axes=2)
