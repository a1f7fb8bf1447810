"""Claims 6-9 from the batching tables (llmqueue.studies.batching.claims.claims_rows)."""

import pandas as pd

from llmqueue.claims import ClaimBook, claims_frame
from llmqueue.hardware.roofline import roofline
from llmqueue.io import read_json, write_csv
from llmqueue.profiles import fit_json_path, resolve_batch_profile
from llmqueue.studies.batching.claims import BandwidthFloor, ClaimsInputs, claims_rows
from llmqueue.studies.batching.spec import ChainSettings, sweep_law

sm = snakemake  # noqa: F821
P = sm.params
fits = {path: read_json(path) for path in sm.input.fits}


def profile(name):
    cfg = P.profiles[name]
    path = fit_json_path(cfg)
    return resolve_batch_profile(name, cfg, fits[path] if path else None)


def floor(gpu):
    r = roofline("llama2-7b-chat", gpu, P.roofline["dtype"])  # peak bandwidth: the least time
    bw = r.gpu.bandwidth_bytes_per_s
    return BandwidthFloor(gpu.upper(), r.weight_bytes / bw, r.weight_bytes / 1e9, bw / 1e12)


inputs = ClaimsInputs(
    fig3b=pd.read_csv(sm.input.fig3b),
    fig3_profiles=[profile(n) for n in P.fig3_profiles],
    fig3b_tokens=P.fig3b_tokens,
    fig5={
        panel: pd.read_csv(path) for panel, path in zip(P.fig5_panels, sm.input.fig5, strict=True)
    },
    fig5_profiles={panel: profile(name) for panel, name in P.fig5_panels.items()},
    fig5_rates=P.fig5_rates,
    fig5_b_range=P.fig5_b_range,
    fig5_bound_fit_range=P.fig5_bound_fit_range,
    fig6_profiles=[profile(n) for n in P.fig6_profiles],
    fig6_law=sweep_law(P.fig6_tokens, P.tail_cap_tokens),
    kstar=[pd.read_csv(path) for path in sm.input.kstar],
    fig6b=[pd.read_csv(path) for path in sm.input.fig6b],
    claim_rate=P.claim_rate,
    inoue_fit_ranges=P.inoue_fit_ranges,
    chain=ChainSettings.from_config(P.chain),
    peak_b_max=P.peak_b_max,
    kv_limit=P.kv_limit,
    floors=[floor(g) for g in P.roofline["gpus"] if g.startswith("a100")],
)
book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), P.tolerances)
write_csv(claims_frame(claims_rows(book, inputs)), sm.output[0])
