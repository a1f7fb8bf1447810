"""llmqueue.studies.validation.fig_vllm_validation draws on a small table (tests/data/plots/fig_vllm_validation/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_validation_draws_on_a_small_table(tmp_path: Path) -> None:
    # 8 axes: JCT and TTFT rows: three loads and the per-request scatter
    check_drawing("fig_vllm_validation", tmp_path, axes=8)
