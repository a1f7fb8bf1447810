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
import sys
from typing import Any

from llmqueue.cli import add_command, flags
from llmqueue.errors import InputError
from llmqueue.io import check_output_path, strict_json
from llmqueue.limits import MAX_TIME_S
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
    if not vals or len(vals) > 16 or any(not 1 <= v <= 1_000_000 for v in vals):
        raise InputError(
            f"--history {text!r}: 1 to 16 comma-separated integers in [1, 1000000] (requests)"
        )
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
        print(strict_json(obj))
        return
    for key, val in obj.items():
        if isinstance(val, dict):
            print(f"{key}: " + ", ".join(f"{k}={_fmt(v)}" for k, v in val.items()))
        else:
            print(f"{key}: {_fmt(val)}")


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


MIN_TRAIN_ROWS = 400  # the training, validation and held-out parts each need rows of every kind


def _train(args: argparse.Namespace) -> int:
    check_output_path(args.out, "--out")  # before any training
    spec = FeatureSpec(_history(args.history), float(args.known_after))
    rows = _rows(args)
    if rows.n < MIN_TRAIN_ROWS:
        raise InputError(
            f"--trace {args.trace}: {rows.n} rows; training needs at least {MIN_TRAIN_ROWS} "
            "(a training part, its validation tail and a held-out part)"
        )
    span = float(rows.arrival_s[-1] - rows.arrival_s[0])
    if args.finish_column is None and args.known_after >= span:
        raise InputError(
            f"--known-after {args.known_after:g} s is not shorter than the trace's span "
            f"({span:g} s): no output would ever be known before a later arrival"
        )
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
        try:
            pred = parse_predictor(args.predictor)
        except InputError as err:
            text = str(err)
            msg = text if text.startswith("--predictor") else f"--predictor: {text}"
            raise InputError(msg) from None
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
    p.add_argument("--seed", type=flags.seed, default=0, help="random seed in [0, 2**63)")
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
    t.add_argument(
        "--n-classes",
        type=flags.count(2, 64),
        default=5,
        help="classes with --classes quantiles, in [2, 64]",
    )
    t.add_argument(
        "--train-fraction",
        type=flags.number(0, 1, lo_open=True, hi_open=True),
        default=0.7,
        help="first part trained on, in (0, 1)",
    )
    t.add_argument(
        "--validation-fraction",
        type=flags.number(0, 1, lo_open=True, hi_open=True),
        default=0.2,
        help="last part of the training rows that chooses the iteration count, in (0, 1)",
    )
    t.add_argument(
        "--known-after",
        type=flags.number(0, MAX_TIME_S, lo_open=True, unit="s"),
        default=60.0,
        help="seconds after its arrival a request's output counts as known (default 60)",
    )
    t.add_argument(
        "--history",
        default="16,64,256",
        help="recent-output features: numbers of most recently known requests averaged",
    )
    t.add_argument(
        "--max-iter",
        type=flags.count(1, 10_000),
        default=100,
        help="most boosting iterations, in [1, 10000]",
    )
    t.add_argument(
        "--learning-rate",
        type=flags.number(0, 1, lo_open=True),
        default=0.1,
        help="in (0, 1] (default 0.1)",
    )
    t.set_defaults(handler=_train)
    s = sub.add_parser("score", help="score a model or a predictor spec on a trace")
    _trace_args(s)
    s.add_argument("--model", help="a model file from `llmqueue predictor train`")
    s.add_argument(
        "--predictor",
        help="or a compiled predictor: oracle, noisy:sigma=S, exp, uniform:a=A, buckets:k=K,acc=A",
    )
    s.set_defaults(handler=_score)


if __name__ == "__main__":  # pragma: no cover
    from llmqueue.cli import main

    sys.exit(main(["predictor", *sys.argv[1:]]))
