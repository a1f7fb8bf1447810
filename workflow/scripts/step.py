"""Run one step of a study: the library function a rule names in ``params.step``
(``"package.module:function"``), called with the job (Snakemake's ``snakemake`` object: its
``input``, ``output``, ``params``, ``wildcards`` and ``log``). Rule usage (docs/architecture.md)::

    input: ..., code=step_code("llmqueue.studies.<study>.steps:<function>")
    params: step="llmqueue.studies.<study>.steps:<function>", ...
    script: "../scripts/step.py"

The function imports what it needs in its body, and ``step_code`` takes the job's code inputs
from the import graph (``llmqueue.importgraph.ImportGraph.function_code``): the function's own
imports, not those of the other steps of its module.
"""

import importlib

sm = snakemake  # noqa: F821
module, _, name = sm.params.step.partition(":")
getattr(importlib.import_module(module), name)(sm)
