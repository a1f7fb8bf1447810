"""Claims 1a-1h (Table I) and 2a-2c (KV-cache limit) of the profiling study; rows 1a-<gpu-id> ..
for every committed GPU measurement listed in profiling.measured (llmqueue.studies.profiling.claims)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.hardware.roofline import roofline
from llmqueue.io import read_json, write_csv
from llmqueue.profiling.fits import is_gpu_source
from llmqueue.studies.profiling.claims import (
    composition_caveat,
    kernel_table1_claims,
    kv_limit_claims,
    measured_gpu_table1_claims,
    roofline_table1_claims,
)

sm = snakemake  # noqa: F821
rp = sm.params.roofline
gpu = rp["batch_gpu_for_fig5"]
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), sm.params.tolerances)
r = roofline("llama2-7b-chat", gpu, rp["dtype"], rp["bandwidth_efficiency"], rp["flops_efficiency"])
label = read_json(next(p for p in sm.input.roofline if f"roofline-{gpu}/" in p))["label"]
rows = roofline_table1_claims(book, pd.read_csv(sm.input.table1), r.request_time, label)
table1_ours = pd.read_csv(sm.input.table1_ours)
kfits = {f["source"]: f for f in (read_json(p) for p in sm.input.kernel_fits)}
for name in sm.params.kernels:
    if kfits[name]["model"] == "llama2-7b-chat":
        rows += kernel_table1_claims(book, table1_ours, name, kfits[name])
for hw, meta_path, fit_path in zip(
    sm.params.measured, sm.input.meta, sm.input.measured_fits, strict=True
):
    meta = read_json(meta_path)
    if is_gpu_source(meta):
        rows += measured_gpu_table1_claims(
            book, table1_ours, hw, meta, composition_caveat(read_json(fit_path))
        )
rows += kv_limit_claims(book, pd.read_csv(sm.input.kv, dtype={"id": str}).set_index("id"))
write_csv(claims_frame(rows), sm.output[0])
