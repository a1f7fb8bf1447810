"""Validation of the serving model against a real engine (vLLM's CPU build), measurement side.

Modules, one job each (vLLM is imported lazily, only where it runs, so the main environment
imports this package without it):

- :mod:`.requests`: request tables, Poisson arrivals and Azure-trace lengths scaled to the model;
- :mod:`.client`: the open-loop asyncio client that sends a table and times every request;
- :mod:`.batches`: controlled batches (warm-up, calibration, the machine-speed cycles) in turn;
- :mod:`.engine`: vLLM's async engine with the configured settings, its token stream, and the
  settings read back from it;
- :mod:`.steplog` / :mod:`.probe` / :mod:`.worker`: the engine's per-iteration record (the probe
  is a vLLM scheduler subclass that runs in the engine-core process; the timing worker, a vLLM
  worker subclass in the model's process, records the model's own time per iteration);
- :mod:`.speedprobe`: two fixed kernels (memory-bound, compute-bound) that time the machine;
- :mod:`.contention` / :mod:`.placement`: CPU steal and other processes' share; which CPUs the
  engine's threads run on;
- :mod:`.groups` / :mod:`.admission`: the validation matrix's run groups; the batch-queue
  admission rule;
- :mod:`.model`: the random-weight Llama-shaped model, made locally;
- :mod:`.record`: the run folder (per-request and per-iteration CSVs, settings, provenance);
- ``llmqueue validate`` (:mod:`llmqueue.cli.validate`): the driver (``check-env``, ``model``,
  ``measure``, ``matrix``, ``machine-speed``), run in the separate vLLM environment by
  ``make validate-vllm`` and ``make validate-vllm-speed``; the step-law fit
  from calibration iterations and the measured capacity are the validation study's
  (:mod:`llmqueue.studies.validation.calibration`).
"""
