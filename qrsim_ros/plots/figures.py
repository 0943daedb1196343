"""The figures of ``qrsim plot``: one function per PNG, each drawing from a ``RunData`` (bagdata.py).

Every function takes the run and the output path, writes one PNG (matplotlib's Agg renderer through
``matplotlib.figure.Figure``: no pyplot, no GUI, no global backend switch) and returns ``None``, or
returns a one-line reason instead when the bag lacks what the figure needs (nothing is written then).
Sizes are fixed (``FIGURE_SIZES_IN`` at ``DPI``) so the images have known pixel dimensions.

Frames and units: the map frame is ENU (east, north, up) in metres; time is simulated seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.colors import BoundaryNorm, ListedColormap, LogNorm, Normalize
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from qrsim_ros.plots.bagdata import Array, RunData, Track, Vehicle, gps_error
from qrsim_ros.plots.style import (
    DPI,
    FIGURE_SIZES_IN,
    VEHICLE_COLOURS,
    estimate_colour,
    legend_outside,
    new_figure,
    save,
    title,
    vehicle_colour,
)
from qrsim_ros.plots.timelines import battery, faults_timeline, shade_faults

#: Terrain classes 0..K: muted earth tones so the tracks and persons stand out.
TERRAIN_COLOURS = ("#eeeadf", "#c9d8b6", "#a9c39a", "#d9c7a0", "#b9b3a8", "#9fb4c7", "#d8b8b0",
                   "#c2c2a0")
FOUND_COLOUR, UNFOUND_COLOUR, SOURCE_COLOUR = "#1a9850", "#d73027", "#000000"

__all__ = ["DPI", "FIGURES", "FIGURE_SIZES_IN", "VEHICLE_COLOURS", "estimate_colour", "vehicle_colour"]


def _finite_rows(values: Array) -> Array:
    return values[np.all(np.isfinite(values), axis=1)] if values.size else values


# --- 1. top view -------------------------------------------------------------------------------------

def _area_extent(run: RunData) -> tuple[float, float, float, float] | None:
    """(east min, east max, north min, north max) [m]: the terrain grid, else the flight area of the
    scenario, widened to whatever data lie outside (with a margin); None when nothing has a position."""
    pts = [_finite_rows(v.truth_enu.values)[:, :2] for v in run.vehicles if not v.truth_enu.empty]
    pts += [_finite_rows(v.gps_enu.values)[:, :2] for v in run.vehicles if not v.gps_enu.empty]
    pts += [q for v in run.vehicles for _, q in v.footprints]
    if run.persons_enu.size:
        pts.append(run.persons_enu[:, :2])
    if run.plume_sources_enu.size:
        pts.append(run.plume_sources_enu[:, :2])
    if run.plume_field is not None:
        pts.append(run.plume_field.points_enu[:, :2])
    pts = [p for p in pts if p.size]
    box = run.terrain.extent if run.terrain is not None else run.area_enu
    if not pts:
        return box
    p = np.concatenate(pts)
    lo, hi = p.min(axis=0), p.max(axis=0)
    if box is not None and box[0] <= lo[0] and hi[0] <= box[1] and box[2] <= lo[1] and hi[1] <= box[3]:
        if run.terrain is not None:
            return box
        m = 0.03 * max(box[1] - box[0], box[3] - box[2])  # the area's dashed boundary stays visible
        return (box[0] - m, box[1] + m, box[2] - m, box[3] + m)
    if box is not None:
        lo = np.minimum(lo, [box[0], box[2]])
        hi = np.maximum(hi, [box[1], box[3]])
    margin = max(5.0, 0.05 * float(np.max(hi - lo)))
    return (lo[0] - margin, hi[0] + margin, lo[1] - margin, hi[1] + margin)


def _draw_area(ax, run: RunData) -> list[Line2D]:  # type: ignore[no-untyped-def]
    """The flight area's boundary (dashed) when the scenario is known and there is no terrain grid."""
    if run.area_enu is None or run.terrain is not None:
        return []
    e0, e1, n0, n1 = run.area_enu
    ax.plot([e0, e1, e1, e0, e0], [n0, n0, n1, n1, n0], color="0.35", lw=1.0, linestyle="--", zorder=1)
    return [Line2D([], [], color="0.35", lw=1.0, linestyle="--", label="flight area")]


def _draw_terrain(ax, run: RunData) -> list[Patch]:  # type: ignore[no-untyped-def]
    t = run.terrain
    if t is None:
        return []
    k = max(int(t.classes.max()) + 1, 1)
    colours = [TERRAIN_COLOURS[c % len(TERRAIN_COLOURS)] for c in range(k)]
    cmap = ListedColormap(colours)
    norm = BoundaryNorm(np.arange(-0.5, k + 0.5), k)
    ax.imshow(np.clip(t.classes, 0, k - 1), origin="lower", extent=t.extent, cmap=cmap, norm=norm,
              interpolation="nearest", zorder=0)
    present = np.unique(t.classes)
    return [Patch(facecolor=colours[c], edgecolor="0.5",
                  label="terrain class 0 (background)" if c == 0 else f"terrain class {c}")
            for c in present if 0 <= c < k]


def _draw_persons(ax, run: RunData) -> list[Line2D]:  # type: ignore[no-untyped-def]
    if not run.persons_enu.size:
        return []
    handles = []
    found = run.persons_found
    for mask, colour, marker, label in ((found, FOUND_COLOUR, "o", "person found"),
                                        (~found, UNFOUND_COLOUR, "X", "person not found")):
        n = int(mask.sum())
        # above the tracks' start/end markers: a vehicle that found a person often ends on it
        ax.scatter(run.persons_enu[mask, 0], run.persons_enu[mask, 1], s=90, c=colour, marker=marker,
                   edgecolors="black", linewidths=0.8, zorder=9)
        handles.append(Line2D([], [], color=colour, marker=marker, markeredgecolor="black", linestyle="",
                              markersize=9, label=f"{label} ({n})"))
    return handles


def _draw_tracks(ax, run: RunData, *, gps: bool = True, footprints: bool = True) -> list:  # type: ignore[type-arg]
    handles = []
    for i, v in enumerate(run.vehicles):
        c = vehicle_colour(i)
        if footprints and v.footprints:
            polys = [q for _, q in v.footprints]
            ax.add_collection(PolyCollection(polys, facecolors=c, edgecolors=c, alpha=0.10, linewidths=0.6,
                                             zorder=2))
            handles.append(Patch(facecolor=c, alpha=0.25, edgecolor=c,
                                 label=f"{v.name} camera footprints ({len(polys)})"))
        if not v.truth_enu.empty:
            p = v.truth_enu.values
            ax.plot(p[:, 0], p[:, 1], color=c, lw=3.0, alpha=0.6, solid_capstyle="round", zorder=4)
            first = _finite_rows(p)
            if first.size:
                ax.plot(first[0, 0], first[0, 1], marker="^", color=c, markeredgecolor="black", ms=9,
                        linestyle="", zorder=7)
                ax.plot(first[-1, 0], first[-1, 1], marker="s", color=c, markeredgecolor="black", ms=7,
                        linestyle="", zorder=7)
            handles.append(Line2D([], [], color=c, lw=3.0, alpha=0.6, label=f"{v.name} true track"))
        if gps and not v.gps_enu.empty:
            g = v.gps_enu.values
            e = estimate_colour(i)
            ax.plot(g[:, 0], g[:, 1], color=e, lw=0.9, linestyle=(0, (3, 2)), marker=".", ms=2.5, zorder=5)
            handles.append(Line2D([], [], color=e, lw=0.9, linestyle=(0, (3, 2)), marker=".", ms=2.5,
                                  label=f"{v.name} GPS estimate"))
    if any(not v.truth_enu.empty for v in run.vehicles):
        handles.append(Line2D([], [], color="0.3", marker="^", markeredgecolor="black", linestyle="",
                              label="start"))
        handles.append(Line2D([], [], color="0.3", marker="s", markeredgecolor="black", linestyle="",
                              label="end"))
    return handles


def top_view(run: RunData, path: Path) -> str | None:
    """Top view of the area in the map frame: terrain classes, persons (found / not found), every
    vehicle's true and GPS-estimated track and its camera footprints."""
    have_tracks = any(not v.truth_enu.empty or not v.gps_enu.empty for v in run.vehicles)
    if not have_tracks and run.terrain is None and not run.persons_enu.size:
        return "no ground truth, GPS fixes, terrain or persons in the bag"
    extent = _area_extent(run)
    if extent is None:
        return "nothing with a position in the bag"
    fig = new_figure("top_view")
    ax = fig.add_subplot()
    handles = _draw_terrain(ax, run)
    handles += _draw_area(ax, run)
    handles += _draw_tracks(ax, run)
    handles += _draw_persons(ax, run)
    if run.plume_sources_enu.size:
        ax.scatter(run.plume_sources_enu[:, 0], run.plume_sources_enu[:, 1], marker="*", s=220,
                   c=SOURCE_COLOUR, edgecolors="white", zorder=8)
        handles.append(Line2D([], [], color=SOURCE_COLOUR, marker="*", linestyle="", ms=12,
                              label="plume source"))
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.set_aspect("equal")
    ax.set_xlabel("east [m]")
    ax.set_ylabel("north [m]")
    sub = []
    if run.status is not None and run.status.persons_total.size and run.status.persons_total[-1] > 0:
        sub.append(f"persons found {run.status.persons_found[-1]} of {run.status.persons_total[-1]}")
    if run.status is not None and run.status.t_s.size:
        sub.append(f"{run.status.t_s[-1]:.0f} s simulated")
    ax.set_title(title(run, "top view, map frame (ENU)") + (f"\n{', '.join(sub)}" if sub else ""))
    ax.grid(True, color="0.6", lw=0.4, alpha=0.5)
    legend_outside(ax, handles)
    save(fig, path)
    return None


# --- 2. altitude and speed -----------------------------------------------------------------------------

def _plot_track(ax, tr: Track, column: int, **kw) -> bool:  # type: ignore[no-untyped-def]
    if tr.empty:
        return False
    ax.plot(tr.t_s, tr.values[:, column], **kw)
    return True


def altitude_speed(run: RunData, path: Path) -> str | None:
    """Altitude (true map z and the altimeter's height) and speed (true |v| and the GPS ground
    velocity's norm) over simulated time, per vehicle; the fault intervals shaded."""
    if not any(not v.truth_enu.empty or not v.altimeter.empty for v in run.vehicles):
        return "no ground truth or altimeter in the bag"
    fig = new_figure("altitude_speed")
    ax_h, ax_v = fig.subplots(2, 1, sharex=True)
    for i, v in enumerate(run.vehicles):
        c, e = vehicle_colour(i), estimate_colour(i)
        truth = {"color": c, "lw": 3.0, "alpha": 0.6}
        estimate = {"color": e, "lw": 0.9, "linestyle": (0, (3, 2))}
        _plot_track(ax_h, v.truth_enu, 2, **truth, label=f"{v.name} true (map z)")
        _plot_track(ax_h, v.altimeter, 0, **estimate, label=f"{v.name} altimeter")
        _plot_track(ax_v, v.truth_speed, 0, **truth, label=f"{v.name} true")
        _plot_track(ax_v, v.gps_speed, 0, **estimate, marker=".", ms=3, label=f"{v.name} GPS velocity")
    if run.faults:  # the fault intervals (/sim/faults), labelled on the altitude plot
        shade_faults(ax_h, run)
        shade_faults(ax_v, run, labels=False, legend=False)
    ax_h.set_ylabel("altitude, up [m]")
    ax_v.set_ylabel("speed [m/s]")
    ax_v.set_xlabel("simulated time [s]")
    ax_h.set_title(title(run, "altitude and speed"))
    for ax in (ax_h, ax_v):
        ax.grid(True, alpha=0.4)
        if ax.lines:
            legend_outside(ax)
    save(fig, path)
    return None


# --- 3. reward -------------------------------------------------------------------------------------------

def reward(run: RunData, path: Path) -> str | None:
    """The reward of every task step and the cumulative reward over simulated time (``/referee/status``);
    for search and rescue also the persons found."""
    st = run.status
    if st is None or st.empty:
        return "no /referee/status in the bag"
    persons = bool(st.persons_total.size and st.persons_total.max() > 0)
    fig = new_figure("reward")
    axes = fig.subplots(3 if persons else 2, 1, sharex=True)
    ax_r, ax_c = axes[0], axes[1]
    ax_r.step(st.t_s, st.reward, where="pre", color="#1f77b4", lw=1.2, label="reward of the task step")
    ax_r.plot(st.t_s, st.reward, ".", color="#1f77b4", ms=3)
    ax_c.plot(st.t_s, st.cumulative_reward, color="#d62728", lw=1.6,
              label=f"cumulative reward (last {st.cumulative_reward[-1]:.4g})")
    ax_r.set_ylabel("reward per step [-]")
    ax_c.set_ylabel("cumulative reward [-]")
    if persons:
        ax_p = axes[2]
        ax_p.step(st.t_s, st.persons_found, where="post", color=FOUND_COLOUR, lw=1.6, label="persons found")
        ax_p.axhline(st.persons_total[-1], color="0.4", lw=0.8, linestyle=":",
                     label=f"persons in the area ({st.persons_total[-1]})")
        ax_p.set_ylabel("persons [-]")
        ax_p.set_ylim(-0.3, st.persons_total.max() + 0.5)
        ax_p.yaxis.get_major_locator().set_params(integer=True)
    axes[-1].set_xlabel("simulated time [s]")
    done = f" (done: {st.done_reason})" if st.done_reason else ""
    ax_r.set_title(title(run, f"reward over time, {st.step[-1]} task steps{done}"))
    for ax in axes:
        ax.grid(True, alpha=0.4)
        legend_outside(ax)
    save(fig, path)
    return None


# --- 4. plume ----------------------------------------------------------------------------------------------

def _field_slice(run: RunData) -> tuple[Array, Array, float] | None:
    """The field's points (m, 2) and concentrations (m,) on its horizontal layer through the highest
    concentration (the plume's core; the cloud is a regular grid), and that layer's height [m]."""
    f = run.plume_field
    if f is None:
        return None
    z_all = np.round(f.points_enu[:, 2], 3)
    z = float(z_all[int(np.argmax(f.concentration))])
    sel = z_all == z
    return f.points_enu[sel, :2], f.concentration[sel], z


def _regular_grid(xy: Array, values: Array) -> tuple[Array, tuple[float, float, float, float]] | None:
    """Points of a regular horizontal grid (m, 2) as an image (ny, nx) (NaN where no point: below the
    cloud's threshold) and its extent; None when the points are not on a regular grid."""
    if len(xy) < 4:
        return None
    spacing = []
    for a in range(2):
        u = np.unique(np.round(xy[:, a], 3))
        if u.size < 2:
            return None
        spacing.append(float(np.min(np.diff(u))))
    lo = xy.min(axis=0)
    idx = (xy - lo) / np.asarray(spacing)
    cells = np.rint(idx).astype(np.int64)
    if np.max(np.abs(idx - cells)) > 0.05:
        return None
    nx, ny = int(cells[:, 0].max()) + 1, int(cells[:, 1].max()) + 1
    if nx * ny > 4_000_000:
        return None
    image = np.full((ny, nx), np.nan)
    image[cells[:, 1], cells[:, 0]] = values
    dx, dy = spacing
    extent = (float(lo[0] - dx / 2), float(lo[0] + (nx - 0.5) * dx), float(lo[1] - dy / 2),
              float(lo[1] + (ny - 0.5) * dy))
    return image, extent


def _concentration_norm(values: Array) -> Normalize:
    pos = values[np.isfinite(values) & (values > 0)]
    if pos.size == values[np.isfinite(values)].size and pos.size and pos.max() / max(pos.min(), 1e-300) > 20:
        vmax = float(pos.max())
        return LogNorm(vmin=max(float(pos.min()), vmax * 1e-6), vmax=vmax)
    finite = values[np.isfinite(values)]
    return Normalize(vmin=float(finite.min()) if finite.size else 0.0,
                     vmax=float(finite.max()) if finite.size and finite.max() > finite.min() else 1.0)


def _samples_at(v: Vehicle) -> tuple[Array, Array]:
    """(n, 2) true positions at the plume readings' times (interpolated) and the readings (n,)."""
    if v.plume.empty or v.truth_enu.empty:
        return np.zeros((0, 2)), np.zeros(0)
    ok = np.all(np.isfinite(v.truth_enu.values), axis=1)
    t, p = v.truth_enu.t_s[ok], v.truth_enu.values[ok]
    keep = np.isfinite(v.plume.values[:, 0]) & (v.plume.t_s >= t[0]) & (v.plume.t_s <= t[-1])
    ts = v.plume.t_s[keep]
    xy = np.stack([np.interp(ts, t, p[:, 0]), np.interp(ts, t, p[:, 1])], axis=1)
    return xy, v.plume.values[keep, 0]


def plume(run: RunData, path: Path) -> str | None:
    """Plume runs: the concentration field slice (when the bag has the field) with the vehicles' tracks,
    the concentrations they sampled and the sources; and the sampled concentration over time."""
    has_samples = any(not v.plume.empty for v in run.vehicles)
    if not has_samples and run.plume_field is None and not run.plume_sources_enu.size:
        return "no plume data (plume/concentration, /plume/markers or a /plume field cloud) in the bag"
    fig = new_figure("plume")
    fig.get_layout_engine().set(wspace=0.06)
    ax_map, ax_t = fig.subplots(1, 2, width_ratios=[1.25, 1.0])
    samples = [_samples_at(v) for v in run.vehicles]
    sl = _field_slice(run)
    # One colour scale for the field and the readings (same units): the field's when there is one (the
    # readings are clipped to it: noise can make them negative), else the readings'.
    values = sl[1] if sl is not None else np.concatenate([c for _, c in samples] + [np.zeros(0)])
    norm = _concentration_norm(values) if values.size else Normalize(0.0, 1.0)
    cmap = "viridis"
    handles: list = []  # type: ignore[type-arg]
    mappable = None
    if sl is not None:
        assert run.plume_field is not None
        xy, conc, z = sl
        c = np.clip(conc, norm.vmin, None) if isinstance(norm, LogNorm) else conc
        grid = _regular_grid(xy, c)
        if grid is not None:  # cells without a point are below the field's threshold: left blank
            mappable = ax_map.imshow(np.ma.masked_invalid(grid[0]), origin="lower", extent=grid[1], cmap=cmap,
                                     norm=norm, interpolation="nearest", zorder=0)
        else:
            mappable = ax_map.scatter(xy[:, 0], xy[:, 1], c=c, cmap=cmap, norm=norm, s=12, zorder=0)
        label = f"field at z = {z:.1f} m, t = {run.plume_field.t_s:.1f} s ({run.plume_field.topic})"
        handles.append(Patch(facecolor="#3b528b", label=label))
    handles += _draw_area(ax_map, run)
    handles += _draw_tracks(ax_map, run, gps=False, footprints=False)
    for xy, conc in samples:
        if conc.size:
            c = np.clip(conc, norm.vmin, norm.vmax)
            scatter = ax_map.scatter(xy[:, 0], xy[:, 1], c=c, cmap=cmap, norm=norm, s=28,
                                     edgecolors="black", linewidths=0.4, zorder=6)
            mappable = mappable or scatter
    if any(c.size for _, c in samples):
        handles.append(Line2D([], [], marker="o", color="0.6", markeredgecolor="black", linestyle="",
                              label="sampled concentration"))
    if run.plume_sources_enu.size:
        ax_map.scatter(run.plume_sources_enu[:, 0], run.plume_sources_enu[:, 1], marker="*", s=260,
                       c="#ff7f0e", edgecolors="black", zorder=8)
        handles.append(Line2D([], [], color="#ff7f0e", marker="*", markeredgecolor="black", linestyle="",
                              ms=13, label=f"source ({len(run.plume_sources_enu)})"))
    extent = _area_extent(run)
    if extent is not None:
        ax_map.set_xlim(extent[0], extent[1])
        ax_map.set_ylim(extent[2], extent[3])
    ax_map.set_aspect("equal")
    ax_map.set_xlabel("east [m]")
    ax_map.set_ylabel("north [m]")
    ax_map.grid(True, alpha=0.3)
    what = "concentration field slice" if sl is not None else "sampled concentrations (no field in the bag)"
    ax_map.set_title(f"{what}, map frame (ENU)", fontsize=11)
    if mappable is not None:
        fig.colorbar(mappable, ax=ax_map, label="concentration [plume units]", shrink=0.9, extend="both")
    fig.legend(handles=handles, loc="outside lower center", ncol=4, fontsize=9, frameon=False)
    for i, v in enumerate(run.vehicles):
        if not v.plume.empty:
            ax_t.plot(v.plume.t_s, v.plume.values[:, 0], color=vehicle_colour(i), lw=1.0, marker=".", ms=4,
                      label=f"{v.name}")
    ax_t.set_xlabel("simulated time [s]")
    ax_t.set_ylabel("concentration [plume units]")
    ax_t.set_title("sampled concentration over time", fontsize=11)
    ax_t.grid(True, alpha=0.4)
    if ax_t.lines:
        readings = np.concatenate([v.plume.values[:, 0] for v in run.vehicles if not v.plume.empty])
        readings = readings[np.isfinite(readings)]
        if readings.size and np.all(readings > 0) and readings.max() / readings.min() > 20:
            ax_t.set_yscale("log")
        ax_t.legend(fontsize=9, loc="best")
    else:
        ax_t.text(0.5, 0.5, "no plume/concentration readings", ha="center", va="center",
                  transform=ax_t.transAxes)
    fig.suptitle(title(run, "plume"))
    save(fig, path)
    return None


# --- 5. GPS error ------------------------------------------------------------------------------------------

def _metres(x: float) -> str:
    """Centimetres for ordinary errors, significant digits for the tiny ones of a noiseless GPS."""
    return f"{x:.2f} m" if x >= 0.01 else f"{x:.2g} m"


def gps_error_figure(run: RunData, path: Path) -> str | None:
    """GPS position error (fix minus ground truth, map ENU) over time per vehicle: horizontal magnitude
    and vertical (up) component, in metres."""
    errors = [(i, v, gps_error(v)) for i, v in enumerate(run.vehicles)]
    errors = [(i, v, e) for i, v, e in errors if not e.empty and np.isfinite(e.values).any()]
    if not errors:
        return "needs both gps/fix and ground_truth/odom of a vehicle in the bag"
    fig = new_figure("gps_error")
    ax_h, ax_u = fig.subplots(2, 1, sharex=True)
    for i, v, e in errors:
        c = vehicle_colour(i)
        horiz = np.hypot(e.values[:, 0], e.values[:, 1])
        up = e.values[:, 2]
        rms_h = float(np.sqrt(np.nanmean(horiz ** 2)))
        rms_u = float(np.sqrt(np.nanmean(up ** 2)))
        ax_h.plot(e.t_s, horiz, color=c, lw=1.2, marker=".", ms=3, label=f"{v.name} (RMS {_metres(rms_h)})")
        ax_u.plot(e.t_s, up, color=c, lw=1.2, marker=".", ms=3, label=f"{v.name} (RMS {_metres(rms_u)})")
    ax_u.axhline(0.0, color="0.3", lw=0.7)
    ax_h.set_ylabel("horizontal error [m]")
    ax_u.set_ylabel("vertical error (up) [m]")
    ax_u.set_xlabel("simulated time [s]")
    ax_h.set_ylim(bottom=0.0)
    largest = max(float(np.nanmax(np.abs(e.values))) for _, _, e in errors)
    notes = [run.origin_note] if run.origin_note else []
    if largest < 1e-6:
        notes.append("all errors below 1 µm: the GPS is noiseless in this scenario (what is left is the "
                     "WGS-84 round trip)")
    note = "".join(f"\n{n}" for n in notes)
    ax_h.set_title(title(run, "GPS position error (fix - ground truth)") + note)
    for ax in (ax_h, ax_u):
        ax.grid(True, alpha=0.4)
        legend_outside(ax)
    save(fig, path)
    return None


#: File stem -> figure function, in the order they are rendered.
FIGURES: dict[str, Callable[[RunData, Path], str | None]] = {
    "top_view": top_view,
    "altitude_speed": altitude_speed,
    "reward": reward,
    "plume": plume,
    "gps_error": gps_error_figure,
    "battery": battery,
    "faults": faults_timeline,
}
