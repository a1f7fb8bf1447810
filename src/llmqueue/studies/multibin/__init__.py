"""The Multi-Bin Batching study (Guldogan et al., arXiv 2412.04504; claim 11).

- :mod:`~llmqueue.studies.multibin.spec`: config ``multibin`` read into typed specs (their
  synthetic setting, their "simulated LLM", Multi-Bin against continuous batching), without
  importing a simulator (the config checks read it before every run);
- :mod:`~llmqueue.studies.multibin.tables`: their Sec. 6.1 setting (B = 128, U(1, 20), k =
  1..5): Theorem 4.2, its exact value and the simulated highest throughput; their simulated LLM
  (0.0366 s per output token, B = 8, 8 servers, k = 1, 2, 4, ..., 32) with bins by the true
  length, under the neighbour-bin error model and from a learned predictor; mean latency against
  k beside Lemma 5.1's bound; Multi-Bin (Eq. 18 batch law) against continuous batching (the
  step law of the same measured kernels) at the same loads;
- :mod:`~llmqueue.studies.multibin.claims`: claim 11 through one :class:`llmqueue.claims.ClaimBook`.

Their GSM8K answer lengths are not available; the length law is a config token-law spec (by
default the empirical law of the Azure conv trace's GeneratedTokens, which a log-normal fits
poorly: it is bimodal). Units: seconds, requests/s, tokens (the synthetic setting: time = tokens,
rates per time unit). Each simulated point draws its own stream,
``seed_sequence(seed, "multibin", part, ...)``.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "ssjf",  # its learned bins come from the SSJF study's model
    "claims": {11: "Multi-Bin Batching: throughput against the number of bins (companion paper)"},
}
