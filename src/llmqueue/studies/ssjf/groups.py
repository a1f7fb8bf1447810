"""The three groups of claim-10 readings side by side (docs/studies/ssjf.md), as SSJF's evaluation
reads them: per policy and batching mode, the mean JCT and SSJF's "throughput" averaged over the
runs at each arrival rate, then over the rates, and only then the reduction against FCFS
(``100 (1 - JCT / JCT_FCFS)``, %) and the ratio (``throughput / throughput_FCFS``)
(``auto_eval_barplot.report_stats`` in their code). Each reading is given over all rates
(``reading = "rates"``) and at each rate alone (``reading = "rate"``), with a 95% confidence
half-width from the jackknife over the runs (leave run i out at every rate; Student t with
runs - 1 degrees of freedom), beside the quality of the predictor SSJF orders by.

- group ``a``: SSJF's inputs, protocol and simulator; ``b``: the same inputs and protocol, this
  engine's serving (:mod:`llmqueue.studies.ssjf.official`);
- group ``c``: the held-out Azure rows and the learned predictor in SSJF's protocol
  (:func:`llmqueue.studies.ssjf.tables.protocol_table`), per cost model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from llmqueue.errors import InputError

__all__ = ["READ_POLICIES", "rate_reading", "groups_table"]

# the policies read against FCFS (SSJF's scheduler always runs its starvation guard)
READ_POLICIES = ("SSJF+guard", "SJF+guard")


def _arrays(runs: pd.DataFrame, policy: str, column: str) -> np.ndarray:
    """[rate, run] values of one policy (rates in increasing order)."""
    d = runs[runs["policy"] == policy].pivot_table(
        index="nominal_rate_per_s", columns="run", values=column, aggfunc="mean"
    )
    if d.empty or d.isna().any().any():
        raise InputError(f"SSJF protocol runs: no complete runs of policy {policy!r}")
    return d.sort_index().to_numpy(dtype=float)


def _jackknife(stat: object, n: int) -> float:
    """95% half-width of the jackknife over n runs of `stat(keep)` (keep: a mask of runs)."""
    if n < 2:
        return math.nan
    from scipy.stats import t

    vals = np.array([stat(np.arange(n) != i) for i in range(n)])  # type: ignore[operator]
    se = math.sqrt((n - 1) / n * float(np.sum((vals - vals.mean()) ** 2)))
    return float(t.ppf(0.975, n - 1) * se)


def rate_reading(runs: pd.DataFrame, policy: str, rates: Sequence[int] | None = None) -> dict:
    """SSJF's reading of `policy` against FCFS over the runs of one (group, setting, mode):
    the mean over runs at each rate, the mean over the rates (``rates``: row indices of the
    sorted rates to keep; None: all), then the JCT reduction (%) and the throughput ratio, with
    their jackknife 95% half-widths over the runs."""
    jf, js = _arrays(runs, "FCFS", "jct_mean_s"), _arrays(runs, policy, "jct_mean_s")
    tf, ts = _arrays(runs, "FCFS", "throughput_per_s"), _arrays(runs, policy, "throughput_per_s")
    keep = slice(None) if rates is None else list(rates)
    jf, js, tf, ts = jf[keep], js[keep], tf[keep], ts[keep]
    n = jf.shape[1]

    def red(m: np.ndarray) -> float:
        return 100.0 * (1.0 - js[:, m].mean(axis=1).mean() / jf[:, m].mean(axis=1).mean())

    def ratio(m: np.ndarray) -> float:
        return float(ts[:, m].mean(axis=1).mean() / tf[:, m].mean(axis=1).mean())

    every = np.ones(n, dtype=bool)
    return {
        "runs": n,
        "fcfs_jct_mean_s": float(jf.mean(axis=1).mean()),
        "jct_mean_s": float(js.mean(axis=1).mean()),
        "jct_reduction_pct": red(every),
        "jct_reduction_ci95": _jackknife(red, n),
        "fcfs_throughput_per_s": float(tf.mean(axis=1).mean()),
        "throughput_per_s": float(ts.mean(axis=1).mean()),
        "throughput_ratio": ratio(every),
        "throughput_ratio_ci95": _jackknife(ratio, n),
    }


def _readings(runs: pd.DataFrame, policy: str) -> list[dict]:
    rates = sorted(float(x) for x in runs["nominal_rate_per_s"].unique())
    out = [{"reading": "rates", "nominal_rate_per_s": math.nan, **rate_reading(runs, policy)}]
    for i, r in enumerate(rates):
        out.append({"reading": "rate", "nominal_rate_per_s": r, **rate_reading(runs, policy, [i])})
    return out


def groups_table(
    official: pd.DataFrame,
    protocol: pd.DataFrame,
    predictors: pd.DataFrame,
    official_predictors: pd.DataFrame,
    ssjf_model: str,
    ssjf_predictor: str,
    settings: Sequence[str],
) -> pd.DataFrame:
    """Every group's readings (module docstring): groups ``a`` and ``b`` from the runs of
    :func:`llmqueue.studies.ssjf.official.official_table`, group ``c`` per setting in
    `settings` from :func:`llmqueue.studies.ssjf.tables.protocol_table`; SSJF's predictor's
    Kendall tau and class accuracy beside each (the oracle's for SJF)."""
    mine = predictors[predictors["predictor"] == f"learned:{ssjf_model}"]
    theirs = official_predictors[official_predictors["predictor"] == ssjf_predictor]
    if mine.empty or theirs.empty:
        raise InputError(
            f"no score for the learned {ssjf_model} or SSJF's {ssjf_predictor} predictions"
        )
    quality = {"c": mine.iloc[0], "a": theirs.iloc[0], "b": theirs.iloc[0]}
    names = {"c": f"learned:{ssjf_model}", "a": ssjf_predictor, "b": ssjf_predictor}
    blocks = [(g, official[official["group"] == g]) for g in ("a", "b")]
    blocks.append(("c", protocol[protocol["setting"].isin(list(settings))]))
    out = []
    for group, df in blocks:
        for (setting, mode), runs in df.groupby(["setting", "mode"], sort=False):
            for policy in READ_POLICIES:
                ssjf = policy.startswith("SSJF")
                q = quality[group]
                for reading in _readings(runs, policy):
                    out.append(
                        {
                            "group": group,
                            "setting": setting,
                            "mode": mode,
                            "policy": policy,
                            **reading,
                            "predictor": names[group] if ssjf else "oracle",
                            "kendall_tau": float(q["kendall_tau"]) if ssjf else 1.0,
                            "accuracy": float(q["accuracy"]) if ssjf else 1.0,
                        }
                    )
    return pd.DataFrame(out)
