"""Claims 3-5: the paper's numbers beside ours, per latency profile
(llmqueue.studies.token_limit.claims.claims_rows)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.io import read_json, write_csv
from llmqueue.profiles import fit_json_path, resolve_linear_profile
from llmqueue.studies.token_limit.claims import claims_rows
from llmqueue.tokens import parse_law

sm = snakemake  # noqa: F821
P = sm.params
fits = {path: read_json(path) for path in sm.input.fits}
profiles, tables = {}, {}
for i, (name, cfg) in enumerate(P.profiles.items()):
    path = fit_json_path(cfg)
    profiles[name] = resolve_linear_profile(name, cfg, fits[path] if path else None)
    tables[name] = {
        key: pd.read_csv(sm.input[key][i])
        for key in ("patient", "impatient", "tradeoff", "gamma_sweep")
    }
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), P.tolerances)
rows = claims_rows(book, parse_law(P.tokens), profiles, tables, P.claim_limits, P.main_profile)
write_csv(claims_frame(rows), sm.output[0])
