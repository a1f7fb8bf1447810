"""The paper's Fig. 4a closed form for the no-batching group of the validation matrix: W_q(l) by
Eq. (1)-(5) over token limits l at the runs' planned rate, with the calibrated per-request law
and the trace's length law (llmqueue.studies.validation.matrix.token_limit_rows)."""

from llmqueue.io import write_csv
from llmqueue.studies.validation.matrix import token_limit_rows
from llmqueue.studies.validation.matrix_spec import read_group

sm = snakemake  # noqa: F821
data = read_group(sm.params.folder)
write_csv(token_limit_rows(data, sm.params.points), sm.output[0])
