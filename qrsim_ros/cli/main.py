"""``qrsim``: the project's command-line tool. Each subcommand lives in its own module, imported only
when it runs (or for ``qrsim --help``): ``qrsim launch`` does not pay for Dask and matplotlib."""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import signal
import sys
from collections.abc import Sequence

from qrsim_ros import __version__

#: The subcommands in ``qrsim --help`` order: NAME -> its module (``build_parser(subparsers)``).
SUBCOMMANDS = {name: f"qrsim_ros.cli.{name}" for name in
               ("demo", "replay", "run", "batch", "launch", "plot", "verify")}


def build_parser(names: Sequence[str] = tuple(SUBCOMMANDS)) -> argparse.ArgumentParser:
    """The top-level parser with the subcommands ``names`` registered (default: every one)."""
    parser = argparse.ArgumentParser(
        prog="qrsim",
        description="QRSim for ROS 2: simulate, replay and inspect Pelican quadrotor runs.",
        epilog="Shell-level commands of ./qrsim: 'test [PYTEST ARGS]' runs the test suite, "
        "'exec -- CMD ARGS...' runs any command inside the project environment.",
    )
    parser.add_argument("--version", action="version", version=f"qrsim_ros {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in names:
        importlib.import_module(SUBCOMMANDS[name]).build_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand named in ``argv``; return its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    _enable_stack_dumps()
    parser = build_parser([argv[0]] if argv and argv[0] in SUBCOMMANDS else tuple(SUBCOMMANDS))
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
