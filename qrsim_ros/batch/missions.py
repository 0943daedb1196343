"""What a batch adds for a task with a mission (``task.type: retrieve``): its results.csv columns and the
mode statistics ``qrsim verify`` reads (docs/VERIFICATION.md).

``columns_for(task_type)`` is the episode's ``columns(sim, result)`` hook; ``extras_for(task_type)`` the
report extras. For retrieve: ``mission_time_s``, the fault flags ``fault_system``, ``fault_actuator``,
``fault_grasper`` (0/1: the fault occurred; the grasper's only when it dropped a carried target, as the
paper counts it, section 6.2.2), counts, and ``mode_path``: the episode's modes in order as
``mode@seconds`` with ``!event`` for an entry a fault caused, and ``mode_distances`` (``mode=metres;...``,
the distance flown in each mode); from those, transitions.csv and
mode_times.csv (``verification.records.ModeStatistics``).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

from qrsim_ros.batch.jobs import ColumnsHook, Record
from qrsim_ros.batch.report import ReportExtra, ReportPart
from qrsim_ros.batch.summary import Summary
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.tasks.retrieve import RetrieveTask
from qrsim_ros.policies.episode import EpisodeResult
from qrsim_ros.verification.formats import (
    MODE_TIMES_COLUMNS,
    MODE_TIMES_FILE,
    TRANSITIONS_COLUMNS,
    TRANSITIONS_FILE,
)
from qrsim_ros.verification.records import ModeStatistics


def retrieve_columns(sim: Simulator, result: EpisodeResult) -> Mapping[str, Any]:
    """The retrieve mission's columns of one finished episode (module docstring)."""
    task = sim.task
    if not isinstance(task, RetrieveTask):
        raise TypeError(f"scenario {sim.scenario.name!r} is not a retrieve task")
    return task.mission_record(float(sim.time))


def parse_mode_path(text: str) -> list[tuple[str, float, str]]:
    """``mode_path`` back into (mode, seconds, event) segments; ValueError naming a malformed part."""
    out = []
    for part in text.split(";"):
        head, _, event = part.partition("!")
        mode, at, seconds = head.partition("@")
        if not at or not mode:
            raise ValueError(f"mode_path part {part!r} is not mode@seconds[!event]")
        out.append((mode, float(seconds), event))
    return out


def parse_mode_distances(text: str) -> dict[str, float]:
    """``mode_distances`` (``mode=metres;...``) back into a mapping; ValueError naming a malformed part."""
    out: dict[str, float] = {}
    for part in filter(None, text.split(";")):
        mode, eq, metres = part.partition("=")
        if not eq or not mode:
            raise ValueError(f"mode_distances part {part!r} is not mode=metres")
        out[mode] = float(metres)
    return out


def mode_statistics(records: Sequence[Record]) -> ModeStatistics:
    """Transition counts and per-mode times over the batch's episodes."""
    stats = ModeStatistics()
    for r in records:
        stats.add_episode(parse_mode_path(str(r["mode_path"])), str(r["outcome"]))
    return stats


def retrieve_report(records: Sequence[Record], summary: Summary) -> ReportPart:
    """transitions.csv and mode_times.csv, and a report.md section on them."""
    stats = mode_statistics(records)
    files = {TRANSITIONS_FILE: _csv_bytes(TRANSITIONS_COLUMNS, stats.transition_rows()),
             MODE_TIMES_FILE: _csv_bytes(MODE_TIMES_COLUMNS, stats.mode_time_rows())}
    distance: dict[str, float] = {}
    for r in records:
        for mode, metres in parse_mode_distances(str(r.get("mode_distances") or "")).items():
            distance[mode] = distance.get(mode, 0.0) + metres
    rows = sorted(stats.visits.items(), key=lambda kv: -stats.total_s[kv[0]])
    n_ep = max(len(records), 1)
    lines = ["## Mission modes", "",
             f"- {TRANSITIONS_FILE}: mode-to-mode counts (`start`, `end:<outcome>`), the paper's Figure 11",
             f"- {MODE_TIMES_FILE}: visits and time per mode; `qrsim verify DIR` model-checks them", "",
             "| mode | visits | mean time per visit (s) | share of all time | distance per episode (m) |",
             "|---|---:|---:|---:|---:|"]
    total = sum(stats.total_s.values()) or 1.0
    lines += [f"| {m} | {n} | {stats.total_s[m] / n:.2f} | {stats.total_s[m] / total:.3f} | "
              f"{distance.get(m, 0.0) / n_ep:.2f} |" for m, n in rows]
    return ReportPart(files=files, markdown=lines + transition_tables(stats))


def transition_probabilities(stats: ModeStatistics) -> dict[tuple[str, str], tuple[int, float]]:
    """(from, to) -> (count, probability) with the probability the share of ``from``'s exits (events
    merged): the paper's Figure 11 with its predicates replaced by probabilities."""
    exits: dict[str, int] = {}
    pairs: dict[tuple[str, str], int] = {}
    for (a, b, _event), n in stats.transitions.items():
        exits[a] = exits.get(a, 0) + n
        pairs[a, b] = pairs.get((a, b), 0) + n
    return {k: (n, n / exits[k[0]]) for k, n in sorted(pairs.items())}


def transition_tables(stats: ModeStatistics) -> list[str]:
    """report.md: every transition's probability (Figure 11) and, per mode, the probabilities of leaving
    it for Emergency land and for Return to base (Table 6)."""
    probs = transition_probabilities(stats)
    lines = ["", "### Transition probabilities (Figure 11)", "", "| from | to | count | p |",
             "|---|---|---:|---:|"]
    lines += [f"| {a} | {b} | {n} | {p:.4f} |" for (a, b), (n, p) in probs.items()]
    lines += ["", "### Into Emergency land and Return to base (Table 6)", "",
              "| from | p(emergency_land) | p(return_to_base) |", "|---|---:|---:|"]
    sources = sorted({a for (a, b) in probs if b in ("emergency_land", "return_to_base")})
    for a in sources:
        e = probs.get((a, "emergency_land"), (0, 0.0))[1]
        r = probs.get((a, "return_to_base"), (0, 0.0))[1]
        lines.append(f"| {a} | {e:.4f} | {r:.4f} |")
    return lines


def _csv_bytes(header: Sequence[str], rows: Sequence[Sequence[str]]) -> bytes:
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def columns_for(task_type: str) -> ColumnsHook | None:
    """The results.csv columns hook of ``task_type`` (None: the base columns only)."""
    return retrieve_columns if task_type == "retrieve" else None


def extras_for(task_type: str) -> tuple[ReportExtra, ...]:
    """The report extras of ``task_type``."""
    return (retrieve_report,) if task_type == "retrieve" else ()
