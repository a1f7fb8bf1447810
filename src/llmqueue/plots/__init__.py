"""One plot module per figure (``llmqueue.plots.<figure stem>``), all sharing :mod:`.style`.

Each module exposes ``plot(inputs, params) -> matplotlib.figure.Figure``: `inputs` maps the
rule's named inputs to DataFrames (CSV) or dicts (JSON); `params` holds the rule's params.
"""
