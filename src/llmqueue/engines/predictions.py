"""The learned predictor's predictions for the validation matrix's SSJF runs
(``llmqueue validate predictions``, run in the main environment: it needs scikit-learn).

One file (config ``validation.vllm.matrix.predictor.file``) holds, per row of the trace the ssjf
runs draw from, the predicted output length and whether the row was held out of the predictor's
training; the matrix driver reads it back (:func:`llmqueue.engines.matrix_run.read_predictions`)
and gives vLLM each request's prediction as its priority.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from llmqueue.engines.groups import select_groups
from llmqueue.engines.matrix_run import matrix_spec
from llmqueue.errors import InputError

__all__ = ["write_predictions"]


def write_predictions(
    cfg: Mapping[str, Any], sec: Mapping[str, Any], names: str, *, needed_model: bool = False
) -> None:
    """The learned predictor's prediction for every row of the trace the ssjf runs of groups
    `names` draw from, into ``matrix.predictor.file``; with `needed_model` only print the model
    file those groups need (nothing when none runs ssjf)."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.predictor.model import load_model
    from llmqueue.traces import TraceColumns, read_trace

    spec = matrix_spec(cfg, sec)
    chosen = {g.name for g in select_groups(spec, names)}
    needed = [n for n in spec.needs_predictions if n in chosen]
    if needed_model:
        if needed:
            print(spec.predictor_model)
        return
    if not needed:
        print("no selected group runs ssjf: no predictions needed")
        return
    traces = {spec.group(n).trace.file: spec.group(n).trace for n in needed}
    if len(traces) != 1:
        raise InputError(
            f"ssjf groups draw from several traces {sorted(traces)}: one predictions file holds one"
        )
    ((path, tr),) = traces.items()
    if not Path(spec.predictor_model).is_file():
        raise InputError(
            f"validation.vllm.matrix.predictor.model {spec.predictor_model!r} does not exist "
            "(the SSJF study's learned predictor: make it with snakemake)"
        )
    model = load_model(spec.predictor_model, where="validation.vllm.matrix.predictor.model")
    rows = read_trace(path, TraceColumns(prompt=tr.input_column, output=tr.output_column))
    pred = model.predict_trace(rows)
    held, same = model.held_out(rows)
    if not same:
        raise InputError(f"the predictor {spec.predictor_model!r} was not trained on {path!r}")
    n = len(pred)
    train = n - len(held.output_tokens)
    out = pd.DataFrame({
        "trace_row": range(n), "predicted_tokens": pred, "held_out": [i >= train for i in range(n)],
    })  # fmt: skip
    write_csv(out, spec.predictions)
    print(f"{spec.predictions}: {n} predictions ({n - train} held out) from {spec.predictor_model}")
