"""Roofline-predicted fit.json of one model on one GPU spec (verdict 'predicted')."""

from llmqueue.io import write_json
from llmqueue.profiling.fits import roofline_fit_json

sm = snakemake  # noqa: F821
write_json(
    roofline_fit_json(sm.wildcards.pmodel, sm.wildcards.gpu, sm.params.profiling), sm.output[0]
)
