"""``qrsim plot``: render PNG figures of a recorded run from its rosbag2 bag.

    qrsim plot bags/search_rescue_2c_20250101_120000
    qrsim plot BAG --out figures/ --only top_view,reward

BAG is a rosbag2 directory (metadata.yaml + MCAP, as ``qrsim launch --record`` writes) or a file in
one. The figures (one PNG each, in --out, default BAG/plots/):

- top_view.png: the area in the map frame (ENU, metres): terrain classes, persons found / not found,
  every vehicle's true track and GPS-estimated track, camera footprints;
- altitude_speed.png: true altitude and the altimeter's, true speed and the GPS velocity's, per vehicle;
- reward.png: reward per task step and cumulative reward (and persons found) over simulated time;
- plume.png: plume runs: the concentration field slice (if the bag has one), tracks, sampled
  concentrations and sources, and the concentration over time;
- gps_error.png: GPS position error (fix minus ground truth) per vehicle, horizontal and vertical;
- battery.png: terminal voltage and charge per vehicle (uavN/battery), fault intervals shaded;
- faults.png: the fault intervals of /sim/faults, one row per vehicle, coloured by kind.

A figure whose topics are not in the bag is skipped with a note. Exit status: 0 when at least one
figure was written; 1 (one line on stderr) for a path that is not a readable bag or a bag with nothing
to plot; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import time

from qrsim_ros.cli import CliError, finish_parser, report, standalone_main, subcommand_parser

PROG = "qrsim plot"


def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("bag", metavar="BAG", help="rosbag2 bag directory (or a file inside one)")
    p.add_argument("--out", default=None, metavar="DIR", help="output directory (default: BAG/plots)")
    p.add_argument("--only", default=None, metavar="NAMES",
                   help="comma-separated figures to render: top_view, altitude_speed, reward, plume, "
                   "gps_error, battery, faults (default: all)")
    return finish_parser(p, run, PROG)


def build_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register the ``plot`` subcommand on a ``qrsim`` subparsers object."""
    p = subcommand_parser(subparsers, "plot",
                          "render PNG figures of a recorded run from its bag", __doc__)
    return _add_arguments(p)


def render_bag(bag: str, out: str | None = None, only: list[str] | None = None, prefix: str = PROG) -> int:
    """Render a bag's figures, printing each PNG written and each figure skipped; 0 if any was written,
    1 (with one line on stderr) otherwise. Used by ``qrsim plot`` and ``qrsim launch --plot``."""
    from qrsim_ros.plots import BagError, render

    t0 = time.monotonic()
    try:
        result = render(bag, out, only)
    except BagError as exc:
        print(f"{prefix}: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    for note in result.notes:
        print(f"{prefix}: note: {note}")
    for name, reason in result.skipped.items():
        print(f"{prefix}: skipped {name}: {reason}")
    for path in result.written.values():
        print(f"{prefix}: wrote {path}")
    print(f"{prefix}: {len(result.written)} figure(s) in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


def run(args: argparse.Namespace) -> int:
    from qrsim_ros.plots import FIGURES

    only = None
    if args.only:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in only if n not in FIGURES]
        if unknown:
            return report(PROG, CliError(f"--only: unknown figure(s) {', '.join(unknown)} "
                                         f"(known: {', '.join(FIGURES)})"))
    return render_bag(args.bag, args.out, only)


def main(argv: list[str] | None = None) -> int:
    """Standalone entry point: ``python -m qrsim_ros.cli.plot BAG ...``."""
    return standalone_main(_add_arguments, run, PROG, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
