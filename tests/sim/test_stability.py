"""Stability of work-conserving and non-work-conserving continuous batchers (Dai, Li and Peng,
arXiv 2504.07347): a batcher that admits only when nothing runs (whole batches, ``batch_queue``)
sustains a lower rate than the work-conserving one with the same batch cap, and is unstable at
rates the work-conserving one serves in a steady state."""

from __future__ import annotations

from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.sim.capacity import max_rate
from llmqueue.sim.engine import run
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law

STEP = StepLaw(0.02, 0.0005, 0.0)
W = PoissonWorkload(
    parse_law("lognormal:mu=5,sigma=1,cap=2048"), 1.0, prompt=parse_law("uniform:low=100,high=600")
)


def test_whole_batches_are_unstable_below_the_work_conserving_limit() -> None:
    wc, whole = Policy("continuous", bmax=32), Policy("continuous", bmax=32, batch_queue=True)
    cap_wc = max_rate(W, wc, STEP, seed=1).rate_per_s
    cap_whole = max_rate(W, whole, STEP, seed=1).rate_per_s
    assert cap_whole < 0.8 * cap_wc
    rate = 0.5 * (cap_whole + 0.9 * cap_wc)  # above the whole batches' limit, below the other's
    kw = {"requests": 100_000, "warmup": 10_000, "seed": 2}
    assert not run(W.at_rate(rate), wc, STEP, **kw).unstable  # type: ignore[arg-type]
    assert run(W.at_rate(rate), whole, STEP, **kw).unstable  # type: ignore[arg-type]
