"""Hardware facts shared by profiling, the serving study and the operator CLI.

- :mod:`~llmqueue.hardware.devices`: named GPU specs (peak FLOP/s, memory bandwidth, memory);
- :mod:`~llmqueue.hardware.models`: architecture shapes of the profiled models, and random-weight
  Llama-style models built from them (torch and transformers imported only when building one);
- :mod:`~llmqueue.hardware.kvcache`: KV-cache bytes per token, the batch limit (claim 2) and
  the KV budget in tokens of a model on a GPU;
- :mod:`~llmqueue.hardware.roofline`: predicted first-token and decode-step times on a named GPU
  (never "measured").

Nothing here imports a simulator or a study, so every layer above may use it.
"""
