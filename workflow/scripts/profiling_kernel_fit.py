"""fit.json of a kernel-profile source (kernels measured by others + roofline attention)."""

from llmqueue.io import read_json, write_json
from llmqueue.profiling.fits import kernel_fit_json
from llmqueue.profiling.kernels import load_kernel_profile

sm = snakemake  # noqa: F821
kcfg = sm.params.kernel
if kcfg["model"] != sm.wildcards.pmodel:
    raise ValueError(f"{sm.wildcards.ksrc} profiles {kcfg['model']}, not {sm.wildcards.pmodel}")
kp = load_kernel_profile(sm.wildcards.ksrc, kcfg, sm.params.profiling)
write_json(kernel_fit_json(kp, read_json(sm.input.meta), sm.params.profiling), sm.output[0])
