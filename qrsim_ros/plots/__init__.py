"""PNG figures of a recorded run (``qrsim plot``): read a rosbag2 bag with rosbags, draw with matplotlib.

``render(bag, out_dir)`` writes one PNG per figure the bag has data for (``figures.FIGURES``: top
view, altitude and speed, reward, plume, GPS error, battery, faults) and returns what it wrote and why
it skipped the others; a retrieve run's bag (it has ``/referee/mission``) gets ireland_2016's Figures 8-10
too (``mission_bag.load_mission_bag``). No rclpy: this runs anywhere rosbags, matplotlib, numpy and pyproj
are installed.

``render_mission(csv, out_dir)`` writes the single-run figures of a retrieve mission (ireland_2016
Figures 8-10, ``mission.MISSION_FIGURES``) from the CSV ``qrsim run --out`` writes (``plots.mission``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qrsim_ros.plots.bagdata import BagError, RunData, bag_directory, load_run
from qrsim_ros.plots.figures import DPI, FIGURE_SIZES_IN, FIGURES
from qrsim_ros.plots.mission import (
    MISSION_FIGURES,
    MissionCsvError,
    default_mission_out_dir,
    load_mission_csv,
    looks_like_run_csv,
)
from qrsim_ros.plots.mission_bag import load_mission_bag

__all__ = ["DPI", "FIGURES", "FIGURE_SIZES_IN", "MISSION_FIGURES", "BagError", "MissionCsvError", "Rendered",
           "RunData", "default_mission_out_dir", "default_out_dir", "load_mission_csv", "load_run",
           "looks_like_run_csv", "render", "render_mission"]


@dataclass
class Rendered:
    """What ``render`` did: the PNGs written (name -> path) and the figures skipped (name -> reason)."""

    written: dict[str, Path] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def default_out_dir(bag: str | Path) -> Path:
    """``<bag directory>/plots``: the figures stay with the run they show."""
    return bag_directory(bag) / "plots"


def render(bag: str | Path, out_dir: str | Path | None = None, names: list[str] | None = None) -> Rendered:
    """Read ``bag`` and write its figures to ``out_dir`` (default ``default_out_dir``) as ``<name>.png``.

    Raises ``BagError`` when the bag cannot be read or holds nothing any figure can use.
    """
    run = load_run(bag)
    out = Path(out_dir) if out_dir is not None else default_out_dir(bag)
    created = not out.exists()
    result = _draw(FIGURES, run, out, names)
    result.notes[:0] = [n for n in (run.read_note, run.origin_note) if n]
    mission = load_mission_bag(bag)  # a retrieve run's graph: Figures 8-10 too
    if mission is not None:
        drawn = _draw(MISSION_FIGURES, mission, out, names)
        result.written.update(drawn.written)
        result.skipped.update(drawn.skipped)
    if not result.written:
        if created:
            out.rmdir()
        topics = ", ".join(sorted(run.topics)) or "none"
        raise BagError(f"{run.path}: nothing to plot (topics in the bag: {topics})")
    return result


def render_mission(csv_path: str | Path, out_dir: str | Path | None = None,
                   names: list[str] | None = None) -> Rendered:
    """Read a retrieve run's CSV (``qrsim run --out``) and write its figures (``MISSION_FIGURES``) to
    ``out_dir`` (default ``default_mission_out_dir``: ``RUN_plots/`` next to ``RUN.csv``).

    Raises ``MissionCsvError`` (one line naming the file) when the CSV is missing, unreadable, of
    another kind or malformed; nothing is written then. OSError when ``out_dir`` cannot be made.
    """
    run = load_mission_csv(csv_path)
    out = Path(out_dir) if out_dir is not None else default_mission_out_dir(csv_path)
    return _draw(MISSION_FIGURES, run, out, names)


def _draw(figures: Mapping[str, Callable[[Any, Path], str | None]], run: Any, out: Path,
          names: list[str] | None) -> Rendered:
    """Draw ``figures`` (name -> draw(run, path), returning None or why it was skipped) of ``names`` (None:
    all) into ``out`` (made if missing) as NAME.png."""
    result = Rendered()
    out.mkdir(parents=True, exist_ok=True)
    for name, draw in figures.items():
        if names is not None and name not in names:
            continue
        path = out / f"{name}.png"
        reason = draw(run, path)
        if reason is None:
            result.written[name] = path
        else:
            result.skipped[name] = reason
    return result
