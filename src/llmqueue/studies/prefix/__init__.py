"""The prefix study (config section ``prefix``; claim 13): automatic prefix caching on Mooncake's
FAST'25 traces, whose requests carry their prompts' block ids (``hash_ids``), on vidur's A100 and
H100 kernels (docs/studies/prefix.md).

Per (trace, step profile), one replay of the trace through continuous batching with on-demand
KV, with the cache off and on:

- the highest sustainable rate (a saturated queue in trace order) against the KV budget;
- the share of prompt tokens served from cache, TTFT and JCT against the KV budget;
- TTFT, TPOT and JCT against the arrival rate, the cache off and on;
- 1 to 8 replicas behind cache-blind and prefix-affinity routers: the hit share and latency.

Modules: :mod:`.spec` (the settings, typed; the traces and the step laws), :mod:`.tables` (the
runs), :mod:`.claims` (Mooncake's Table 2 cache ratios against the engine's), :mod:`.docs` (the
page's blocks), :mod:`.steps` (the rules' steps), one plot module per figure.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "plan",
    "claims": {13: "prefix caching: Mooncake's cache ratios (Qin et al., FAST'25, Table 2)"},
}
