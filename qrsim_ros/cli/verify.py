"""``qrsim verify``: model-check a batch's abstract mission model with Storm, beside its Monte Carlo results.

    qrsim verify BATCH_DIR

BATCH_DIR holds results.csv, transitions.csv and mode_times.csv (formats: docs/VERIFICATION.md). From
the mode-transition counts it builds a DTMC over the mission modes (maximum-likelihood probabilities,
mean sojourn times as the "time" reward) and an interval MDP (each transition probability anywhere in its
Wilson 95 % interval, each sojourn time in its t interval), writes them in the PRISM language and checks
with Storm: the probability of every outcome and of every fault, and the expected mission time. Printed:
one line per quantity, the DTMC's value, the Monte Carlo estimate with its 95 % interval, the MDP's
[min, max], and whether the DTMC's value lies in the Monte Carlo interval; then the model sizes and
check times. Written into BATCH_DIR: abstract_dtmc.prism, abstract_mdp.prism, abstract.props.

Exit status: 0 after the table (whatever it shows); 2 with one line on stderr for a missing or malformed
batch file (or no stormpy); 1 if a model file cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qrsim_ros.cli import CliError, finish_parser, report, write_bytes_atomic
from qrsim_ros.cli.commands import HELP_LINES
from qrsim_ros.cli.subcommand import Subcommand

PROG = "qrsim verify"
DTMC_FILE = "abstract_dtmc.prism"
MDP_FILE = "abstract_mdp.prism"
PROPERTIES_FILE = "abstract.props"


def _add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("directory", metavar="BATCH_DIR",
                   help="a batch directory (results.csv, transitions.csv, mode_times.csv)")
    return finish_parser(p, run, PROG)


#: ``qrsim verify``: ``build_parser`` registers it on the ``qrsim`` parser, ``main`` runs it standalone.
COMMAND = Subcommand(PROG, HELP_LINES["verify"], __doc__, _add_arguments)
build_parser, main = COMMAND.build_parser, COMMAND.main


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) atomically onto ``path`` (``cli.write_bytes_atomic``); an OSError becomes a
    CliError naming ``path``."""
    write_bytes_atomic(str(path), text.encode("utf-8"))


def run(args: argparse.Namespace) -> int:
    """Read, check, print, write. 0 ok, 2 bad input, 1 unwritable output."""
    try:
        from qrsim_ros.verification.compare import table_lines, verify
    except ImportError as exc:  # stormpy is in the project venv, not in `pip install .`
        return report(PROG, CliError(f"needs stormpy (pip install stormpy==2.0.0): {exc}"))
    from qrsim_ros.verification.abstraction import AbstractionError
    from qrsim_ros.verification.formats import BatchFormatError, read_batch
    from qrsim_ros.verification.storm import CheckError

    directory = Path(args.directory)
    try:
        batch = read_batch(directory)
        result = verify(batch)
    except (BatchFormatError, AbstractionError) as exc:
        return report(PROG, exc)
    except CheckError as exc:  # the writer's bug, not the input's
        return report(PROG, exc, 1)
    for line in table_lines(result):
        print(line)
    d, m = result.dtmc_result, result.mdp_result
    print(f"models: DTMC {d.states} states, {d.transitions} transitions, checked in {d.seconds:.3f} s; "
          f"MDP {m.states} states, {m.choices} choices, {m.transitions} transitions, checked in "
          f"{m.seconds:.3f} s (Storm {d.storm_version})")
    try:
        outputs = ((DTMC_FILE, result.dtmc), (MDP_FILE, result.mdp), (PROPERTIES_FILE, result.properties))
        for name, text in outputs:
            write_text_atomic(directory / name, text)
    except CliError as exc:
        return report(PROG, exc, 1)
    print(f"written: {directory / DTMC_FILE}, {directory / MDP_FILE}, {directory / PROPERTIES_FILE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
