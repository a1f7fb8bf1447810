"""The literature study's tables: the engine's and the exact mean response time of every
(setting, queue order, rate) a reference row names, and the exact curves of the figure.

Every point is a one-at-a-time server (batching ``none``) with S = N: the token law's mean is
the time unit, a = 1 s per token (:mod:`llmqueue.studies.literature.spec`). The exact value is
:func:`llmqueue.sim.exact.exact_wait` plus E[S] (for a preemptive order that function gives the
response time less E[S]); none where no formula exists.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from llmqueue.latency import LinearLatency
from llmqueue.policy import Policy
from llmqueue.seeds import seed_sequence
from llmqueue.sim.engine import run
from llmqueue.sim.exact import exact_wait
from llmqueue.sim.predictors import parse_predictor
from llmqueue.sim.workload import PoissonWorkload
from llmqueue.studies.literature.spec import LiteratureSpec, Setting, reference_points
from llmqueue.tokens import parse_law

__all__ = ["UNIT_TIME", "exact_response", "literature_table", "literature_curves"]

UNIT_TIME = LinearLatency(1.0, 0.0)  # S = N: one token is one time unit (s)


def _workload(setting: Setting, rate_per_s: float) -> PoissonWorkload:
    pred = parse_predictor(setting.predictor_at(rate_per_s))
    return PoissonWorkload(parse_law(setting.tokens), rate_per_s, predictor=pred)


def exact_response(setting: Setting, order: str, rate_per_s: float) -> tuple[float, str, float]:
    """(mean response time, the formula's name, its standard error) of `order` at `rate_per_s`
    (time units); (nan, "", nan) where no formula exists."""
    return _exact(_workload(setting, rate_per_s), order)


def _exact(w: PoissonWorkload, order: str) -> tuple[float, str, float]:
    found = exact_wait(w, Policy("none", order=order), UNIT_TIME, seed=0)
    if found is None:
        return math.nan, "", math.nan
    return found.wait_s + w.output.mean(), found.method, found.se_s


def literature_table(reference: str, spec: Mapping[str, Any], seed: int) -> pd.DataFrame:
    """One row per (setting, order, rate) of the reference rows (`reference`: the CSV's path;
    `spec`: config section ``literature``): the engine's mean response time and 95% CI
    (batch means) and the exact one. Stream: (seed, "literature", setting, order, rate)."""
    cfg = LiteratureSpec.from_config(spec)
    sim = cfg.simulation
    rows = []
    for name, order, rate in reference_points(
        pd.read_csv(reference, dtype={"id": str}, keep_default_na=False).to_dict("records"),
        cfg.settings,
    ):
        setting = cfg.settings[name]
        w = _workload(setting, rate)
        res = run(
            w,
            Policy("none", order=order),
            UNIT_TIME,
            requests=int(sim.requests or 0),
            warmup=sim.warmup,
            batches=sim.batches,
            seed=seed_sequence(seed, "literature", name, order, rate),
        )
        if res.response is None or res.unstable:
            raise RuntimeError(f"literature: {name} {order} at {rate}: no steady-state response")
        exact, method, se = _exact(w, order)
        rows.append(
            {
                "setting": name,
                "tokens": setting.tokens,
                "predictor": setting.predictor_at(rate),
                "order": order,
                "rate_per_s": rate,
                "sim_requests": int(sim.requests or 0),
                "sim_response_mean_s": res.response.mean,
                "sim_response_ci95_s": res.response.ci95,
                "exact_response_mean_s": exact,
                "exact_response_se_s": se,
                "exact_method": method,
            }
        )
    return pd.DataFrame(rows)


def literature_curves(reference: str, spec: Mapping[str, Any]) -> pd.DataFrame:
    """The exact mean response time of every (setting, order) the reference rows name, at the
    loads ``curves.rates`` (the figure's lines; time units)."""
    cfg = LiteratureSpec.from_config(spec)
    points = reference_points(
        pd.read_csv(reference, dtype={"id": str}, keep_default_na=False).to_dict("records"),
        cfg.settings,
    )
    pairs = list(dict.fromkeys((name, order) for name, order, _ in points))
    rows = []
    for name, order in pairs:
        for rate in cfg.curve_rates:
            exact, method, _ = exact_response(cfg.settings[name], order, rate)
            rows.append(
                {
                    "setting": name,
                    "order": order,
                    "rate_per_s": rate,
                    "exact_response_mean_s": exact,
                    "exact_method": method,
                }
            )
    return pd.DataFrame(rows)
