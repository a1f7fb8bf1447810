"""Execute one study notebook with papermill from cached results and render it to HTML.

The notebook receives the study's name, figure stems, claim numbers and results folder as
papermill parameters; it reads files only (never recomputes a simulation). Both outputs are
written atomically, so a killed run leaves no notebook that looks finished.
"""

import logging
import sys
from pathlib import Path

import nbformat
import papermill
from nbconvert import HTMLExporter

from llmqueue.io import atomic_path, write_text

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, force=True)
root = Path.cwd()
parameters = {
    "study": sm.wildcards.study,
    "figures": list(sm.params.figures),
    "claim_numbers": [int(n) for n in sm.params.claim_numbers],
    "results_dir": sm.params.results_dir,
    "claims_csv": sm.input.claims,
    "config_file": "config/config.yaml",
    "root": str(root),
}
# The kernel imports the same llmqueue as the pipeline: it inherits the job's PYTHONPATH, set
# for the whole workflow in workflow/rules/common.smk.
with atomic_path(sm.output.ipynb) as tmp:
    papermill.execute_notebook(
        sm.input.notebook,
        str(tmp),
        parameters=parameters,
        kernel_name="python3",
        cwd=str(root),
        progress_bar=False,
        log_output=True,
        stdout_file=sys.stderr,
    )
    nb = nbformat.read(tmp, as_version=4)
exporter = HTMLExporter()
exporter.exclude_input_prompt = True
exporter.exclude_output_prompt = True
body, _ = exporter.from_notebook_node(nb)
write_text(body, sm.output.html)
