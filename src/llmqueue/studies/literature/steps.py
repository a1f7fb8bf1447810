"""The literature study's rule steps (the published tables beside the engine, the exact curves and
claim 12): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def claims(sm: Any) -> None:
    """Claim 12 (the literature) from the study's table (llmqueue.studies.literature.claims.claims_rows)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.io import write_csv
    from llmqueue.studies.literature.claims import claims_rows

    reference = pd.read_csv(sm.input.reference, dtype={"id": str}, keep_default_na=False)
    book = ClaimBook(reference, sm.params.tolerances)
    rows = claims_rows(book, reference, pd.read_csv(sm.input.table))
    write_csv(claims_frame(rows), sm.output[0])


def curves(sm: Any) -> None:
    """The literature study's exact curves (llmqueue.studies.literature.tables.literature_curves)."""
    from llmqueue.io import write_csv
    from llmqueue.studies.literature.tables import literature_curves

    write_csv(literature_curves(sm.input.reference, sm.params.spec), sm.output[0])


def table(sm: Any) -> None:
    """The literature study's table (llmqueue.studies.literature.tables.literature_table)."""
    from llmqueue.io import write_csv
    from llmqueue.studies.literature.tables import literature_table

    write_csv(literature_table(sm.input.reference, sm.params.spec, sm.params.seed), sm.output[0])
