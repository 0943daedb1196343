"""Exit statuses by name, and what the end of one process means for its run (both launchers).

docs/LAUNCH.md "Exit statuses" lists them for users; the nodes end with them (``ros.node.run_node``),
``qrsim launch`` returns them, and ``classify_exit`` is the one rule both launchers judge a child by.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any


class ExitStatus(IntEnum):
    """The exit statuses of the simulator's processes (nodes, ``qrsim`` commands)."""

    #: the work is done (or the process was asked to stop and stopped cleanly)
    OK = 0
    #: a failure: a bad parameter or argument (one line names it), a node that died, an unclean run
    FAILED = 1
    #: a command line argparse rejected
    USAGE = 2
    #: the recorder could not write its bag (a full disk); a run that went on without it ends so too
    RECORDER_FAILED = 3
    #: a node whose clean-up hung past its stop deadline and was ended by its watchdog
    STOP_DEADLINE = 4


#: Exit statuses of a process that stopped because it was asked to (SIGINT/SIGTERM, by the launcher).
CLEAN_STOP_STATUSES = (ExitStatus.OK, -signal.SIGINT, -signal.SIGTERM, 128 + signal.SIGINT,
                       128 + signal.SIGTERM)
#: Processes whose exit with status 0 is the normal end of a run: the clock owner at ``duration_s``, the
#: referee at the end of the episode (``exit_when_done``), the single process holding both.
NORMAL_END_PROCESSES = ("vehicle_dynamics", "referee", "single_process")
#: Processes that may be closed by the user (status 0): it ends the run, not as a failure.
USER_CLOSED_PROCESSES = ("rviz2",)
#: The process whose ``RECORDER_FAILED`` is a full disk rather than a crash.
RECORDER = "recorder"


@dataclass(frozen=True)
class ExitVerdict:
    """What one process's exit means for the run: end it? count it as a failure? and why (one line)."""

    ends_run: bool
    failure: bool
    reason: str


def describe_exit(returncode: int | None) -> str:
    """``exit status 1``, ``killed by SIGTERM``; for a POSIX return code (negative: the signal)."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    if returncode in (128 + signal.SIGINT, 128 + signal.SIGTERM):  # a node that stopped on that signal
        return f"exit status {returncode}: stopped by {signal.Signals(returncode - 128).name}"
    return f"exit status {returncode}"


def normal_end_processes(specs: Iterable[Any]) -> tuple[str, ...]:
    """The processes of a launch plan (``launch_plan.NodeSpec``s) whose exit with status 0 is the normal
    end of the run: the clock owner only when it was given a ``duration_s`` (else it never ends by
    itself), the referee only with ``exit_when_done``, the single process always. So a SIGTERM from
    outside, after which a node exits 0, is not mistaken for their normal end (the 10-minute soak found
    exactly that)."""
    names: list[str] = ["single_process"]
    for s in specs:
        if ((s.executable == "vehicle_dynamics" and float(s.parameters.get("duration_s", 0.0) or 0.0) > 0)
                or (s.executable == "referee" and bool(s.parameters.get("exit_when_done", False)))):
            names.append(s.name)
    return tuple(names)


def classify_exit(name: str, returncode: int, *, requested: bool,
                  record_required: bool = False,
                  normal_end: Iterable[str] = NORMAL_END_PROCESSES) -> ExitVerdict:
    """The meaning of process ``name`` ending with ``returncode``.

    ``requested``: the launcher had asked it to stop (it is stopping the run): a clean status
    (``CLEAN_STOP_STATUSES``) is no failure, anything else is one. Not requested: the normal end of a run
    (``NORMAL_END_PROCESSES`` with status 0) or a user closing ``rviz2`` ends the run cleanly; the
    recorder failing to write (``ExitStatus.RECORDER_FAILED``, even while stopping: the last file did not
    fit) is a failure that ends the run only if ``record_required``; any other exit, status 0 or a
    SIGTERM from outside included, is a node that stopped before it was asked to: a failure that ends
    the run.
    """
    if name == RECORDER and returncode == ExitStatus.RECORDER_FAILED:  # asked to stop or not
        if record_required:
            return ExitVerdict(not requested, True, "the recorder could not write the bag (record required)")
        return ExitVerdict(False, True, "the recorder could not write the bag: the run goes on without it")
    if requested:
        if returncode in CLEAN_STOP_STATUSES:
            return ExitVerdict(False, False, f"{name} stopped")
        return ExitVerdict(False, True, f"{name} ({describe_exit(returncode)} while stopping)")
    if returncode == ExitStatus.OK and name in tuple(normal_end):
        what = "the episode is done" if name == "referee" else "the end of the run"
        return ExitVerdict(True, False, f"{name} finished ({what})")
    if returncode == ExitStatus.OK and name in USER_CLOSED_PROCESSES:
        return ExitVerdict(True, False, f"{name} was closed")
    if returncode == ExitStatus.OK or returncode in CLEAN_STOP_STATUSES:
        return ExitVerdict(True, True,
                           f"node {name} stopped before it was asked to ({describe_exit(returncode)})")
    return ExitVerdict(True, True, f"node {name} died ({describe_exit(returncode)})")
