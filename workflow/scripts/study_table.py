"""Write one study table: call the library function the rule names and write its DataFrame.

Glue for a study whose table is one function of its settings, so such a study needs no script of
its own (docs/architecture.md, "A study"; the worked example of
tests/workflow/test_study_template.py). Rule usage::

    input: code=script_code("study_table.py") + module_code("llmqueue.studies.<study>")
    output: "results/<study>/<table>.csv"
    params: function="llmqueue.studies.<study>:<function>", kwargs={...its keyword arguments}
    script: "../scripts/study_table.py"

The function's module is imported by name, which the import graph does not see: the rule names
its code with ``module_code``.
"""

import importlib

from llmqueue.io import write_csv

sm = snakemake  # noqa: F821
module, _, name = sm.params.function.partition(":")
table = getattr(importlib.import_module(module), name)(**dict(sm.params.kwargs))
write_csv(table, sm.output[0])
