"""llmqueue.plan.fig_plan_pareto draws on a small table (tests/data/plots/fig_plan_pareto/)."""

from pathlib import Path

from figure_case import check_drawing


def test_fig_plan_pareto_draws_on_a_small_table(tmp_path: Path) -> None:
    # 1 axes: goodput per replica against latency
    check_drawing("fig_plan_pareto", tmp_path, axes=1)
