# llmqueue: the whole study, from profiling data to figures and the claims table.
# Paper: arXiv 2407.05347. Run: `make reproduce` (or `.venv/bin/snakemake --cores all`).
import sys

# jsonschema imports rfc3987_syntax when it is installed, which compiles ~40 grammars (about 4 s)
# on every run, even one with nothing to do; our schema uses no IRI formats, so leave it out.
sys.modules.setdefault("rfc3987_syntax", None)

from snakemake.exceptions import WorkflowError
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


# first: the environment (this checkout's llmqueue), shared helpers and the figure registry
include: "workflow/rules/common.smk"


from llmqueue.studies import check_config
from llmqueue.schema import fill_defaults
from llmqueue.errors import InputError

# errors name the file(s) the config came from: config/config.yaml, or those given with --configfile
CONFIG_FILES = (
    ", ".join(str(p) for p in workflow.overwrite_configfiles) or "config/config.yaml"
)
try:
    # the schema, in one pass: every key and value checked, and every default it declares filled
    # in every section (snakemake's validate fills only the top file's), so the rules read
    # config[key], never a second default
    fill_defaults(config, "workflow/schemas/config.schema.yaml")
    check_config(config, workflow.basedir)
except InputError as err:
    raise WorkflowError(f"{CONFIG_FILES}: {err}")


report: "workflow/report/workflow.rst"


# every study's rule files, in its package beside its steps, in the registry's order
# (llmqueue.studies.STUDIES)
from llmqueue.studies import STUDIES

for _study in STUDIES:
    for _rules in _study.rule_files:

        include: _rules


# then what reads every study's declarations: plot rules, claims, docs, notebooks
include: "workflow/rules/figures.smk"
include: "workflow/rules/claims.smk"
include: "workflow/rules/docs.smk"
include: "workflow/rules/notebooks.smk"


wildcard_constraints:
    profile="[A-Za-z0-9_\-]+",
    scenario="patient|impatient",


rule all:
    default_target: True
    input:
        all_targets(),
        "results/claims.csv",
