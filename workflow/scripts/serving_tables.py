"""The serving study's two tables (llmqueue.studies.serving.tables.capacity_markdown, replay_markdown)."""

import pandas as pd

from llmqueue.io import write_csv, write_text
from llmqueue.studies.serving.tables import capacity_markdown, replay_markdown

sm = snakemake  # noqa: F821
cap = pd.concat([pd.read_csv(p) for p in sm.input.capacity], ignore_index=True)
rep = pd.concat([pd.read_csv(p) for p in sm.input.replay], ignore_index=True)
write_csv(cap, sm.output.capacity_csv)
write_text(capacity_markdown(cap), sm.output.capacity_md)
write_csv(rep, sm.output.replay_csv)
write_text(replay_markdown(rep, sm.params.reference), sm.output.replay_md)
