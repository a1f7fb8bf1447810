"""The reported KV utilisation (``kv_utilisation``: KV held over busy time, as a share of the
budget M) against its exact value.

A request of l prompt and o output tokens runs o iterations; under on-demand growth iteration
j = 0..o-1 holds l + j tokens (its prefill holds the prompt, each decode takes its next token's KV
as the iteration starts, as admission and the KV threshold count it: M / E[l o + o(o-1)/2], Nie,
Si and Zhou, arXiv 2605.04595), g = l o + o(o - 1)/2 token-iterations in all; reserving the
whole l + o up front, g = (l + o) o. Two exact relations follow:

- pathwise, with a constant iteration time: the KV integral and the batch sum count the same
  iterations, so kv_utilisation x M / mean_batch = g / o for every request alike (l = 10,
  o = 20: 19.5, where counting each decode's KV from the iteration after it would give 18.55);
  only the measured window's two edges differ, a relative OUT(1/n);
- at a load where the server is never idle (about 50 requests in the system, P(empty) ~ e^-50),
  the busy time is the wall time and kv_utilisation = lambda step g / M, within the run's
  arrival-count noise (about 1 / sqrt(n))."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llmqueue.latency import StepLaw
from llmqueue.policy import Policy
from llmqueue.sim.engine import run
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.tokens import parse_law

PROMPT, OUT = 10, 20
STEP = 0.004
KV = 1_000_000  # never full: no preemption
RATE = 50.0 / (STEP * OUT)  # about 50 requests in the system
REQUESTS = 200_000


def _run(admission: str) -> tuple[float, float]:
    w = PoissonWorkload(
        parse_law(f"deterministic:value={OUT}"),
        RATE,
        prompt=parse_law(f"deterministic:value={PROMPT}"),
    )
    policy = Policy("continuous", kv_tokens=KV, admission=admission)
    res = run(w, policy, StepLaw(STEP, 0.0, 0.0), requests=REQUESTS, seed=41)
    assert not res.unstable and res.preemptions == 0
    return res.kv_utilisation, res.mean_batch


@pytest.mark.parametrize(
    ("admission", "g"),
    [("on_demand", PROMPT * OUT + OUT * (OUT - 1) / 2), ("reserve", (PROMPT + OUT) * OUT)],
)
def test_kv_utilisation_is_exact(admission: str, g: float) -> None:
    util, batch = _run(admission)
    assert util * KV / batch == pytest.approx(g / OUT, rel=1e-3)
    # the server never idles: busy time = wall time; arrivals' count noise 1/sqrt(n) ~ 0.2%
    assert util == pytest.approx(RATE * STEP * g / KV, rel=4.0 / math.sqrt(REQUESTS))


def test_dongs_accounting_holds_one_more_token_per_sequence() -> None:
    """Dong and Cao's count (arXiv 2604.11001): making token j holds l + j, so g = l o +
    o(o + 1)/2 token-iterations, o more than vLLM's; pathwise as above."""
    w = PoissonWorkload(
        parse_law(f"deterministic:value={OUT}"),
        RATE,
        prompt=parse_law(f"deterministic:value={PROMPT}"),
    )
    policy = Policy("continuous", kv_tokens=KV, admission="on_demand", kv_accounting="dong")
    res = run(w, policy, StepLaw(STEP, 0.0, 0.0), requests=REQUESTS, seed=41)
    g = PROMPT * OUT + OUT * (OUT + 1) / 2
    assert res.kv_utilisation * KV / res.mean_batch == pytest.approx(g / OUT, rel=1e-3)


@pytest.mark.parametrize("accounting", ["vllm", "dong"])
def test_the_kv_bound_on_the_rate(accounting: str) -> None:
    """Dong and Cao's Proposition 3.2 (Nie, Si and Zhou's threshold under vLLM's count): with
    iterations of one time unit, a KV budget M and requests of KV workload w (token-iterations),
    no scheduler sustains a rate above M / E[w] per unit of time. Three classes as their
    synthetic experiment's, (l, o) = (10, 20), (10, 40), (10, 60), one each in turn; M = 16492.
    The saturated engine stays below the bound and, KV being its only limit, reaches most of it
    (the newest request is preempted when the KV runs out, its work recomputed)."""
    from llmqueue.sim.capacity import saturated_rate
    from llmqueue.sim.workload import ReplayWorkload

    classes = [(10, 20), (10, 40), (10, 60)]
    n = 30_000
    prompt = np.array([classes[i % 3][0] for i in range(n)], dtype=float)
    out = np.array([classes[i % 3][1] for i in range(n)], dtype=float)
    extra = 1 if accounting == "dong" else -1
    w = np.mean([p * o + o * (o + extra) / 2 for p, o in classes])
    bound = 16492 / w
    if accounting == "dong":
        # their lambda* = M / sum_k w_k = 16492 / 4060 = 4.0621 per class, for three classes
        assert bound == pytest.approx(3 * 4.0621, rel=1e-4)
    policy = Policy("continuous", kv_tokens=16492, admission="on_demand", kv_accounting=accounting)
    cap = saturated_rate(
        ReplayWorkload(np.arange(n) * 1e-9, prompt, out), policy, StepLaw(1.0, 0.0, 0.0),
        requests=n, seed=1,
    )  # fmt: skip
    # measured between the 25th and 75th percentiles of the finish times, not over the whole
    # run: within half a percent of the long-run rate
    assert 0.9 * bound < cap.rate_per_s <= 1.005 * bound
