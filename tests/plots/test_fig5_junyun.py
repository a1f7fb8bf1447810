"""llmqueue.studies.batching.fig5_junyun draws on a small table (tests/data/plots/fig5_junyun/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig5_junyun_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: one model's panel (llama)
    check_drawing("fig5_junyun", tmp_path, axes=1)
