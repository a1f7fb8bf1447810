"""Study tables: pure functions that turn config values into the DataFrames the pipeline caches."""
