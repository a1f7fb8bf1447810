"""``llmqueue plan``'s library: which serving configuration carries an operator's load within
their latency targets.

- :mod:`llmqueue.plan.slo`: the SLOs (bounds on a statistic, per-request deadlines with an
  attainment) and whether a run meets them;
- :mod:`llmqueue.plan.space`: the search space (lists and ranges of replicas, routers, queue
  orders, batch caps, token budgets, KV budgets) and its slices;
- :mod:`llmqueue.plan.search`: the goodput of a configuration by bisection on the rate, and a
  search over many on worker threads;
- :mod:`llmqueue.plan.summary`: the best configuration, the fewest replicas for a target rate,
  the Pareto front;
- :mod:`llmqueue.plan.table`: a plan's table read back (``--merge``), strictly.
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {"follows": "validation"}
