"""Claim 2: KV-cache batch limit under each configured reading."""

import pandas as pd

from llmqueue.hardware.kvcache import kv_limit
from llmqueue.io import write_csv

sm = snakemake  # noqa: F821
kv = sm.params.profiling["kv_limit"]
rows = []
for r in kv["readings"]:
    lim = kv_limit(
        kv["model"],
        r["gpu"],
        int(kv["sequence_tokens"]),
        r["weights_dtype"],
        r["kv_dtype"],
        float(r["overhead_gib"]),
    )
    rows.append({"id": r["id"], **lim.to_dict()})
write_csv(pd.DataFrame(rows), sm.output[0])
