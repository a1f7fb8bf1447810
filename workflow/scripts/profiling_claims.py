"""Claims 1 (Table I) and 2 (KV-cache limit) of the profiling study: one row per distinct Table I
cell from the best source (the first committed GPU measurement of profiling.measured, else the
first kernel profile measured on an A100), the others in its note; the roofline as a bound; Table
I's slope and intercept; the KV limit and its bound (llmqueue.studies.profiling.claims)."""

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
    restate_table1,
    roofline_table1_claims,
    table1_shape_claims,
)

sm = snakemake  # noqa: F821
rp = sm.params.roofline
gpu = rp["batch_gpu_for_fig5"]
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), sm.params.tolerances)
r = roofline("llama2-7b-chat", gpu, rp["dtype"], rp["bandwidth_efficiency"], rp["flops_efficiency"])
label = read_json(next(p for p in sm.input.roofline if f"roofline-{gpu}/" in p))["label"]
table1 = pd.read_csv(sm.input.table1)
rows = roofline_table1_claims(book, table1, r.request_time, label)
table1_ours = pd.read_csv(sm.input.table1_ours)
by_source = {}  # source -> (rows, column of figures/table1.csv, label, why not the paper's GPU)
for hw, meta_path, fit_path in zip(
    sm.params.measured, sm.input.meta, sm.input.measured_fits, strict=True
):
    meta = read_json(meta_path)
    if is_gpu_source(meta):
        gpu_name = str(meta.get("environment", {}).get("gpu", "an unnamed GPU"))
        by_source[hw] = (
            measured_gpu_table1_claims(
                book, table1_ours, hw, meta, composition_caveat(read_json(fit_path))
            ),
            f"{hw}_composed_s",
            f"the times measured on {gpu_name}",
            "" if "A100" in gpu_name.upper() else f"measured on {gpu_name}, not the paper's A100",
        )
kfits = {f["source"]: f for f in (read_json(p) for p in sm.input.kernel_fits)}
kernels = [n for n in sm.params.kernels if kfits[n]["model"] == "llama2-7b-chat"]
for name in sorted(kernels, key=lambda n: not str(kfits[n]["gpu"]["name"]).startswith("a100")):
    a100 = str(kfits[name]["gpu"]["name"]).startswith("a100")
    by_source[name] = (
        kernel_table1_claims(book, table1_ours, name, kfits[name]),
        f"{name}_kernels_s",
        f"the kernel sums of {name}",
        "" if a100 else f"kernels measured on another GPU than the paper's A100 ({name})",
    )
primary = next(iter(by_source))
rows += restate_table1(book, {k: v[0] for k, v in by_source.items()}, primary)
_, column, source_label, incomparable = by_source[primary]
rows += table1_shape_claims(book, table1, table1_ours[column], source_label, incomparable)
rows += kv_limit_claims(book, pd.read_csv(sm.input.kv, dtype={"id": str}).set_index("id"))
write_csv(claims_frame(rows), sm.output[0])
