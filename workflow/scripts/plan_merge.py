"""The slices of llmqueue plan's search merged (rule plan): the table and its summary."""

import contextlib
import io
import json

from llmqueue.cli import main
from llmqueue.cli import plan as _plan  # noqa: F401 - the command's code, for the import graph
from llmqueue.io import write_json

sm = snakemake  # noqa: F821
argv = ["plan", "--merge", *map(str, sm.input.slices), "--csv", sm.output.csv, "--json",
        "--rate", sm.params.rate]  # fmt: skip
if sm.params.target_rate is not None:
    argv += ["--target-rate", str(sm.params.target_rate)]
buf = io.StringIO()
with contextlib.redirect_stdout(buf):
    rc = main(argv)
if rc != 0:
    raise SystemExit(f"llmqueue plan --merge exited {rc}")
out = json.loads(buf.getvalue())
out.pop("rows")
out["slo"] = sm.params.slo
write_json(out, sm.output.summary)
with open(sm.log[0], "w") as log:
    log.write(json.dumps(out, indent=2) + "\n")
