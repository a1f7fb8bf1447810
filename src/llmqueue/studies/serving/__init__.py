"""The serving study: every batch former on one hardware law, and the pieces of the operator CLI.

- :mod:`~llmqueue.studies.serving.spec`: config ``serving`` read into a :class:`~llmqueue.studies.serving.spec.ServingSetup`:
  the policies (KV budget filled in from the profile's model and GPU,
  :func:`llmqueue.profiles.kv_tokens_of_fit`), the time law of each (continuous batching priced
  by the step law; static batches by the same law written as Eq. (18),
  :func:`llmqueue.latency.batch_law_from_step`, at the workload's mean prompt and decode context,
  :func:`llmqueue.analytic.batch_time.decode_context`), the Poisson workload of trace rows and the
  replay of the same trace;
- :mod:`~llmqueue.studies.serving.tables`: the highest sustainable rate per policy
  (:func:`llmqueue.sim.capacity.max_rate`), mean and p99 JCT against the arrival rate, and the
  trace replayed at its own timestamps, time-scaled to given rates.

Exact mean waits where a formula applies come from :mod:`llmqueue.sim.exact`. Units: seconds,
requests/s, tokens. Every simulated point draws its own stream
``SeedSequence(seed, spawn_key=(stream, policy, point))`` (:mod:`llmqueue.seeds`).
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {"follows": "batching"}
