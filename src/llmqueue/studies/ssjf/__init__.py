"""The SSJF study: ordering the queue by a predicted output length (claim 10).

Speculative shortest-job-first (Qiu et al., arXiv 2404.08509) orders waiting requests by an
output length a proxy model predicts; it reports a 30.5-39.6% lower mean job completion time
(JCT) than FCFS and 2.2-3.6x its "throughput", under no, dynamic and continuous batching. We
rebuild it in the serving engine (:mod:`llmqueue.sim.engine`) on the Azure conversation trace:

- :mod:`~llmqueue.studies.ssjf.spec`: the config read into typed settings: the policies (FCFS,
  SJF, SSJF, with and without SSJF's starvation guard), the cost models with their three
  batching modes (SSJF's own: a job of n output tokens takes 0.1 s + 0.02 s x n; and
  LLaMA-2-7B's A100 profiles of this project);
- :mod:`~llmqueue.studies.ssjf.tables`: the trace and its held-out rows, the learned and compiled
  predictors scored alike (:func:`~llmqueue.predictor.scoring.score_predictions`), FCFS capacity
  per mode, JCT against load (Poisson or the held-out rows replayed at their own timestamps),
  the gain against predictor quality, the starvation guard's trade-off and SSJF's own protocol
  (50 jobs arriving in whole-second slots, averaged over runs); with no batching the exact mean
  JCT (:mod:`llmqueue.sim.exact`) beside the simulation;
- :mod:`~llmqueue.studies.ssjf.official`: SSJF's own published inputs (vicuna-13b output
  lengths with their BERT proxy model's classes, ``data/ssjf-predictions``) in SSJF's protocol,
  served as SSJF's simulator serves (its FCFS batch timeout, its guard's run-time trigger, its
  re-batching "continuous" mode: options of the engine) and as this engine serves;
- :mod:`~llmqueue.studies.ssjf.groups`: every protocol reading as SSJF's evaluation reads it
  (means over runs, then over the arrival rates, then the ratio), with jackknife intervals;
- :mod:`~llmqueue.studies.ssjf.claims`: SSJF's two headline numbers in three groups: (a) SSJF's
  inputs, protocol and simulator, (b) SSJF's inputs and protocol with this engine's serving,
  (c) the Azure trace with the learned predictor, per setting and batching mode, by SSJF's
  protocol and in steady state.

Every simulation draws its lengths from the held-out rows only, so the learned predictor never
ranks a request it was trained on. Units: seconds, requests/s, tokens. Every point draws its own
stream ``SeedSequence(seed, spawn_key=("ssjf", table, ...))`` (:mod:`llmqueue.seeds`); the
policies of one point share it (the same requests), so their differences are paired.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "serving",
    "claims": {10: "SSJF: mean JCT and throughput against FCFS (companion paper)"},
}
