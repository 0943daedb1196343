"""A batch report as files (name -> bytes), written into ``--report DIR`` by the command line:

- ``results.csv``: one row per episode (``summary.columns_of``: the base columns, then extra columns);
- ``summary.json``: outcome probabilities with Wilson 95 % intervals and the distributions;
- ``report.md``: both as tables, how the batch ran, the figures;
- ``outcomes.png``, ``distributions.png`` (``figures``);
- whatever the ``extras`` add: each a ``ReportExtra`` returning files and a markdown section (e.g. a
  mission's transitions.csv).

results.csv and summary.json depend on the records only (no wall times, engine or worker count), so
they are byte-identical for any engine and worker count.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from qrsim_ros.batch.figures import distributions_png, outcomes_png
from qrsim_ros.batch.jobs import Record
from qrsim_ros.batch.summary import Summary, columns_of, outcomes_for, summarise


@dataclass(frozen=True)
class BatchInfo:
    """What was run and how (the how only goes into report.md)."""

    scenario: str
    policy: str
    seeds: tuple[int, ...]
    engine: str = ""
    workers: int = 0
    wall_s: float = 0.0
    task_type: str = ""


@dataclass
class ReportPart:
    """Extra report content: files (name -> bytes) and markdown lines appended to report.md."""

    files: dict[str, bytes] = field(default_factory=dict)
    markdown: list[str] = field(default_factory=list)


#: ``extra(records, summary)``: more files and a report.md section from a task or policy.
ReportExtra = Callable[[Sequence[Record], Summary], ReportPart]


def cell(value: Any) -> str:
    """One CSV cell: None is empty, a bool 1/0, a float its shortest exact form (parses back bit for bit)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def results_table(records: Sequence[Record]) -> tuple[list[str], list[list[str]]]:
    """results.csv's header and rows (a record without a column has an empty cell there)."""
    columns = columns_of(records)
    return columns, [[cell(r.get(c)) for c in columns] for r in records]


def results_csv(records: Sequence[Record]) -> bytes:
    header, rows = results_table(records)
    text = io.StringIO(newline="")
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return text.getvalue().encode("utf-8")


def summary_json(info: BatchInfo, summary: Summary) -> bytes:
    data = {
        "scenario": info.scenario, "policy": info.policy, "episodes": summary.episodes,
        "seed_first": info.seeds[0], "seed_last": info.seeds[-1],
        "outcomes": {o.name: {"count": o.count, "p": o.p, "wilson95": list(o.wilson95)}
                     for o in summary.outcomes},
        "events": {o.name: {"count": o.count, "p": o.p, "wilson95": list(o.wilson95)}
                   for o in summary.events},
        "distributions": {c: d.as_dict() for c, d in summary.distributions.items()},
    }
    return (json.dumps(data, indent=2, allow_nan=False) + "\n").encode("utf-8")


def _markdown(info: BatchInfo, summary: Summary, figures: Sequence[str], columns: Sequence[str]) -> list[str]:
    n = summary.episodes
    lines = [f"# qrsim batch: {info.scenario}, policy {info.policy}", "",
             f"{n} episodes, seeds {info.seeds[0]}..{info.seeds[-1]} (episode i has seed "
             f"{info.seeds[0]} + i)."]
    if info.engine:
        rate = n / info.wall_s if info.wall_s > 0 else float("nan")
        lines.append(f"Engine {info.engine}, {info.workers} worker(s): {info.wall_s:.1f} s wall, "
                     f"{rate:.2f} episodes/s.")
    lines += ["", "## Outcomes", "", "| outcome | count | p | 95 % CI (Wilson) |", "|---|---:|---:|---|"]
    lines += [f"| {o.name} | {o.count} | {o.p:.3f} | [{o.wilson95[0]:.3f}, {o.wilson95[1]:.3f}] |"
              for o in summary.outcomes]
    if summary.events:
        lines += ["", "## Events (faults)", "", "| event | episodes | p | 95 % CI (Wilson) |",
                  "|---|---:|---:|---|"]
        lines += [f"| {o.name} | {o.count} | {o.p:.3f} | [{o.wilson95[0]:.3f}, {o.wilson95[1]:.3f}] |"
                  for o in summary.events]
    stats = ("mean", "std", "min", "q1", "median", "q3", "max")
    lines += ["", "## Distributions", "", "| | " + " | ".join(stats) + " |",
              "|---" + "|---:" * len(stats) + "|"]
    for column, d in summary.distributions.items():
        values = " | ".join(f"{getattr(d, s):.6g}" for s in stats)
        lines.append(f"| {summary.label(column)} | {values} |")
    lines += ["", "## Figures", ""] + [f"![{name}]({name})" for name in figures]
    lines += ["", "## Files", "", f"- results.csv: one row per episode ({', '.join(columns)})",
              "- summary.json: the outcome probabilities and distributions above"]
    return lines


def build_report(records: Sequence[Record], info: BatchInfo,
                 extras: Sequence[ReportExtra] = ()) -> dict[str, bytes]:
    """Every file of the report, name -> content, in the order to write them: the data (results.csv,
    summary.json, the extras' files), report.md, then the figures, so that a disk that fills up while
    the report is written loses figures, never data."""
    summary = summarise(records, outcomes_for(info.task_type))
    title = f"{info.scenario} ({info.policy})"
    files = {"results.csv": results_csv(records), "summary.json": summary_json(info, summary),
             "outcomes.png": outcomes_png(summary, title)}
    histograms = distributions_png(summary, records, title)
    if histograms is not None:
        files["distributions.png"] = histograms
    figures = [name for name in files if name.endswith(".png")]
    markdown = _markdown(info, summary, figures, columns_of(records))
    for extra in extras:
        part = extra(records, summary)
        clash = sorted(set(part.files) & (set(files) | {"report.md"}))
        if clash:
            raise ValueError(f"report extra {getattr(extra, '__qualname__', extra)} rewrites {clash}")
        files.update(part.files)
        markdown += ["", *part.markdown]
    files["report.md"] = ("\n".join(markdown) + "\n").encode("utf-8")
    return {**{n: d for n, d in files.items() if not n.endswith(".png")},
            **{n: d for n, d in files.items() if n.endswith(".png")}}
