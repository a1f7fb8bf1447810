# Validation of the serving model against vLLM (issue 17).
