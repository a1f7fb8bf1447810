"""The committed machine-speed run, cycle by cycle: the engine's iteration, the model's forward
pass and the two fixed kernels per cycle, and per series its spread and its correlation with the
forward pass (llmqueue.studies.validation.machine_speed)."""

import json
from pathlib import Path

from llmqueue.io import write_csv
from llmqueue.studies.validation.machine_speed import cycle_table, read_speed_run, speed_summary

sm = snakemake  # noqa: F821
folder = Path(sm.input.meta).parent
cycles, steps, model = read_speed_run(folder)
meta = json.loads((folder / "meta.json").read_text())
table = cycle_table(cycles, steps, model, int(meta["machine_speed"]["batch"]))
write_csv(table, sm.output.cycles)
write_csv(speed_summary(table), sm.output.summary)
