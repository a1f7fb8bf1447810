"""Claim 10 under SSJF's own inputs and protocol (groups a and b of the claim rows).

SSJF's authors publish the inputs of their evaluation (``data/ssjf-predictions/``): the output
lengths vicuna-13b gave to LMSYS-Chat prompts and the class a BERT proxy model predicted for each
prompt. Their simulator draws 50 of those rows per run, 20 runs at each of the arrival rates 1, 3,
5, 7 and 9 per second (Poisson counts per whole-second slot), prices a job of n output tokens at
0.1 s + 0.02 s n, orders SSJF's queue by the predicted class and reads the mean JCT and SSJF's
"throughput" per run; its reported reduction and ratio average over runs *and rates* before the
ratio is taken. Here the same protocol runs in this project's engine twice over the same jobs:

- group ``a``: with the serving semantics of their simulator (:meth:`spec.Official.policy`):
  FCFS waits up to 10 s to fill a batch, the guard's second trigger (10x a job's run time), and
  their "continuous" batching as re-batching at the shortest member's end (``rebatch``);
- group ``b``: with this engine's serving: no FCFS timeout, the guard's age trigger only, and
  iteration-level continuous batching priced by the setting's step law.

:func:`official_predictor_table` scores the published classes as the study scores every
predictor (class accuracy, Kendall's tau). Units: s, requests/s, tokens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pandas as pd

from llmqueue.errors import InputError
from llmqueue.predictor.scoring import score_predictions
from llmqueue.seeds import seed_sequence
from llmqueue.studies.ssjf.spec import (
    MODES,
    OFFICIAL_GROUPS,
    POLICIES,
    PROTOCOL_POLICIES,
    Official,
    PredictionFile,
    Setting,
)
from llmqueue.studies.ssjf.tables import protocol_run, slotted_arrivals
from llmqueue.traces import PREDICTED_CLASS, TraceRows, read_trace

__all__ = [
    "OfficialRows",
    "load_predictions",
    "official_predictor_table",
    "official_sweep_table",
    "official_table",
]


class OfficialRows:
    """One published prediction file: true output lengths (tokens) and predicted classes."""

    def __init__(self, file: PredictionFile, rows: TraceRows) -> None:
        self.file = file
        self.output_tokens = rows.output_tokens
        self.classes = rows.frame[PREDICTED_CLASS].to_numpy(dtype=np.int64)
        top = int(self.classes.max())
        if top > len(file.edges):
            raise InputError(
                f"ssjf.official.predictions ({file.name}): {file.path} has classes up to {top}; "
                f"its {len(file.edges)} edges make {len(file.edges) + 1} classes"
            )

    @property
    def n(self) -> int:
        return int(self.output_tokens.size)

    def class_tokens(self) -> np.ndarray:
        """Each row's predicted class as the lower edge of its length range (tokens; 0 for the
        shortest class): a length in that class, for scoring against the true lengths."""
        lower = np.concatenate([[0.0], np.asarray(self.file.edges, dtype=float)])
        return lower[self.classes]


def load_predictions(file: PredictionFile, base: str = "") -> OfficialRows:
    """A published prediction file through the trace readers (format ``ssjf-predictions``)."""
    path = f"{base.rstrip('/')}/{file.path}" if base else file.path
    rows = read_trace(
        path, format="ssjf-predictions", where=f"ssjf.official.predictions.{file.name}"
    )
    return OfficialRows(file, rows)


def official_predictor_table(files: Mapping[str, OfficialRows]) -> pd.DataFrame:
    """Every published prediction file scored as the study scores a predictor: accuracy of the
    predicted class against the true length's class (the file's own edges), Kendall's tau-b
    between class and true length; the mean absolute error is not defined for classes."""
    out = []
    for name, rows in files.items():
        score = score_predictions(rows.output_tokens, rows.class_tokens(), rows.file.edges)
        out.append(
            {
                "predictor": name,
                "file": rows.file.path,
                "classes": len(rows.file.edges) + 1,
                "edges": "/".join(f"{e:g}" for e in rows.file.edges),
                "n": score.n,
                "accuracy": score.accuracy,
                "kendall_tau": score.kendall_tau,
                "output_mean_tokens": float(np.mean(rows.output_tokens)),
                "output_max_tokens": float(np.max(rows.output_tokens)),
            }
        )
    return pd.DataFrame(out)


def _draws(
    rows: OfficialRows, jobs: int, runs: int, rates_per_s: Sequence[float], seed: int
) -> Iterator[tuple[int, float, int, np.random.SeedSequence, np.ndarray, np.ndarray]]:
    """(rate index, rate, run, seed sequence, rows drawn, arrival times) of every run of SSJF's
    protocol: `jobs` rows without replacement in whole-second slots at each rate; the same draws
    for every table that runs the protocol on these rows."""
    for k, rate in enumerate(rates_per_s):
        for r in range(runs):
            ss = seed_sequence(seed, "ssjf", "official", f"{float(rate):g}", r)
            rng = np.random.default_rng(ss)
            idx = rng.choice(rows.n, size=jobs, replace=False)
            arr = slotted_arrivals(rng, jobs, float(rate))
            if arr[-1] <= arr[0]:
                arr[-1] = arr[0] + 1.0  # a replay needs two distinct times
            yield k, float(rate), r, ss, idx, arr


def _runs(
    rows: OfficialRows,
    official: Official,
    setting: Setting,
    cells: Sequence[tuple[str, str]],
    draw: tuple[int, float, int, np.random.SeedSequence, np.ndarray, np.ndarray],
    jobs: int,
    percentile: float,
    guard_s: float,
) -> list[dict]:
    """One run of every policy in each (group, mode) of `cells` on one draw of :func:`_draws`."""
    k, rate, r, ss, idx, arr = draw
    out_tok = rows.output_tokens[idx]
    classes = rows.classes[idx].astype(float)
    out = []
    for group, mode in cells:
        for label in PROTOCOL_POLICIES:
            spec = POLICIES[label]
            got = protocol_run(
                arr,
                np.zeros(jobs),
                out_tok,
                official.policy(group, mode, label, guard_s),
                official.latency(group, mode, setting),
                ss,
                percentile,
                row_pred=classes if spec.learned else None,
            )
            out.append(
                {
                    "group": group,
                    "setting": setting.name,
                    "mode": mode,
                    "rate_index": k,
                    "nominal_rate_per_s": rate,
                    "run": r,
                    "policy": label,
                    "serving": official.policy(group, mode, label, guard_s).label(),
                    "predictor": rows.file.name if spec.learned else "oracle",
                    "jobs": jobs,
                    **got,
                }
            )
    return out


def official_table(
    rows: OfficialRows,
    official: Official,
    setting: Setting,
    jobs: int,
    runs: int,
    rates_per_s: Sequence[float],
    percentile: float,
    guard_s: float,
    seed: int,
) -> pd.DataFrame:
    """SSJF's protocol on SSJF's inputs, for groups ``a`` and ``b`` (module docstring): per rate
    (jobs per s) and run, `jobs` rows drawn without replacement arriving in whole-second slots;
    the same jobs for both groups, every batching mode and every policy (FCFS, SJF and SSJF with
    the starvation guard `guard_s`; SSJF orders by the predicted class). Per run: mean JCT,
    SSJF's throughput and the last finish."""
    cells = [(g, m) for g in OFFICIAL_GROUPS for m in MODES]
    out = []
    for draw in _draws(rows, jobs, runs, rates_per_s, seed):
        out += _runs(rows, official, setting, cells, draw, jobs, percentile, guard_s)
    return pd.DataFrame(out)


def official_sweep_table(
    rows: OfficialRows,
    official: Official,
    setting: Setting,
    jobs: int,
    runs: int,
    rates_per_s: Sequence[float],
    percentile: float,
    guard_s: float,
    seed: int,
    batch_sizes: Sequence[int],
    group: str = "a",
    mode: str = "continuous",
) -> pd.DataFrame:
    """The runs of :func:`official_table` for one (group, mode), repeated at each batch size of
    `batch_sizes` (column ``batch_size``): SSJF's run script sweeps the batch size of its
    batching modes, so a published range covers that sweep. The draws are those of
    :func:`official_table` (its batch size's rows are the same runs)."""
    if not batch_sizes or min(int(b) for b in batch_sizes) < 1:
        raise InputError(f"ssjf.official.sweep_batch_sizes must be >= 1, got {list(batch_sizes)}")
    out = []
    for b in batch_sizes:
        at_b = replace(official, batch_size=int(b))
        for draw in _draws(rows, jobs, runs, rates_per_s, seed):
            for row in _runs(rows, at_b, setting, [(group, mode)], draw, jobs, percentile, guard_s):
                out.append({**row, "batch_size": int(b)})
    return pd.DataFrame(out)
