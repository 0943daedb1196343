"""How a ``qrsim NAME`` subcommand module declares itself: one ``Subcommand`` of its arguments, its help
line and its docstring, which registers it on the ``qrsim`` parser (``build_parser``) and runs it
standalone (``main``: ``python -m qrsim_ros.cli.NAME ...``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

from qrsim_ros.cli import standalone_main, subcommand_parser


def run_parsed(args: argparse.Namespace) -> int:
    """Run the function the parsed arguments name (``func``: ``cli.finish_parser`` sets it)."""
    return args.func(args)


@dataclass(frozen=True)
class Subcommand:
    """The subcommand ``prog`` (``qrsim NAME``): ``add_arguments(parser)`` adds its arguments and returns
    the parser finished (``cli.finish_parser``: the run function as ``func``, one-line usage errors);
    ``help_text`` is its line in ``qrsim --help``, ``doc`` (the module docstring) its description."""

    prog: str
    help_text: str
    doc: str | None
    add_arguments: Callable[[argparse.ArgumentParser], argparse.ArgumentParser]

    @property
    def name(self) -> str:
        """NAME of ``qrsim NAME``."""
        return self.prog.rpartition(" ")[2]

    def build_parser(self, subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
        """Register the subcommand on a ``qrsim`` subparsers object."""
        return self.add_arguments(subcommand_parser(subparsers, self.name, self.help_text, self.doc))

    def main(self, argv: list[str] | None = None) -> int:
        """Standalone entry point: ``argv`` (default: the command line) parsed with the subcommand's
        arguments, then run; a usage error (status 2, one line) or --help (0) returns its status."""
        return standalone_main(self.add_arguments, run_parsed, self.prog, self.doc, argv)
