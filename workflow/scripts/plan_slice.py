"""One slice of llmqueue plan's search (rule plan_slice): the command itself, on the config's flags."""

import contextlib
from pathlib import Path

import yaml

from llmqueue.cli import main
from llmqueue.cli import plan as _plan  # noqa: F401 - the command's code, for the import graph

sm = snakemake  # noqa: F821
out = Path(sm.output[0])
# the one step profile the command reads (--profile), beside the output
profile = out.with_name(f".{out.stem}.profiles.yaml")
profile.write_text(yaml.safe_dump(dict(sm.params.profiles)))
try:
    with open(sm.log[0], "w") as log, contextlib.redirect_stdout(log):
        rc = main(
            [
                "plan",
                *sm.params.args,
                "--trace",
                str(sm.input.trace),
                "--config",
                str(profile),
                "--slice",
                f"{sm.wildcards.pslice}/{sm.params.slices}",
                "--csv",
                str(out),
                "--workers",
                str(sm.threads),
            ]  # fmt: skip
        )
finally:
    profile.unlink(missing_ok=True)
if rc != 0:
    raise SystemExit(f"llmqueue plan exited {rc} (see {sm.log[0]})")
