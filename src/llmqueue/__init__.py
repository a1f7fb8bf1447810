"""llmqueue: queueing models of LLM inference with variable token length.

Replicates Yang, Xu, Jiao, "A Queueing Theoretic Perspective on Low-Latency LLM Inference
with Variable Token Length" (arXiv 2407.05347).

This module deliberately imports nothing: `llmqueue profile` must run on a GPU machine that
has only torch, transformers, numpy, scipy, pandas and pyyaml.
"""

__version__ = "0.1.0"
