"""Training the learned output-length predictor (scikit-learn's histogram gradient boosting,
deterministic: no subsampling, one thread).

Both kinds (:data:`~llmqueue.predictor.model.KINDS`) are trained on the first
``train_fraction`` of the trace (arrival order) and scored on the rest; the number of boosting
iterations is chosen on the last part of the training rows (time-ordered validation). Classes of
the classifier: SSJF's 42 / 141 / 294 / 503 tokens, or the training outputs' equal-probability
quantiles. scikit-learn is imported on first use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.predictor.features import FeatureSpec, split_index, trace_features
from llmqueue.predictor.model import KINDS, LengthModel
from llmqueue.predictor.scoring import SSJF_EDGES
from llmqueue.traces import TraceRows

__all__ = ["train_length_model"]


def _classes(edges: tuple[float, ...], out: np.ndarray) -> np.ndarray:
    return np.searchsorted(np.asarray(edges, dtype=float), out, side="right")


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
