"""``qrsim play``: serve a recorded bag on a Foxglove WebSocket, so a recorded run is watched as a live one.

    qrsim play bags/search_rescue_2c_20250101_120000            # ws://127.0.0.1:8765, the bag's pace
    qrsim play BAG --rate 4 --loop                              # four times as fast, again and again
    qrsim play BAG --foxglove 9000 --wait-for-client            # start once the app subscribes

Then open Foxglove or Lichtblick on ``ws://localhost:PORT`` (the layouts in foxglove_layouts/ work for a
bag as for a live run). The channels are the ones ``qrsim launch --foxglove`` serves: each topic with its
ROS 2 type, its ``ros2msg`` definition as the bag stores it and ``cdr``, the messages as recorded; the
app's clock follows the bag's log time (the simulated time of a ``qrsim launch --record`` bag). No ROS 2
install is needed. Ctrl-C stops.

Exit status: 0 when the bag was played to its end (or stopped by Ctrl-C/SIGTERM); 2 (one line on stderr)
for bad arguments, a path that is not a readable bag or a port that cannot be served.
"""

from __future__ import annotations

import argparse
import math
import re
import signal
import sys
import threading

from qrsim_ros.cli import CliError, finish_parser, report
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.subcommand import Subcommand
from qrsim_ros.core.common.limits import FOXGLOVE_PORT

PROG = "qrsim play"
#: Left out unless --exclude says otherwise (as the live bridge leaves them out).
DEFAULT_EXCLUDE = "^/parameter_events$"


def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("bag", metavar="BAG", help="rosbag2 bag directory (or a file inside one)")
    p.add_argument("--foxglove", type=int, default=FOXGLOVE_PORT, metavar="PORT",
                   help=f"the Foxglove WebSocket's port (default {FOXGLOVE_PORT}; 0: any free one)")
    p.add_argument("--network", action="store_true",
                   help="serve other machines too (0.0.0.0; default 127.0.0.1 only)")
    p.add_argument("--rate", type=float, default=1.0, metavar="R",
                   help="pace: R times the bag's (default 1; 0: as fast as it goes)")
    p.add_argument("--loop", action="store_true", help="play the bag again each time it ends")
    p.add_argument("--wait-for-client", action="store_true",
                   help="start playing once a client subscribes to a channel")
    p.add_argument("--exclude", default=DEFAULT_EXCLUDE, metavar="REGEX",
                   help=f"topics not to serve (default {DEFAULT_EXCLUDE!r}; empty: none)")
    p.add_argument("--message-backlog", type=int, default=1024, metavar="N",
                   help="messages queued per client before the oldest are dropped (default 1024)")
    return finish_parser(p, run, PROG)


#: ``qrsim play``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["play"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def _check(args: argparse.Namespace) -> re.Pattern[str] | None:
    from qrsim_ros.core.common.limits import LIMITS
    from qrsim_ros.core.common.validation import ConfigError

    try:
        LIMITS["foxglove_port"].check(args.foxglove, "--foxglove")
    except ConfigError as exc:
        raise CliError(str(exc)) from None
    if not (math.isfinite(args.rate) and args.rate >= 0):
        raise CliError(f"--rate {args.rate}: must be a finite number >= 0 (0: as fast as it goes)")
    if args.message_backlog < 1:
        raise CliError(f"--message-backlog {args.message_backlog}: must be at least 1")
    try:
        return re.compile(args.exclude) if args.exclude else None
    except re.error as exc:
        raise CliError(f"--exclude {args.exclude!r}: not a regular expression: {exc}") from None


def _warn(line: str) -> None:
    print(f"{PROG}: warning: {line}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from qrsim_ros.bag.foxglove_endpoint import EndpointError, FoxgloveEndpoint
    from qrsim_ros.bag.play import BagPlayer, PlayError

    try:
        exclude = _check(args)
        player = BagPlayer(args.bag, exclude)
    except (CliError, PlayError) as exc:
        return report(PROG, exc)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())

    def say(line: str) -> None:
        print(f"{PROG}: {line}", flush=True)

    host = "0.0.0.0" if args.network else "127.0.0.1"
    try:
        endpoint = FoxgloveEndpoint(host, args.foxglove, args.message_backlog, say, _warn)
    except EndpointError as exc:
        player.close()
        return report(PROG, exc)
    try:
        for line in player.unknown:
            say(f"not served: {line}: no definition in the bag and the type is not installed")
        say(f"Foxglove WebSocket server on {endpoint.url} (open it in Foxglove or Lichtblick): "
            f"{len(player.definitions)} topics of {player.path}")
        if args.wait_for_client:
            player.advertise(endpoint)
            say("waiting for a client to subscribe")
            while not endpoint.watched() and not stopped.wait(0.05):
                pass
        while not stopped.is_set():
            stats = player.play(endpoint, args.rate, stopped.is_set)
            say(f"played {stats.messages} messages, {stats.bag_s:.1f} s of the bag in {stats.wall_s:.1f} s")
            if not args.loop:
                break
    finally:
        say(endpoint.summary())
        endpoint.stop()
        player.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
