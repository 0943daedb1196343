"""The battery and fault figures of ``qrsim plot``, and the fault spans drawn on the time plots.

- ``battery.png``: per vehicle the terminal voltage [V] and the charge [%] over simulated time
  (``uavN/battery``), with the fault intervals shaded;
- ``faults.png``: a timeline of the fault intervals (``/sim/faults``), one row per vehicle, one bar per
  firing, coloured by kind and labelled with kind and id;
- ``shade_faults(ax, run)``: the intervals as shaded vertical spans on any axes whose x is simulated
  time [s] (the battery and the altitude/speed figures).

However many intervals a run has, each figure draws a few artists per fault kind: the spans and bars
of a kind are one collection (its overlapping spans merged), their start lines another, and only the
first ``MAX_INTERVAL_LABELS`` intervals are written out (the legend names every kind).

Every figure function returns ``None`` after writing its PNG, or a one-line reason (nothing written).
An interval still active when the recording ends (``end_s`` NaN) is drawn to the run's last sample.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.collections import PatchCollection
from matplotlib.patches import Patch, Rectangle
from matplotlib.transforms import blended_transform_factory

from qrsim_ros.plots.bagdata import RunData
from qrsim_ros.plots.faults import FaultInterval
from qrsim_ros.plots.style import legend_outside, new_figure, save, title, vehicle_colour

#: Fault kind colours, in the order of ``core.faults.KINDS`` (one colour per kind in every figure).
FAULT_COLOURS = ("#e41a1c", "#377eb8", "#4daf4a", "#984ea3", "#ff7f00", "#a65628", "#f781bf", "#666666",
                 "#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#17becf", "#bcbd22")
#: Opacity of the fault spans on the time plots (the data stay readable through them).
SPAN_ALPHA = 0.15
#: Intervals written out on a figure at most (a run with many firings: the first ones).
MAX_INTERVAL_LABELS = 40


def fault_colour(kind: str) -> str:
    """The kind's colour: by its place in ``core.faults.KINDS``; an unknown kind by its name."""
    from qrsim_ros.core.faults import KINDS

    kinds = list(KINDS)
    i = kinds.index(kind) if kind in kinds else sum(map(ord, kind))
    return FAULT_COLOURS[i % len(FAULT_COLOURS)]


def _end(f: FaultInterval, run_end_s: float) -> float:
    """Where the interval is drawn to [s]: its end, or the run's last sample when still active then."""
    return f.end_s if math.isfinite(f.end_s) else max(run_end_s, f.start_s)


def merged_spans(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of the closed intervals ``(start, end)`` as sorted, disjoint ``(start, end)`` pairs."""
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def shade_faults(ax, run: RunData, *, labels: bool = True, legend: bool = True) -> int:  # type: ignore[no-untyped-def]
    """Shade every fault interval of the run on ``ax`` (x: simulated time [s]) in its kind's colour: per
    kind one collection of spans (overlapping ones merged) and one of start lines; with ``labels`` the
    vehicle, kind and id of the first ``MAX_INTERVAL_LABELS`` intervals are written at the top of their
    spans; with ``legend`` each kind carries a legend label. Returns the number of intervals shaded."""
    top = blended_transform_factory(ax.transData, ax.transAxes)
    end_s = run.end_s
    by_kind: dict[str, list[FaultInterval]] = {}
    for f in run.faults:
        by_kind.setdefault(f.kind, []).append(f)
    for kind, intervals in by_kind.items():
        colour = fault_colour(kind)
        spans = merged_spans([(f.start_s, _end(f, end_s)) for f in intervals])
        ax.broken_barh([(a, b - a) for a, b in spans], (0.0, 1.0), transform=top, facecolors=colour,
                       alpha=SPAN_ALPHA, lw=0, zorder=0, label=f"fault: {kind}" if legend else None)
        ax.vlines(sorted({f.start_s for f in intervals}), 0.0, 1.0, transform=top, colors=colour, lw=0.8,
                  alpha=0.7, zorder=0)
    if labels:
        for f in run.faults[:MAX_INTERVAL_LABELS]:
            ax.text(f.start_s, 0.98, f" {f.name} {f.label}", transform=top, rotation=90, va="top", ha="left",
                    fontsize=7, color=fault_colour(f.kind), clip_on=True)
    return len(run.faults)


# --- battery --------------------------------------------------------------------------------------------

def battery(run: RunData, path: Path) -> str | None:
    """Terminal voltage [V] and charge [%] over simulated time per vehicle (``uavN/battery``), with the
    fault intervals shaded."""
    packs = [(i, v) for i, v in enumerate(run.vehicles) if not v.battery_v.empty]
    if not packs:
        return "no uavN/battery in the bag (the battery is off, or the run predates it)"
    fig = new_figure("battery")
    ax_v, ax_p = fig.subplots(2, 1, sharex=True)
    lowest: list[str] = []
    for i, v in packs:
        c = vehicle_colour(i)
        pct = 100.0 * v.battery_fraction.values[:, 0]
        ax_v.plot(v.battery_v.t_s, v.battery_v.values[:, 0], color=c, lw=1.6, label=v.name)
        ax_p.plot(v.battery_fraction.t_s, pct, color=c, lw=1.6, label=v.name)
        if np.isfinite(pct).any():
            lowest.append(f"{v.name} {np.nanmin(pct):.0f} %")
    shade_faults(ax_v, run)
    shade_faults(ax_p, run, labels=False, legend=False)
    ax_v.set_ylabel("terminal voltage [V]")
    ax_p.set_ylabel("charge [%]")
    ax_p.set_xlabel("simulated time [s]")
    ax_p.set_ylim(bottom=min(0.0, ax_p.get_ylim()[0]), top=max(100.0, ax_p.get_ylim()[1]))
    faults = f", {len(run.faults)} fault interval(s) shaded" if run.faults else ""
    ax_v.set_title(title(run, "battery") + f"\nlowest charge: {', '.join(lowest)}{faults}")
    for ax in (ax_v, ax_p):
        ax.grid(True, alpha=0.4)
    legend_outside(ax_v)
    legend_outside(ax_p)
    save(fig, path)
    return None


# --- faults timeline ---------------------------------------------------------------------------------------

def _lanes(intervals: list[FaultInterval], end_s: float) -> list[int]:
    """A lane per interval so that overlapping intervals of one vehicle are drawn side by side."""
    lane_end: dict[tuple[int, int], float] = {}
    lanes = []
    for f in intervals:
        lane = 0
        while lane_end.get((f.vehicle, lane), -math.inf) > f.start_s:
            lane += 1
        lane_end[(f.vehicle, lane)] = _end(f, end_s)
        lanes.append(lane)
    return lanes


def faults_timeline(run: RunData, path: Path) -> str | None:
    """The fault intervals from ``/sim/faults``: one row per vehicle, one bar per firing (kind colour,
    labelled kind and id); hatched when still active at the end of the recording."""
    if "/sim/faults" not in run.topics:
        return "no /sim/faults in the bag (not recorded, or the run predates it)"
    if not run.faults:
        return f"no fault was active in the run (/sim/faults: {run.fault_messages} message(s), all empty)"
    end_s = run.end_s
    lanes = _lanes(run.faults, end_s)
    vehicles = sorted({int(v.name[3:]) - 1 for v in run.vehicles} | {f.vehicle for f in run.faults})
    row = {v: r for r, v in enumerate(reversed(vehicles))}  # uav1 at the top
    depth = {v: 1 + max([ln for f, ln in zip(run.faults, lanes, strict=True) if f.vehicle == v], default=0)
             for v in vehicles}
    fig = new_figure("faults")
    ax = fig.add_subplot()
    span = max(end_s, 1e-9)
    # one collection of bars per kind and state (still active: hatched), one of dotted planned ends
    bars: dict[tuple[str, bool], tuple[list[tuple[float, float]], list[tuple[float, float]]]] = {}
    planned: tuple[list[float], list[float], list[float]] = ([], [], [])
    for i, (f, lane) in enumerate(zip(run.faults, lanes, strict=True)):
        h = 0.8 / depth[f.vehicle]
        y = row[f.vehicle] - 0.4 + lane * h
        x1 = _end(f, end_s)
        xs, ys = bars.setdefault((f.kind, not math.isfinite(f.end_s)), ([], []))
        xs.append((f.start_s, max(x1 - f.start_s, span * 2e-3)))
        ys.append((y + 0.05 * h, 0.9 * h))
        if math.isfinite(f.planned_end_s) and abs(f.planned_end_s - x1) > 1e-6:  # cleared early / reset
            for column, value in zip(planned, (f.planned_end_s, y + 0.05 * h, y + 0.95 * h), strict=True):
                column.append(value)
        if i < MAX_INTERVAL_LABELS:
            ax.text(f.start_s, y + 0.5 * h, f" {f.label}", va="center", ha="left", fontsize=8, zorder=5,
                    clip_on=True, bbox={"facecolor": "white", "alpha": 0.75, "linewidth": 0, "pad": 1.0})
    for (kind, still), (xs, ys) in bars.items():
        rects = [((x, y), w, hgt) for (x, w), (y, hgt) in zip(xs, ys, strict=True)]
        ax.add_collection(PatchCollection([Rectangle(*r) for r in rects], facecolors=fault_colour(kind),
                                          edgecolors="black", linewidths=0.6, hatch="//" if still else None,
                                          zorder=3))
    if planned[0]:
        ax.vlines(*planned, colors="black", lw=1.0, linestyles=":", zorder=4)
    ax.set_yticks([row[v] for v in vehicles], [f"uav{v + 1}" for v in vehicles])
    for v in vehicles:
        ax.get_yticklabels()[vehicles.index(v)].set_color(vehicle_colour(v))
    ax.set_ylim(-0.6, len(vehicles) - 0.4)
    ax.set_xlim(0.0, span * 1.02)
    ax.set_xlabel("simulated time [s]")
    ax.grid(True, axis="x", alpha=0.4)
    kinds = sorted({f.kind for f in run.faults})
    handles = [Patch(facecolor=fault_colour(k), edgecolor="black", label=k) for k in kinds]
    if any(not math.isfinite(f.end_s) for f in run.faults):
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label="active at the end of the recording"))
    on = len({f.vehicle for f in run.faults})
    ax.set_title(title(run, f"faults, {len(run.faults)} interval(s) on {on} vehicle(s) (/sim/faults)"))
    legend_outside(ax, handles)
    save(fig, path)
    return None
