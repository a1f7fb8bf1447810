"""The workflow's steps that run the command line or belong to no study (through
``workflow/scripts/step.py``, as a study's ``steps``): the slices of ``llmqueue plan``'s search and
their merge (the command itself, so the workflow plans what an operator's command plans), the
figure registry's list and the gathered claims table. One function per rule, taking the job
(Snakemake's ``snakemake`` object); each imports what it needs in its body, so a rule's code
inputs are its own function's imports (``ImportGraph.function_code``).
"""

from __future__ import annotations

from typing import Any


def figure_list(sm: Any) -> None:
    """results/figures.tsv: the figure registry (target, study, plot module, caption, claims,
    files)."""
    from llmqueue.io import write_text

    columns = ["target", "study", "module", "caption", "claims", "outputs"]
    lines = ["\t".join(columns), *("\t".join(map(str, row)) for row in sm.params.rows)]
    write_text("\n".join(lines) + "\n", sm.output[0])


def gather_claims(sm: Any) -> None:
    """Gather results/claims/<study>.csv into results/claims.csv."""
    import pandas as pd

    from llmqueue.claims import gather_claims
    from llmqueue.io import write_csv

    tables = [p for p in sm.input if p.endswith(".csv")]
    write_csv(gather_claims(pd.read_csv(p, dtype={"id": str}) for p in tables), sm.output[0])


def plan_merge(sm: Any) -> None:
    """The slices of llmqueue plan's search merged (rule plan): the table and its summary."""
    import contextlib
    import io
    import json

    from llmqueue.cli import main
    from llmqueue.cli import plan as _plan  # noqa: F401 - the command's code, for the import graph
    from llmqueue.io import write_json

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


def plan_slice(sm: Any) -> None:
    """One slice of llmqueue plan's search (rule plan_slice): the command itself, on the config's flags."""
    import contextlib
    from pathlib import Path

    import yaml

    from llmqueue.cli import main
    from llmqueue.cli import plan as _plan  # noqa: F401 - the command's code, for the import graph

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
