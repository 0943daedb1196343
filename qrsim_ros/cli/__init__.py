"""Command-line tools of qrsim_ros (pure Python; no rclpy)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import NoReturn


def one_line_errors(parser: argparse.ArgumentParser, prog: str, *,
                    dash_hint: str = "") -> argparse.ArgumentParser:
    """Make ``parser`` report a usage error as one stderr line, ``PROG: message (see 'PROG --help')``,
    with exit status 2 (argparse prints the usage and the message on two lines). ``dash_hint`` is
    appended when an option misses its value, most likely one starting with '-'."""
    def error(message: str) -> NoReturn:
        if dash_hint and "expected one argument" in message:
            message += f" ({dash_hint})"
        parser.exit(2, f"{prog}: {message} (see '{prog} --help')\n")

    parser.error = error  # type: ignore[method-assign]
    return parser


def standalone_main(add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
                    run: Callable[[argparse.Namespace], int], prog: str, doc: str | None,
                    argv: list[str] | None) -> int:
    """A subcommand run as ``python -m qrsim_ros.cli.<name>``: parse ``argv`` with the subcommand's
    arguments and run it; a usage error (status 2, one line) or --help (0) returns its status."""
    parser = add_arguments(argparse.ArgumentParser(
        prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter))
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    return run(args)
