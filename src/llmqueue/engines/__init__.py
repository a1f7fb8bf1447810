"""The real-engine instrument: the engines the serving model is validated against (vLLM's CPU
build, Hugging Face transformers' continuous batching), their sessions, clients and recording;
the validation study (:mod:`llmqueue.studies.validation`) compares what they measure.

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
- :mod:`.record`: the run folder (per-request and per-iteration CSVs, settings, provenance), the
  progress log, the hardware id and folder names that cannot leave their folder;
- :mod:`.calibration`: the step law fitted on an engine's calibration iterations, iteration times,
  the measured capacity of a burst;
- :mod:`.environment`: the vLLM environment's pins and checks (``check-env``, and the quick check
  every engine command makes before it writes anything);
- the engine sessions, one module per command of ``llmqueue validate``: :mod:`.single_run`
  (``measure``), :mod:`.matrix_run` (``matrix``: every group's sessions and its folder's
  assembly), :mod:`.speed_run` (``machine-speed``), :mod:`.predictions` (``predictions``, main
  environment). The command line itself (:mod:`llmqueue.cli.validate`) only parses flags, loads
  the checked config (:func:`llmqueue.studies.validation.checks.load_validation_config`) and calls them;
  ``make validate-vllm`` and ``make validate-vllm-speed`` run it in the separate vLLM
  environment.
"""
