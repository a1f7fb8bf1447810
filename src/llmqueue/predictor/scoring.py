"""One way of scoring every output-length predictor: class accuracy, rank agreement, error.

:func:`score_predictions` scores any predictions against the true output lengths the same way:
accuracy over SSJF's five output-length classes (Qiu et al., arXiv 2404.08509; edges
:data:`SSJF_EDGES`), Kendall's tau-b between predicted and true lengths, and the mean absolute
error (tokens). SciPy is imported on first use.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from llmqueue.errors import InputError

__all__ = ["SSJF_EDGES", "PredictorScore", "score_predictions"]

# SSJF's output-length class thresholds (tokens; arXiv 2404.08509, about the quartiles and the
# 99th percentile of their data): five classes [0, 42), [42, 141), [141, 294), [294, 503), >= 503.
SSJF_EDGES: tuple[float, ...] = (42.0, 141.0, 294.0, 503.0)


@dataclass(frozen=True)
class PredictorScore:
    """How well predictions rank and size the true output lengths (n requests).

    accuracy: fraction whose predicted length falls in the same one of SSJF's five classes
    (edges 42, 141, 294, 503 tokens) as the true length; kendall_tau: Kendall's tau-b between
    predicted and true lengths (0 for a constant prediction: it ranks nothing); mae_tokens: mean
    |predicted - true| (tokens)."""

    n: int
    accuracy: float
    kendall_tau: float
    mae_tokens: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def score_predictions(
    true_tokens: np.ndarray, predicted_tokens: np.ndarray, edges: tuple[float, ...] = SSJF_EDGES
) -> PredictorScore:
    """Score predictions against true output lengths (the one scoring of the SSJF study)."""
    from scipy.stats import kendalltau

    t = np.asarray(true_tokens, dtype=float)
    p = np.asarray(predicted_tokens, dtype=float)
    if t.shape != p.shape or t.ndim != 1 or t.size < 2:
        raise InputError("score_predictions: true and predicted lengths: equal 1-D, >= 2 values")
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(p))):
        raise InputError("score_predictions: lengths must be finite")
    e = np.asarray(edges, dtype=float)
    acc = float(np.mean(np.searchsorted(e, t, side="right") == np.searchsorted(e, p, side="right")))
    if np.ptp(p) == 0 or np.ptp(t) == 0:
        tau = 0.0
    else:
        tau = float(kendalltau(p, t).statistic)
    return PredictorScore(int(t.size), acc, tau, float(np.mean(np.abs(p - t))))
