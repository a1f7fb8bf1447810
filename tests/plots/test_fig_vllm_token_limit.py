"""llmqueue.studies.validation.fig_vllm_token_limit draws on a small table (tests/data/plots/fig_vllm_token_limit/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_vllm_token_limit_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: W_q and JCT against the limit
    check_drawing("fig_vllm_token_limit", tmp_path, axes=2)
