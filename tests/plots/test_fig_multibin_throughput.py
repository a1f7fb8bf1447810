"""llmqueue.studies.multibin.fig_multibin_throughput draws on a small table (tests/data/plots/fig_multibin_throughput/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_multibin_throughput_draws_on_a_small_table(tmp_path: Path) -> None:
    # 3 axes: (a) synthetic, (b) simulated LLM, (c) gain over k = 1
    check_drawing("fig_multibin_throughput", tmp_path, axes=3)
