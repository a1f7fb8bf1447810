"""Claim 1 (Table I) rows from a measured GPU source (paper Sec. II-B, Table I).

The paper timed LLaMA-2-7B-chat on an NVIDIA A100. A committed GPU measurement
(``data/profiling/<gpu-id>/``, full depth) gives, per Table I cell, the composed time
T = t1(s) + (n - 1) t2(s) at batch 1 (seconds), read from ``figures/table1.csv``'s
``<gpu-id>_composed_s`` column. Each becomes a row ``<claim id>-<gpu-id>`` beside the roofline row.

figures.md: "a different GPU is never 'reproduced'": a row measured on anything but an A100 is
``not_reproduced`` whatever its value, with the GPU named; a measured A100 is judged by tolerance.
CPU sources give no claim rows (a CPU never stands in for the A100).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from llmqueue.claims import ClaimRow, Tolerance, judge
from llmqueue.errors import InputError
from llmqueue.profiling.fits import is_gpu_source

__all__ = ["measured_gpu_table1_claims"]


def measured_gpu_table1_claims(
    reference: pd.DataFrame,
    table1_ours: pd.DataFrame,
    hw: str,
    meta: Mapping[str, Any],
    tolerances: Mapping[str, Tolerance],
) -> list[ClaimRow]:
    """Rows ``1a-<hw>`` .. ``1h-<hw>``: the paper's Table I beside T composed from `hw`'s timings.

    `reference`: the claim-1 rows of ``data/reference/claims_profiling.csv`` in Table I order;
    `table1_ours`: ``figures/table1.csv`` (same order), which must hold ``<hw>_composed_s``
    (a full-depth measurement; a CPU or fewer-layer source has no such column); `tolerances`:
    config ``claims.tolerances`` by name, each row judged by its reference row's tolerance.
    """
    if not is_gpu_source(meta):
        raise InputError(
            f"{hw}: meta.json says device {meta.get('environment', {}).get('device')!r}, not CUDA"
        )
    col = f"{hw}_composed_s"
    if col not in table1_ours.columns:
        raise InputError(
            f"{hw}: figures/table1.csv has no column {col!r} (is the measurement full depth?); "
            f"columns: {list(table1_ours.columns)}"
        )
    if len(reference) != len(table1_ours):
        raise InputError(
            f"{hw}: {len(reference)} claim-1 reference rows but {len(table1_ours)} Table I rows"
        )
    env = meta.get("environment", {})
    gpu = str(env.get("gpu", "an unnamed GPU"))
    dtype = next((r.get("plan", {}).get("dtype") for r in meta.get("runs", [])), "?")
    a100 = "A100" in gpu.upper()
    rows = []
    for (_, c), (_, t) in zip(reference.iterrows(), table1_ours.iterrows(), strict=True):
        s, n = int(t["input_tokens"]), int(t["output_tokens"])
        ours = float(t[col])
        paper = float(c["paper"])
        rows.append(
            judge(
                f"{c['id']}-{hw}",
                f"{c['claim']} [measured on {gpu}]",
                paper,
                ours,
                c["unit"],
                tolerances[c["tolerance"]],
                note=(
                    f"ours = measured on {gpu} ({dtype}, random-weight LLaMA-2-7B shapes, full depth, "
                    f"torch {env.get('torch', '?')}, transformers {env.get('transformers', '?')}): "
                    f"T = t1({s}) + {n - 1} x t2({s}) at batch 1 from short decodes; paper / ours = "
                    f"{paper / ours:.2f}"
                ),
                miss_reason="the measured eager latency differs from the paper's beyond tolerance",
                incomparable="" if a100 else f"measured on {gpu}, not the paper's A100",
            )
        )
    return rows
