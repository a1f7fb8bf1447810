"""A learned output-length predictor: a scikit-learn model on what a server knows at arrival.

SSJF (Qiu et al., arXiv 2404.08509) predicts a request's output length with a BERT proxy model
reading the prompt. Our traces carry no prompt text, so this model reads what a serving trace
does carry, all of it known when the request arrives (:func:`trace_features`):

- ``log_prompt_tokens``: log(1 + prompt tokens);
- ``time_of_day_s``: seconds since midnight of the arrival timestamp (a numeric timestamp in
  seconds is taken modulo 86400);
- ``recent_log_output_M`` for each M of ``FeatureSpec.history``: the mean of log(1 + output
  tokens) over the M requests whose outputs became known most recently *before this arrival*
  (NaN while none is known). An output is known when its request finished: at its finish time
  when the trace has one (``finish_s``), else ``known_after_s`` seconds after its arrival (a
  stated assumption: every request completes within that time; the trace's own timeline). The
  request's own output, and every output known after its arrival, are never read.

Two models (scikit-learn's histogram gradient boosting, deterministic: no subsampling): a
**regressor** of log(1 + output tokens), predicting exp(.) - 1, and a **classifier** over
output-length classes (SSJF's 42 / 141 / 294 / 503 tokens, or the training outputs'
equal-probability quantiles), predicting the class's median training output. Both are trained on
the first ``train_fraction`` of the trace (arrival order) and scored on the rest; the number of
boosting iterations is chosen on the last part of the training rows (time-ordered validation).

Saved models (:func:`save_model`) are one JSON header line (format name, format version,
features, classes, the trace's fingerprint, the scikit-learn version) followed by the pickled
estimator; :func:`load_model` refuses another format version or another scikit-learn minor version
with an InputError (a pickle is only portable within one scikit-learn version). Load only model
files you made: unpickling runs code. scikit-learn is imported on first use.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.io import atomic_path
from llmqueue.sim.predictors import SSJF_EDGES, PredictorScore, score_predictions

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "FeatureSpec",
    "TraceRows",
    "LengthModel",
    "read_trace_rows",
    "trace_features",
    "known_history",
    "train_length_model",
    "save_model",
    "load_model",
    "split_index",
]

FORMAT = "llmqueue-length-model"
FORMAT_VERSION = 1
KINDS = ("regressor", "classifier")
DAY_S = 86_400.0


@dataclass(frozen=True)
class FeatureSpec:
    """Which features: history lengths M (requests) and when an output becomes known (s)."""

    history: tuple[int, ...] = (16, 64, 256)
    known_after_s: float = 60.0

    def __post_init__(self) -> None:
        h = tuple(self.history)
        if not h or any(not (isinstance(m, int) and m >= 1) for m in h):
            raise InputError(f"features.history: integers >= 1 (requests), got {list(h)}")
        if not (math.isfinite(self.known_after_s) and self.known_after_s > 0):
            raise InputError(
                f"features.known_after_s must be a time > 0 s (an output is never known at its "
                f"own arrival), got {self.known_after_s}"
            )
        object.__setattr__(self, "history", h)

    @property
    def names(self) -> list[str]:
        return ["log_prompt_tokens", "time_of_day_s"] + [
            f"recent_log_output_{m}" for m in self.history
        ]


@dataclass(frozen=True)
class TraceRows:
    """A trace in arrival order: arrival (s from the first), time of day (s), prompt and output
    tokens, and optionally each request's finish time (s, same clock as arrival)."""

    arrival_s: np.ndarray
    time_of_day_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    finish_s: np.ndarray | None = None
    source: str = "trace"

    def __post_init__(self) -> None:
        cols = [self.arrival_s, self.time_of_day_s, self.prompt_tokens, self.output_tokens]
        if self.finish_s is not None:
            cols.append(self.finish_s)
        arr = [np.asarray(c, dtype=float) for c in cols]
        n = arr[0].size
        if any(a.ndim != 1 or a.size != n for a in arr) or n < 2:
            raise InputError(f"{self.source}: trace columns must be equal, 1-D, >= 2 rows")
        if any(not np.all(np.isfinite(a)) for a in arr):
            raise InputError(f"{self.source}: trace columns must be finite numbers")
        if np.any(np.diff(arr[0]) < 0):
            raise InputError(f"{self.source}: rows must be in arrival order")
        if np.any(arr[2] < 0) or np.any(arr[3] < 0):
            raise InputError(f"{self.source}: token counts must be >= 0")
        if self.finish_s is not None and np.any(arr[4] <= arr[0]):
            raise InputError(f"{self.source}: every finish time must be after its arrival")
        object.__setattr__(self, "arrival_s", arr[0])
        object.__setattr__(self, "time_of_day_s", arr[1])
        object.__setattr__(self, "prompt_tokens", arr[2])
        object.__setattr__(self, "output_tokens", arr[3])
        if self.finish_s is not None:
            object.__setattr__(self, "finish_s", arr[4])

    @property
    def n(self) -> int:
        return int(self.arrival_s.size)

    def take(self, lo: int, hi: int | None = None) -> TraceRows:
        """Rows lo..hi-1 (arrival times kept on the trace's clock)."""
        s = slice(lo, hi)
        fin = None if self.finish_s is None else self.finish_s[s]
        return TraceRows(
            self.arrival_s[s],
            self.time_of_day_s[s],
            self.prompt_tokens[s],
            self.output_tokens[s],
            fin,
            self.source,
        )

    def fingerprint(self) -> str:
        """SHA-256 of the columns (tells the training trace from another)."""
        h = hashlib.sha256()
        for a in (self.arrival_s, self.prompt_tokens, self.output_tokens):
            h.update(np.ascontiguousarray(a, dtype="<f8").tobytes())
        return h.hexdigest()


def read_trace_rows(
    path: str | Path,
    timestamp_column: str = "TIMESTAMP",
    prompt_column: str = "ContextTokens",
    output_column: str = "GeneratedTokens",
    finish_column: str | None = None,
    where: str = "--trace",
) -> TraceRows:
    """A CSV trace as :class:`TraceRows`, sorted by arrival (InputError names the file, the
    column and what exists). Timestamps: date-times or numbers (s)."""
    from llmqueue.sim.workload import read_timestamps, read_trace_columns

    cols = read_trace_columns(path, [prompt_column, output_column], where)
    abs_s, tod = read_timestamps(path, timestamp_column, where)
    origin = float(abs_s.min())
    arr = abs_s - origin
    fin = None
    if finish_column:
        fin = read_timestamps(path, finish_column, where)[0] - origin
    order = np.argsort(arr, kind="stable")
    return TraceRows(
        arr[order],
        tod[order],
        cols[prompt_column][order],
        cols[output_column][order],
        None if fin is None else fin[order],
        source=f"{where} {Path(path).name}",
    )


def split_index(n: int, train_fraction: float) -> int:
    """Rows 0..k-1 train, k..n-1 test (arrival order); at least 2 rows each side."""
    if not (0.0 < train_fraction < 1.0):
        raise InputError(f"train_fraction must be in (0, 1), got {train_fraction}")
    k = int(round(n * train_fraction))
    if k < 2 or n - k < 2:
        raise InputError(
            f"train_fraction {train_fraction} of {n} rows leaves fewer than 2 rows to train or test"
        )
    return k


def known_history(rows: TraceRows, spec: FeatureSpec) -> tuple[np.ndarray, np.ndarray]:
    """(order, count): `order` sorts the rows by the time their output became known; row i may
    read the outputs of rows order[count[i] - M : count[i]] (the M known most recently before
    its arrival), and of no other row."""
    known = rows.finish_s if rows.finish_s is not None else rows.arrival_s + spec.known_after_s
    order = np.argsort(known, kind="stable")
    count = np.searchsorted(known[order], rows.arrival_s, side="right")
    return order, count


def trace_features(rows: TraceRows, spec: FeatureSpec) -> np.ndarray:
    """The feature matrix (rows x len(spec.names)) of the module docstring."""
    order, count = known_history(rows, spec)
    lo = np.log1p(rows.output_tokens)[order]
    cs = np.concatenate([[0.0], np.cumsum(lo)])
    cols = [np.log1p(rows.prompt_tokens), rows.time_of_day_s]
    for m in spec.history:
        j0 = np.maximum(count - m, 0)
        cnt = count - j0
        with np.errstate(invalid="ignore", divide="ignore"):
            cols.append(np.where(cnt > 0, (cs[count] - cs[j0]) / cnt, np.nan))
    return np.column_stack(cols)


def _classes(edges: tuple[float, ...], out: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(edges, dtype=float), out, side="right")


@dataclass
class LengthModel:
    """A trained output-length model (see the module docstring); predictions in tokens."""

    kind: str
    estimator: Any
    features: FeatureSpec
    class_edges: tuple[float, ...] = ()
    class_values: tuple[float, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)

    def predict_features(self, x: np.ndarray) -> np.ndarray:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(1):
            raw = self.estimator.predict(x)
        if self.kind == "regressor":
            return np.maximum(np.expm1(raw), 0.0)
        return np.asarray(self.class_values, dtype=float)[np.asarray(raw, dtype=int)]

    def predict_trace(self, rows: TraceRows) -> np.ndarray:
        """One prediction per row of `rows` (the outputs are read only as known history)."""
        return self.predict_features(trace_features(rows, self.features))

    def score(self, rows: TraceRows) -> PredictorScore:
        return score_predictions(rows.output_tokens, self.predict_trace(rows))

    def held_out(self, rows: TraceRows) -> tuple[TraceRows, bool]:
        """The rows to score on: the held-out part when `rows` is the training trace (same
        fingerprint), else all of them; and whether it was the training trace."""
        if rows.fingerprint() == self.meta.get("fingerprint"):
            return rows.take(int(self.meta["train_rows"])), True
        return rows, False


def _best_iterations(est: Any, x_val: np.ndarray, y_val: np.ndarray, regressor: bool) -> int:
    """The number of boosting iterations (1..max_iter) with the best validation score: squared
    error of log(1 + tokens) for the regressor, accuracy for the classifier (first best)."""
    scores = []
    for pred in est.staged_predict(x_val):
        if regressor:
            scores.append(-float(np.mean((pred - y_val) ** 2)))
        else:
            scores.append(float(np.mean(pred == y_val)))
    return int(np.argmax(scores)) + 1


def train_length_model(
    rows: TraceRows,
    kind: str = "regressor",
    *,
    train_fraction: float = 0.7,
    validation_fraction: float = 0.2,
    features: FeatureSpec | None = None,
    classes: str = "ssjf",
    n_classes: int = 5,
    max_iter: int = 100,
    learning_rate: float = 0.1,
    seed: int = 0,
) -> LengthModel:
    """Train on rows 0..k-1 (k = round(n * train_fraction)); the rest is the held-out part,
    never read here.

    The number of boosting iterations (at most `max_iter`) is chosen on the last
    `validation_fraction` of the training rows (time-ordered: fitted on the rows before them),
    then the model is refitted on all training rows with that number. `classes` (classifier):
    ``ssjf`` (edges 42, 141, 294, 503) or ``quantiles`` (the training outputs'
    equal-probability quantiles, `n_classes` classes)."""
    if kind not in KINDS:
        raise InputError(f"--kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if classes not in ("ssjf", "quantiles"):
        raise InputError(f"--classes must be ssjf or quantiles, got {classes!r}")
    if not (isinstance(max_iter, int) and max_iter >= 1):
        raise InputError(f"max_iter must be an integer >= 1, got {max_iter!r}")
    if not (0 < learning_rate <= 1):
        raise InputError(f"learning_rate must be in (0, 1], got {learning_rate!r}")
    spec = features or FeatureSpec()
    k = split_index(rows.n, train_fraction)
    x = trace_features(rows, spec)[:k]
    y = rows.output_tokens[:k]
    kv = split_index(k, 1.0 - validation_fraction)
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    def model(n_iter: int) -> Any:
        cls = (
            HistGradientBoostingRegressor if kind == "regressor" else HistGradientBoostingClassifier
        )
        return cls(
            max_iter=n_iter, learning_rate=learning_rate, early_stopping=False, random_state=seed
        )

    edges: tuple[float, ...] = ()
    values: tuple[float, ...] = ()
    if kind == "regressor":
        target = np.log1p(y)
    else:
        if classes == "ssjf":
            edges = SSJF_EDGES
        else:
            if not (isinstance(n_classes, int) and n_classes >= 2):
                raise InputError(f"--n-classes must be an integer >= 2, got {n_classes!r}")
            q = np.quantile(y, np.arange(1, n_classes) / n_classes)
            edges = tuple(float(v) for v in np.unique(q))
        target = _classes(edges, y)
        if np.unique(target[:kv]).size < 2:
            raise InputError("the training rows fall in fewer than 2 length classes")
        # every class index 0..K-1 gets a value: the median training output in it (an empty
        # class: the midpoint of its edges), so predicted classes map to lengths in order
        lo = [0.0, *edges]
        hi = [*edges, edges[-1] * 2]
        values = tuple(
            float(np.median(y[target == i])) if np.any(target == i) else (lo[i] + hi[i]) / 2
            for i in range(len(edges) + 1)
        )
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # one thread: identical on any machine, and fast on a busy one
        probe = model(max_iter).fit(x[:kv], target[:kv])
        n_iter = _best_iterations(probe, x[kv:], target[kv:], kind == "regressor")
        est = model(n_iter).fit(x, target)
    import sklearn

    meta = {
        "source": rows.source,
        "rows": rows.n,
        "train_rows": k,
        "train_fraction": train_fraction,
        "validation_fraction": validation_fraction,
        "fingerprint": rows.fingerprint(),
        "sklearn": sklearn.__version__,
        "estimator": type(est).__name__,
        "max_iter": max_iter,
        "iterations": n_iter,
        "learning_rate": learning_rate,
        "seed": seed,
        "classes": classes if kind == "classifier" else None,
    }
    return LengthModel(kind, est, spec, edges, values, meta)


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def save_model(model: LengthModel, path: str | Path) -> None:
    """Write `model` (a JSON header line, then the pickled estimator), atomically."""
    header = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "kind": model.kind,
        "features": {
            "names": model.features.names,
            "history": list(model.features.history),
            "known_after_s": model.features.known_after_s,
        },
        "class_edges": list(model.class_edges),
        "class_values": list(model.class_values),
        "meta": model.meta,
    }
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(json.dumps(header, sort_keys=True).encode() + b"\n")
            pickle.dump(model.estimator, fh, protocol=4)


def load_model(path: str | Path, where: str = "--model") -> LengthModel:
    """Read a model written by :func:`save_model`; InputError for a missing file, a file that
    is not one, another format version or another scikit-learn minor version."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{where}: model file {str(path)!r} does not exist")
    with p.open("rb") as fh:
        first = fh.readline()
        try:
            header = json.loads(first)
        except (UnicodeDecodeError, json.JSONDecodeError):
            header = None
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise InputError(
                f"{where}: {path} is not an llmqueue length model (make one with "
                "`llmqueue predictor train`)"
            )
        if header.get("version") != FORMAT_VERSION:
            raise InputError(
                f"{where}: {path} is a length model of format version {header.get('version')!r}; "
                f"this llmqueue reads version {FORMAT_VERSION}: retrain it with "
                "`llmqueue predictor train`"
            )
        import sklearn

        made = str(header.get("meta", {}).get("sklearn", "?"))
        if _minor(made) != _minor(sklearn.__version__):
            raise InputError(
                f"{where}: {path} was saved with scikit-learn {made}; this environment has "
                f"{sklearn.__version__} (a pickled model is only portable within one version): "
                "retrain it with `llmqueue predictor train`"
            )
        try:
            est = pickle.load(fh)  # noqa: S301 - our own format; the docstring warns
        except Exception as err:  # noqa: BLE001 - a damaged file is the user's input
            raise InputError(f"{where}: {path}: the estimator cannot be read: {err}") from None
    f = header["features"]
    spec = FeatureSpec(tuple(int(m) for m in f["history"]), float(f["known_after_s"]))
    kind = str(header.get("kind"))
    if kind not in KINDS:
        raise InputError(f"{where}: {path}: unknown model kind {kind!r}")
    return LengthModel(
        kind,
        est,
        spec,
        tuple(float(x) for x in header.get("class_edges", [])),
        tuple(float(x) for x in header.get("class_values", [])),
        dict(header.get("meta", {})),
    )
