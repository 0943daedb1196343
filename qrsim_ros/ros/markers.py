"""Visualisation messages for RViz (and Foxglove): pure builders, a throttle, the robot description.

Nothing here creates a node or touches the graph: the functions build ``visualization_msgs``,
``nav_msgs`` and ``sensor_msgs`` messages from arrays the nodes already hold, and ``VizThrottle``
decides, in simulated time, when a node may publish one. Every position is in ``map`` (ENU, metres);
the core's NED vectors are converted with ``qrsim_ros.core.common.frames`` and attitudes with
``conversions.quaternions_enu_flu`` (no rotation is re-derived here).

Cost model ("visualisation never costs the simulation"): per 20 ms tick a node calls only
``VizThrottle.due(t_s)`` (a comparison or two); the message is built when that says yes (at most once
per ``period_s`` of simulated time and per ``VIZ_MIN_WALL_S`` of wall time, so a run 20x faster than
real time does not build 20x more messages per second), and published only if
``VizThrottle.changed(t_s, key)`` says its content differs from the last one published
(``content_key`` rounds arrays to a resolution, so noise far below what a display shows does not count
as a change).

Topics built here (who publishes them, see rviz/README.md):
``uavN/robot_description`` (std_msgs/String, latched), ``uavN/ground_truth/path`` (nav_msgs/Path),
``/viz/task_status``, ``/viz/gps``, ``/viz/camera_footprints``, ``/viz/wind``, ``/referee/markers``
(visualization_msgs/MarkerArray), ``/viz/terrain`` (nav_msgs/OccupancyGrid), ``/plume/field``
(sensor_msgs/PointCloud2).
"""

from __future__ import annotations

import array
import math
import os
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import ned_to_enu
from qrsim_ros.ros.parameters import Param

Array = NDArray[np.float64]

#: Default least simulated time between two messages of a visualisation topic [s] (2 Hz).
VIZ_PERIOD_S = 0.5
#: Least wall-clock time between two messages of a visualisation topic [s]: a run much faster than real
#: time would otherwise publish (period x real-time factor) messages per second that no display needs.
VIZ_MIN_WALL_S = 0.2
#: Least simulated time between two poses (and messages) of a ground-truth path [s].
PATH_PERIOD_S = 1.0
#: Poses kept in a ground-truth path (at PATH_PERIOD_S: 5 minutes). A Path message carries its whole
#: history: rclpy converts every pose at every publication (~10-40 us each here), so the length bounds
#: the cost: 3 vehicles x 300 poses once per simulated second.
PATH_MAX_POSES = 300
#: Points kept in a GPS track (at VIZ_PERIOD_S: 1 minute).
TRACK_MAX_POINTS = 120
#: Height of the person markers [m].
PERSON_MARKER_HEIGHT_M = 1.8
#: Package whose share directory holds urdf/ (and rviz/).
PACKAGE = "qrsim_ros"
#: The Pelican's URDF, relative to the package's share directory or the source tree.
URDF_RELATIVE_PATH = Path("urdf") / "pelican.urdf"

#: One colour per vehicle (RGB 0..1), cycled: vehicle i gets VEHICLE_COLOURS[i % len]. The .rviz files
#: colour the paths of uav1.. with the same values.
VEHICLE_COLOURS: tuple[tuple[float, float, float], ...] = (
    (0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16),
    (0.58, 0.4, 0.74), (0.55, 0.34, 0.29), (0.89, 0.47, 0.76), (0.5, 0.5, 0.5),
)
FOUND_COLOUR = (0.1, 0.9, 0.1, 1.0)
NOT_FOUND_COLOUR = (0.95, 0.1, 0.1, 1.0)


def vehicle_colour(index: int, alpha: float = 1.0) -> tuple[float, float, float, float]:
    """RGBA (0..1) of vehicle ``index`` (0-based), the same on every visualisation topic."""
    r, g, b = VEHICLE_COLOURS[index % len(VEHICLE_COLOURS)]
    return r, g, b, alpha


# --- when to publish ------------------------------------------------------------------------------

def viz_period_param(topic: str) -> Param:
    """The ``viz_period_s`` row of the parameters of a node that publishes the visualisation ``topic``."""
    return Param("viz_period_s", VIZ_PERIOD_S, f"least simulated time between two {topic} (0: off) [s]",
                 lo=0.0, hi=3600.0)


class VizThrottle:
    """At most one message per ``period_s`` of simulated time (and per ``min_wall_s`` of wall time),
    and only when its content changed.

    Per tick: ``due(t_s)``. When due, build the content's key and call ``changed(t_s, key)``: it starts
    the next period and returns whether the key differs from the last published one (then publish).
    Time going backwards (a new episode restarts at t = 0) makes the next check due at once, whatever
    the wall clock; ``reset()`` also forgets the last content (publish at the next check whatever it
    is). ``period_s`` 0: every check is due (still only changed content is published). ``clock``: the
    wall clock [s] (``time.monotonic``; tests pass their own).
    """

    def __init__(self, period_s: float, min_wall_s: float = VIZ_MIN_WALL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(period_s) and period_s >= 0):
            raise ValueError(f"period_s={period_s!r} must be a finite number >= 0")
        if not (math.isfinite(min_wall_s) and min_wall_s >= 0):
            raise ValueError(f"min_wall_s={min_wall_s!r} must be a finite number >= 0")
        self.period_s = float(period_s)
        self.min_wall_s = float(min_wall_s)
        self._clock = clock
        self._next_s = -math.inf
        self._next_wall_s = -math.inf
        self._last_check_s = -math.inf
        self._key: Hashable | None = None
        self._has_key = False
        self.published = 0

    def due(self, t_s: float) -> bool:
        """Whether a check is due at simulated time ``t_s`` [s] (cheap: call it every tick)."""
        if t_s < self._last_check_s:
            return True
        return t_s >= self._next_s and (self.min_wall_s == 0 or self._clock() >= self._next_wall_s)

    def changed(self, t_s: float, key: Hashable) -> bool:
        """Record a check at ``t_s``; True (publish) if ``key`` differs from the last published key."""
        self._last_check_s = t_s
        # a small tolerance so that t = 0.5 after 0.0 is due with period 0.5 despite float steps
        self._next_s = t_s + self.period_s - 1e-9
        if self.min_wall_s:
            self._next_wall_s = self._clock() + self.min_wall_s
        if self._has_key and key == self._key:
            return False
        self._key, self._has_key = key, True
        self.published += 1
        return True

    def poll(self, t_s: float, key: Hashable) -> bool:
        """``due(t_s) and changed(t_s, key)``, for keys that cost nothing to build."""
        return self.due(t_s) and self.changed(t_s, key)

    def reset(self) -> None:
        """Forget the last check and content: the next check is due and publishes."""
        self._next_s = -math.inf
        self._next_wall_s = -math.inf
        self._last_check_s = -math.inf
        self._has_key = False
        self._key = None


def content_key(*parts: Any, resolution: float = 0.01) -> tuple[Any, ...]:
    """A hashable key of arrays and scalars: floats rounded to ``resolution`` (NaN kept as NaN)."""
    out: list[Any] = []
    for p in parts:
        if isinstance(p, np.ndarray) and p.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                out.append((p.shape, np.round(p / resolution).tobytes()))
        elif isinstance(p, np.ndarray):
            out.append((p.shape, p.tobytes()))
        elif isinstance(p, float):
            out.append(round(p / resolution) if math.isfinite(p) else repr(p))
        else:
            out.append(p)
    return tuple(out)


# --- the robot description ----------------------------------------------------------------------------

def robot_description_candidates() -> list[Path]:
    """Where ``urdf/pelican.urdf`` is looked up, in order: the installed share directories
    (AMENT_PREFIX_PATH), the source tree (also through colcon's symlinks), a pip install's prefix."""
    out = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix:
            out.append(Path(prefix) / "share" / PACKAGE / URDF_RELATIVE_PATH)
    out.append(Path(__file__).resolve().parents[2] / URDF_RELATIVE_PATH)
    out.append(Path(sys.prefix) / "share" / PACKAGE / URDF_RELATIVE_PATH)
    return out


def load_robot_description(path: str | os.PathLike[str] | None = None) -> str:
    """The URDF text of ``path``, or of the first ``robot_description_candidates()`` that exists.

    Raises FileNotFoundError with one line naming the file (or every place searched).
    """
    if path:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"robot description {str(p)!r} not found")
        return p.read_text(encoding="utf-8")
    candidates = robot_description_candidates()
    for c in candidates:
        if c.is_file():
            return c.read_text(encoding="utf-8")
    raise FileNotFoundError(f"robot description {URDF_RELATIVE_PATH} not found in "
                            + ", ".join(str(c.parent.parent) for c in candidates))


def robot_description_message(urdf: str) -> Any:
    from std_msgs.msg import String

    return String(data=urdf)


# --- generic marker helpers -------------------------------------------------------------------------

def _marker(ns: str, mid: int, mtype: int, frame: str, stamp: Any,
            colour: Sequence[float] = (1.0, 1.0, 1.0, 1.0)) -> Any:
    from visualization_msgs.msg import Marker

    m = Marker()
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.ns = ns
    m.id = int(mid)
    m.type = mtype
    m.action = Marker.ADD
    m.pose.orientation.w = 1.0
    m.color.r, m.color.g, m.color.b, m.color.a = (float(c) for c in colour)
    return m


def delete_all(frame: str, stamp: Any, ns: str = "") -> Any:
    """A DELETEALL marker, first in every array here: each array replaces the topic's previous content
    whole. RViz 2 deletes only namespace ``ns`` when it is set, every marker of the display when empty."""
    from visualization_msgs.msg import Marker

    m = Marker(action=Marker.DELETEALL)
    m.header.stamp = stamp
    m.header.frame_id = frame
    m.ns = ns
    return m


def _points(xyz: Array) -> list[Any]:
    from geometry_msgs.msg import Point

    return [Point(x=float(p[0]), y=float(p[1]), z=float(p[2])) for p in xyz.tolist()]


def _finite_rows(a: ArrayLike) -> Array:
    a = np.asarray(a, float).reshape(-1, 3)
    return a[np.all(np.isfinite(a), axis=1)]


def marker_array(markers: list[Any]) -> Any:
    from visualization_msgs.msg import MarkerArray

    return MarkerArray(markers=markers)


# --- task: persons, vehicles, targets, status ---------------------------------------------------------

def persons_markers(centres_ned: ArrayLike, found: ArrayLike, size_m: float, frame: str, stamp: Any) -> Any:
    """/referee/markers of search and rescue: DELETEALL, then one cylinder per person (id = person index)
    standing on the ground at its centre, green once found, red until then."""
    from visualization_msgs.msg import Marker

    enu = ned_to_enu(np.asarray(centres_ned, float)).reshape(-1, 3)
    out = [delete_all(frame, stamp, "persons")]
    for j, (c, f) in enumerate(zip(enu.tolist(), np.asarray(found, bool).tolist(), strict=True)):
        m = _marker("persons", j, Marker.CYLINDER, frame, stamp, FOUND_COLOUR if f else NOT_FOUND_COLOUR)
        m.pose.position.x, m.pose.position.y = c[0], c[1]
        m.pose.position.z = c[2] + 0.5 * PERSON_MARKER_HEIGHT_M
        m.scale.x = m.scale.y = max(float(size_m), 0.5)
        m.scale.z = PERSON_MARKER_HEIGHT_M
        out.append(m)
    return marker_array(out)


def vehicle_label_markers(positions_ned: ArrayLike, labels: Sequence[str], frame: str, stamp: Any, *,
                          highlight: int | None = None, highlight_radius_m: float = 2.0,
                          text_height_m: float = 2.0) -> Any:
    """Labels above the vehicles (``labels[i]`` at vehicle i, its colour) and a translucent sphere on
    ``highlight`` (cats and mouse: the mouse). Vehicles without a finite position are left out."""
    from visualization_msgs.msg import Marker

    enu = ned_to_enu(np.asarray(positions_ned, float)).reshape(-1, 3)
    out = [delete_all(frame, stamp)]
    for i, (p, label) in enumerate(zip(enu.tolist(), labels, strict=True)):
        if not all(math.isfinite(v) for v in p):
            continue
        t = _marker("vehicle_labels", i, Marker.TEXT_VIEW_FACING, frame, stamp, vehicle_colour(i))
        t.pose.position.x, t.pose.position.y, t.pose.position.z = p[0], p[1], p[2] + 1.5 * text_height_m
        t.scale.z = float(text_height_m)
        t.text = str(label)
        out.append(t)
        if i == highlight:
            s = _marker("highlight", i, Marker.SPHERE, frame, stamp, (*vehicle_colour(i)[:3], 0.35))
            s.pose.position.x, s.pose.position.y, s.pose.position.z = p
            s.scale.x = s.scale.y = s.scale.z = 2.0 * float(highlight_radius_m)
            out.append(s)
    return marker_array(out)


def target_markers(targets_ned: ArrayLike, frame: str, stamp: Any, radius_m: float = 0.5) -> Any:
    """Targets (keep spot: every vehicle's start point; goto_waypoint: the waypoint): a translucent
    sphere of ``radius_m`` and a vertical line to the ground, in the vehicle's colour."""
    from visualization_msgs.msg import Marker

    enu = _finite_rows(ned_to_enu(np.asarray(targets_ned, float)))
    out = [delete_all(frame, stamp)]
    for i, p in enumerate(enu.tolist()):
        s = _marker("targets", i, Marker.SPHERE, frame, stamp, (*vehicle_colour(i)[:3], 0.4))
        s.pose.position.x, s.pose.position.y, s.pose.position.z = p
        s.scale.x = s.scale.y = s.scale.z = 2.0 * float(radius_m)
        out.append(s)
        line = _marker("target_poles", i, Marker.LINE_LIST, frame, stamp, (*vehicle_colour(i)[:3], 0.6))
        line.scale.x = 0.05
        line.points = _points(np.array([p, [p[0], p[1], 0.0]]))
        out.append(line)
    return marker_array(out)


#: Retrieve markers: a tethered target, the landing site (charging base), the drop zone.
CARRIED_COLOUR = (0.95, 0.8, 0.1, 1.0)
BASE_COLOUR = (0.2, 0.4, 0.95, 0.5)
DROP_ZONE_COLOUR = (0.1, 0.9, 0.1, 0.35)
#: Height of the flat discs that mark the retrieve sites [m].
SITE_MARKER_HEIGHT_M = 0.01


def retrieve_markers(targets_ned: ArrayLike, carried: ArrayLike, deposited: ArrayLike,
                     target_radius_m: float, sites: Sequence[tuple[ArrayLike, float, Sequence[float]]],
                     frame: str, stamp: Any) -> Any:
    """/referee/markers of the retrieve mission: DELETEALL, a flat disc per site (``sites``: centre (north,
    east) [m], radius [m], colour; the landing site and the drop zone) and a sphere per target (id = target
    index): green once deposited in the drop zone, yellow while carried, red otherwise."""
    from visualization_msgs.msg import Marker

    out = [delete_all(frame, stamp)]
    for j, (centre_ne, radius_m, colour) in enumerate(sites):
        c = ned_to_enu(np.array([*np.asarray(centre_ne, float)[0:2], 0.0]))
        m = _marker("sites", j, Marker.CYLINDER, frame, stamp, colour)
        m.pose.position.x, m.pose.position.y = float(c[0]), float(c[1])
        m.pose.position.z = 0.5 * SITE_MARKER_HEIGHT_M
        m.scale.x = m.scale.y = 2.0 * float(radius_m)
        m.scale.z = SITE_MARKER_HEIGHT_M
        out.append(m)
    enu = ned_to_enu(np.asarray(targets_ned, float)).reshape(-1, 3)
    flags = zip(np.asarray(carried, bool).tolist(), np.asarray(deposited, bool).tolist(), strict=True)
    for j, (p, (held, done)) in enumerate(zip(enu.tolist(), flags, strict=True)):
        colour = FOUND_COLOUR if done else CARRIED_COLOUR if held else NOT_FOUND_COLOUR
        m = _marker("targets", j, Marker.SPHERE, frame, stamp, colour)
        m.pose.position.x, m.pose.position.y, m.pose.position.z = p
        m.scale.x = m.scale.y = m.scale.z = 2.0 * float(target_radius_m)
        out.append(m)
    return marker_array(out)


def task_status_text(status: Any) -> str:
    """The text of a qrsim_ros/TaskStatus: scenario, time and step, reward, persons, validity, done."""
    lines = [f"{status.scenario}   t = {status.time:.1f} s   step {status.step}",
             f"reward {status.reward:.4g}   total {status.cumulative_reward:.6g}"]
    if status.persons_total:
        lines.append(f"persons found {status.persons_found} / {status.persons_total}")
    invalid = [n for n, v in zip(status.vehicle_names, status.vehicle_valid, strict=False) if not v]
    if invalid:
        lines.append("invalid: " + ", ".join(invalid))
    if status.done:
        lines.append(f"DONE: {status.done_reason}")
    return "\n".join(lines)


def text_markers(text: str, position_enu: ArrayLike, height_m: float, frame: str, stamp: Any,
                 ns: str = "task_status") -> Any:
    """One TEXT_VIEW_FACING marker (white) at ``position_enu``, letters ``height_m`` high."""
    from visualization_msgs.msg import Marker

    p = np.asarray(position_enu, float)
    m = _marker(ns, 0, Marker.TEXT_VIEW_FACING, frame, stamp)
    m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in p)
    m.scale.z = float(height_m)
    m.text = text
    return marker_array([m])


def status_text_anchor(area_limits_ned: ArrayLike) -> tuple[Array, float]:
    """Where the status text floats (ENU: the area's centre, above its top) and its letter height
    (4 % of the area's larger horizontal extent, at least 1 m)."""
    lim = np.asarray(area_limits_ned, float)
    span = max(lim[1] - lim[0], lim[3] - lim[2])
    centre_ned = np.array([0.5 * (lim[0] + lim[1]), 0.5 * (lim[2] + lim[3]), lim[4] - 0.1 * span])
    return ned_to_enu(centre_ned), max(1.0, 0.04 * span)


# --- vehicles: paths, GPS estimates, wind, camera footprints ------------------------------------------

class TrackHistory:
    """A bounded history of N vehicles' positions (ENU) for LINE_STRIPs; NaN rows are skipped."""

    def __init__(self, num_vehicles: int, max_points: int = TRACK_MAX_POINTS) -> None:
        self.max_points = int(max_points)
        self.tracks: list[list[list[float]]] = [[] for _ in range(num_vehicles)]

    def append(self, positions_enu: ArrayLike) -> None:
        rows = np.asarray(positions_enu, float).reshape(-1, 3).tolist()
        for track, p in zip(self.tracks, rows, strict=True):
            if all(math.isfinite(v) for v in p):
                track.append(p)
                if len(track) > self.max_points:
                    del track[0]

    def clear(self) -> None:
        for t in self.tracks:
            t.clear()


def gps_markers(estimates_ned: ArrayLike, tracks: TrackHistory, frame: str, stamp: Any,
                sphere_m: float = 1.0) -> Any:
    """/viz/gps: per vehicle a sphere at the latest GPS estimate (ns ``gps_estimate``) and the
    estimates' track (ns ``gps_track``, LINE_STRIP), in the vehicle's colour."""
    from visualization_msgs.msg import Marker

    enu = ned_to_enu(np.asarray(estimates_ned, float)).reshape(-1, 3)
    out = [delete_all(frame, stamp)]
    for i, p in enumerate(enu.tolist()):
        if all(math.isfinite(v) for v in p):
            s = _marker("gps_estimate", i, Marker.SPHERE, frame, stamp, vehicle_colour(i, 0.7))
            s.pose.position.x, s.pose.position.y, s.pose.position.z = p
            s.scale.x = s.scale.y = s.scale.z = float(sphere_m)
            out.append(s)
        track = tracks.tracks[i]
        if len(track) >= 2:
            line = _marker("gps_track", i, Marker.LINE_STRIP, frame, stamp, vehicle_colour(i, 0.8))
            line.scale.x = 0.2
            line.points = _points(np.asarray(track))
            out.append(line)
    return marker_array(out)


def arrow_markers(starts_enu: ArrayLike, vectors_enu: ArrayLike, frame: str, stamp: Any, *,
                  ns: str = "air_velocity", scale_s: float = 1.0, shaft_m: float = 0.15) -> Any:
    """One ARROW per row from ``starts_enu[i]`` to ``starts_enu[i] + scale_s * vectors_enu[i]`` (e.g.
    air velocity [m/s] x 1 s = metres), in vehicle i's colour; rows with non-finite values are left out."""
    from visualization_msgs.msg import Marker

    a = np.asarray(starts_enu, float).reshape(-1, 3)
    v = np.asarray(vectors_enu, float).reshape(-1, 3)
    out = [delete_all(frame, stamp)]
    for i in range(a.shape[0]):
        if not (np.all(np.isfinite(a[i])) and np.all(np.isfinite(v[i]))):
            continue
        m = _marker(ns, i, Marker.ARROW, frame, stamp, vehicle_colour(i))
        m.points = _points(np.array([a[i], a[i] + scale_s * v[i]]))
        m.scale.x, m.scale.y, m.scale.z = float(shaft_m), 2.0 * float(shaft_m), 3.0 * float(shaft_m)
        out.append(m)
    return marker_array(out)


def link_markers(positions_ned: ArrayLike, pairs: ArrayLike, frame: str, stamp: Any, *,
                 ns: str = "radio_links", width_m: float = 0.2) -> Any:
    """The radio links that are up: one LINE_LIST with a segment between the two vehicles of each row of
    ``pairs`` (P, 2) (vehicle indices) at ``positions_ned`` (N, 3) [m], drawn in ENU; an empty array
    (only the DELETEALL) when no link is up."""
    from visualization_msgs.msg import Marker

    out = [delete_all(frame, stamp)]
    links = np.asarray(pairs, np.intp).reshape(-1, 2)
    if links.size:
        enu = ned_to_enu(np.asarray(positions_ned, float).reshape(-1, 3))
        m = _marker(ns, 0, Marker.LINE_LIST, frame, stamp, (0.2, 0.9, 0.3, 0.8))
        m.points = _points(enu[links.reshape(-1)])
        m.scale.x = float(width_m)
        out.append(m)
    return marker_array(out)


def footprint_outline_ned(corners_ned: ArrayLike) -> Array:
    """The closed outline (M, 3) of a camera's window-corner grid (nf1+1, nf2+1, 3) (NED): the grid's
    border walked once around, first point repeated; corners that miss the ground (NaN) are dropped."""
    c = np.asarray(corners_ned, float)
    if c.ndim != 3 or c.shape[0] < 2 or c.shape[1] < 2:
        return np.zeros((0, 3))
    ring = np.concatenate([c[:, 0], c[-1, 1:], c[-2::-1, -1], c[0, -2::-1]])
    ring = ring[np.all(np.isfinite(ring), axis=1)]
    return ring if len(ring) >= 3 else np.zeros((0, 3))


def footprint_markers(outlines_ned: Sequence[ArrayLike | None], frame: str, stamp: Any) -> Any:
    """/viz/camera_footprints: a LINE_STRIP per vehicle (id = vehicle index) along its outline, lifted
    0.1 m above the ground so the terrain map does not hide it; None or empty outlines are left out."""
    from visualization_msgs.msg import Marker

    out = [delete_all(frame, stamp)]
    for i, outline in enumerate(outlines_ned):
        if outline is None or len(outline) < 3:
            continue
        enu = ned_to_enu(np.asarray(outline, float))
        enu[:, 2] += 0.1
        m = _marker("camera_footprints", i, Marker.LINE_STRIP, frame, stamp, vehicle_colour(i))
        m.scale.x = 0.3
        m.points = _points(enu)
        out.append(m)
    return marker_array(out)


class PathHistory:
    """nav_msgs/Path of N vehicles' ground truth (``uavN/ground_truth/path``), each at most ``max_poses``
    long (the oldest pose goes first). ``append`` adds one pose per vehicle in place (no copy of the
    history): the cost of a publication is the serialisation of the bounded path."""

    def __init__(self, num_vehicles: int, frame: str, max_poses: int = PATH_MAX_POSES) -> None:
        from nav_msgs.msg import Path as PathMsg

        if max_poses < 1:
            raise ValueError(f"max_poses={max_poses!r} must be >= 1")
        self.max_poses = int(max_poses)
        self.frame = frame
        self.paths = []
        for _ in range(num_vehicles):
            m = PathMsg()
            m.header.frame_id = frame
            self.paths.append(m)

    def append(self, stamp: Any, positions_enu: ArrayLike, quaternions_xyzw: ArrayLike,
               vehicles: Sequence[int] | None = None) -> None:
        """Add the pose of each vehicle (ENU position, FLU-in-ENU quaternion x y z w) stamped ``stamp``;
        only ``vehicles`` (default all); non-finite rows are skipped."""
        from geometry_msgs.msg import PoseStamped

        p = np.asarray(positions_enu, float).reshape(-1, 3)
        q = np.asarray(quaternions_xyzw, float).reshape(-1, 4)
        which = range(len(self.paths)) if vehicles is None else vehicles
        for i in which:
            if not (np.all(np.isfinite(p[i])) and np.all(np.isfinite(q[i]))):
                continue
            ps = PoseStamped()
            ps.header.stamp = stamp
            ps.header.frame_id = self.frame
            pos, o = ps.pose.position, ps.pose.orientation
            pos.x, pos.y, pos.z = (float(v) for v in p[i])
            o.x, o.y, o.z, o.w = (float(v) for v in q[i])
            path = self.paths[i]
            path.header.stamp = stamp
            poses = path.poses  # the message's own list: appended in place
            poses.append(ps)
            if len(poses) > self.max_poses:
                del poses[0]

    def clear(self) -> None:
        for path in self.paths:
            path.poses.clear()


# --- area: terrain classes for the Map display -------------------------------------------------------------

def terrain_display_grid(terrain_grid: Any, max_class: int) -> Any:
    """/viz/terrain: a copy of the /area/terrain OccupancyGrid whose cell values are spread over RViz's
    "costmap" colour scheme (class 0 -> 0, drawn transparent; classes 1..K -> round(98 c / K), blue to
    red), because classes 0..K (K ~ 3) would all look alike in any of RViz's schemes. Same geometry."""
    from nav_msgs.msg import OccupancyGrid

    k = max(int(max_class), 1)
    data = np.asarray(terrain_grid.data, np.int16)
    spread = np.where(data > 0, np.rint(98.0 * np.clip(data, 0, k) / k), 0).astype(np.int8)
    msg = OccupancyGrid()
    msg.header = terrain_grid.header
    msg.info = terrain_grid.info
    msg.data = array.array("b", spread.tobytes())
    return msg


# --- fields as point clouds -----------------------------------------------------------------------------

def field_points(xyz_enu: ArrayLike, values: ArrayLike, value_name: str = "concentration"
                 ) -> NDArray[np.void]:
    """A structured array (x, y, z, <value_name>) float32 of points and their values."""
    xyz = np.asarray(xyz_enu, float).reshape(-1, 3)
    dtype = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), (value_name, "<f4")])
    pts = np.zeros(xyz.shape[0], dtype)
    pts["x"], pts["y"], pts["z"] = xyz[:, 0], xyz[:, 1], xyz[:, 2]
    pts[value_name] = np.asarray(values, float).reshape(-1)
    return pts


def field_cloud(xyz_enu: ArrayLike, values: ArrayLike, frame: str, stamp: Any,
                value_name: str = "concentration") -> Any:
    """sensor_msgs/PointCloud2 (unorganised, little endian, dense) of points (M, 3) ENU and one float32
    value per point (``value_name``: the channel RViz's Intensity colour transformer reads)."""
    from qrsim_ros.ros.to_messages import structured_cloud

    return structured_cloud(field_points(xyz_enu, values, value_name), frame, stamp)


def cloud_array(msg: Any) -> NDArray[np.void]:
    """The structured array of a float32 PointCloud2 built by ``field_cloud`` (for consumers, tests)."""
    names = [f.name for f in msg.fields]
    dtype = np.dtype({"names": names, "formats": ["<f4"] * len(names),
                      "offsets": [f.offset for f in msg.fields], "itemsize": msg.point_step})
    return np.frombuffer(bytes(msg.data), dtype).reshape(msg.height * msg.width)


class FieldSampler:
    """Where to evaluate a 3-D scalar field (a plume's concentration) so that a point cloud shows its
    support finely at a bounded cost: a regular coarse grid over the box (``grid_points_ned``), then, in
    the coarse cells whose value reaches ``threshold`` and their neighbours (the cells the support
    crosses), ``refine``^3 sub-points each; only sub-points at or above the threshold are kept. At most
    ``max_points`` coarse and ``max_points`` refined evaluations (the highest-valued cells first).
    """

    def __init__(self, area_limits_ned: ArrayLike, resolution_m: float, max_points: int,
                 refine: int = 3) -> None:
        if refine < 1:
            raise ValueError(f"refine={refine!r} must be >= 1")
        self.coarse_ned, self.spacing_m = grid_points_ned(area_limits_ned, resolution_m, max_points)
        lim = np.asarray(area_limits_ned, float)
        extent = np.array([lim[1] - lim[0], lim[3] - lim[2], lim[5] - lim[4]])
        self.counts = np.maximum(np.floor(extent / self.spacing_m).astype(int), 1)
        self.cell_m = extent / self.counts  # exact cell sizes per axis
        self.refine = int(refine)
        self.max_points = int(max_points)
        r = (np.arange(self.refine) + 0.5) / self.refine - 0.5  # sub-point offsets in cell units
        ox, oy, oz = np.meshgrid(r, r, r, indexing="ij")
        self._offsets = np.column_stack([ox.ravel(), oy.ravel(), oz.ravel()]) * self.cell_m

    @property
    def fine_spacing_m(self) -> Array:
        """Spacing of the refined points per axis [m]."""
        return self.cell_m / self.refine

    def sample(self, field: Any, threshold: float) -> tuple[Array, Array]:
        """(points (M, 3) NED, values (M,)) of ``field(points_ned) -> values`` at or above ``threshold``."""
        from scipy.ndimage import binary_dilation

        coarse = np.asarray(field(self.coarse_ned), float)
        hot = np.isfinite(coarse) & (coarse >= threshold)
        cells = binary_dilation(hot.reshape(self.counts), np.ones((3, 3, 3), bool)).ravel()
        idx = np.flatnonzero(cells)
        per_cell = len(self._offsets)
        budget = max(self.max_points // per_cell, 1)
        if len(idx) > budget:  # the highest-valued cells first
            order = np.argsort(-np.nan_to_num(coarse[idx], nan=-np.inf), kind="stable")
            idx = idx[order[:budget]]
        if len(idx) == 0:
            return np.zeros((0, 3)), np.zeros(0)
        fine = (self.coarse_ned[idx][:, None, :] + self._offsets[None, :, :]).reshape(-1, 3)
        values = np.asarray(field(fine), float)
        keep = np.isfinite(values) & (values >= threshold)
        return fine[keep], values[keep]


def grid_points_ned(area_limits_ned: ArrayLike, resolution_m: float, max_points: int) -> tuple[Array, float]:
    """A regular grid (M, 3) NED over the box [xmin xmax ymin ymax zmin zmax], cell centres spaced
    ``resolution_m`` or, if that gives more than ``max_points`` points, the smallest spacing (in steps of
    5 %) that does not; returns the points and the spacing used [m]."""
    lim = np.asarray(area_limits_ned, float)
    if not (resolution_m > 0 and max_points >= 1):
        raise ValueError(f"resolution_m={resolution_m!r} must be > 0 and max_points={max_points!r} >= 1")
    extent = np.array([lim[1] - lim[0], lim[3] - lim[2], lim[5] - lim[4]])
    s = float(resolution_m)
    while True:
        counts = np.maximum(np.floor(extent / s).astype(int), 1)
        if int(np.prod(counts)) <= max_points:
            break
        s *= 1.05
    axes = [lim[2 * a] + (np.arange(counts[a]) + 0.5) * extent[a] / counts[a] for a in range(3)]
    gx, gy, gz = np.meshgrid(*axes, indexing="ij")
    return np.column_stack([gx.ravel(), gy.ravel(), gz.ravel()]), s


# --- the 3-D scene ------------------------------------------------------------------------------------

#: Colours of the scene's parts (RGBA): ground, box, cylinder (trees, poles), building.
SCENE_COLOURS = {"ground": (0.45, 0.5, 0.35, 1.0), "box": (0.55, 0.45, 0.35, 1.0),
                 "cylinder": (0.3, 0.55, 0.25, 1.0), "building": (0.6, 0.6, 0.65, 1.0)}


def scene_markers(scene: Any, frame: str, stamp: Any) -> Any:
    """/scene/markers: DELETEALL, the obstacles (a CUBE per box and building, a CYLINDER per cylinder,
    id = obstacle index, standing on their base) and, for a height map, the ground as one TRIANGLE_LIST
    (the mesh the sensors see). Persons are drawn by the referee's /referee/markers. ENU ``frame``."""
    from visualization_msgs.msg import Marker

    out = [delete_all(frame, stamp, "scene_obstacles"), delete_all(frame, stamp, "scene_ground")]
    for j, ob in enumerate(scene.obstacles):
        kind = Marker.CYLINDER if ob.type == "cylinder" else Marker.CUBE
        m = _marker("scene_obstacles", j, kind, frame, stamp, SCENE_COLOURS[ob.type])
        base_ned = np.array([ob.center_ne_m[0], ob.center_ne_m[1], scene.obstacle_base_z_ned_m[j]])
        centre = ned_to_enu(base_ned) + np.array([0.0, 0.0, 0.5 * ob.height])
        m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in centre)
        # NED yaw psi (north towards east) is ENU yaw pi/2 - psi; the box's length lies along its x
        yaw_enu = 0.5 * math.pi - ob.yaw_rad
        m.pose.orientation.z, m.pose.orientation.w = math.sin(0.5 * yaw_enu), math.cos(0.5 * yaw_enu)
        if ob.type == "cylinder":
            m.scale.x = m.scale.y = 2.0 * ob.radius_m
        else:
            m.scale.x, m.scale.y = ob.size_m[0], ob.size_m[1]
        m.scale.z = ob.height
        out.append(m)
    if not scene.ground.flat:
        m = _marker("scene_ground", 0, Marker.TRIANGLE_LIST, frame, stamp, SCENE_COLOURS["ground"])
        m.scale.x = m.scale.y = m.scale.z = 1.0
        verts, faces = scene.ground.mesh()
        m.points = _points(ned_to_enu(verts[faces.ravel()]))
        out.append(m)
    return marker_array(out)
