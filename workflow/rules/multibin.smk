# Multi-Bin Batching study (issue 15).
