"""The prefix study's rule steps: one function per rule, run by workflow/scripts/step.py on the
job (docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def runs(sm: Any) -> None:
    """Every run of one (trace, step profile) (llmqueue.studies.prefix.tables.prefix_runs)."""
    from llmqueue.io import read_json, write_csv
    from llmqueue.studies.prefix.spec import PrefixSpec, profile_law, read_replay
    from llmqueue.studies.prefix.tables import prefix_runs

    P = sm.params
    spec = PrefixSpec.from_config(P.section)
    law, kv = profile_law(
        P.profile, P.profiles, read_json(sm.input.fit[0]), spec.kv_memory_fraction
    )
    replay = read_replay(sm.input.trace, P.trace)
    write_csv(prefix_runs(spec, replay, law, kv, trace=P.trace, seed=P.seed), sm.output[0])


def table(sm: Any) -> None:
    """Every (trace, profile)'s runs in one table."""
    import pandas as pd

    from llmqueue.io import write_csv

    write_csv(pd.concat([pd.read_csv(p) for p in sm.input.runs], ignore_index=True), sm.output[0])


def claims(sm: Any) -> None:
    """Claim 13 from the study's table (llmqueue.studies.prefix.claims.claims_rows)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.io import write_csv
    from llmqueue.studies.prefix.claims import claims_rows

    reference = pd.read_csv(sm.input.reference, dtype={"id": str}, keep_default_na=False)
    book = ClaimBook(reference, sm.params.tolerances)
    rows = claims_rows(book, reference, pd.read_csv(sm.input.table))
    write_csv(claims_frame(rows), sm.output[0])
