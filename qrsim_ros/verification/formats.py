"""The batch directory's files that ``qrsim verify`` reads, and their readers (formats: docs/VERIFICATION.md).

    results.csv       one row per episode: episode, seed, outcome, mission_time_s, fault_<event> (0/1)...
    transitions.csv   from_mode, to_mode, event, count: mode-to-mode transition counts over all episodes
    mode_times.csv    mode, visits, total_time_s, total_sq_time_s2: time spent in each mode

Every malformed or missing file is one ``BatchFormatError`` naming the file and, where there is one, the
line (``DIR/transitions.csv:7: count must be a whole number >= 1, got 'x'``). ``read_batch`` also checks
the three files against each other (they describe the same runs).
"""

from __future__ import annotations

import csv
import math
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

RESULTS_FILE = "results.csv"
TRANSITIONS_FILE = "transitions.csv"
MODE_TIMES_FILE = "mode_times.csv"
#: from_mode of the row counting each episode's first mode.
START = "start"
#: to_mode prefix of the rows counting each episode's end: ``end:<outcome>``.
END_PREFIX = "end:"
#: the outcome of a successful mission.
SUCCESS = "success"
#: results.csv column prefix of the 0/1 fault flags: ``fault_<event>``.
FAULT_PREFIX = "fault_"
RESULTS_COLUMNS = ("episode", "seed", "outcome", "mission_time_s")
TRANSITIONS_COLUMNS = ("from_mode", "to_mode", "event", "count")
MODE_TIMES_COLUMNS = ("mode", "visits", "total_time_s", "total_sq_time_s2")
#: words of the PRISM language (Storm's parser refuses them as label names).
PRISM_KEYWORDS = frozenset({
    "bool", "clock", "const", "ctmc", "deadlock", "double", "dtmc", "endinit", "endinvariant", "endmodule",
    "endobservables", "endplayer", "endrewards", "endsystem", "false", "filter", "formula", "func", "global",
    "init", "int", "invariant", "label", "ma", "max", "mdp", "min", "module", "nondeterministic",
    "observable", "observables", "player", "pomdp", "probabilistic", "pta", "rate", "rewards", "smg",
    "stochastic", "system", "true",
})
#: names the abstract model uses itself (the entry state, the label of every end).
RESERVED = frozenset({START, "done"})
#: an outcome is a label of the model: neither reserved nor a PRISM word.
RESERVED_OUTCOMES = RESERVED | PRISM_KEYWORDS
_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
#: relative tolerance of the cross-file check of the mission times against the mode times.
TIME_RTOL = 1e-6


class BatchFormatError(ValueError):
    """A batch file is missing or malformed, or disagrees with another; the message names file and line."""


@dataclass(frozen=True)
class ResultRow:
    """One row of results.csv: ``mission_time_s`` in s; ``faults`` maps an event name to 0/1."""

    episode: int
    seed: int
    outcome: str
    mission_time_s: float
    faults: dict[str, int]


@dataclass(frozen=True)
class TransitionCount:
    """One row of transitions.csv: ``count`` transitions ``source -> target`` caused by ``event`` ('' for
    none). ``source`` is a mode or ``start``; ``target`` a mode or ``end:<outcome>``."""

    source: str
    target: str
    event: str
    count: int


@dataclass(frozen=True)
class ModeTime:
    """One row of mode_times.csv: entries into ``mode``, the total time in it (s) and the sum of the squared
    per-visit times (s^2), over all episodes."""

    mode: str
    visits: int
    total_time_s: float
    total_sq_time_s2: float


@dataclass(frozen=True)
class Batch:
    """The three files of one batch directory, checked against each other."""

    directory: Path
    episodes: tuple[ResultRow, ...]
    transitions: tuple[TransitionCount, ...]
    mode_times: tuple[ModeTime, ...]

    @property
    def fault_events(self) -> tuple[str, ...]:
        """The events of results.csv's fault_<event> columns, in column order."""
        return tuple(self.episodes[0].faults) if self.episodes else ()

    @property
    def outcomes(self) -> tuple[str, ...]:
        """Every outcome of the episodes: success first, then the failure causes sorted."""
        seen = {e.outcome for e in self.episodes}
        return tuple(sorted(seen, key=lambda o: (o != SUCCESS, o)))


# --- generic CSV reading -----------------------------------------------------------------------------------

def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line number, row)`` of a CSV whose header holds ``columns`` (more are allowed)."""
    if not path.is_file():
        raise BatchFormatError(f"{path}: missing (a batch directory holds {RESULTS_FILE}, "
                               f"{TRANSITIONS_FILE} and {MODE_TIMES_FILE})")
    try:
        with path.open(newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise BatchFormatError(f"{path}:1: empty file (expected the header {','.join(columns)})")
            missing = [c for c in columns if c not in header]
            if missing:
                raise BatchFormatError(f"{path}:1: header lacks {', '.join(missing)} "
                                       f"(expected {','.join(columns)})")
            if len(set(header)) != len(header):
                raise BatchFormatError(f"{path}:1: repeated column name in the header")
            for row in reader:
                line = reader.line_num
                if not row:
                    continue
                if len(row) != len(header):
                    raise BatchFormatError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
                yield line, dict(zip(header, row, strict=True))
    except UnicodeDecodeError:
        raise BatchFormatError(f"{path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise BatchFormatError(f"{path}: not a CSV file: {exc}") from None
    except OSError as exc:
        raise BatchFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None


def _int(path: Path, line: int, column: str, text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise BatchFormatError(f"{path}:{line}: {column} must be a whole number >= {minimum}, "
                               f"got {text!r:.80}")
    return value


def _float(path: Path, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0.0:
        raise BatchFormatError(f"{path}:{line}: {column} must be a finite number >= 0, got {text!r:.80}")
    return value


def _name(path: Path, line: int, column: str, text: str, reserved: frozenset[str] = RESERVED) -> str:
    if not _NAME.match(text) or text in reserved:
        words = "start, done" if reserved is RESERVED else "start, done or a word of the PRISM language"
        raise BatchFormatError(f"{path}:{line}: {column} must be a name of lower-case letters, digits and _ "
                               f"(not {words}), got {text!r:.80}")
    return text


# --- the three files ---------------------------------------------------------------------------------------

def read_results(path: Path) -> tuple[ResultRow, ...]:
    """results.csv: one ResultRow per row; at least one row; episode numbers unique."""
    episodes: list[ResultRow] = []
    seen: set[int] = set()
    for line, row in _rows(path, RESULTS_COLUMNS):
        number = _int(path, line, "episode", row["episode"], 0)
        if number in seen:
            raise BatchFormatError(f"{path}:{line}: episode {number} appears twice")
        seen.add(number)
        faults = {}
        for column, text in row.items():
            if column.startswith(FAULT_PREFIX):
                event = _name(path, 1, f"the column {column}'s event", column[len(FAULT_PREFIX):])
                if text not in ("0", "1"):
                    raise BatchFormatError(f"{path}:{line}: {column} must be 0 or 1, got {text!r:.80}")
                faults[event] = int(text)
        outcome = _name(path, line, "outcome", row["outcome"], RESERVED_OUTCOMES)
        if outcome.startswith(FAULT_PREFIX):
            raise BatchFormatError(f"{path}:{line}: outcome must not start with {FAULT_PREFIX} (the fault "
                                   f"labels' prefix), got {outcome!r:.80}")
        episodes.append(ResultRow(number, _int(path, line, "seed", row["seed"], 0), outcome,
                                _float(path, line, "mission_time_s", row["mission_time_s"]), faults))
    if not episodes:
        raise BatchFormatError(f"{path}: no episodes (only a header)")
    return tuple(episodes)


def read_transitions(path: Path) -> tuple[TransitionCount, ...]:
    """transitions.csv: one TransitionCount per row; each (from_mode, to_mode, event) once."""
    rows: list[TransitionCount] = []
    seen: set[tuple[str, str, str]] = set()
    for line, row in _rows(path, TRANSITIONS_COLUMNS):
        source = row["from_mode"]
        if source != START:
            source = _name(path, line, "from_mode", source)
        target = row["to_mode"]
        if target.startswith(END_PREFIX):
            target = END_PREFIX + _name(path, line, "to_mode's outcome", target[len(END_PREFIX):],
                                        RESERVED_OUTCOMES)
        else:
            target = _name(path, line, "to_mode", target)
        if source == START and target.startswith(END_PREFIX):
            raise BatchFormatError(f"{path}:{line}: an episode ends in no mode ({source} -> {target})")
        event = row["event"] and _name(path, line, "event", row["event"])
        key = (source, target, event)
        if key in seen:
            raise BatchFormatError(f"{path}:{line}: {source} -> {target} (event {event!r}) appears twice")
        seen.add(key)
        rows.append(TransitionCount(source, target, event, _int(path, line, "count", row["count"], 1)))
    if not rows:
        raise BatchFormatError(f"{path}: no transitions (only a header)")
    return tuple(rows)


def _check_moments(path: Path, line: int, m: ModeTime) -> None:
    """n visits of times t_i >= 0 adding up to T have sum(t_i^2) between T^2 / n (all equal) and T^2 (one
    visit takes it all): anything else cannot come from visits (it would move the time band)."""
    total, sq = m.total_time_s, m.total_sq_time_s2
    low, high = total * total / m.visits, total * total
    slack = 1e-9 * max(high, 1.0)  # the sums' rounding
    if not low - slack <= sq <= high + slack:
        raise BatchFormatError(f"{path}:{line}: mode {m.mode}: total_sq_time_s2={sq:g} is impossible for "
                               f"{m.visits} visits totalling {total:g} s (it lies between total^2 / visits = "
                               f"{low:g} and total^2 = {high:g} s^2)")


def read_mode_times(path: Path) -> tuple[ModeTime, ...]:
    """mode_times.csv: one ModeTime per row; each mode once; moments visits can have (``_check_moments``)."""
    rows: list[ModeTime] = []
    seen: set[str] = set()
    for line, row in _rows(path, MODE_TIMES_COLUMNS):
        mode = _name(path, line, "mode", row["mode"])
        if mode in seen:
            raise BatchFormatError(f"{path}:{line}: mode {mode} appears twice")
        seen.add(mode)
        m = ModeTime(mode, _int(path, line, "visits", row["visits"], 1),
                     _float(path, line, "total_time_s", row["total_time_s"]),
                     _float(path, line, "total_sq_time_s2", row["total_sq_time_s2"]))
        _check_moments(path, line, m)
        rows.append(m)
    if not rows:
        raise BatchFormatError(f"{path}: no modes (only a header)")
    return tuple(rows)


def read_batch(directory: Path) -> Batch:
    """Read and cross-check a batch directory (see ``check_consistent``)."""
    if not directory.is_dir():
        raise BatchFormatError(f"{directory}: not a directory")
    episodes = read_results(directory / RESULTS_FILE)
    transitions = read_transitions(directory / TRANSITIONS_FILE)
    batch = Batch(directory, episodes, transitions, read_mode_times(directory / MODE_TIMES_FILE))
    check_consistent(batch)
    return batch


def check_consistent(batch: Batch) -> None:
    """The files describe the same runs: one ``start`` per episode, one ``end:<o>`` per episode of outcome
    o, every mode entered as often as left and as mode_times.csv's visits say, every event of the
    transitions has a fault column and a fault flagged there has transitions of its event, and the mode
    times add up to the mission times."""
    d = batch.directory
    tr, mt, res = d / TRANSITIONS_FILE, d / MODE_TIMES_FILE, d / RESULTS_FILE
    n = len(batch.episodes)
    starts = sum(t.count for t in batch.transitions if t.source == START)
    if starts != n:
        raise BatchFormatError(f"{tr}: the {START} rows count {starts} episodes, {res} has {n}")
    ends = Counter[str]()
    entered, left = Counter[str](), Counter[str]()
    for t in batch.transitions:
        if t.target.startswith(END_PREFIX):
            ends[t.target[len(END_PREFIX):]] += t.count
        else:
            entered[t.target] += t.count
        if t.source != START:
            left[t.source] += t.count
    outcomes = Counter(e.outcome for e in batch.episodes)
    if ends != outcomes:
        diff = sorted(set(ends) | set(outcomes), key=lambda o: (ends[o] == outcomes[o], o))[0]
        raise BatchFormatError(f"{tr}: end:{diff} counts {ends[diff]} episodes, {res} has {outcomes[diff]} "
                               f"with outcome {diff}")
    visits = {m.mode: m.visits for m in batch.mode_times}
    for mode in sorted(set(entered) | set(left) | set(visits)):
        if not entered[mode] == left[mode] == visits.get(mode, 0):
            raise BatchFormatError(f"{tr}: mode {mode} is entered {entered[mode]} and left {left[mode]} "
                                   f"times, {mt} says {visits.get(mode, 0)} visits")
    events = {t.event for t in batch.transitions if t.event}
    for event in sorted(events - set(batch.fault_events)):
        raise BatchFormatError(f"{tr}: transitions with event {event} but {res} has no column "
                               f"{FAULT_PREFIX}{event}")
    for event in batch.fault_events:
        flagged = sum(e.faults[event] for e in batch.episodes)
        if flagged and event not in events:
            raise BatchFormatError(f"{res}: {FAULT_PREFIX}{event} is 1 in {flagged} episodes but {tr} has no "
                                   f"transition with event {event}")
    mission = sum(e.mission_time_s for e in batch.episodes)
    in_modes = sum(m.total_time_s for m in batch.mode_times)
    if abs(mission - in_modes) > TIME_RTOL * max(1.0, mission):
        raise BatchFormatError(f"{mt}: the mode times add up to {in_modes:.9g} s, the mission times of {res} "
                               f"to {mission:.9g} s")
