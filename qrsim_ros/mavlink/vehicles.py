"""Every vehicle of a fleet as a PX4 vehicle on MAVLink 2: the onboard autopilot's MAVLink adapter.

Vehicle i (0-based) is system i+1, component 1, with PX4 SITL instance i's two UDP links
(``MavlinkPorts``): the API link (local 14580+i -> 14540+i, PX4's "onboard" stream rates) and the
ground-station link (local 18570+i -> 14550, PX4's "normal" rates). Each tick the front end calls
``receive`` (commands, set points, missions, parameters become ``OnboardAutopilot`` calls, each answered
as PX4 answers) and, after the autopilot's step, ``send`` (the telemetry streams that are due).

What the vehicle reports is its estimated state eX (the simulated sensors), never the ground truth;
positions go to WGS-84 through the scenario's geodetic origin (``core.common.geodesy``). Times are the
simulated time: time_boot_ms is simulated milliseconds since the start, TIMESYNC answers in simulated
nanoseconds.
"""

from __future__ import annotations

import itertools
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pymavlink.dialects.v20 import common as mavlink

from qrsim_ros.core.common.frames import euler_to_quaternion, quaternion_to_euler
from qrsim_ros.core.common.geodesy import GeodeticOrigin, lla_to_ned, ned_to_lla
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.onboard.autopilot import FORCE_DISARM_MAGIC, OnboardAutopilot, Result
from qrsim_ros.core.onboard.mission import ItemKind, MissionItem
from qrsim_ros.core.onboard.modes import FlightMode
from qrsim_ros.core.onboard.parameters import BY_NAME, SPECS
from qrsim_ros.core.vehicles.estimated_state import (
    ANGULAR_VELOCITY_FRD,
    EULER,
    HEIGHT,
    POSITION_NED,
    velocity_ned,
)
from qrsim_ros.mavlink import px4
from qrsim_ros.mavlink.link import MavlinkLink

Array = NDArray[np.float64]

#: The link kinds and PX4's default stream rates on each [Hz] (PX4's mavlink module, "onboard" and
#: "normal" modes); 0 = on every new sample (GPS_RAW_INT on the API link). Capped at the tick rate.
API, GCS = "api", "gcs"
STREAM_RATES_HZ: dict[str, dict[str, float]] = {
    API: {"HEARTBEAT": 1.0, "SYS_STATUS": 5.0, "EXTENDED_SYS_STATE": 5.0, "ATTITUDE": 100.0,
          "ATTITUDE_QUATERNION": 50.0, "LOCAL_POSITION_NED": 30.0, "GLOBAL_POSITION_INT": 50.0,
          "GPS_RAW_INT": 0.0, "ALTITUDE": 10.0, "HOME_POSITION": 0.5, "BATTERY_STATUS": 0.5,
          "SYSTEM_TIME": 1.0},
    GCS: {"HEARTBEAT": 1.0, "SYS_STATUS": 1.0, "EXTENDED_SYS_STATE": 1.0, "ATTITUDE": 15.0,
          "LOCAL_POSITION_NED": 1.0, "GLOBAL_POSITION_INT": 5.0, "GPS_RAW_INT": 1.0, "ALTITUDE": 1.0,
          "HOME_POSITION": 0.5, "BATTERY_STATUS": 0.5},
}
#: A mission upload that stalls this long [s, simulated] is abandoned (bounded state, as PX4 times out).
MISSION_UPLOAD_TIMEOUT_S = 5.0
#: The most mission items a vehicle takes.
MAX_MISSION_ITEMS = int(LIMITS["mission_items"].hi)
#: SET_POSITION_TARGET_LOCAL_NED type_mask bits (MAVLink's POSITION_TARGET_TYPEMASK).
_IGNORE_POSITION, _IGNORE_VELOCITY, _IGNORE_ACCEL = 0x7, 0x38, 0x1C0
_IGNORE_YAW, _IGNORE_YAW_RATE = 0x400, 0x800
#: SET_ATTITUDE_TARGET type_mask bits (MAVLink's ATTITUDE_TARGET_TYPEMASK).
_IGNORE_BODY_YAW_RATE, _IGNORE_THROTTLE, _IGNORE_ATTITUDE = 0x4, 0x40, 0x80
#: The sensors a vehicle reports (the simulated IMU, altimeter and GPS; the orientation estimator's
#: heading stands for a magnetometer's).
_SENSORS = (mavlink.MAV_SYS_STATUS_SENSOR_3D_GYRO | mavlink.MAV_SYS_STATUS_SENSOR_3D_ACCEL
            | mavlink.MAV_SYS_STATUS_SENSOR_3D_MAG
            | mavlink.MAV_SYS_STATUS_SENSOR_ABSOLUTE_PRESSURE | mavlink.MAV_SYS_STATUS_SENSOR_GPS
            | mavlink.MAV_SYS_STATUS_SENSOR_ATTITUDE_STABILIZATION
            | mavlink.MAV_SYS_STATUS_SENSOR_Z_ALTITUDE_CONTROL
            | mavlink.MAV_SYS_STATUS_SENSOR_XY_POSITION_CONTROL | mavlink.MAV_SYS_STATUS_SENSOR_MOTOR_OUTPUTS
            | mavlink.MAV_SYS_STATUS_PREARM_CHECK)
_CAPABILITIES = (mavlink.MAV_PROTOCOL_CAPABILITY_MISSION_INT | mavlink.MAV_PROTOCOL_CAPABILITY_COMMAND_INT
                 | mavlink.MAV_PROTOCOL_CAPABILITY_PARAM_ENCODE_BYTEWISE
                 | mavlink.MAV_PROTOCOL_CAPABILITY_SET_POSITION_TARGET_LOCAL_NED
                 | mavlink.MAV_PROTOCOL_CAPABILITY_MAVLINK2)
_MISSION_COMMANDS = {
    mavlink.MAV_CMD_NAV_WAYPOINT: ItemKind.WAYPOINT, mavlink.MAV_CMD_NAV_LOITER_TIME: ItemKind.LOITER_TIME,
    mavlink.MAV_CMD_NAV_TAKEOFF: ItemKind.TAKEOFF, mavlink.MAV_CMD_NAV_LAND: ItemKind.LAND,
    mavlink.MAV_CMD_NAV_RETURN_TO_LAUNCH: ItemKind.RTL,
    mavlink.MAV_CMD_DO_CHANGE_SPEED: ItemKind.CHANGE_SPEED,
}
_COMMAND_OF_KIND = {kind: cmd for cmd, kind in _MISSION_COMMANDS.items()}


@dataclass(frozen=True)
class MavlinkPorts:
    """The UDP ports of vehicle i: PX4 SITL instance i's. ``host``: where the links bind and send
    (loopback; ``bind_host`` 0.0.0.0 to be reached from the network)."""

    api_local: int = 14580
    api_remote: int = 14540
    gcs_local: int = 18570
    gcs_remote: int = 14550
    host: str = "127.0.0.1"
    bind_host: str = "127.0.0.1"

    def links(self, i: int) -> dict[str, tuple[tuple[str, int], tuple[str, int]]]:
        """Vehicle ``i``'s links: kind -> (local, remote) addresses."""
        return {API: ((self.bind_host, self.api_local + i), (self.host, self.api_remote + i)),
                GCS: ((self.bind_host, self.gcs_local + i), (self.host, self.gcs_remote))}


@dataclass
class VehicleCounters:
    """Per vehicle: what was refused or ignored, by kind."""

    foreign_target: int = 0  # addressed to another system or component
    unsupported: int = 0  # a message or command this vehicle does not implement
    bad_setpoints: int = 0  # a set point in an unsupported frame, or not finite
    commands: dict[str, int] = field(default_factory=dict)


@dataclass
class _Upload:
    """A mission upload in progress: the count announced, the items so far, who sends it, since when."""

    count: int
    items: list[Any]
    peer: tuple[int, int]
    kind: str
    last_s: float


@dataclass
class Telemetry:
    """What the front end knows besides eX for one tick (per vehicle arrays, (N,)): battery voltage [V]
    and remaining fraction (NaN: unknown), whether the GPS has a fix and its satellites, and the sensor
    bits that are unhealthy (a fault: MAV_SYS_STATUS_SENSOR bits)."""

    battery_v: Array
    battery_fraction: Array
    gps_fix: NDArray[np.bool_]
    satellites: NDArray[np.int_]
    unhealthy_bits: NDArray[np.int_]

    @classmethod
    def nominal(cls, n: int) -> Telemetry:
        return cls(np.full(n, np.nan), np.full(n, np.nan), np.ones(n, bool), np.full(n, 10, int),
                   np.zeros(n, int))


class MavlinkVehicles:
    """The MAVLink face of ``autopilot``'s vehicles (module docstring).

    ``origin``: the scenario's geodetic origin of NED; ``dt_s``: the tick [s]; ``preflight``: a callable
    ``(i) -> list of failed checks`` asked when vehicle i is to arm (a failed self-test, a GPS outage).
    """

    def __init__(self, autopilot: OnboardAutopilot, origin: GeodeticOrigin, dt_s: float,
                 ports: MavlinkPorts | None = None,
                 preflight: Callable[[int], list[str]] | None = None) -> None:
        self.autopilot = autopilot
        self.origin = origin
        self.dt_s = float(dt_s)
        self.ports = ports or MavlinkPorts()
        self.preflight = preflight or (lambda _i: [])
        n = self.num_vehicles = autopilot.num_vehicles
        self.links: list[dict[str, MavlinkLink]] = []
        try:
            for i in range(n):
                self.links.append({kind: MavlinkLink(local, remote, i + 1)
                                   for kind, (local, remote) in self.ports.links(i).items()})
        except OSError:
            self.close()
            raise
        self.counters = [VehicleCounters() for _ in range(n)]
        self._rates = [{kind: dict(STREAM_RATES_HZ[kind]) for kind in (API, GCS)} for _ in range(n)]
        # per stream: its credit (every stream is due at the first tick)
        self._credit = [{kind: dict.fromkeys(STREAM_RATES_HZ[kind], 1.0) for kind in (API, GCS)}
                        for _ in range(n)]
        self._uploads: list[_Upload | None] = [None] * n
        self._now_s = 0.0
        self._last_gps_s = np.full(n, -np.inf)
        self._reached_sent = np.full(n, -1, np.int64)

    def close(self) -> None:
        for links in self.links:
            for link in links.values():
                link.close()

    # --- incoming ---------------------------------------------------------------------------------------

    def receive(self, now_s: float) -> None:
        """Handle every message waiting on every link (the tick at ``now_s`` [s])."""
        self._now_s = float(now_s)
        for i, links in enumerate(self.links):
            upload = self._uploads[i]
            if upload is not None and now_s - upload.last_s > MISSION_UPLOAD_TIMEOUT_S:
                self._uploads[i] = None
                self._text(i, mavlink.MAV_SEVERITY_WARNING, "Mission upload timed out")
            for kind, link in links.items():
                for msg in link.poll():
                    self._handle(i, kind, link, msg)
        self._flush()

    def _flush(self) -> None:
        for links in self.links:
            for link in links.values():
                link.flush()

    def _handle(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        name = msg.get_type()
        target = getattr(msg, "target_system", None)
        if target is not None and target not in (0, i + 1):
            self.counters[i].foreign_target += 1
            return
        component = getattr(msg, "target_component", None)
        if component is not None and component not in (0, mavlink.MAV_COMP_ID_AUTOPILOT1):
            self.counters[i].foreign_target += 1
            return
        handler = _HANDLERS.get(name)
        if handler is None:
            if name not in ("HEARTBEAT", "SYSTEM_TIME"):  # a peer's own heartbeat needs no answer
                self.counters[i].unsupported += 1
            return
        handler(self, i, kind, link, msg)

    def _on_command_long(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        params = [msg.param1, msg.param2, msg.param3, msg.param4, msg.param5, msg.param6, msg.param7]
        self._command(i, kind, link, msg, msg.command, params)

    def _on_command_int(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        params = [msg.param1, msg.param2, msg.param3, msg.param4, msg.x * 1e-7, msg.y * 1e-7, msg.z]
        self._command(i, kind, link, msg, msg.command, params)

    def _command(self, i: int, kind: str, link: MavlinkLink, msg: Any, command: int, p: list[float]) -> None:
        ap = self.autopilot
        c = self.counters[i].commands
        c[str(command)] = c.get(str(command), 0) + 1
        result: Result | None
        if command == mavlink.MAV_CMD_COMPONENT_ARM_DISARM:
            if p[0] >= 0.5:
                checks = self.preflight(i)
                result = ap.arm(i, failed_checks=checks)
            else:
                result = ap.disarm(i, force=round(p[1]) == FORCE_DISARM_MAGIC)
        elif command == mavlink.MAV_CMD_NAV_TAKEOFF:
            alt = p[6] - self._home_amsl(i) if math.isfinite(p[6]) else math.nan
            result = ap.takeoff(i, alt)
        elif command == mavlink.MAV_CMD_NAV_LAND:
            result = ap.set_mode(i, FlightMode.LAND)
        elif command == mavlink.MAV_CMD_NAV_RETURN_TO_LAUNCH:
            result = ap.set_mode(i, FlightMode.RTL)
        elif command == mavlink.MAV_CMD_DO_SET_MODE:
            custom = int(p[0]) & mavlink.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED
            mode = px4.mode_of(int(p[1]), int(p[2])) if custom else None
            result = Result(False, f"mode {int(p[1])}.{int(p[2])} not supported") if mode is None else (
                ap.takeoff(i) if mode == FlightMode.TAKEOFF else ap.set_mode(i, mode))
        elif command == mavlink.MAV_CMD_MISSION_START:
            result = ap.start_mission(i, int(p[0]) if math.isfinite(p[0]) else 0)
        elif command == mavlink.MAV_CMD_SET_MESSAGE_INTERVAL:
            result = self._set_interval(i, kind, int(p[0]), p[1])
        elif command == mavlink.MAV_CMD_REQUEST_MESSAGE:
            result = self._send_once(i, link, int(p[0]))
        elif command == mavlink.MAV_CMD_REQUEST_AUTOPILOT_CAPABILITIES:
            result = self._send_once(i, link, mavlink.MAVLINK_MSG_ID_AUTOPILOT_VERSION)
        else:
            result = None
        if result is None:
            self.counters[i].unsupported += 1
            code = mavlink.MAV_RESULT_UNSUPPORTED
        else:
            code = mavlink.MAV_RESULT_ACCEPTED if result.accepted else mavlink.MAV_RESULT_DENIED
        link.send(mavlink.MAVLink_command_ack_message(command, code, 0, 0, msg.get_srcSystem(),
                                                       msg.get_srcComponent()))
        self._send_events()

    def _on_set_position_target(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        if msg.coordinate_frame != mavlink.MAV_FRAME_LOCAL_NED:
            self.counters[i].bad_setpoints += 1
            return
        mask = msg.type_mask

        def field3(bits: int, values: tuple[float, float, float]) -> tuple[float, float, float]:
            return (math.nan,) * 3 if mask & bits == bits else values

        pos = field3(_IGNORE_POSITION, (msg.x, msg.y, msg.z))
        vel = field3(_IGNORE_VELOCITY, (msg.vx, msg.vy, msg.vz))
        acc = field3(_IGNORE_ACCEL, (msg.afx, msg.afy, msg.afz))
        yaw = math.nan if mask & _IGNORE_YAW else msg.yaw
        yaw_rate = math.nan if mask & _IGNORE_YAW_RATE else msg.yaw_rate
        result = self.autopilot.offboard_setpoint(i, position_ned_m=pos, velocity_ned_mps=vel,
                                                  accel_ned_mps2=acc, yaw_rad=yaw, yaw_rate_rads=yaw_rate)
        if not result.accepted:
            self.counters[i].bad_setpoints += 1

    def _on_param_request_list(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        for index, spec in enumerate(SPECS):
            link.send(self._param_value(i, spec.name, index))

    def _on_param_request_read(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        name = _param_id(msg.param_id)
        if msg.param_index >= 0 and not name:
            name = SPECS[msg.param_index].name if msg.param_index < len(SPECS) else ""
        if name in BY_NAME:
            link.send(self._param_value(i, name, list(BY_NAME).index(name)))
        else:
            self.counters[i].unsupported += 1

    def _on_param_set(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        name = _param_id(msg.param_id)
        spec = BY_NAME.get(name)
        if spec is None:
            self.counters[i].unsupported += 1
            self._text(i, mavlink.MAV_SEVERITY_WARNING, f"Parameter {name[:16]} unknown")
            return
        value = _decode_param(msg.param_value, msg.param_type)
        try:
            self.autopilot.params.set(name, i, value)
        except ConfigError as exc:
            self._text(i, mavlink.MAV_SEVERITY_WARNING, str(exc))
        # PX4 answers with the value it holds (the new one, or the old one if refused)
        link.send(self._param_value(i, name, list(BY_NAME).index(name)))

    def _param_value(self, i: int, name: str, index: int) -> Any:
        spec = BY_NAME[name]
        value = self.autopilot.params.value(name, i)
        ptype = mavlink.MAV_PARAM_TYPE_INT32 if spec.integer else mavlink.MAV_PARAM_TYPE_REAL32
        encoded = _encode_param(value, ptype)
        return mavlink.MAVLink_param_value_message(name.encode(), encoded, ptype, len(SPECS), index)

    # --- the mission protocol -----------------------------------------------------------------------------

    def _on_mission_count(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        peer = (msg.get_srcSystem(), msg.get_srcComponent())
        if getattr(msg, "mission_type", 0) != mavlink.MAV_MISSION_TYPE_MISSION:
            self._mission_ack(link, peer, mavlink.MAV_MISSION_UNSUPPORTED, msg)
            return
        if msg.count > MAX_MISSION_ITEMS:
            self._mission_ack(link, peer, mavlink.MAV_MISSION_NO_SPACE, msg)
            return
        if msg.count == 0:
            self._store_mission(i, link, peer, [], msg)
            return
        self._uploads[i] = _Upload(msg.count, [], peer, kind, self._now_s)
        self._request_item(i, link, 0)

    def _on_mission_item_int(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        upload = self._uploads[i]
        if upload is None or msg.seq != len(upload.items):
            if upload is not None:  # out of order: ask again for the one expected
                self._request_item(i, link, len(upload.items))
            return
        upload.items.append(msg)
        upload.last_s = self._now_s
        if len(upload.items) < upload.count:
            self._request_item(i, link, len(upload.items))
            return
        self._uploads[i] = None
        self._store_mission(i, link, upload.peer, upload.items, msg)

    def _store_mission(self, i: int, link: MavlinkLink, peer: tuple[int, int], raw: list[Any],
                       msg: Any) -> None:
        try:
            items = [self._mission_item(i, m) for m in raw]
        except (ConfigError, ValueError) as exc:
            self._text(i, mavlink.MAV_SEVERITY_WARNING, f"Mission refused: {exc}")
            self._mission_ack(link, peer, mavlink.MAV_MISSION_INVALID, msg)
            return
        result = self.autopilot.set_mission(i, items)
        code = mavlink.MAV_MISSION_ACCEPTED if result.accepted else mavlink.MAV_MISSION_DENIED
        self._mission_ack(link, peer, code, msg)
        self._send_events()

    def _mission_item(self, i: int, m: Any) -> MissionItem:
        kind = _MISSION_COMMANDS.get(m.command)
        if kind is None:
            raise ValueError(f"item {m.seq}: command {m.command} unsupported")
        if kind == ItemKind.CHANGE_SPEED:  # param2: the speed [m/s] (-1: back to the default)
            return MissionItem(kind, speed_mps=m.param2 if m.param2 > 0 else math.nan)
        lat, lon = m.x * 1e-7, m.y * 1e-7
        if m.frame in (mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT, mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT):
            amsl = self._home_amsl(i) + m.z
        elif m.frame in (mavlink.MAV_FRAME_GLOBAL_INT, mavlink.MAV_FRAME_GLOBAL):
            amsl = m.z
        elif m.frame == mavlink.MAV_FRAME_MISSION and kind in (ItemKind.RTL, ItemKind.LAND):
            lat = lon = amsl = math.nan
        else:
            raise ValueError(f"item {m.seq}: frame {m.frame} not supported")
        no_position = not (math.isfinite(lat) and math.isfinite(lon)) or (lat == 0 and lon == 0)
        if kind == ItemKind.RTL or no_position:
            ned = (math.nan, math.nan, -amsl + self.origin.alt_m if math.isfinite(amsl) else math.nan)
        else:
            ned = tuple(float(v) for v in lla_to_ned([lat, lon, amsl], self.origin))
        hold = m.param1 if kind in (ItemKind.WAYPOINT, ItemKind.LOITER_TIME) else 0.0
        acceptance = m.param2 if kind == ItemKind.WAYPOINT and m.param2 > 0 else math.nan
        yawed = kind in (ItemKind.WAYPOINT, ItemKind.TAKEOFF) and math.isfinite(m.param4)
        yaw_rad = math.radians(m.param4) if yawed else math.nan
        return MissionItem(kind, ned, hold_s=hold, yaw_rad=yaw_rad, acceptance_m=acceptance)

    def _on_mission_request_list(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        link.send(mavlink.MAVLink_mission_count_message(msg.get_srcSystem(), msg.get_srcComponent(),
                                                        len(self.autopilot.missions[i]),
                                                        mavlink.MAV_MISSION_TYPE_MISSION))

    def _on_mission_request_int(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        items = self.autopilot.missions[i]
        if not 0 <= msg.seq < len(items):
            self._mission_ack(link, (msg.get_srcSystem(), msg.get_srcComponent()),
                              mavlink.MAV_MISSION_INVALID_SEQUENCE, msg)
            return
        item = items[msg.seq]
        p = np.array(item.position_ned_m, float)
        if np.isfinite(p[0:2]).all():
            lat, lon, amsl = ned_to_lla(np.where(np.isfinite(p), p, 0.0), self.origin)
            x, y = round(lat * 1e7), round(lon * 1e7)
            z = float(amsl - self._home_amsl(i)) if math.isfinite(p[2]) else 0.0
        else:
            x = y = 0
            z = float(-p[2] + self.origin.alt_m - self._home_amsl(i)) if math.isfinite(p[2]) else 0.0
        yaw = math.degrees(item.yaw_rad) if math.isfinite(item.yaw_rad) else math.nan
        accept = item.acceptance_m if math.isfinite(item.acceptance_m) else 0.0
        p1, p2 = item.hold_s, accept
        if item.kind == ItemKind.CHANGE_SPEED:  # param1 1: ground speed; param2 the speed (-1: default)
            p1, p2 = 1.0, item.speed_mps if math.isfinite(item.speed_mps) else -1.0
        link.send(mavlink.MAVLink_mission_item_int_message(
            msg.get_srcSystem(), msg.get_srcComponent(), msg.seq, mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT,
            _COMMAND_OF_KIND[item.kind], int(msg.seq == self.autopilot.mission_current[i]), 1, p1,
            p2, 0.0, yaw, x, y, z, mavlink.MAV_MISSION_TYPE_MISSION))

    def _on_mission_clear_all(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        peer = (msg.get_srcSystem(), msg.get_srcComponent())
        if getattr(msg, "mission_type", 0) not in (mavlink.MAV_MISSION_TYPE_MISSION,
                                                   mavlink.MAV_MISSION_TYPE_ALL):
            self._mission_ack(link, peer, mavlink.MAV_MISSION_UNSUPPORTED, msg)
            return
        result = self.autopilot.set_mission(i, [])
        self._mission_ack(link, peer, mavlink.MAV_MISSION_ACCEPTED if result.accepted
                          else mavlink.MAV_MISSION_DENIED, msg)

    def _on_mission_set_current(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        self.autopilot.set_current_item(i, msg.seq)
        self._send_mission_current(i, link)

    def _on_mission_ack(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        """The end of a download: nothing to do."""

    def _on_timesync(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        if msg.tc1 == 0:  # a request: answer with our (simulated) time
            link.send(mavlink.MAVLink_timesync_message(self._time_ns(), msg.ts1))

    def _on_set_attitude_target(self, i: int, kind: str, link: MavlinkLink, msg: Any) -> None:
        mask = msg.type_mask
        if mask & _IGNORE_ATTITUDE:  # body rates only: the airframe's inputs are angles
            self.counters[i].unsupported += 1
            if self.counters[i].unsupported == 1:
                self._text(i, mavlink.MAV_SEVERITY_WARNING, "SET_ATTITUDE_TARGET without an attitude not "
                                                            "supported: send the attitude quaternion")
            return
        roll, pitch, yaw = quaternion_to_euler([msg.q[1], msg.q[2], msg.q[3], msg.q[0]])
        yaw_rate = math.nan if mask & _IGNORE_BODY_YAW_RATE else msg.body_yaw_rate
        held = self.autopilot.offboard_thrust(i)
        thrust = held if mask & _IGNORE_THROTTLE else msg.thrust
        result = self.autopilot.offboard_attitude(i, roll_rad=float(roll), pitch_rad=float(pitch),
                                                  thrust=thrust, yaw_rad=float(yaw), yaw_rate_rads=yaw_rate)
        if not result.accepted:
            self.counters[i].bad_setpoints += 1

    def _request_item(self, i: int, link: MavlinkLink, seq: int) -> None:
        upload = self._uploads[i]
        assert upload is not None
        link.send(mavlink.MAVLink_mission_request_int_message(upload.peer[0], upload.peer[1], seq,
                                                              mavlink.MAV_MISSION_TYPE_MISSION))

    def _mission_ack(self, link: MavlinkLink, peer: tuple[int, int], code: int, msg: Any) -> None:
        link.send(mavlink.MAVLink_mission_ack_message(peer[0], peer[1], code,
                                                      getattr(msg, "mission_type", 0)))

    # --- outgoing -------------------------------------------------------------------------------------------

    def send(self, now_s: float, ex: Array, telemetry: Telemetry | None = None,
             gps_updated: NDArray[np.bool_] | None = None) -> None:
        """The streams due at ``now_s`` [s] from estimated states ``ex`` (N, 20) on every link, and the
        events of the tick (STATUSTEXT, MISSION_ITEM_REACHED, MISSION_CURRENT)."""
        self._now_s = float(now_s)
        if ex is not self._last_ex:
            self.remember(ex)
        tel = telemetry or Telemetry.nominal(self.num_vehicles)
        self._send_events()
        builders = _STREAMS
        for i, links in enumerate(self.links):
            for kind, link in links.items():
                rates, credit = self._rates[i][kind], self._credit[i][kind]
                for name, rate in rates.items():
                    if rate < 0:
                        continue
                    if rate == 0:  # on every new sample
                        if name != "GPS_RAW_INT" or gps_updated is None or not gps_updated[i]:
                            continue
                    else:  # a message is due each time the credit (rate x ticks) reaches one
                        if credit[name] < 1.0 - 1e-9:
                            credit[name] += rate * self.dt_s
                            continue
                        credit[name] = min(credit[name] - 1.0 + rate * self.dt_s, 1.0)
                    msg = builders[name](self, i, ex[i], tel)
                    if msg is not None:
                        link.send(msg)
        self._flush()

    def _send_events(self) -> None:
        for e in self.autopilot.drain_events():
            for link in self.links[e.vehicle].values():
                if e.kind == "reached":
                    link.send(mavlink.MAVLink_mission_item_reached_message(e.seq))
                    self._send_mission_current(e.vehicle, link)
                else:
                    for msg in _statustexts(e.severity, e.text):
                        link.send(msg)

    def _text(self, i: int, severity: int, text: str) -> None:
        for link in self.links[i].values():
            for msg in _statustexts(severity, text):
                link.send(msg)

    def _send_mission_current(self, i: int, link: MavlinkLink) -> None:
        items = self.autopilot.missions[i]
        link.send(mavlink.MAVLink_mission_current_message(min(int(self.autopilot.mission_current[i]),
                                                              max(len(items) - 1, 0)), len(items)))

    def _set_interval(self, i: int, kind: str, message_id: int, interval_us: float) -> Result:
        name = _MESSAGE_NAMES.get(message_id)
        if name is None or name not in _STREAMS:
            return Result(False, f"message {message_id} is not streamed")
        rates = self._rates[i][kind]
        if interval_us == 0:
            rates[name] = STREAM_RATES_HZ[kind].get(name, 1.0)
        elif interval_us < 0:
            rates[name] = -1.0
        else:
            rates[name] = min(1e6 / interval_us, 1.0 / self.dt_s)
        self._credit[i][kind][name] = 1.0  # due at the next tick
        return Result(True)

    def _send_once(self, i: int, link: MavlinkLink, message_id: int) -> Result:
        name = _MESSAGE_NAMES.get(message_id)
        if name == "AUTOPILOT_VERSION":
            link.send(mavlink.MAVLink_autopilot_version_message(
                _CAPABILITIES, 0, 0, 0, 0, [0] * 8, [0] * 8, [0] * 8, 0, 0, i + 1))
            return Result(True)
        if name in _STREAMS:
            ex = self._last_ex
            tel = Telemetry.nominal(self.num_vehicles)
            msg = _STREAMS[name](self, i, ex[i], tel) if ex is not None else None
            if msg is None:
                return Result(False, f"{name} not available yet")
            link.send(msg)
            return Result(True)
        return Result(False, f"message {message_id} not supported")

    _last_ex: Array | None = None

    def remember(self, ex: Array) -> None:
        """The tick's estimated states (for REQUEST_MESSAGE answers between ticks too) and what the
        high-rate streams carry, derived for every vehicle at once (a row per vehicle of plain Python
        numbers, None where the estimate lacks what the message needs): ATTITUDE, ATTITUDE_QUATERNION,
        LOCAL_POSITION_NED and GLOBAL_POSITION_INT's fields after the time, WGS-84 positions."""
        self._last_ex = ex
        pos = ex[:, POSITION_NED]
        has_pos = np.isfinite(pos).all(axis=1)
        lla = np.full((len(ex), 3), np.nan)
        if has_pos.any():
            lla[has_pos] = ned_to_lla(pos[has_pos], self.origin)
        self._lla = lla
        euler, rates = ex[:, EULER], ex[:, ANGULAR_VELOCITY_FRD]
        quat = euler_to_quaternion(euler[:, 0], euler[:, 1], euler[:, 2])
        self._quat_xyzw = quat
        vel = velocity_ned(ex)
        vel = np.where(np.isfinite(vel), vel, 0.0)
        has_att = np.isfinite(euler).all(axis=1)
        attitude = np.column_stack([euler, rates])
        self._attitude_rows = _rows(attitude, has_att & np.isfinite(rates).all(axis=1))
        self._quaternion_rows = _rows(np.column_stack([quat[:, [3, 0, 1, 2]], rates]), has_att)
        self._local_rows = _rows(np.column_stack([pos, vel]), has_pos)
        # GLOBAL_POSITION_INT: lat, lon [1e-7 deg], altitude AMSL and above home [mm], velocity [cm/s],
        # heading [cdeg] (65535 unknown); above home: the estimate's height until home is known
        home_z = self.autopilot.home_ned[:, 2]
        home_amsl = self.origin.alt_m - np.where(np.isfinite(home_z), home_z, 0.0)
        height = ex[:, HEIGHT]
        rel = np.where(np.isfinite(home_z) | ~np.isfinite(height), lla[:, 2] - home_amsl, height)
        hdg = np.degrees(euler[:, 2]) % 360.0
        hdg_cdeg = np.where(np.isfinite(hdg), np.round(np.nan_to_num(hdg) * 100) % 36000, 65535)
        scaled = np.column_stack([lla[:, 0] * 1e7, lla[:, 1] * 1e7, lla[:, 2] * 1e3, rel * 1e3, vel * 100])
        gpi = np.column_stack([np.round(np.nan_to_num(scaled)), hdg_cdeg]).astype(np.int64)
        self._global_rows = _rows(gpi, has_pos)

    def _time_ms(self) -> int:
        return round(self._now_s * 1e3) & 0xFFFFFFFF

    def _time_ns(self) -> int:
        return round(self._now_s * 1e9)

    def _home_amsl(self, i: int) -> float:
        """Vehicle ``i``'s home altitude [m above the origin's height datum] (its launch estimate)."""
        home = self.autopilot.home_ned[i]
        return self.origin.alt_m - (float(home[2]) if math.isfinite(home[2]) else 0.0)

    # --- the stream builders: one message from vehicle i's row of eX -----------------------------------

    def _heartbeat(self, i: int, ex: Array, tel: Telemetry) -> Any:
        ap = self.autopilot
        state = mavlink.MAV_STATE_ACTIVE if ap.armed[i] else mavlink.MAV_STATE_STANDBY
        if ap.failsafe_onsets[i] and ap.mode[i] != FlightMode.OFFBOARD and ap.armed[i]:
            state = mavlink.MAV_STATE_CRITICAL
        return mavlink.MAVLink_heartbeat_message(
            mavlink.MAV_TYPE_QUADROTOR, mavlink.MAV_AUTOPILOT_PX4, px4.base_mode(bool(ap.armed[i])),
            px4.custom_mode(ap.mode[i]), state, 3)

    def _sys_status(self, i: int, ex: Array, tel: Telemetry) -> Any:
        healthy = _SENSORS & ~int(tel.unhealthy_bits[i])
        if not (tel.gps_fix[i] and np.isfinite(ex[POSITION_NED]).all()):
            healthy &= ~mavlink.MAV_SYS_STATUS_SENSOR_GPS
        if self.preflight(i):
            healthy &= ~mavlink.MAV_SYS_STATUS_PREARM_CHECK
        volts = tel.battery_v[i]
        frac = tel.battery_fraction[i]
        return mavlink.MAVLink_sys_status_message(
            _SENSORS, _SENSORS, healthy, 0, round(volts * 1e3) if math.isfinite(volts) else 0xFFFF, -1,
            round(frac * 100) if math.isfinite(frac) else -1, 0, 0, 0, 0, 0, 0)

    def _extended_sys_state(self, i: int, ex: Array, tel: Telemetry) -> Any:
        return mavlink.MAVLink_extended_sys_state_message(mavlink.MAV_VTOL_STATE_UNDEFINED,
                                                          px4.LANDED_STATES[self.autopilot.landed_state[i]])

    def _attitude(self, i: int, ex: Array, tel: Telemetry) -> Any:
        row = self._attitude_rows[i]
        return None if row is None else mavlink.MAVLink_attitude_message(self._time_ms(), *row)

    def _attitude_quaternion(self, i: int, ex: Array, tel: Telemetry) -> Any:
        row = self._quaternion_rows[i]  # w, x, y, z, then the rates
        return None if row is None else mavlink.MAVLink_attitude_quaternion_message(self._time_ms(), *row)

    def _local_position_ned(self, i: int, ex: Array, tel: Telemetry) -> Any:
        row = self._local_rows[i]
        return None if row is None else mavlink.MAVLink_local_position_ned_message(self._time_ms(), *row)

    def _global_position_int(self, i: int, ex: Array, tel: Telemetry) -> Any:
        row = self._global_rows[i]
        return None if row is None else mavlink.MAVLink_global_position_int_message(self._time_ms(), *row)

    def _gps_raw_int(self, i: int, ex: Array, tel: Telemetry) -> Any:
        pos = ex[POSITION_NED]
        fix = bool(tel.gps_fix[i]) and bool(np.isfinite(pos).all())
        if not fix:
            return mavlink.MAVLink_gps_raw_int_message(self._time_ns() // 1000, mavlink.GPS_FIX_TYPE_NO_FIX,
                                                       0, 0, 0, 65535, 65535, 65535, 65535, 0)
        lat, lon, amsl = self._lla[i]
        vel = velocity_ned(ex[None, :])[0]
        speed = math.hypot(vel[0], vel[1]) if np.isfinite(vel[0:2]).all() else 0.0
        course = math.degrees(math.atan2(vel[1], vel[0])) % 360.0 if speed > 0 else 0.0
        return mavlink.MAVLink_gps_raw_int_message(
            self._time_ns() // 1000, mavlink.GPS_FIX_TYPE_3D_FIX, round(lat * 1e7), round(lon * 1e7),
            round(amsl * 1e3), 100, 150, round(speed * 100), round(course * 100) % 36000,
            int(tel.satellites[i]))

    def _altitude(self, i: int, ex: Array, tel: Telemetry) -> Any:
        pos = ex[POSITION_NED]
        if not np.isfinite(pos).all():
            return None
        amsl = self.origin.alt_m - pos[2]
        local = -pos[2]
        rel = amsl - self._home_amsl(i)
        terrain = ex[HEIGHT] if math.isfinite(ex[HEIGHT]) else math.nan
        return mavlink.MAVLink_altitude_message(self._time_ns() // 1000, amsl, amsl, local, rel, terrain,
                                                terrain)

    def _home_position(self, i: int, ex: Array, tel: Telemetry) -> Any:
        home = self.autopilot.home_ned[i]
        if not np.isfinite(home).all():
            return None
        lat, lon, amsl = ned_to_lla(home, self.origin)
        q = euler_to_quaternion(0.0, 0.0, self.autopilot.home_heading[i])
        return mavlink.MAVLink_home_position_message(round(lat * 1e7), round(lon * 1e7), round(amsl * 1e3),
                                                     *home, [q[3], q[0], q[1], q[2]], 0.0, 0.0, 0.0,
                                                     self._time_ns() // 1000)

    def _battery_status(self, i: int, ex: Array, tel: Telemetry) -> Any:
        volts, frac = tel.battery_v[i], tel.battery_fraction[i]
        if not math.isfinite(volts):
            return None
        cells = [65535] * 10
        cells[0] = min(round(volts * 1e3), 65534)
        return mavlink.MAVLink_battery_status_message(
            0, mavlink.MAV_BATTERY_FUNCTION_ALL, mavlink.MAV_BATTERY_TYPE_LIPO, 32767, cells, -1, -1, -1,
            round(frac * 100) if math.isfinite(frac) else -1)

    def _system_time(self, i: int, ex: Array, tel: Telemetry) -> Any:
        return mavlink.MAVLink_system_time_message(0, self._time_ms())


_STATUSTEXT_BYTES = 50
_text_ids = itertools.count(1)


def _rows(values: Array, present: NDArray[np.bool_]) -> list[list[Any] | None]:
    """``values`` (N, K) as a list of rows of Python numbers, None for the rows not ``present``."""
    return [row if ok else None for row, ok in zip(values.tolist(), present.tolist(), strict=True)]


def _statustexts(severity: int, text: str) -> list[Any]:
    """``text`` as STATUSTEXT messages: one if it fits in 50 bytes, else MAVLink 2's chunks (one id,
    chunk_seq 0, 1, ...; the last shorter than 50 bytes, an empty one if the text fills the last)."""
    data = text.encode("utf-8", "replace")
    if len(data) <= _STATUSTEXT_BYTES:
        return [mavlink.MAVLink_statustext_message(severity, data)]
    text_id = next(_text_ids) % 65535 + 1
    parts = [data[k:k + _STATUSTEXT_BYTES] for k in range(0, len(data), _STATUSTEXT_BYTES)]
    if len(parts[-1]) == _STATUSTEXT_BYTES:
        parts.append(b"")
    return [mavlink.MAVLink_statustext_message(severity, part, text_id, seq)
            for seq, part in enumerate(parts)]


def _param_id(raw: Any) -> str:
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    return text.split("\0", 1)[0]


def _encode_param(value: float, ptype: int) -> float:
    """PX4's byte-wise encoding: an INT32 parameter's bits travel in the float field."""
    if ptype == mavlink.MAV_PARAM_TYPE_INT32:
        return float(struct.unpack("<f", struct.pack("<i", round(value)))[0])
    return float(value)


def _decode_param(value: float, ptype: int) -> float:
    if ptype == mavlink.MAV_PARAM_TYPE_INT32:
        return float(struct.unpack("<i", struct.pack("<f", value))[0])
    return float(value)


_HANDLERS: dict[str, Callable[..., None]] = {
    "COMMAND_LONG": MavlinkVehicles._on_command_long,
    "COMMAND_INT": MavlinkVehicles._on_command_int,
    "SET_POSITION_TARGET_LOCAL_NED": MavlinkVehicles._on_set_position_target,
    "SET_ATTITUDE_TARGET": MavlinkVehicles._on_set_attitude_target,
    "PARAM_REQUEST_LIST": MavlinkVehicles._on_param_request_list,
    "PARAM_REQUEST_READ": MavlinkVehicles._on_param_request_read,
    "PARAM_SET": MavlinkVehicles._on_param_set,
    "MISSION_COUNT": MavlinkVehicles._on_mission_count,
    "MISSION_ITEM_INT": MavlinkVehicles._on_mission_item_int,
    "MISSION_REQUEST_LIST": MavlinkVehicles._on_mission_request_list,
    "MISSION_REQUEST_INT": MavlinkVehicles._on_mission_request_int,
    "MISSION_CLEAR_ALL": MavlinkVehicles._on_mission_clear_all,
    "MISSION_SET_CURRENT": MavlinkVehicles._on_mission_set_current,
    "MISSION_ACK": MavlinkVehicles._on_mission_ack,
    "TIMESYNC": MavlinkVehicles._on_timesync,
}
_STREAMS: dict[str, Callable[..., Any]] = {
    "HEARTBEAT": MavlinkVehicles._heartbeat,
    "SYS_STATUS": MavlinkVehicles._sys_status,
    "EXTENDED_SYS_STATE": MavlinkVehicles._extended_sys_state,
    "ATTITUDE": MavlinkVehicles._attitude,
    "ATTITUDE_QUATERNION": MavlinkVehicles._attitude_quaternion,
    "LOCAL_POSITION_NED": MavlinkVehicles._local_position_ned,
    "GLOBAL_POSITION_INT": MavlinkVehicles._global_position_int,
    "GPS_RAW_INT": MavlinkVehicles._gps_raw_int,
    "ALTITUDE": MavlinkVehicles._altitude,
    "HOME_POSITION": MavlinkVehicles._home_position,
    "BATTERY_STATUS": MavlinkVehicles._battery_status,
    "SYSTEM_TIME": MavlinkVehicles._system_time,
}
#: MAVLink message id -> name, for SET_MESSAGE_INTERVAL and REQUEST_MESSAGE.
_MESSAGE_NAMES = {getattr(mavlink, f"MAVLINK_MSG_ID_{name}"): name
                  for name in (*_STREAMS, "AUTOPILOT_VERSION")}
