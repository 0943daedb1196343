"""``qrsim``: the project's command-line tool. Each subcommand lives in its own module."""

from __future__ import annotations

import argparse
import sys

from qrsim_ros import __version__
from qrsim_ros.cli import batch, demo, launch, plot, replay, run, verify


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="qrsim",
        description="QRSim for ROS 2: simulate, replay and inspect Pelican quadrotor runs.",
        epilog="Shell-level commands of ./qrsim: 'test [PYTEST ARGS]' runs the test suite, "
        "'exec -- CMD ARGS...' runs any command inside the project environment.",
    )
    parser.add_argument("--version", action="version", version=f"qrsim_ros {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo.build_parser(sub)
    replay.build_parser(sub)
    run.build_parser(sub)
    batch.build_parser(sub)
    launch.build_parser(sub)
    plot.build_parser(sub)
    verify.build_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand named in ``argv``; return its exit status."""
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] == "help":
        parser.print_help()
        return 0
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
