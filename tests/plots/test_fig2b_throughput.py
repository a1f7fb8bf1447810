"""llmqueue.studies.profiling.fig2b_throughput draws on a small table (tests/data/plots/fig2b_throughput/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig2b_throughput_draws_on_a_small_table(tmp_path: Path) -> None:
    # 6 axes: throughput, t1 and t2 rows for the roofline and the CPU panels
    check_drawing("fig2b_throughput", tmp_path, axes=6)
