"""Render the generated blocks of the documentation and splice them into their pages.

Glue: loads each block's input files (CSV as text tables, JSON, YAML), renders the block with
llmqueue.docgen, writes every fragment to the output (results/docs/blocks.json) and splices the
fragments into the pages in place (a page is rewritten only when one of its blocks changed).
"""

import json
from pathlib import Path

import pandas as pd
import yaml

from llmqueue import docgen
from llmqueue.io import write_json, write_text

sm = snakemake  # noqa: F821


def load(path):
    """One input file: a CSV as a table of text cells, JSON or YAML as parsed objects."""
    suffix = Path(path).suffix
    if suffix == ".csv":
        return pd.read_csv(path, dtype=str, keep_default_na=False)
    if suffix == ".json":
        return json.loads(Path(path).read_text())
    if suffix in (".yaml", ".yml"):
        return yaml.safe_load(Path(path).read_text())
    raise ValueError(f"{path}: no loader for {suffix!r} files")


def load_input(spec):
    """A path -> its content; {key: path} -> {key: content}; [CSV paths] -> one table;
    [other paths] -> {path: content}."""
    if isinstance(spec, str):
        return load(spec)
    if isinstance(spec, dict):
        return {key: load(path) for key, path in spec.items()}
    if all(p.endswith(".csv") for p in spec):
        return pd.concat([load(p) for p in spec], ignore_index=True)
    return {p: load(p) for p in spec}


fragments = {}
for name, block in sm.params.blocks.items():
    inputs = {role: load_input(spec) for role, spec in block["inputs"].items()}
    body = docgen.render(block["kind"], **inputs, **block["options"])
    fragments[name] = docgen.Fragment(docgen.block_sources(block["inputs"]), body)

rendered = {name: {"sources": list(f.sources), "body": f.body} for name, f in fragments.items()}
# a block a page lacks is an error, except a new section's block (params.headed: {page: {block:
# the prose before it}}), which is appended with its heading
headed = getattr(sm.params, "headed", None) or {}
changed = [
    p
    for p in sm.params.pages
    if docgen.splice_file(p, fragments, keep=sm.params.skipped, headed=headed.get(p))
]
write_json(rendered, sm.output[0])
write_text("".join(f"rewrote {p}\n" for p in changed) or "no page changed\n", sm.log[0])
