"""The error table of every compared vLLM run: figures/table_vllm_validation.csv (all rows) and
.md (llmqueue.studies.validation.markdown_table)."""

from pathlib import Path

import pandas as pd

from llmqueue.io import read_json, write_csv, write_text
from llmqueue.studies.validation.tables import markdown_table, settings_note

sm = snakemake  # noqa: F821
comparison = pd.concat([pd.read_csv(p) for p in sm.input.comparisons], ignore_index=True)
notes = [
    settings_note(Path(p).parent.name, read_json(p), sm.params.kv_model, sm.params.kv_budget)
    for p in sm.input.settings
]
write_csv(comparison, sm.output.csv)
write_text(markdown_table(comparison, "\n".join(notes)), sm.output.md)
