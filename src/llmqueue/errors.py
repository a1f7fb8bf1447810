"""Errors raised for bad user input (config keys, law specs, data files, CLI arguments)."""


class InputError(ValueError):
    """Bad input from the user. The message names the key, file or argument and the allowed range.

    The CLI turns it into a one-line message on stderr with exit code 2; the Snakefile turns it
    into a failed start before any job runs.
    """


class UnstableError(InputError):
    """A queue asked for at a load where it has no steady state (e.g. rho >= 1 for patient users)."""
