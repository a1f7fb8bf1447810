"""The operator CLI: ``llmqueue token-limit``, ``batching``, ``simulate``, ``predictor``.

Each subcommand lives in its own module (``llmqueue.cli.<name>``) exposing
``register(subparsers)``; its handler returns an exit code. Bad input raises
:class:`llmqueue.errors.InputError`, which ends here as one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from typing import NoReturn

from llmqueue.errors import InputError

SUBCOMMANDS = ("token_limit", "batching", "simulate", "predictor")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse exits 2 too; keep it one clean line
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="llmqueue", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in SUBCOMMANDS:
        if importlib.util.find_spec(f"llmqueue.cli.{name}") is not None:
            importlib.import_module(f"llmqueue.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except InputError as err:
        print(f"llmqueue {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
