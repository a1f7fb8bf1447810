"""The serving model against vLLM: replay each measured request table through the
continuous-batching simulator and compare every request's TTFT and JCT with what vLLM did.

Inputs: a committed run folder ``data/validation/vllm-cpu-<hardware-id>/`` (made by
``make validate-vllm``; data/validation/README.md), read by :func:`~llmqueue.studies.validation.spec.read_run`:

- ``settings.json``: the engine settings read back from vLLM, mapped onto a
  :class:`llmqueue.policy.Policy` by :func:`engine_policy`;
- ``calibration_fit.json``: the step law fitted on the calibration iterations only
  (:func:`calibration_law`); the same law fitted on each load's own iterations is used for
  diagnosis only, never for the prediction (:func:`in_situ_law`);
- ``requests_<run>.csv``: arrival time, prompt and output tokens of every request (replayed
  exactly, :func:`replay`) and its measured first-token and finish times (client side);
- ``steps_<run>.csv``: vLLM's iterations during that run (:func:`steplaw_check`: the calibration
  law on the run's own iterations);
- ``meta.json``: load fractions, rates, ``calibration.max_gap_s``.

Prediction (:func:`predict`): the serving engine (:func:`llmqueue.sim.engine.run`) on a
:class:`llmqueue.sim.workload.ReplayWorkload` of the same arrivals and lengths, one server. What the
model has of vLLM 0.32's scheduler (README "What vLLM 0.32's scheduler does"): one token budget per
iteration shared by decodes and prefill chunks (``max_num_batched_tokens``), running requests first
in admission order, then FCFS admission while the batch has room (``max_num_seqs``), a request
admitted only when its whole prompt fits in the free KV (head-of-line blocking), KV in blocks of
``block_size`` tokens (``kv_model: paged``; a sequence holding h tokens takes ceil(h / block_size)
blocks, the decodes of an iteration take their new blocks before any admission), recompute
preemption of the newest request to the front of the queue, the first token at the end of the
iteration that completes the prompt, and iteration times from the step law
c0 + c_tok (decode_seqs + prefill_tokens) + c_ctx context_tokens. What it lacks: the engine's
time to pick up a request that arrives while it is idle and the hand-off of each token to the
client (about 1 ms each, measured, not modelled), any step time the linear law does not
describe (at high load prefill iterations take longer than it says, decode-only ones less), the
machine's noise, and blocks that are taken chunk by chunk during a prefill (the model reserves the
whole prompt at admission; with the token budget a chunked prompt leaves no budget for a second
admission, so only the decodes' growth of that iteration could differ).

Comparison (:func:`error_rows`): per run and metric (JCT = finish - arrival, TTFT = first token -
arrival, s), over the measured requests (warm-up rows left out): mean, p50, p90 measured and
predicted, relative errors (predicted / measured - 1), per-request Pearson and Spearman
correlations and the median absolute relative error; the issue's targets (mean JCT within 10%,
p90 JCT within 15%) are judged on the prediction only. Diagnostic variants (never the result):
``token_kv`` (KV counted in tokens, not blocks) and ``in_situ_law`` (the law fitted on the run's
own iterations: what is left is the scheduler model's error).

Modules: :mod:`~llmqueue.studies.validation.spec` (config and run folders),
:mod:`~llmqueue.engines.calibration` (the step law from an engine's own iterations,
used by the measurement driver and the comparison), :mod:`~llmqueue.studies.validation.tables`
(prediction and comparison).
"""

# this study's record in the catalogue (llmqueue.catalog)
STUDY = {"follows": "literature", "rules": ["validation", "validation_law"]}
