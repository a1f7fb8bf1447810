"""Event-driven simulators (Numba-compiled inner loops) and their output statistics.

- :mod:`llmqueue.sim.stats`: batch-means confidence intervals and histogram quantiles;
- :mod:`llmqueue.sim.mg1`: FCFS single server, optional deterministic patience (Sec. III);
- :mod:`llmqueue.sim.batching`: dynamic / fixed / elastic batching (Sec. IV).
"""
