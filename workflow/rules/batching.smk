# Batching study (issue 4): Fig. 3a, 3b, 5, 6a, 6b and claims 6-9.
