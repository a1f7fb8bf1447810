"""llmqueue.studies.validation.fig_vllm_machine_speed draws on a small table (tests/data/plots/fig_vllm_machine_speed/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_machine_speed_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: the cycles over time and compute against each kernel
    check_drawing("fig_vllm_machine_speed", tmp_path, axes=2)
