"""llmqueue.studies.batching.fig3a_EL_Hb draws on a small table (tests/data/plots/fig3a_EL_Hb/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig3a_EL_Hb_draws_on_a_small_table(tmp_path: Path) -> None:
    # 2 axes: E[L_b] and its twin axis E[T_b]
    check_drawing("fig3a_EL_Hb", tmp_path, axes=2)
