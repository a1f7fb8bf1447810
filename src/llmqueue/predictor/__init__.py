"""The learned output-length predictor: features known at arrival, training, the model file and
the one scoring of every predictor.

- :mod:`~llmqueue.predictor.features`: what a server knows when a request arrives (prompt
  tokens, time of day, recently finished outputs), computed from :class:`llmqueue.traces.TraceRows`;
- :mod:`~llmqueue.predictor.training`: a scikit-learn model trained on the first part of a trace;
- :mod:`~llmqueue.predictor.model`: the trained :class:`~llmqueue.predictor.model.LengthModel`
  and its versioned file format;
- :mod:`~llmqueue.predictor.scoring`: class accuracy, Kendall's tau and mean absolute error of
  any predictions (the compiled error models of :mod:`llmqueue.sim.predictors` included).

This package reads traces and never a simulator: :mod:`llmqueue.sim.predictors` wraps a saved
model as the ``learned:PATH`` predictor of the serving engine.
"""
