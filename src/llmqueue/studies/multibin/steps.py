"""The multibin study's rule steps (Multi-Bin Batching's synthetic, simulated-LLM and learned-bin
tables and claim 11): one function per rule, run by workflow/scripts/step.py on the job
(docs/architecture.md, "The pipeline")."""

from __future__ import annotations

from typing import Any


def claims(sm: Any) -> None:
    """Claim 11 (Multi-Bin Batching) from the study's tables (llmqueue.studies.multibin.claims.claims_rows)."""
    import pandas as pd

    from llmqueue.claims import ClaimBook, claims_frame
    from llmqueue.io import write_csv
    from llmqueue.studies.multibin.claims import claims_rows

    book = ClaimBook(pd.read_csv(sm.input.reference, dtype={"id": str}), sm.params.tolerances)
    rows = claims_rows(
        book,
        pd.read_csv(sm.input.synthetic),
        pd.read_csv(sm.input.capacity),
        pd.read_csv(sm.input.latency),
    )
    write_csv(claims_frame(rows), sm.output[0])


def learned(sm: Any) -> None:
    """Multi-Bin Batching with bins from the SSJF study's learned length model on its held-out rows
    (llmqueue.studies.multibin.tables.learned_capacity_table)."""
    import logging

    from llmqueue.io import write_csv
    from llmqueue.predictor.features import read_heldout
    from llmqueue.predictor.model import load_model
    from llmqueue.sim.predictors import Learned, row_predictions
    from llmqueue.studies.multibin.spec import LLMSpec
    from llmqueue.studies.multibin.tables import learned_capacity_table

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    trace = read_heldout(sm.input.trace, P.columns, P.train_fraction, where="ssjf.trace")
    predictor = Learned(sm.input.model, load_model(sm.input.model))
    predictions = row_predictions(predictor, trace, P.seed)
    df = learned_capacity_table(
        LLMSpec.from_config(P.spec),
        trace.test.prompt_tokens,
        trace.test.output_tokens,
        predictions,
        predictor,
        f"learned {P.kind}",
        P.seed,
        logging.info,
    )
    write_csv(df, sm.output[0])


def llm_table(sm: Any) -> None:
    """Multi-Bin Batching, simulated LLM, the table its rule names (``params.table``):
    ``capacity``, the highest sustainable rate per (p_e, k), exact and simulated
    (llmqueue.studies.multibin.tables.llm_capacity_table), or ``latency``, the mean latency
    against k at several loads beside Lemma 5.1 (llm_latency_table)."""
    import logging

    from llmqueue.io import write_csv
    from llmqueue.studies.multibin import tables
    from llmqueue.studies.multibin.spec import LLMSpec

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    table = {"capacity": tables.llm_capacity_table, "latency": tables.llm_latency_table}[P.table]
    write_csv(table(LLMSpec.from_config(P.spec), P.seed, logging.info), sm.output[0])


def synthetic(sm: Any) -> None:
    """Multi-Bin Batching, synthetic setting (Theorem 4.2 against simulation):
    llmqueue.studies.multibin.tables.synthetic_table."""
    import logging

    from llmqueue.io import write_csv
    from llmqueue.studies.multibin.spec import SyntheticSpec
    from llmqueue.studies.multibin.tables import synthetic_table

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    df = synthetic_table(SyntheticSpec.from_config(P.spec), P.seed, logging.info)
    write_csv(df, sm.output[0])


def vs_continuous(sm: Any) -> None:
    """Multi-Bin Batching against continuous batching, and how their two time laws relate
    (llmqueue.studies.multibin.tables.vs_continuous_tables)."""
    import logging

    from llmqueue.io import read_json, write_csv
    from llmqueue.profiles import fit_json_path, resolve_batch_profile, resolve_step_profile
    from llmqueue.studies.multibin.spec import VsContinuousSpec
    from llmqueue.studies.multibin.tables import vs_continuous_tables

    logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
    P = sm.params
    spec = VsContinuousSpec.from_config(P.spec)

    def fit(cfg):
        path = fit_json_path(cfg)
        return read_json(path) if path else None

    batch_law = resolve_batch_profile(spec.batch_profile, P.batch_cfg, fit(P.batch_cfg))
    step_law = resolve_step_profile(spec.step_profile, P.step_cfg, fit(P.step_cfg))
    table, laws = vs_continuous_tables(spec, batch_law, step_law, P.seed, logging.info)
    write_csv(table, sm.output.table)
    write_csv(laws, sm.output.laws)
