"""The literature study (config section ``literature``; claim 12): published numbers of the
LLM-queueing and scheduling-with-predictions literature against this engine, where the engine
expresses the setting (docs/studies/literature.md).

- :mod:`.spec`: the settings, typed; the reference rows (``data/reference/
  claims_literature.csv``) name a setting, a queue order and a rate each;
- :mod:`.tables`: the simulated and exact mean response time of every (setting, order, rate) a
  reference row names, and the exact curves of the figure;
- :mod:`.claims`: one claim row per published number.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "follows": "multibin",
    "claims": {
        12: "the literature: scheduling with predictions (Mitzenmacher and Shahout's Tables 1-3)"
    },
}
