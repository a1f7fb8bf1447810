"""Claims 3-5: the paper's numbers beside ours, per latency profile."""

import pandas as pd

from llmqueue.claims import claims_frame
from llmqueue.io import read_json, write_csv
from llmqueue.latency import resolve_linear_profile
from llmqueue.studies.token_limit import claims_rows
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
tl = sm.params.section
profiles, tables = {}, {}
fits = {f: read_json(f) for f in sm.input.fits}
for i, (name, cfg) in enumerate(sm.params.profiles.items()):
    fit = None
    if cfg["kind"] == "fit":
        fit = fits[f"results/profiling/{cfg['source']}/{cfg['model']}/fit.json"]
    profiles[name] = resolve_linear_profile(name, cfg, fit)
    tables[name] = {
        key: pd.read_csv(sm.input[key][i])
        for key in ("patient", "impatient", "tradeoff", "gamma_sweep")
    }
rows = claims_rows(
    pd.read_csv(sm.input.reference, dtype={"id": str}),
    sm.params.tolerances,
    parse_law(tl["tokens"]),
    profiles,
    tables,
    tl["claim_limits"],
    tl["profile"],
)
write_csv(claims_frame(rows), sm.output[0])
