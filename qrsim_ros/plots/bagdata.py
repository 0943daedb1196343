"""A recorded run read back from a rosbag2 bag into numpy arrays, for the figures (no rclpy).

``load_run(path)`` opens the bag with rosbags' ``AnyReader`` and the project's type store
(``qrsim_ros.bag.types.typestore``), reads only the topics the figures use and returns a ``RunData``:

- per vehicle (``uavN``, from the topic names): the true track (``uavN/ground_truth/odom``: map ENU
  position [m], speed [m/s]), the GPS fixes (``uavN/gps/fix`` WGS-84, converted to map ENU with the
  scenario's geodetic origin through ``core.common.geodesy.lla_to_ned`` and
  ``core.common.frames.ned_to_enu``, as the estimated state does), the altimeter height, the GPS ground
  velocity, the camera footprints
  (``uavN/camera/detections`` corner fields), the plume readings (``uavN/plume/concentration``) and the
  battery (``uavN/battery``: terminal voltage [V], percentage as a fraction 0..1);
- the terrain classes (``/area/terrain`` OccupancyGrid), the persons (``/referee/markers``: the final
  state of the marker set; found/unfound from the marker namespace or colour), the task status
  history (``/referee/status``), the plume sources (``/plume/markers``) and, when the bag has one, a
  sampled concentration field (a PointCloud2 on a ``/plume/...`` topic);
- the fault intervals (``/sim/faults`` snapshots of the active set, rebuilt by ``plots.faults``).

Times are the messages' header stamps (simulated time, seconds). A bag with several episodes (the
stamps restart at 0 after a reset) is laid end to end: each restart of a topic's stamps adds the
previous episode's last stamp, and tracks get a NaN row at the break so lines are not joined.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.plots.faults import FaultInterval, FaultLog

Array = NDArray[np.float64]

#: Vehicle namespaces as the nodes name them (``ros.names.vehicle_namespace``): uav1, uav2, ...
_VEHICLE_TOPIC = re.compile(r"^/(uav\d+)/(.+)$")
#: NavSatFix status below this has no fix (sensor_msgs/NavSatStatus.STATUS_NO_FIX = -1).
_STATUS_FIX = 0
#: visualization_msgs/Marker actions.
_ADD, _DELETE, _DELETEALL = 0, 2, 3


class BagError(Exception):
    """The path is not a readable rosbag2 bag, or it holds nothing the figures can use."""


@dataclass
class Track:
    """Samples of one quantity over time: ``t_s`` (n,) and ``values`` (n, k)."""

    t_s: Array
    values: Array

    @property
    def empty(self) -> bool:
        return self.t_s.size == 0


def _empty_track(k: int) -> Track:
    return Track(np.zeros(0), np.zeros((0, k)))


@dataclass
class Vehicle:
    """One vehicle's recorded data (every array may be empty when its topic is not in the bag)."""

    name: str
    truth_enu: Track = field(default_factory=lambda: _empty_track(3))   # map ENU [m]
    truth_speed: Track = field(default_factory=lambda: _empty_track(1))  # |v| [m/s]
    gps_enu: Track = field(default_factory=lambda: _empty_track(3))     # map ENU [m] (fixes only)
    gps_speed: Track = field(default_factory=lambda: _empty_track(1))   # |v| of gps/vel [m/s]
    altimeter: Track = field(default_factory=lambda: _empty_track(1))   # height [m], up
    plume: Track = field(default_factory=lambda: _empty_track(1))       # concentration
    battery_v: Track = field(default_factory=lambda: _empty_track(1))   # terminal voltage [V]
    battery_fraction: Track = field(default_factory=lambda: _empty_track(1))  # charge, 0..1
    footprints: list[tuple[float, Array]] = field(default_factory=list)  # (t, (4, 2) ENU corners [m])
    # (episode, header stamp [ns]) of every truth_enu / gps_enu row (-1, -1 for the NaN break rows)
    truth_keys: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    gps_keys: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), np.int64))


@dataclass
class Terrain:
    """The terrain-class grid: ``classes[r, c]`` covers east ``x0 + c*res`` .. and north ``y0 + r*res`` .."""

    classes: NDArray[np.int_]
    x0_m: float
    y0_m: float
    resolution_m: float

    @property
    def extent(self) -> tuple[float, float, float, float]:
        """(east min, east max, north min, north max) [m], for imshow."""
        rows, cols = self.classes.shape
        res = self.resolution_m
        return (self.x0_m, self.x0_m + cols * res, self.y0_m, self.y0_m + rows * res)


@dataclass
class Status:
    """The task status history (``/referee/status``), one row per message."""

    t_s: Array
    step: NDArray[np.int64]
    reward: Array
    cumulative_reward: Array
    persons_found: NDArray[np.int64]
    persons_total: NDArray[np.int64]
    scenario: str
    done_reason: str

    @property
    def empty(self) -> bool:
        return self.t_s.size == 0


@dataclass
class PlumeField:
    """Concentrations sampled on points: ``points_enu`` (n, 3) [m] and ``concentration`` (n,)."""

    points_enu: Array
    concentration: Array
    topic: str
    field_name: str
    t_s: float  # header stamp of the cloud [s] (the last one in the bag is kept)


@dataclass
class RunData:
    """Everything the figures need from one bag."""

    path: Path
    topics: dict[str, str]                      # topic -> message type
    vehicles: list[Vehicle]
    terrain: Terrain | None = None
    persons_enu: Array = field(default_factory=lambda: np.zeros((0, 3)))
    persons_found: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, bool))
    status: Status | None = None
    plume_sources_enu: Array = field(default_factory=lambda: np.zeros((0, 3)))
    plume_field: PlumeField | None = None
    custom_data: dict[str, str] = field(default_factory=dict)  # metadata.yaml custom_data (recorder's)
    area_enu: tuple[float, float, float, float] | None = None  # flight area (east/north min/max) [m]
    faults: list[FaultInterval] = field(default_factory=list)  # from /sim/faults (plots.faults)
    fault_messages: int = 0                                    # /sim/faults messages read
    origin_note: str = ""
    read_note: str = ""                                        # set when the bag could not be read to its end

    @property
    def end_s(self) -> float:
        """The last time of any sample read [s] (0 when none): where open fault intervals are drawn to."""
        ends = [tr.t_s[-1] for v in self.vehicles
                for tr in (v.truth_enu, v.altimeter, v.gps_speed, v.battery_v, v.plume) if not tr.empty]
        if self.status is not None and not self.status.empty:
            ends.append(self.status.t_s[-1])
        ends += [t for f in self.faults for t in (f.start_s, f.end_s) if math.isfinite(t)]
        return float(max(ends, default=0.0))

    @property
    def scenario(self) -> str:
        """The scenario's name: TaskStatus.scenario, else the recorder's custom_data, else the bag's name."""
        if self.status is not None and self.status.scenario:
            return self.status.scenario
        recorded = self.custom_data.get("qrsim_ros.scenario", "")
        return Path(recorded).stem if recorded else self.path.name


# --- opening the bag ------------------------------------------------------------------------------

def bag_directory(path: str | Path) -> Path:
    """The rosbag2 directory of ``path`` (the directory itself, or the one holding a given bag file)."""
    p = Path(path)
    if p.is_file() and (p.parent / "metadata.yaml").is_file():
        return p.parent
    if not p.exists():
        raise BagError(f"{p}: no such file or directory")
    if not p.is_dir() or not (p / "metadata.yaml").is_file():
        raise BagError(f"{p}: not a rosbag2 bag (expected a directory with metadata.yaml and the storage "
                       "files, as 'qrsim launch --record' writes)")
    return p


class OpenBag:
    """The opened bag: connections by topic and a message iterator yielding deserialized messages.

    ``AnyReader`` rebuilds the types from the definitions stored in the bag; when one of them does not
    parse (rosbags' generated definitions write an empty string constant, e.g. TaskStatus's
    ``DONE_NONE=""``, as ``string DONE_NONE=``, which its own parser then rejects) or does not match
    its hash, the bag is read with the plain rosbag2 ``Reader`` and the project's type store instead.
    """

    def __init__(self, path: Path) -> None:
        from rosbags.highlevel import AnyReader, AnyReaderError
        from rosbags.rosbag2 import Reader

        from qrsim_ros.bag.types import typestore

        try:
            self._store = typestore()
        except FileNotFoundError as exc:  # installed without the package's msg/ folder
            raise BagError(f"{path}: cannot read the bag: {exc}") from None
        self.truncated = ""
        self._any: Any = None
        self._reader: Any = None
        try:
            self._any = AnyReader([path], default_typestore=self._store)
            self._any.open()
            self.connections = list(self._any.connections)
        except AnyReaderError as exc:
            # The stored definitions do not parse (or do not match their hashes): read the CDR data
            # with the installed types instead; if even that fails, report AnyReader's reason.
            text = str(exc)
            self._any = None
            try:
                self._reader = Reader(path)
                self._reader.open()
            except Exception:  # rosbags raises several unrelated types
                first = " ".join(text.splitlines()[0].split()) if text else repr(exc)
                raise BagError(f"{path}: cannot read the bag: {first}") from None
            self.connections = list(self._reader.connections)
        except Exception as exc:
            raise BagError(f"{path}: cannot read the bag: {' '.join(str(exc).split())}") from None

    def close(self) -> None:
        if self._any is not None:
            self._any.close()
        if self._reader is not None:
            self._reader.close()

    def messages(self, topics: set[str]) -> Iterator[tuple[str, Any]]:
        """(topic, message) in log order for the given topics; undecodable messages are skipped."""
        conns = [c for c in self.connections if c.topic in topics]
        if not conns:
            return
        if self._any is not None:
            source = self._any.messages(connections=conns)
            decode: Callable[[bytes, str], Any] = self._any.deserialize
        else:
            source = self._reader.messages(connections=conns)
            decode = self._store.deserialize_cdr
        while True:
            try:
                conn, _t, raw = next(source)
            except StopIteration:
                return
            except Exception as exc:  # a damaged file (a recorder killed mid-write): keep what was read
                reason = " ".join(str(exc).split())
                self.truncated = f"the bag is damaged, read up to where it breaks ({reason})"
                return
            try:
                yield conn.topic, decode(raw, conn.msgtype)
            except Exception:  # a message that does not decode with its type: skip it
                continue


# --- helpers ------------------------------------------------------------------------------------------

def header_stamp_ns(header: Any) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


class _Timeline:
    """Turns one topic's header stamps into a monotonic time axis across episode restarts."""

    def __init__(self) -> None:
        self.offset_ns = 0
        self.last_ns: int | None = None
        self.episode = 0
        self.starts_ns = [0]  # where each episode starts on the time axis [ns]

    def __call__(self, stamp_ns: int) -> tuple[float, bool]:
        """(time [s], whether this sample starts a new episode)."""
        restart = self.last_ns is not None and stamp_ns < self.last_ns
        if restart:
            assert self.last_ns is not None
            self.offset_ns += self.last_ns
            self.episode += 1
            self.starts_ns.append(self.offset_ns)
        self.last_ns = stamp_ns
        return (self.offset_ns + stamp_ns) * 1e-9, restart


class _Series:
    """Accumulates one topic's samples; a NaN row separates episodes."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.timeline = _Timeline()
        self.t: list[float] = []
        self.v: list[Any] = []
        self.keys: list[tuple[int, int]] = []

    def add(self, stamp_ns: int, values: Any) -> None:
        t, restart = self.timeline(stamp_ns)
        if restart and self.t:
            self.t.append(self.t[-1])
            self.v.append([math.nan] * self.k)
            self.keys.append((-1, -1))
        self.t.append(t)
        self.v.append(values)
        self.keys.append((self.timeline.episode, stamp_ns))

    def key_array(self) -> NDArray[np.int64]:
        return np.asarray(self.keys, np.int64).reshape(-1, 2)

    def track(self) -> Track:
        if not self.t:
            return _empty_track(self.k)
        return Track(np.asarray(self.t, float), np.asarray(self.v, float).reshape(len(self.t), self.k))


def _vehicle_sort_key(name: str) -> int:
    return int(name[3:])


def read_custom_data(bag_dir: Path) -> dict[str, str]:
    """The ``custom_data`` of a bag's metadata.yaml (the recorder writes the scenario, seed, ...)."""
    from qrsim_ros.bag.info import bag_metadata

    custom = (bag_metadata(bag_dir) or {}).get("custom_data") or {}
    return {str(k): str(v) for k, v in custom.items()} if isinstance(custom, dict) else {}


@dataclass
class ScenarioInfo:
    """What the figures take from the scenario file: the geodetic origin and the flight area."""

    origin: Any                                              # core.common.geodesy.GeodeticOrigin
    area_enu: tuple[float, float, float, float] | None       # (east min, east max, north min, north max) [m]
    note: str                                                # why the defaults were used, or ""


def scenario_info(candidates: list[str], num_vehicles: int) -> ScenarioInfo:
    """Load the first loadable scenario among ``candidates`` (a YAML path or a config name: the
    recorder's custom_data, then TaskStatus.scenario) with the bag's number of vehicles (the search and
    rescue area grows with it); QRSim's default origin and no area, with a note, when none loads."""
    from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN
    from qrsim_ros.core.config.scenario import load_scenario

    tried = [c for c in candidates if c]
    for name in tried:
        for overrides in ({"num_vehicles": num_vehicles}, None) if num_vehicles > 0 else (None,):
            try:
                sc = load_scenario(name, overrides)
            except Exception:  # not loadable here (another machine's file), or a fixed fleet size
                continue
            x0, x1, y0, y1 = (float(v) for v in sc.area_limits_ned[:4])
            return ScenarioInfo(sc.origin, (y0, y1, x0, x1), "")
    what = f"scenario {' / '.join(repr(t) for t in tried)} not found" if tried else "no scenario in the bag"
    return ScenarioInfo(QRSIM_ORIGIN, None,
                        f"{what}: GPS fixes converted to map with QRSim's default geodetic origin")


def _footprint(msg: Any) -> Array | None:
    """The ground footprint (4, 2) ENU of one camera/detections cloud: the outer corners of the window
    grid (core corner order c0 (u0, v0), c1 (u0, v1), c2 (u1, v0), c3 (u1, v1)), or None."""
    if msg.height == 0 or msg.width == 0 or not msg.data.size:
        return None
    fields = {f.name: int(f.offset) for f in msg.fields}
    needed = [f"c{c}_{a}" for c in range(4) for a in "xy"]
    if not all(n in fields for n in needed) or msg.point_step <= 0:
        return None
    step = int(msg.point_step)
    data = np.frombuffer(bytes(msg.data), np.uint8)
    if data.size < step * msg.height * msg.width:
        return None
    rows = data[: step * msg.height * msg.width].reshape(msg.height, msg.width, step)

    def corner(r: int, c: int, name: str) -> Array:
        out = []
        for a in "xy":
            off = fields[f"{name}_{a}"]
            out.append(np.frombuffer(rows[r, c, off:off + 4].tobytes(), "<f4")[0])
        return np.asarray(out, float)

    last_r, last_c = msg.height - 1, msg.width - 1
    quad = np.stack([corner(0, 0, "c0"), corner(0, last_c, "c2"), corner(last_r, last_c, "c3"),
                     corner(last_r, 0, "c1")])
    if np.all(np.isfinite(quad)):
        return quad
    # Some windows miss the ground: the convex hull of every finite corner instead.
    pts = []
    for c in range(4):
        x = np.frombuffer(rows[..., fields[f"c{c}_x"]:fields[f"c{c}_x"] + 4].tobytes(), "<f4")
        y = np.frombuffer(rows[..., fields[f"c{c}_y"]:fields[f"c{c}_y"] + 4].tobytes(), "<f4")
        pts.append(np.stack([x, y], axis=1))
    p = np.concatenate(pts).astype(float)
    p = p[np.all(np.isfinite(p), axis=1)]
    if len(p) < 3:
        return None
    from scipy.spatial import ConvexHull, QhullError

    try:
        return p[ConvexHull(p).vertices]
    except QhullError:
        return None


def _is_found(marker: Any) -> bool:
    """Found or not, from the marker's namespace if it says so, else its colour (green = found)."""
    ns = marker.ns.lower()
    if "unfound" in ns or "not_found" in ns or "missing" in ns:
        return False
    if "found" in ns:
        return True
    c = marker.color
    return float(c.g) > float(c.r)


def marker_state(state: dict[tuple[str, int], Any], msg: Any) -> None:
    """Apply one MarkerArray to the set of live markers (ADD/MODIFY, DELETE, DELETEALL per namespace
    or, with an empty namespace, all)."""
    for m in msg.markers:
        if m.action == _DELETEALL:
            for key in [k for k in state if not m.ns or k[0] == m.ns]:
                del state[key]
        elif m.action == _DELETE:
            state.pop((m.ns, int(m.id)), None)
        elif m.action == _ADD or m.action == 1:  # 1: MODIFY (deprecated alias of ADD)
            state[(m.ns, int(m.id))] = m


def _plume_field_from_cloud(msg: Any, topic: str, t_s: float) -> PlumeField | None:
    """Points and concentrations of a PointCloud2 on a /plume/... topic (x, y, z float32 + one more
    scalar field: the first named like a concentration, else the first extra float32 field)."""
    fields = {f.name: f for f in msg.fields}
    if not all(a in fields for a in "xyz") or msg.width * msg.height == 0:
        return None
    float_types = {7: "<f4", 8: "<f8"}  # sensor_msgs/PointField FLOAT32, FLOAT64
    extra = [f for f in msg.fields if f.name not in ("x", "y", "z") and f.datatype in float_types]
    if not extra:
        return None
    named = [f for f in extra if any(s in f.name.lower() for s in ("conc", "intensity", "value", "c"))]
    value = (named or extra)[0]
    n = int(msg.width) * int(msg.height)
    step = int(msg.point_step)
    data = np.frombuffer(bytes(msg.data), np.uint8)[: n * step].reshape(n, step)

    def col(f: Any) -> Array:
        dt = np.dtype(float_types[int(f.datatype)])
        if msg.is_bigendian:
            dt = dt.newbyteorder(">")
        return np.frombuffer(data[:, f.offset:f.offset + dt.itemsize].tobytes(), dt).astype(float)

    pts = np.stack([col(fields["x"]), col(fields["y"]), col(fields["z"])], axis=1)
    conc = col(value)
    ok = np.all(np.isfinite(pts), axis=1) & np.isfinite(conc)
    if not ok.any():
        return None
    return PlumeField(pts[ok], conc[ok], topic, value.name, t_s)


# --- reading ----------------------------------------------------------------------------------------

def load_run(path: str | Path) -> RunData:
    """Read a bag's plotted topics into a ``RunData`` (raises ``BagError`` for an unreadable bag)."""
    from qrsim_ros.core.common.frames import ned_to_enu
    from qrsim_ros.core.common.geodesy import lla_to_ned

    bag_path = bag_directory(path)
    bag = OpenBag(bag_path)
    try:
        topics = {c.topic: c.msgtype for c in bag.connections}
        names = sorted({m.group(1) for t in topics if (m := _VEHICLE_TOPIC.match(t))}, key=_vehicle_sort_key)
        run = RunData(bag_path, topics, [Vehicle(n) for n in names], custom_data=read_custom_data(bag_path))
        by_name = {v.name: v for v in run.vehicles}
        series: dict[tuple[str, str], _Series] = {}
        footprint_timelines: dict[str, _Timeline] = {}
        fixes: dict[str, list[tuple[int, list[float]]]] = {n: [] for n in names}
        markers: dict[tuple[str, int], Any] = {}
        plume_markers: dict[tuple[str, int], Any] = {}
        status_rows: list[tuple[float, int, float, float, int, int]] = []
        status_timeline = _Timeline()
        scenario = done_reason = ""

        def s(name: str, what: str, k: int) -> _Series:
            return series.setdefault((name, what), _Series(k))

        faults = FaultLog()
        wanted = {"ground_truth/odom", "gps/fix", "gps/vel", "altimeter", "camera/detections",
                  "plume/concentration", "battery"}
        plume_clouds = {t for t, ty in topics.items()
                        if t.startswith("/plume/") and ty == "sensor_msgs/msg/PointCloud2"}
        read = {t for t in topics if (m := _VEHICLE_TOPIC.match(t)) and m.group(2) in wanted}
        read |= {"/area/terrain", "/referee/markers", "/referee/status", "/plume/markers",
                 "/sim/faults"} & set(topics)
        read |= plume_clouds
        for topic, msg in bag.messages(read):
            m = _VEHICLE_TOPIC.match(topic)
            if m:
                v, what = by_name[m.group(1)], m.group(2)
                if what == "ground_truth/odom":
                    p, lin = msg.pose.pose.position, msg.twist.twist.linear
                    stamp = header_stamp_ns(msg.header)
                    s(v.name, "truth", 3).add(stamp, [p.x, p.y, p.z])
                    s(v.name, "speed", 1).add(stamp, [math.sqrt(lin.x ** 2 + lin.y ** 2 + lin.z ** 2)])
                elif what == "gps/fix":
                    if int(msg.status.status) >= _STATUS_FIX:
                        fixes[v.name].append((header_stamp_ns(msg.header), [msg.latitude, msg.longitude,
                                                                       msg.altitude]))
                elif what == "gps/vel":
                    lin = msg.twist.linear
                    s(v.name, "gps_speed", 1).add(header_stamp_ns(msg.header),
                                                  [math.sqrt(lin.x ** 2 + lin.y ** 2 + lin.z ** 2)])
                elif what == "altimeter":
                    s(v.name, "altimeter", 1).add(header_stamp_ns(msg.header), [msg.height])
                elif what == "plume/concentration":
                    s(v.name, "plume", 1).add(header_stamp_ns(msg.header), [msg.concentration])
                elif what == "battery":
                    s(v.name, "battery", 2).add(header_stamp_ns(msg.header), [msg.voltage, msg.percentage])
                elif what == "camera/detections":
                    quad = _footprint(msg)
                    t, _ = footprint_timelines.setdefault(v.name, _Timeline())(header_stamp_ns(msg.header))
                    if quad is not None:
                        v.footprints.append((t, quad))
            elif topic == "/area/terrain":
                info = msg.info
                grid = np.asarray(msg.data, np.int64).reshape(int(info.height), int(info.width))
                run.terrain = Terrain(grid, float(info.origin.position.x), float(info.origin.position.y),
                                      float(info.resolution))
            elif topic == "/sim/faults":
                faults.add(header_stamp_ns(msg.header) * 1e-9, int(msg.episode), msg.faults)
            elif topic == "/referee/markers":
                marker_state(markers, msg)
            elif topic == "/plume/markers":
                marker_state(plume_markers, msg)
            elif topic == "/referee/status":
                t, _ = status_timeline(header_stamp_ns(msg.header))
                status_rows.append((t, int(msg.step), float(msg.reward), float(msg.cumulative_reward),
                                    int(msg.persons_found), int(msg.persons_total)))
                scenario, done_reason = str(msg.scenario), str(msg.done_reason)
            elif topic in plume_clouds:
                fld = _plume_field_from_cloud(msg, topic, header_stamp_ns(msg.header) * 1e-9)
                if fld is not None:
                    run.plume_field = fld
    finally:
        bag.close()
    run.read_note = bag.truncated

    for v in run.vehicles:
        for what, attr in (("truth", "truth_enu"), ("speed", "truth_speed"), ("gps_speed", "gps_speed"),
                           ("altimeter", "altimeter"), ("plume", "plume")):
            if (v.name, what) in series:
                setattr(v, attr, series[(v.name, what)].track())
        if (v.name, "truth") in series:
            v.truth_keys = series[(v.name, "truth")].key_array()
        if (v.name, "battery") in series:
            tr = series[(v.name, "battery")].track()
            v.battery_v = Track(tr.t_s, tr.values[:, :1])
            v.battery_fraction = Track(tr.t_s.copy(), tr.values[:, 1:])
    # the faults on the vehicle topics' time axis: the episode starts of the series with most episodes
    timelines = [ser.timeline for ser in series.values()]
    longest = max(timelines, key=lambda tl: len(tl.starts_ns), default=None)
    run.faults = faults.intervals([t * 1e-9 for t in longest.starts_ns] if longest else ())
    run.fault_messages = faults.messages

    if status_rows:
        a = np.asarray(status_rows, float)
        run.status = Status(a[:, 0], a[:, 1].astype(np.int64), a[:, 2], a[:, 3], a[:, 4].astype(np.int64),
                            a[:, 5].astype(np.int64), scenario, done_reason)

    info = scenario_info([run.custom_data.get("qrsim_ros.scenario", ""), scenario], len(run.vehicles))
    run.area_enu = info.area_enu
    if any(fixes.values()):
        origin = info.origin
        run.origin_note = info.note
        for v in run.vehicles:
            if not fixes[v.name]:
                continue
            ser = _Series(3)
            for stamp, lla in fixes[v.name]:
                ser.add(stamp, lla)
            tr = ser.track()
            ok = np.all(np.isfinite(tr.values), axis=1) & (np.abs(tr.values[:, 0]) <= 90.0)
            enu = np.full_like(tr.values, np.nan)
            if ok.any():
                enu[ok] = ned_to_enu(lla_to_ned(tr.values[ok], origin).reshape(-1, 3))
            v.gps_enu = Track(tr.t_s, enu)
            v.gps_keys = ser.key_array()

    persons = [m for (ns, _), m in sorted(markers.items()) if "person" in ns.lower()
               and m.type in (1, 2, 3, 10)]  # CUBE, SPHERE, CYLINDER, MESH_RESOURCE
    if persons:
        run.persons_enu = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                                    for m in persons])
        run.persons_found = np.array([_is_found(m) for m in persons], bool)
    sources = [m for _, m in sorted(plume_markers.items()) if m.type in (1, 2, 3)]
    if sources:
        run.plume_sources_enu = np.array([[m.pose.position.x, m.pose.position.y, m.pose.position.z]
                                          for m in sources])
    return run


def gps_error(vehicle: Vehicle) -> Track:
    """GPS position error (fix - truth) in map ENU [m], (n, 3), at the fixes' times.

    Fixes are stamped with the tick they belong to, as the ground truth is, so the truth of a fix is the
    one with the same stamp in the same episode; a fix without one (a gap in the recording) is compared
    with the truth of that episode linearly interpolated in time, and is NaN outside its span.
    """
    if vehicle.gps_enu.empty or vehicle.truth_enu.empty:
        return _empty_track(3)
    keys = vehicle.truth_keys
    index = {(int(e), int(s)): i for i, (e, s) in enumerate(keys) if e >= 0}
    tv = vehicle.truth_enu.values
    err = np.full_like(vehicle.gps_enu.values, np.nan)
    for j, (episode, stamp) in enumerate(vehicle.gps_keys):
        if episode < 0:
            continue
        i = index.get((int(episode), int(stamp)))
        if i is not None:
            truth = tv[i]
        else:
            same = (keys[:, 0] == episode) & np.all(np.isfinite(tv), axis=1)
            ts = keys[same, 1]
            if ts.size < 2 or not ts[0] <= stamp <= ts[-1]:
                continue
            truth = np.array([np.interp(stamp, ts, tv[same, a]) for a in range(3)])
        err[j] = vehicle.gps_enu.values[j] - truth
    return Track(vehicle.gps_enu.t_s.copy(), err)
