"""The step law's form on the validation matrix's committed groups
(llmqueue.studies.validation.law_form): per group and form, leave-one-batch-out on the calibration
batches, and the judged runs' iterations and mean JCT; the forms' table with the chosen form
(results/validation/matrix/<engine>/law_forms.csv, figures/table_<engine>_law_forms.md)."""

import logging

import pandas as pd

from llmqueue.io import write_csv, write_text
from llmqueue.studies.validation.law_form import (
    choose_form,
    group_rows,
    mark_chosen,
    markdown_law_forms,
)
from llmqueue.studies.validation.matrix_spec import read_group

sm = snakemake  # noqa: F821
logging.basicConfig(filename=sm.log[0], level=logging.INFO, format="%(asctime)s %(message)s")
settings = dict(sm.params.settings, seed=sm.params.seed)
rows = pd.concat(
    [group_rows(read_group(folder), settings) for folder in sm.params.folders],
    ignore_index=True,
)
rows = mark_chosen(rows)
logging.info(
    "%d groups, %d rows; chosen form %s", len(sm.params.folders), len(rows), choose_form(rows)
)
write_csv(rows, sm.output.csv)
write_text(markdown_law_forms(rows), sm.output.md)
