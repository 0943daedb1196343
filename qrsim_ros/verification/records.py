"""For the batch writer: episodes' mode sequences accumulated into transitions.csv and mode_times.csv.

    stats = ModeStatistics()
    stats.add_episode([("take_off", 3.2, ""), ("initialise", 1.0, ""), ("land", 4.1, "system")], "aborted")
    stats.write(directory)   # transitions.csv, mode_times.csv (docs/VERIFICATION.md)

Each segment is (mode, time spent in it in s, the fault event that caused entering it or ''); the episode's
mission time is the sum of its segments' times, which is what results.csv's mission_time_s must hold.
"""

from __future__ import annotations

import contextlib
import csv
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from qrsim_ros.verification.formats import (
    END_PREFIX,
    MODE_TIMES_COLUMNS,
    MODE_TIMES_FILE,
    START,
    TRANSITIONS_COLUMNS,
    TRANSITIONS_FILE,
)


class ModeStatistics:
    """Transition counts and per-mode visit times over the episodes added so far."""

    def __init__(self) -> None:
        self.transitions: Counter[tuple[str, str, str]] = Counter()
        self.visits: Counter[str] = Counter()
        self.total_s: defaultdict[str, float] = defaultdict(float)
        self.total_sq_s2: defaultdict[str, float] = defaultdict(float)

    def add_episode(self, segments: Sequence[tuple[str, float, str]], outcome: str,
                    end_event: str = "") -> float:
        """Count one episode: its ``(mode, time_s, event)`` segments in order, then its end with
        ``outcome`` (``end_event``: a fault that ended it directly). Returns the mission time (s)."""
        if not segments:
            raise ValueError("an episode has at least one mode")
        previous = START
        for mode, time_s, event in segments:
            if time_s < 0.0:
                raise ValueError(f"mode {mode}: negative time {time_s} s")
            self.transitions[previous, mode, event] += 1
            self.visits[mode] += 1
            self.total_s[mode] += time_s
            self.total_sq_s2[mode] += time_s * time_s
            previous = mode
        self.transitions[previous, END_PREFIX + outcome, end_event] += 1
        return sum(t for _, t, _ in segments)

    def transition_rows(self) -> list[list[str]]:
        """transitions.csv rows (without the header), sorted."""
        return [[a, b, e, str(n)] for (a, b, e), n in sorted(self.transitions.items())]

    def mode_time_rows(self) -> list[list[str]]:
        """mode_times.csv rows (without the header), sorted; times in full precision."""
        return [[m, str(n), repr(self.total_s[m]), repr(self.total_sq_s2[m])]
                for m, n in sorted(self.visits.items())]

    def write(self, directory: Path) -> None:
        """Write transitions.csv and mode_times.csv into ``directory`` (each replaced atomically)."""
        _write_csv(directory / TRANSITIONS_FILE, TRANSITIONS_COLUMNS, self.transition_rows())
        _write_csv(directory / MODE_TIMES_FILE, MODE_TIMES_COLUMNS, self.mode_time_rows())


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    tmp = None
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", suffix=".tmp",
                                         newline="", encoding="utf-8", delete=False) as f:
            tmp = f.name
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
        tmp = None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
