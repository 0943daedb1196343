"""``qrsim``: the project's command-line tool. Each subcommand lives in its own module, imported only
when it runs: ``qrsim launch`` does not pay for Dask and matplotlib, and ``qrsim --version``, ``qrsim
help``, ``qrsim --help`` and a mistyped command import no subcommand (their lines come from
``cli.commands``)."""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import signal
import sys
from collections.abc import Sequence

from qrsim_ros import __version__
from qrsim_ros.cli.commands import HELP_LINES, module_name

#: The subcommands in ``qrsim --help`` order: NAME -> its module (``build_parser(subparsers)``).
SUBCOMMANDS = {name: module_name(name) for name in HELP_LINES}


def build_parser(names: Sequence[str] = tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The top-level parser listing every subcommand; those in ``names`` (default: every one) with their
    arguments (their modules imported), the others by name and help line only."""
    parser = argparse.ArgumentParser(
        prog="qrsim",
        description="QRSim for ROS 2: simulate, replay and inspect Pelican quadrotor runs.",
        epilog="Shell-level commands of ./qrsim: 'test [PYTEST ARGS]' runs the test suite, "
        "'exec -- CMD ARGS...' runs any command inside the project environment.",
    )
    parser.add_argument("--version", action="version", version=f"qrsim_ros {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module in SUBCOMMANDS.items():
        if name in names:
            importlib.import_module(module).build_parser(sub)
        else:  # listed in --help; never parsed (main loads the subcommand its arguments name)
            sub.add_parser(name, help=HELP_LINES[name], add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand named in ``argv``; return its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    _enable_stack_dumps()
    parser = build_parser([argv[0]] if argv and argv[0] in SUBCOMMANDS else ())
    if not argv or argv[0] == "help":
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(args.func(args))


def _enable_stack_dumps() -> None:
    """As the node executables do: a crash in native code (DDS, numba) prints the Python stack, and
    SIGUSR1 prints every thread's stack at any time (``kill -USR1 PID``), so a hung ``qrsim launch``
    says where it waits."""
    # the process's own standard error (a test calling ``main`` may have replaced sys.stderr)
    if not faulthandler.is_enabled():  # (pytest's own handler stays when a test calls ``main``)
        faulthandler.enable(file=sys.__stderr__)
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)


if __name__ == "__main__":
    sys.exit(main())
