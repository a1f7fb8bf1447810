"""The token-limit study's rule steps (the token-limit sweeps, the trade-off and claims 3-5): one
function per rule, run by workflow/scripts/step.py on the job (docs/architecture.md, "The
pipeline")."""

from __future__ import annotations

from typing import Any


def claims(sm: Any) -> None:
    """Claims 3-5: the paper's numbers beside ours, per latency profile
    (llmqueue.studies.token_limit.claims.claims_rows)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import fit_json_path, resolve_linear_profile
    from llmqueue.studies.token_limit.claims import claims_rows
    from llmqueue.tokens import parse_law

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


def sweep(sm: Any) -> None:
    """One token-limit sweep (a profile and a scenario): closed form, exact and simulated delay for
    every limit of the grid (llmqueue.studies.token_limit.tables.sweep_table)."""
    import logging

    from llmqueue.grids import grid_from_config
    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import resolve_linear_profile
    from llmqueue.sim.settings import SimSettings
    from llmqueue.studies.token_limit.tables import sweep_table
    from llmqueue.tokens import parse_law

    logging.basicConfig(
        filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s", force=True
    )
    P = sm.params
    fit = read_json(sm.input.fit[0]) if sm.input.fit else None
    latency = resolve_linear_profile(sm.wildcards.profile, P.profile_cfg, fit)
    limits = grid_from_config(P.limits, "token_limit.limits")
    logging.info("profile %s: %s; %d limits", latency.name, latency, limits.size)
    df = sweep_table(
        parse_law(P.tokens),
        latency,
        limits,
        P.rate_per_s,
        P.patience_s,
        SimSettings.from_config(P.sim) if P.sim else None,
        P.seed,
        P.impatience,
        logging.info,
    )
    write_csv(df, sm.output[0])


def tradeoff(sm: Any) -> None:
    """F1, F2 over the l grid (Fig. 4d) and the gamma sweep of g(r) = r^gamma."""
    import pandas as pd

    from llmqueue.io import write_csv
    from llmqueue.studies.token_limit.spec import gamma_grid
    from llmqueue.studies.token_limit.tables import gamma_sweep_table, tradeoff_table
    from llmqueue.tokens import parse_law

    tradeoff = sm.params.tradeoff
    law = parse_law(sm.params.tokens)
    patient = pd.read_csv(sm.input.patient)
    impatient = pd.read_csv(sm.input.impatient)
    write_csv(tradeoff_table(law, patient, impatient, tradeoff), sm.output.tradeoff)
    write_csv(
        gamma_sweep_table(law, patient, impatient, tradeoff, gamma_grid(tradeoff)),
        sm.output.gamma_sweep,
    )
