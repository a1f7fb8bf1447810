# Profiling study (issue 5): Table I, Fig. 2a, 2b, KV-cache limit, claims 1-2.
