"""``llmqueue predictor``: train and score an output-length predictor on an operator's own trace.

Examples::

    llmqueue predictor train --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \\
        --out conv.model --kind classifier
    llmqueue predictor score --trace data/traces/azure-llm-trace-2023/AzureLLMInferenceTrace_conv.csv \\
        --model conv.model --json
    llmqueue predictor score --trace my_trace.csv --predictor noisy:sigma=1
    llmqueue simulate --trace my_trace.csv --order spjf --predictor learned:conv.model ...

``train`` fits a scikit-learn model (:mod:`llmqueue.predictor`) on the features a server has
when a request arrives: prompt tokens, time of day, and the mean log output length of the
requests finished before it (an output counts as known ``--known-after`` seconds after its
request arrived, or at its finish time with ``--finish-column``). It trains on the first
``--train-fraction`` of the trace (arrival order), chooses the number of boosting iterations on
the last part of those rows, and prints the score on the rest. ``--kind regressor`` predicts the
length, ``--kind classifier`` one of five classes (SSJF's 42 / 141 / 294 / 503 tokens, or the
trace's quantiles with ``--classes quantiles``). The model file is versioned: another format
version or scikit-learn version is refused with a clear error.

``score`` scores a model (on the held-out rows when the trace is the one it was trained on, else
on every row) or a compiled predictor (``--predictor SPEC``) by the same three numbers: accuracy
over SSJF's five classes, Kendall's tau between predicted and true lengths, and the mean absolute
error (tokens). Bad input exits 2 naming the flag.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from llmqueue.cli import add_command
from llmqueue.errors import InputError
from llmqueue.predictor.features import FeatureSpec
from llmqueue.predictor.model import KINDS, load_model, save_model
from llmqueue.predictor.scoring import PredictorScore, score_predictions
from llmqueue.predictor.training import train_length_model
from llmqueue.sim.predictors import parse_predictor
from llmqueue.traces import TraceColumns, read_trace


def _history(text: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--history {text!r}: comma-separated integers >= 1 (requests)") from None
    if not vals or any(v < 1 for v in vals):
        raise InputError(f"--history {text!r}: comma-separated integers >= 1 (requests)")
    return vals


def _rows(args: argparse.Namespace) -> Any:
    columns = TraceColumns(
        args.timestamp_column, args.prompt_column, args.output_column, args.finish_column
    )
    return read_trace(args.trace, columns)


def _score_dict(score: PredictorScore, **extra: Any) -> dict[str, Any]:
    return {**extra, **score.to_dict()}


def _emit(obj: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(obj, indent=2, default=float))
        return
    for key, val in obj.items():
        if isinstance(val, dict):
            print(f"{key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in val.items()))
        else:
            print(f"{key}: {_fmt(val)}")


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _train(args: argparse.Namespace) -> int:
    if not 0.0 < args.train_fraction < 1.0:
        raise InputError(f"--train-fraction must be in (0, 1), got {args.train_fraction}")
    if not 0.0 < args.validation_fraction < 1.0:
        raise InputError(f"--validation-fraction must be in (0, 1), got {args.validation_fraction}")
    if args.max_iter < 1:
        raise InputError(f"--max-iter must be an integer >= 1, got {args.max_iter}")
    if not 0.0 < args.learning_rate <= 1.0:
        raise InputError(f"--learning-rate must be in (0, 1], got {args.learning_rate}")
    if args.n_classes < 2:
        raise InputError(f"--n-classes must be an integer >= 2, got {args.n_classes}")
    if not args.known_after > 0:
        raise InputError(f"--known-after must be a time > 0 s, got {args.known_after}")
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    spec = FeatureSpec(_history(args.history), float(args.known_after))
    rows = _rows(args)
    model = train_length_model(
        rows,
        args.kind,
        train_fraction=args.train_fraction,
        validation_fraction=args.validation_fraction,
        features=spec,
        classes=args.classes,
        n_classes=args.n_classes,
        max_iter=args.max_iter,
        learning_rate=args.learning_rate,
        seed=args.seed,
    )
    save_model(model, args.out)
    test, _ = model.held_out(rows)
    out = {
        "model": args.out,
        "kind": model.kind,
        "features": ", ".join(spec.names),
        "trained_on": {
            "trace": args.trace,
            "train_rows": model.meta["train_rows"],
            "held_out_rows": test.n,
            "iterations": model.meta["iterations"],
        },
        "held_out_score": score_predictions(
            test.output_tokens, model.predict_trace(test)
        ).to_dict(),
    }
    if model.class_edges:
        out["classes"] = {
            "edges_tokens": "/".join(f"{e:g}" for e in model.class_edges),
            "values_tokens": "/".join(f"{v:g}" for v in model.class_values),
        }
    _emit(out, args.json)
    return 0


def _score(args: argparse.Namespace) -> int:
    if (args.model is None) == (args.predictor is None):
        raise InputError("give --model MODEL (a trained model) or --predictor SPEC, not both")
    if args.seed < 0:
        raise InputError(f"--seed must be >= 0, got {args.seed}")
    rows = _rows(args)
    if args.model is not None:
        model = load_model(args.model, where="--model")
        test, same = model.held_out(rows)
        score = score_predictions(test.output_tokens, model.predict_trace(test))
        scored = "held-out rows of the training trace" if same else "every row (a new trace)"
        out = _score_dict(
            score, predictor=f"learned:{args.model}", kind=model.kind, scored_on=scored
        )
    else:
        pred = parse_predictor(args.predictor)
        if pred.needs_rows:
            raise InputError("--predictor learned:PATH: score it with --model PATH")
        import numpy as np

        out_tok = rows.output_tokens
        pred = pred.resolved(lambda q: np.quantile(out_tok, q))
        score = score_predictions(out_tok, pred.predict(out_tok, args.seed))
        out = _score_dict(score, predictor=pred.spec, scored_on="every row")
    _emit(out, args.json)
    return 0


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--trace", required=True, help="CSV trace (one request per row)")
    p.add_argument(
        "--timestamp-column", default="TIMESTAMP", help="arrival time (default TIMESTAMP)"
    )
    p.add_argument("--prompt-column", default="ContextTokens", help="prompt tokens")
    p.add_argument("--output-column", default="GeneratedTokens", help="output tokens")
    p.add_argument(
        "--finish-column",
        default=None,
        help="finish time of each request (same clock as the timestamps); default: none, an "
        "output counts as known --known-after seconds after its arrival",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--json", action="store_true")


def register(subparsers: Any) -> None:
    p = add_command(subparsers, "predictor", __doc__)
    sub = p.add_subparsers(dest="action", required=True, parser_class=type(p))
    t = sub.add_parser("train", help="train a model on a trace and save it")
    _trace_args(t)
    t.add_argument("--out", required=True, help="model file to write")
    t.add_argument("--kind", choices=KINDS, default="regressor")
    t.add_argument(
        "--classes",
        choices=["ssjf", "quantiles"],
        default="ssjf",
        help="classifier classes: SSJF's 42/141/294/503 tokens or trace quantiles",
    )
    t.add_argument("--n-classes", type=int, default=5, help="classes with --classes quantiles")
    t.add_argument("--train-fraction", type=float, default=0.7, help="first part trained on")
    t.add_argument(
        "--validation-fraction",
        type=float,
        default=0.2,
        help="last part of the training rows that chooses the iteration count",
    )
    t.add_argument(
        "--known-after",
        type=float,
        default=60.0,
        help="seconds after its arrival a request's output counts as known (default 60)",
    )
    t.add_argument(
        "--history",
        default="16,64,256",
        help="recent-output features: numbers of most recently known requests averaged",
    )
    t.add_argument("--max-iter", type=int, default=100, help="most boosting iterations")
    t.add_argument("--learning-rate", type=float, default=0.1)
    t.set_defaults(handler=_train)
    s = sub.add_parser("score", help="score a model or a predictor spec on a trace")
    _trace_args(s)
    s.add_argument("--model", help="a model file from `llmqueue predictor train`")
    s.add_argument(
        "--predictor", help="or a compiled predictor: oracle, noisy:sigma=S, buckets:k=K,acc=A"
    )
    s.set_defaults(handler=_score)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["predictor", *sys.argv[1:]]))
