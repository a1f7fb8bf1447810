"""Checks of the ``plan`` section of the config (llmqueue plan's worked example as a workflow).

The section holds the command's flags: they are parsed here by the command's own parsers (the
SLOs, the rate, every dimension of the search space and its size, the predictor spec), and the
step profile must exist, before any job runs. Every error names the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.errors import InputError


def check(config: Mapping[str, Any], base_dir: Path) -> None:
    from llmqueue.schema import section

    sec = section(config, "plan")
    if not sec:
        return
    from llmqueue.limits import MAX_BATCH, MAX_SERVERS, MAX_TOKENS
    from llmqueue.plan.search import parse_rate
    from llmqueue.plan.slo import parse_slo
    from llmqueue.plan.space import SearchSpace, parse_fractions, parse_ints, parse_names
    from llmqueue.policy import DEFAULT_ORDER, ORDERS, ROUTERS, predicting_names, predictions_needed

    def key(name: str, parse: Any, *a: Any, **kw: Any) -> Any:
        try:
            return parse(*a, **kw)
        except InputError as err:
            raise InputError(f"plan.{name}: {err}") from None

    steps = config.get("step_profiles") or {}
    if sec["step_profile"] not in steps:
        raise InputError(
            f"plan.step_profile: unknown step profile {sec['step_profile']!r}; "
            f"defined: {sorted(steps)}"
        )
    key("slo", parse_slo, sec["slo"])
    key("rate", parse_rate, str(sec["rate"]))
    sp = sec.get("space") or {}
    routers = key("space.router", parse_names, sp.get("router", "central"), "--router", ROUTERS)
    orders = key("space.order", parse_names, sp.get("order", DEFAULT_ORDER), "--order", ORDERS)
    if predictions_needed(orders=orders, routers=routers) and not sec.get("predictor"):
        raise InputError(f"plan.predictor: {predicting_names(formers=False)} need a predictor spec")
    if sec.get("predictor"):
        from llmqueue.sim.predictors import parse_predictor

        key("predictor", parse_predictor, sec["predictor"])
    replicas = key("space.replicas", parse_ints, str(sp.get("replicas", "1")), "--replicas",
                   lo=1, hi=MAX_SERVERS, geometric=False)  # fmt: skip
    batch = key("space.max_batch", parse_ints, str(sp.get("max_batch", "256")), "--max-batch",
                lo=1, hi=MAX_BATCH, geometric=True)  # fmt: skip
    mbt = key("space.max_batched_tokens", parse_ints, str(sp.get("max_batched_tokens", "2048")),
              "--max-batched-tokens", lo=1, hi=int(MAX_TOKENS), geometric=True,
              allow_none=True)  # fmt: skip
    kv = key("space.kv_fraction", parse_fractions, str(sp.get("kv_fraction", "0.9")),
             "--kv-fraction")  # fmt: skip
    space = key(
        "space", SearchSpace, replicas, routers, orders, batch, mbt,
        tuple((f, 1) for f in kv), int(sp.get("block_size", 16)),
    )  # fmt: skip
    if sec["slices"] > space.size:
        raise InputError(
            f"plan.slices: {sec['slices']} jobs for {space.size} configurations; at most that many"
        )
