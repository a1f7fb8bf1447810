"""The profiling study (paper Sec. II: Table I, Fig. 2a, Fig. 2b, the KV-cache limit; claims 1-2).

Every latency source side by side, from the fit.json files the profiling part of the pipeline
writes (:mod:`llmqueue.profiling.fits`: the paper's Table I, the roofline on named GPUs, vidur's
measured A100/H100 kernels, this project's measured sweeps):

- :mod:`~llmqueue.studies.profiling.tables`: Fig. 2a's time against output tokens, Fig. 2b's
  t1(b) and t2(b) with their Eq. (18) lines, the kernel composition check and Table I (the total
  time of a request of given input and output tokens per source), with its notes;
- :mod:`~llmqueue.studies.profiling.claims`: claims 1-2 (Table I from each source, the KV-cache
  batch limit), a GPU other than an A100 never ``reproduced``.

Units: seconds, tokens, GiB.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {
    "rules": ["calibration", "profiling"],
    "claims": {
        1: "Table I latencies and their linear law, LLaMA-2-7B on an A100",
        2: "the KV cache holds 49 sequences of 1280 tokens",
    },
}
