"""Single-run figures of a retrieve mission (ireland_2016 section 6.1, Figures 8-10) from the CSV that
``qrsim run SCENARIO --out RUN.csv`` writes for a retrieve scenario (``qrsim plot RUN.csv``).

``load_mission_csv(path)`` reads and checks the file into a ``MissionRun`` (vehicle 0: the vehicle the
referee scores, the paper flies one); ``render_mission(path, out_dir)`` writes ``MISSION_FIGURES``:

- ``mission_path.png`` (Figure 8): top view, north up and east to the right, equal aspect: the vehicle's
  true path (start ▲, end ■), each target's start position (○), its track while carried or falling and
  its final position (●), the drop site with its radius R_ds, the landing site, the lab's outline;
- ``mission_height.png`` (Figure 9): height above the floor (-z) over simulated time with the guidance's
  height command dashed, the background shaded by mission mode, and the mode sequence below;
- ``mission_battery.png`` (Figure 10): terminal voltage over time with the maximum voltage V_max and the
  low-battery warning threshold V_th dashed, the background shaded by mode.

Anything wrong with the file (missing, unreadable, not a ``qrsim run --out`` CSV, a run of another kind
of scenario, a malformed row) raises ``MissionCsvError`` with one line naming the file and the problem.
The column layout is ``qrsim_ros.cli.run``'s (its module docstring); a row is the state at the end of a
task step, so the mode of row k was flown from row k-1's time to row k's (from 0 for the first row).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, Patch, Rectangle

from qrsim_ros.core.common.validation import shorten
from qrsim_ros.core.mission.modes import MODES, mode_number
from qrsim_ros.core.world.targets import PHASES, RESTING
from qrsim_ros.plots.bagdata import Array
from qrsim_ros.plots.style import legend_outside, new_figure, save, vehicle_colour

#: The first columns of every ``qrsim run --out`` CSV.
RUN_COLUMNS = ("step", "t", "reward", "cumulative_reward")
#: Vehicle 0's columns the figures read (run.py: ``episode_header`` and ``retrieve_header``).
VEHICLE_COLUMNS = ("px_0", "py_0", "pz_0", "valid_0", "mode_0", "zcmd_0", "battery_v_0", "holding_0")
#: The episode's constants, repeated on every row (run.py's ``RETRIEVE_CONSTANTS``).
CONSTANT_COLUMNS = ("landing_x", "landing_y", "drop_x", "drop_y", "drop_radius_m", "battery_full_v",
                    "battery_low_v")
#: ireland_2016's MAST lab (section 4.8.1): x (north) in [-2, 2], y (east) in [-3.5, 3.5] [m]; the
#: scenarios' flight area leaves half a metre around it (config/retrieve_*.yaml).
LAB_NE_M = (-2.0, 2.0, -3.5, 3.5)
#: Target colours (never vehicle 0's blue, which draws the path).
TARGET_COLOURS = ("#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
#: One colour per mode, mode n (Figure 5's numbering) ``MODE_COLOURS[n - 1]`` (matplotlib's tab20).
MODE_COLOURS: tuple[tuple[float, ...], ...] = tuple(matplotlib.colormaps["tab20"].colors[:len(MODES)])
#: Opacity of the mode spans behind the time plots.
MODE_ALPHA = 0.22


class MissionCsvError(Exception):
    """The file is not a readable retrieve-run CSV of ``qrsim run --out``; the message names it."""


@dataclass
class MissionRun:
    """Vehicle 0's retrieve mission as ``qrsim run --out`` recorded it, one entry per task step."""

    path: Path
    t_s: Array                  # (n,) simulated time at the end of each step [s]
    position_ned_m: Array       # (n, 3) true position
    valid: Array                # (n,) bool
    modes: list[str]            # (n,) the reported mission mode
    zcmd_ned_m: Array           # (n,) the guidance's height command (NaN: none recorded)
    battery_v: Array            # (n,) terminal voltage (NaN: battery off)
    holding: Array              # (n,) bool
    targets_ned_m: Array        # (n, m, 3) target centres
    target_phases: list[list[str]]  # (n, m)
    landing_ne_m: Array         # (2,)
    drop_ne_m: Array            # (2,)
    drop_radius_m: float
    battery_full_v: float
    battery_low_v: float

    @property
    def num_targets(self) -> int:
        return int(self.targets_ned_m.shape[1])

    @property
    def name(self) -> str:
        return self.path.name

    def mode_segments(self) -> list[tuple[str, float, float]]:
        """(mode, start [s], end [s]) of every stretch flown in one mode, in order: row k's mode covers
        row k-1's time to row k's (0 to the first row's)."""
        out: list[tuple[str, float, float]] = []
        start = 0.0
        for k, mode in enumerate(self.modes):
            if k + 1 == len(self.modes) or self.modes[k + 1] != mode:
                out.append((mode, start, float(self.t_s[k])))
                start = float(self.t_s[k])
        return out

    def targets_in_drop_zone(self) -> int:
        """How many targets rest within R_ds of the drop site (horizontally) at the last row."""
        final = self.targets_ned_m[-1]
        d = np.hypot(final[:, 0] - self.drop_ne_m[0], final[:, 1] - self.drop_ne_m[1])
        resting = np.array([p == PHASES[RESTING] for p in self.target_phases[-1]], bool)
        return int(np.count_nonzero((d <= self.drop_radius_m) & resting))


def mode_colour(mode: str) -> tuple[float, ...]:
    return MODE_COLOURS[mode_number(mode) - 1]


def default_mission_out_dir(csv_path: str | Path) -> Path:
    """``RUN_plots/`` next to ``RUN.csv``."""
    p = Path(csv_path)
    return p.with_name(f"{p.stem}_plots")


def looks_like_run_csv(path: str | Path) -> bool:
    """True for a ``.csv`` path, or an existing file whose first line starts as a ``qrsim run --out``
    CSV does (``qrsim plot`` then reads it as a mission run, not as a bag)."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return True
    if not p.is_file():
        return False
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith(",".join(RUN_COLUMNS).encode())


# --- reading ----------------------------------------------------------------------------------------------

def _read_rows(path: Path) -> list[tuple[int, list[str]]]:
    """(line number, fields) of every non-empty line."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            return [(reader.line_num, row) for row in reader if row]
    except FileNotFoundError:
        raise MissionCsvError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MissionCsvError(f"{path}: is a directory, not a CSV of 'qrsim run --out'") from None
    except OSError as exc:
        raise MissionCsvError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise MissionCsvError(f"{path}: not a UTF-8 text file (not a CSV of 'qrsim run --out')") from None
    except csv.Error as exc:
        raise MissionCsvError(f"{path}: not a valid CSV: {exc}") from None


def _numbers(path: Path, rows: list[tuple[int, list[str]]], col: int, name: str, *,
             finite: bool = False) -> Array:
    out = np.empty(len(rows))
    for k, (line, row) in enumerate(rows):
        text = row[col]
        try:
            out[k] = float(text)
        except ValueError:
            raise MissionCsvError(f"{path}: line {line}, column {name}: {shorten(text)} "
                                  "is not a number") from None
        if finite and not math.isfinite(out[k]):
            raise MissionCsvError(f"{path}: line {line}, column {name}: {shorten(text)} is not finite")
    return out


def _flags(path: Path, rows: list[tuple[int, list[str]]], col: int, name: str) -> Array:
    for line, row in rows:
        if row[col] not in ("0", "1"):
            raise MissionCsvError(f"{path}: line {line}, column {name}: {shorten(row[col])} is not 0 or 1")
    return np.array([row[col] == "1" for _, row in rows], bool)


def _names(path: Path, rows: list[tuple[int, list[str]]], col: int, name: str,
           known: tuple[str, ...], what: str) -> list[str]:
    for line, row in rows:
        if row[col] not in known:
            raise MissionCsvError(f"{path}: line {line}, column {name}: unknown {what} {shorten(row[col])} "
                                  f"(one of {', '.join(known)})")
    return [row[col] for _, row in rows]


def load_mission_csv(path: str | Path) -> MissionRun:
    """Read and check a retrieve run's CSV (module docstring); ``MissionCsvError`` says what is wrong."""
    p = Path(path)
    lines = _read_rows(p)
    if not lines:
        raise MissionCsvError(f"{p}: empty file (no header): not a CSV of 'qrsim run --out'")
    header = lines[0][1]
    if tuple(header[:len(RUN_COLUMNS)]) != RUN_COLUMNS:
        start = shorten(",".join(header[:len(RUN_COLUMNS)]))
        raise MissionCsvError(f"{p}: not a CSV of 'qrsim run --out' (the header starts {start}, "
                              f"expected {','.join(RUN_COLUMNS)})")
    if "mode_0" not in header:
        raise MissionCsvError(f"{p}: a 'qrsim run --out' CSV without the mission columns (mode_0, zcmd_0, "
                              "...): the mission figures need a run of a retrieve scenario")
    missing = [c for c in (*VEHICLE_COLUMNS, *CONSTANT_COLUMNS) if c not in header]
    if missing:
        raise MissionCsvError(f"{p}: missing column(s) {', '.join(missing)}")
    if len(set(header)) != len(header):
        dup = sorted({c for c in header if header.count(c) > 1})
        raise MissionCsvError(f"{p}: duplicate column(s) {', '.join(dup)}")
    rows = lines[1:]
    if not rows:
        raise MissionCsvError(f"{p}: no data rows after the header")
    for line, row in rows:
        if len(row) != len(header):
            raise MissionCsvError(f"{p}: line {line} has {len(row)} field(s), the header {len(header)}")
    col = {name: i for i, name in enumerate(header)}
    m = 0
    while f"tx_{m}" in col:
        m += 1
    for j in range(m):
        absent = [c for c in (f"ty_{j}", f"tz_{j}", f"phase_{j}") if c not in col]
        if absent:
            raise MissionCsvError(f"{p}: missing column(s) {', '.join(absent)}")

    def num(name: str, finite: bool = False) -> Array:
        return _numbers(p, rows, col[name], name, finite=finite)

    t = num("t", finite=True)
    if np.any(np.diff(t) < 0):
        k = int(np.flatnonzero(np.diff(t) < 0)[0]) + 1
        raise MissionCsvError(f"{p}: line {rows[k][0]}: the time t goes back ({t[k - 1]!r} -> {t[k]!r})")
    targets = np.zeros((len(rows), m, 3))
    phases_by_target = []
    for j in range(m):
        for a, axis in enumerate("xyz"):
            targets[:, j, a] = num(f"t{axis}_{j}")
        phases_by_target.append(_names(p, rows, col[f"phase_{j}"], f"phase_{j}", PHASES, "target phase"))
    const = {name: num(name, finite=True) for name in CONSTANT_COLUMNS}
    for name, values in const.items():
        if np.any(values != values[0]):
            k = int(np.flatnonzero(values != values[0])[0])
            raise MissionCsvError(f"{p}: line {rows[k][0]}: the episode constant {name} changes")
    return MissionRun(
        path=p, t_s=t,
        position_ned_m=np.column_stack([num("px_0"), num("py_0"), num("pz_0")]),
        valid=_flags(p, rows, col["valid_0"], "valid_0"),
        modes=_names(p, rows, col["mode_0"], "mode_0", MODES, "mission mode"),
        zcmd_ned_m=num("zcmd_0"), battery_v=num("battery_v_0"),
        holding=_flags(p, rows, col["holding_0"], "holding_0"),
        targets_ned_m=targets,
        target_phases=[[phases[k] for phases in phases_by_target] for k in range(len(rows))],
        landing_ne_m=np.array([const["landing_x"][0], const["landing_y"][0]]),
        drop_ne_m=np.array([const["drop_x"][0], const["drop_y"][0]]),
        drop_radius_m=float(const["drop_radius_m"][0]),
        battery_full_v=float(const["battery_full_v"][0]),
        battery_low_v=float(const["battery_low_v"][0]),
    )


# --- drawing ----------------------------------------------------------------------------------------------

def target_colour(j: int) -> str:
    return TARGET_COLOURS[j % len(TARGET_COLOURS)]


def shade_modes(ax, run: MissionRun) -> list[Patch]:  # type: ignore[no-untyped-def]
    """Shade each mode stretch on ``ax`` (x: simulated time [s]) in its mode's colour; returns one legend
    patch per mode flown, in Figure 5's order."""
    for mode, start, end in run.mode_segments():
        ax.axvspan(start, end, color=mode_colour(mode), alpha=MODE_ALPHA, lw=0, zorder=0)
    flown = sorted(set(run.modes), key=mode_number)
    return [Patch(facecolor=mode_colour(m), alpha=MODE_ALPHA + 0.2, label=f"{mode_number(m)} {m}")
            for m in flown]


def _finish_time_axis(ax, run: MissionRun) -> None:  # type: ignore[no-untyped-def]
    ax.set_xlim(0.0, float(run.t_s[-1]))
    ax.grid(True, alpha=0.3)


def mission_path(run: MissionRun, path: Path) -> str | None:
    """Figure 8: the vehicle's path and the targets seen from above (module docstring)."""
    fig = new_figure("mission_path")
    ax = fig.subplots()
    n0, n1, e0, e1 = LAB_NE_M
    ax.add_patch(Rectangle((e0, n0), e1 - e0, n1 - n0, fill=False, ec="0.35", lw=1.2, ls="--",
                           label=f"lab ({n1 - n0:g} x {e1 - e0:g} m)"))
    drop_e, drop_n = run.drop_ne_m[1], run.drop_ne_m[0]
    ax.add_patch(Circle((drop_e, drop_n), run.drop_radius_m, fc="#1a9850", ec="#1a9850", alpha=0.2, lw=1.5,
                        label=f"drop zone (R = {run.drop_radius_m:g} m)"))
    ax.plot([drop_e], [drop_n], "x", color="#1a9850", ms=10, mew=2.5, label="drop site")
    ax.plot([run.landing_ne_m[1]], [run.landing_ne_m[0]], "H", color="0.2", ms=13, mfc="none", mew=2,
            label="landing site")
    c = vehicle_colour(0)
    pos = run.position_ned_m
    ax.plot(pos[:, 1], pos[:, 0], color=c, lw=1.3, alpha=0.85, label="vehicle path")
    ax.plot([pos[0, 1]], [pos[0, 0]], "^", color=c, ms=9, label="vehicle start")
    ax.plot([pos[-1, 1]], [pos[-1, 0]], "s", color=c, ms=8, label="vehicle end")
    for j in range(run.num_targets):
        tc = target_colour(j)
        track = run.targets_ned_m[:, j, :]
        ax.plot(track[:, 1], track[:, 0], ":", color=tc, lw=1.2)
        ax.plot([track[0, 1]], [track[0, 0]], "o", mfc="none", mec=tc, mew=2, ms=10,
                label=f"target {j} start")
        ax.plot([track[-1, 1]], [track[-1, 0]], "o", color=tc, ms=8, label=f"target {j} final")
    pts = np.vstack([pos[:, 0:2], run.targets_ned_m.reshape(-1, 3)[:, 0:2], run.drop_ne_m[None],
                     run.landing_ne_m[None]])
    pts = pts[np.all(np.isfinite(pts), axis=1)]
    margin = 0.3
    ax.update_datalim([(min(e0, pts[:, 1].min()) - margin, min(n0, pts[:, 0].min()) - margin),
                       (max(e1, pts[:, 1].max()) + margin, max(n1, pts[:, 0].max()) + margin)])
    ax.margins(0.0)
    ax.autoscale_view()
    ax.set_aspect("equal", adjustable="datalim")  # the axes keep their layout box, the limits grow
    ax.set_xlabel("y (east) [m]")
    ax.set_ylabel("x (north) [m]")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"{run.name}: mission path (ireland_2016 Figure 8); targets in the drop zone at the end: "
                 f"{run.targets_in_drop_zone()}/{run.num_targets}", fontsize=11)
    # a figure legend: constrained layout makes room for it beside the equal-aspect axes
    fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", fontsize=9)
    save(fig, path)
    return None


def mission_height(run: MissionRun, path: Path) -> str | None:
    """Figure 9: height above the floor and the height command over time, shaded by mode."""
    fig = new_figure("mission_height")
    ax, ax_m = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3.0, 1.3]})
    patches = shade_modes(ax, run)
    ax.plot(run.t_s, -run.position_ned_m[:, 2], color=vehicle_colour(0), lw=1.5, label="height (-z)")
    handles = [Line2D([], [], color=vehicle_colour(0), lw=1.5, label="height (-z)")]
    if np.any(np.isfinite(run.zcmd_ned_m)):
        ax.plot(run.t_s, -run.zcmd_ned_m, "--", color="black", lw=1.1, drawstyle="steps-pre")
        handles.append(Line2D([], [], color="black", ls="--", lw=1.1, label="height command"))
    ax.set_ylabel("height above the floor [m]")
    ax.set_ylim(bottom=0.0)
    _finish_time_axis(ax, run)
    legend_outside(ax, handles=handles + patches, title="mode (shaded)", title_fontsize=9)
    ax.set_title(f"{run.name}: height (ireland_2016 Figure 9)", fontsize=11)
    numbers = np.array([mode_number(m) for m in run.modes])
    ax_m.plot(run.t_s, numbers, color="0.25", lw=1.2, drawstyle="steps-pre")
    flown = sorted(set(numbers.tolist()))
    ax_m.set_yticks(flown, [MODES[n - 1] for n in flown], fontsize=7)
    ax_m.set_ylim(min(flown) - 0.7, max(flown) + 0.7)
    ax_m.set_ylabel("mode")
    ax_m.set_xlabel("time [s]")
    _finish_time_axis(ax_m, run)
    save(fig, path)
    return None


def mission_battery(run: MissionRun, path: Path) -> str | None:
    """Figure 10: the terminal voltage over time with V_max and V_th dashed, shaded by mode."""
    if not np.any(np.isfinite(run.battery_v)):
        return "battery_v_0 is nan throughout (the battery is off in this scenario)"
    fig = new_figure("mission_battery")
    ax = fig.subplots()
    patches = shade_modes(ax, run)
    ax.plot(run.t_s, run.battery_v, color=vehicle_colour(0), lw=1.5)
    handles = [Line2D([], [], color=vehicle_colour(0), lw=1.5, label="voltage")]
    finite = run.battery_v[np.isfinite(run.battery_v)]
    lo, hi = float(finite.min()), float(finite.max())
    for volts, colour, label in ((run.battery_full_v, "black", "maximum V_max"),
                                 (run.battery_low_v, "#d73027", "warning threshold V_th")):
        if math.isfinite(volts):  # (a bag whose scenario does not load here has no thresholds)
            ax.axhline(volts, color=colour, ls="--", lw=1.1)
            handles.append(Line2D([], [], color=colour, ls="--", lw=1.1, label=f"{label} = {volts:g} V"))
            lo, hi = min(lo, volts), max(hi, volts)
    pad = max(0.05 * (hi - lo), 0.02)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("battery voltage [V]")
    _finish_time_axis(ax, run)
    legend_outside(ax, handles=handles + patches, title="mode (shaded)", title_fontsize=9)
    ax.set_title(f"{run.name}: battery voltage (ireland_2016 Figure 10); lowest {finite.min():.3f} V",
                 fontsize=11)
    save(fig, path)
    return None


#: The figures of a retrieve run's CSV, in the order they are drawn.
MISSION_FIGURES: dict[str, Callable[[MissionRun, Path], str | None]] = {
    "mission_path": mission_path,
    "mission_height": mission_height,
    "mission_battery": mission_battery,
}
