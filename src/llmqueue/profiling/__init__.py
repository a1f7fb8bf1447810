"""Profiling and calibration (paper Sec. II: Table I, Fig. 2a, Fig. 2b, the KV-cache limit).

- :mod:`~llmqueue.profiling.harness`: forced-length generation, t1 / t2 timing;
- :mod:`~llmqueue.profiling.sweeps`: the config's sweeps (timing grid, Fig. 2a, depth check);
- :mod:`~llmqueue.profiling.fits`: fits S = a N + b0, t1(b), t2(b), depth linearity -> fit.json.

Model shapes, GPU specs, the KV-cache limit and the roofline live in :mod:`llmqueue.hardware`.

Runs on the lent GPU machine as it is: this package imports only numpy, scipy, pandas, pyyaml,
torch and transformers (torch lazily), plus the llmqueue modules that do the same.
"""
