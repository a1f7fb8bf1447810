"""A trained output-length model and its file format.

:class:`LengthModel` predicts output tokens from :mod:`llmqueue.predictor.features` (a
**regressor** of log(1 + output tokens), predicting exp(.) - 1, or a **classifier** over
output-length classes, predicting the class's median training output); it is trained by
:func:`llmqueue.predictor.training.train_length_model`.

Saved models (:func:`save_model`) are one JSON header line (format name, format version,
features, classes, the trace's fingerprint, the scikit-learn version) followed by the pickled
estimator; :func:`load_model` refuses another format version or another scikit-learn minor version
with an InputError (a pickle is only portable within one scikit-learn version). Load only model
files you made: unpickling runs code. scikit-learn is imported on first use.
"""

from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmqueue.errors import InputError
from llmqueue.io import atomic_path
from llmqueue.predictor.features import FeatureSpec, trace_features
from llmqueue.predictor.scoring import PredictorScore, score_predictions
from llmqueue.traces import TraceRows

__all__ = ["FORMAT", "FORMAT_VERSION", "KINDS", "LengthModel", "save_model", "load_model"]

FORMAT = "llmqueue-length-model"
FORMAT_VERSION = 1
KINDS = ("regressor", "classifier")


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
        spec, kind, edges, values, meta = _header_fields(header, f"{where}: {path}")
        import sklearn

        made = str(meta.get("sklearn", "?"))
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
    if not (hasattr(est, "predict") and callable(est.predict)):
        raise InputError(f"{where}: {path}: the estimator has no predict method")
    if kind == "classifier" and len(values) != len(edges) + 1:
        raise InputError(
            f"{where}: {path}: a classifier needs one class value more than its edges, got "
            f"{len(values)} values for {len(edges)} edges"
        )
    return LengthModel(kind, est, spec, edges, values, meta)


def _header_fields(
    header: dict[str, Any], where: str
) -> tuple[FeatureSpec, str, tuple[float, ...], tuple[float, ...], dict[str, Any]]:
    """The header's features, kind, class edges and values, and meta, checked key by key: a
    header with the right format name but a wrong or missing field is an InputError naming it."""
    try:
        f = header["features"]
        spec = FeatureSpec(tuple(int(m) for m in f["history"]), float(f["known_after_s"]))
        kind = str(header["kind"])
        edges = tuple(float(x) for x in header.get("class_edges", []))
        values = tuple(float(x) for x in header.get("class_values", []))
        meta = dict(header["meta"])
        int(meta["train_rows"])
        str(meta["fingerprint"])
    except KeyError as err:
        raise InputError(f"{where}: its header lacks {err.args[0]!r}") from None
    except (TypeError, ValueError) as err:
        raise InputError(f"{where}: its header holds a wrong value ({err})") from None
    if kind not in KINDS:
        raise InputError(f"{where}: unknown model kind {kind!r}; known: {', '.join(KINDS)}")
    return spec, kind, edges, values, meta
