"""fit.json of one model from a committed measurement folder data/profiling/<hw>/."""

from pathlib import Path

from llmqueue.io import write_json
from llmqueue.profiling.fits import measured_fit_json, read_measured

sm = snakemake  # noqa: F821
prof = sm.params.profiling
model = sm.wildcards.pmodel
timing, e2e, meta = read_measured(Path(sm.input.timing).parent)
depth_models = prof["hardware"]["cpu"].get("depth_models", [])
# A model without its own depth check borrows the per-layer costs of the model with the same block
# (Chinese-Alpaca-2-7B has LLaMA-2-7B's blocks; only its vocabulary differs).
depth_from = (
    model
    if model in depth_models
    else ("llama2-7b-chat" if "llama2-7b-chat" in depth_models else None)
)
fit = measured_fit_json(
    sm.wildcards.hw,
    model,
    timing,
    e2e,
    meta,
    prof,
    depth_from=depth_from,
    depth_tolerance=float(prof.get("depth_tolerance", 0.1)),
)
write_json(fit, sm.output[0])
