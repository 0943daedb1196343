"""``qrsim plot``: render PNG figures of a recorded run from its rosbag2 bag, or of a retrieve mission
from the CSV ``qrsim run --out`` wrote.

    qrsim plot bags/search_rescue_2c_20250101_120000
    qrsim plot BAG --out figures/ --only top_view,reward
    qrsim run retrieve_simplified --policy mission --seed 3 --out run.csv && qrsim plot run.csv

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

RUN.csv (a path ending in .csv, or a file starting with ``qrsim run --out``'s header) is read as a
retrieve run (``qrsim run retrieve_... --out RUN.csv``: the mission columns of vehicle 0) and gives
ireland_2016's single-run figures (section 6.1; ``qrsim_ros.plots.mission``), in --out (default
RUN_plots/ next to the CSV):

- mission_path.png (Figure 8): top view (north up, east right) of the vehicle's path, the targets' start
  and final positions and their tracks when carried, the drop site and its radius, the landing site,
  the lab's outline;
- mission_height.png (Figure 9): height above the floor (-z) over time, the guidance's height command
  dashed, the background shaded by mission mode, the mode sequence below;
- mission_battery.png (Figure 10): battery voltage over time, the maximum voltage and the low-battery
  warning threshold dashed, shaded by mode (skipped when the battery is off).

A retrieve run's bag (``qrsim launch retrieve --record``) gets these three too, read from the graph's
topics (``plots.mission_bag``: the height figure without the guidance's height command, which no topic
carries). --only takes these names for a CSV or a retrieve bag.

A CSV that is missing, unreadable, of another kind (a non-retrieve run, any other CSV) or malformed
exits with status 2 and one line on stderr naming the file and the problem; an output directory that
cannot be made exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import time

from qrsim_ros.cli import CliError, finish_parser, report
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.subcommand import Subcommand

PROG = "qrsim plot"


def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("bag", metavar="BAG|RUN.csv", help="rosbag2 bag directory (or a file inside one), "
                   "or a retrieve run's CSV (qrsim run --out)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output directory (default: BAG/plots, or RUN_plots next to RUN.csv)")
    p.add_argument("--only", default=None, metavar="NAMES",
                   help="comma-separated figures to render: top_view, altitude_speed, reward, plume, "
                   "gps_error, battery, faults, and for a retrieve bag or CSV mission_path, mission_height, "
                   "mission_battery (default: all)")
    return finish_parser(p, run, PROG)


#: ``qrsim plot``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["plot"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


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


def render_mission_csv(csv_path: str, out: str | None = None, only: list[str] | None = None,
                       prefix: str = PROG) -> int:
    """Render a retrieve run's CSV (module docstring), printing each PNG written and each figure
    skipped; 0 if any was written, 2 (one line on stderr) for a bad CSV, 1 otherwise."""
    from qrsim_ros.plots import MissionCsvError, render_mission

    t0 = time.monotonic()
    try:
        result = render_mission(csv_path, out, only)
    except MissionCsvError as exc:
        return report(prefix, exc, 2)
    except OSError as exc:
        return report(prefix, CliError(f"{exc.filename or out}: cannot write the figures: "
                                       f"{exc.strerror or exc}"), 1)
    for name, reason in result.skipped.items():
        print(f"{prefix}: skipped {name}: {reason}")
    for path in result.written.values():
        print(f"{prefix}: wrote {path}")
    print(f"{prefix}: {len(result.written)} figure(s) in {time.monotonic() - t0:.1f} s", flush=True)
    return 0 if result.written else 1


def run(args: argparse.Namespace) -> int:
    from qrsim_ros.plots import FIGURES, MISSION_FIGURES, looks_like_run_csv

    is_csv = looks_like_run_csv(args.bag)
    known = MISSION_FIGURES if is_csv else {**FIGURES, **MISSION_FIGURES}  # (a retrieve bag has both)
    only = None
    if args.only:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in only if n not in known]
        if unknown:
            what = "a run's CSV" if is_csv else "a bag"
            return report(PROG, CliError(f"--only: unknown figure(s) {', '.join(unknown)} for {what} "
                                         f"(known: {', '.join(known)})"))
    if is_csv:
        return render_mission_csv(args.bag, args.out, only)
    return render_bag(args.bag, args.out, only)


if __name__ == "__main__":
    sys.exit(main())
