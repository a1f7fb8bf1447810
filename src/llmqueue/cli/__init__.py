"""The command line: ``llmqueue token-limit``, ``batching``, ``simulate``, ``predictor`` (the
operator commands), ``profile`` (the profiling harness) and ``validate`` (the vLLM measurement).

Each subcommand lives in its own module (``llmqueue.cli.<name>``) exposing
``register(subparsers)``; its handler returns an exit code. A module imports at its top only
what registering its flags needs, and the rest inside its handler, so that every command runs
where its own dependencies are: ``profile`` on a GPU machine with torch but no Numba, ``validate``
in the vLLM environment without scikit-learn or matplotlib. Bad input raises
:class:`llmqueue.errors.InputError`, which ends here as one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from llmqueue.errors import InputError

# The subcommands, by name (the module is llmqueue.cli.<name with - as _>), with the help line
# `llmqueue --help` shows without importing them.
SUBCOMMANDS = {
    "token-limit": "the max-token limit of an M/G/1 server (paper Sec. III)",
    "batching": "one batching policy by formula, bound, exact chain and simulation (Sec. IV)",
    "simulate": "one serving policy (queue order, batch former, KV budget) under your load",
    "plan": "the serving configurations that carry your load within your latency targets",
    "predictor": "train or score an output-length predictor on a trace",
    "profile": "measure and fit latencies (the profiling harness; a GPU machine as it is)",
    "validate": "measure vLLM's CPU build for the validation (in .venv-vllm)",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep it one line
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def add_command(subparsers: Any, name: str, doc: str | None) -> argparse.ArgumentParser:
    """The parser of subcommand `name`: its help line from :data:`SUBCOMMANDS`, its module's
    docstring `doc` as its description (each module's ``register`` starts with this)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name,
        help=SUBCOMMANDS[name],
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def _module(name: str) -> str:
    return f"llmqueue.cli.{name.replace('-', '_')}"


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand; with `only`, only that subcommand's module is imported
    (the others stay one help line), so a command runs where just its own dependencies are."""
    parser = _Parser(prog="llmqueue", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name, help_line in SUBCOMMANDS.items():
        if only is None or name == only:
            importlib.import_module(_module(name)).register(sub)
        else:
            sub.add_parser(name, help=help_line)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The subcommand named on the command line (its first word that is not a flag), if known."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command: 0 on success; 2 with one line naming the flag and the allowed values on
    bad input (before any long work); 0 without a traceback when a reader closes the output
    early (``... --json | head -1``); 1 with one line for anything unforeseen."""
    words = list(sys.argv[1:] if argv is None else argv)
    only = _command(words)
    parser = build_parser(only if only is not None else "")
    try:
        args = parser.parse_args(words)
    except SystemExit as done:  # --help (0) or a flag refused by its type (2, one line printed)
        return done.code if isinstance(done.code, int) else 2
    try:
        return int(args.handler(args))
    except InputError as err:
        print(f"llmqueue {args.command}: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except KeyboardInterrupt:
        print(f"llmqueue {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - the last line of defence: one line, never a traceback
        print(
            f"llmqueue {args.command}: internal error ({type(err).__name__}: {err}); "
            "this is a bug, please report it with the command line",
            file=sys.stderr,
        )
        return 1


def _quiet_stdout() -> None:
    """The reader of stdout has gone: point stdout at /dev/null so that Python's flush at exit
    raises nothing more."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (a test's buffer): nothing to do
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
