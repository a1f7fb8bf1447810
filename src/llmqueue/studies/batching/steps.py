"""The batching study's rule steps (the batch-size sweeps, Fig. 3's data, K* and claims 6-9): one
function per rule, run by workflow/scripts/step.py on the job (docs/architecture.md, "The
pipeline")."""

from __future__ import annotations

from typing import Any


def claims(sm: Any) -> None:
    """Claims 6-9 from the batching tables (llmqueue.studies.batching.claims.claims_rows)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.hardware.roofline import roofline
    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import fit_json_path, resolve_batch_profile
    from llmqueue.studies.batching.claims import BandwidthFloor, ClaimsInputs, claims_rows
    from llmqueue.studies.batching.spec import ChainSettings, sweep_law

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
            panel: pd.read_csv(path)
            for panel, path in zip(P.fig5_panels, sm.input.fig5, strict=True)
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


def fig3(sm: Any) -> None:
    """Fig. 3a (E[L_b], E[T_b]) and Fig. 3b (mu_b) tables (llmqueue.studies.batching)."""
    from llmqueue.io import write_csv
    from llmqueue.profiles import resolve_batch_profile
    from llmqueue.studies.batching.tables import fig3a_table, fig3b_table
    from llmqueue.tokens import parse_law

    P = sm.params
    profiles = [resolve_batch_profile(n, P.profiles[n]) for n in P.profile_names]
    write_csv(
        fig3a_table(parse_law(P.fig3a_tokens), profiles, P.b_max, P.mc_samples, P.seed),
        sm.output.fig3a,
    )
    write_csv(fig3b_table(profiles, P.fig3b_tokens, P.b_max), sm.output.fig3b)


def kstar(sm: Any) -> None:
    """Claim 8: every fixed batch size K at the claim rate for one profile
    (llmqueue.studies.batching.tables.kstar_table)."""
    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import resolve_batch_profile
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.batching.spec import ChainSettings, sweep_law
    from llmqueue.studies.batching.tables import kstar_table

    P = sm.params
    fit = read_json(sm.input.fit[0]) if sm.input.fit else None
    profile = resolve_batch_profile(P.profile, P.profile_cfg, fit)
    df = kstar_table(
        profile,
        sweep_law(P.tokens, P.tail_cap_tokens),
        P.rate_per_s,
        tuple(P.k_range),
        SimSettings.from_config(P.sim),
        ChainSettings.from_config(P.chain),
        P.seed,
        P.stream,
    )
    write_csv(df, sm.output[0])


def sweep(sm: Any) -> None:
    """One lambda sweep of the batching study (a Fig. 5 panel, or Fig. 6a / 6b for one profile):
    llmqueue.studies.batching.tables.sweep_table with the rule's per-job spec."""
    import logging

    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import resolve_batch_profile
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.batching.spec import ChainSettings, SweepSpec, sweep_law
    from llmqueue.studies.batching.tables import sweep_table

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    fit = read_json(sm.input.fit[0]) if sm.input.fit else None
    profile = resolve_batch_profile(P.profile, P.profile_cfg, fit)
    spec = SweepSpec.from_dict(P.spec)
    df = sweep_table(
        spec,
        profile,
        sweep_law(spec.tokens, spec.tail_cap_tokens),
        SimSettings.from_config(P.sim),
        ChainSettings.from_config(P.chain),
        P.seed,
        logging.info,
    )
    write_csv(df, sm.output[0])
