"""fit.json of one model from a committed measurement folder data/profiling/<hw>/."""

from pathlib import Path

from llmqueue.io import write_json
from llmqueue.profiling.fits import depth_source, measured_fit_json, read_measured, read_step_law

sm = snakemake  # noqa: F821
prof = sm.params.profiling
model = sm.wildcards.pmodel
folder = Path(sm.input.timing).parent
timing, e2e, meta = read_measured(folder)
step = read_step_law(folder)  # None when the folder has no step_law.csv
fit = measured_fit_json(
    sm.wildcards.hw,
    model,
    timing,
    e2e,
    meta,
    prof,
    depth_from=depth_source(model, prof["hardware"]["cpu"].get("depth_models", [])),
    depth_tolerance=float(prof.get("depth_tolerance", 0.1)),
    step=step,
)
write_json(fit, sm.output[0])
