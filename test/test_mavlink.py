"""The MAVLink face of the onboard autopilot (qrsim_ros.mavlink), over real UDP sockets on loopback, with
a client built on pymavlink's MAVLink 2 parser (not on our adapter): heartbeats and PX4 modes, commands
and their acknowledgements, offboard set points and their loss, the mission and parameter protocols,
the stream rates, and bad input (CRC, truncation, foreign targets, a flood). The vehicles are the
kinematic fleet of the autopilot's own tests; the airframes fly under the same autopilot elsewhere."""

from __future__ import annotations

import math
import random
import re
import socket
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kinematic_fleet import DT_S, KinematicFleet
from pymavlink import mavutil
from pymavlink.dialects.v20 import common as mavlink

from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN, ned_to_lla
from qrsim_ros.core.onboard.autopilot import OnboardAutopilot
from qrsim_ros.core.onboard.modes import FlightMode
from qrsim_ros.core.onboard.parameters import SPECS, ParameterTable
from qrsim_ros.mavlink import px4
from qrsim_ros.mavlink.link import MAX_DATAGRAMS_PER_POLL
from qrsim_ros.mavlink.vehicles import MavlinkPorts, MavlinkVehicles

GCS_SYSTEM = 255


def free_ports(num_vehicles: int) -> MavlinkPorts:
    """Loopback ports for ``num_vehicles`` (PX4's layout, shifted to a free range) and their clients."""
    for _ in range(50):
        base = random.randrange(20000, 60000, 10)
        ports = MavlinkPorts(api_local=base, api_remote=base + 1000, gcs_local=base + 2000,
                             gcs_remote=base + 3000)
        wanted = [p for i in range(num_vehicles) for p in (base + i, base + 1000 + i, base + 2000 + i)]
        wanted.append(base + 3000)
        socks = []
        try:
            for p in wanted:
                s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                socks.append(s)
                s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return ports
    raise RuntimeError("no free UDP port range on loopback")


class Client:
    """A MAVLink 2 peer on loopback (pymavlink's parser): listens where the vehicle sends, writes to
    the vehicle's local port."""

    def __init__(self, listen_port: int, vehicle_port: int, system_id: int = GCS_SYSTEM) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", listen_port))
        self.sock.setblocking(False)
        self.vehicle = ("127.0.0.1", vehicle_port)
        self.mav = mavlink.MAVLink(None, srcSystem=system_id, srcComponent=mavlink.MAV_COMP_ID_MISSIONPLANNER)
        self.received: list[Any] = []
        self.first_bytes: set[int] = set()  # of every datagram: 0xFD is MAVLink 2's start marker

    def send(self, msg: Any) -> None:
        self.sock.sendto(msg.pack(self.mav), self.vehicle)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendto(data, self.vehicle)

    def read(self) -> list[Any]:
        """Every message that arrived since the last read."""
        new = []
        while True:
            try:
                data = self.sock.recv(4096)
            except BlockingIOError:
                break
            self.first_bytes.add(data[0])
            new += [m for m in (self.mav.parse_buffer(data) or []) if m.get_type() != "BAD_DATA"]
        self.received += new
        return new

    def texts(self) -> list[str]:
        """The STATUSTEXT lines received, chunked ones (MAVLink 2's id and chunk_seq) joined."""
        out, chunks = [], {}
        for m in self.of("STATUSTEXT"):
            text = m.text if isinstance(m.text, str) else m.text.decode()
            if m.id == 0:
                out.append(text)
                continue
            chunks.setdefault(m.id, []).append(text)
            if len(text) < 50:
                out.append("".join(chunks.pop(m.id)))
        return out

    def of(self, name: str, new: list[Any] | None = None) -> list[Any]:
        return [m for m in (self.received if new is None else new) if m.get_type() == name]

    def command(self, command: int, *params: float, target: int = 1) -> None:
        p = [*params, *([0.0] * (7 - len(params)))]
        self.send(mavlink.MAVLink_command_long_message(target, 1, command, 0, *p))

    def close(self) -> None:
        self.sock.close()


class Rig:
    """N kinematic vehicles on the ground, their autopilot, its MAVLink face and an API client each."""

    def __init__(self, n: int = 1, **params: float) -> None:
        self.fleet = KinematicFleet([(10.0 * i, 0.0, 0.0) for i in range(n)])
        self.ap = OnboardAutopilot(n, DT_S, ParameterTable(n, params))
        self.ap.observe(0.0, self.fleet.ex(), np.ones(n, bool))
        self.failed_checks: dict[int, list[str]] = {}
        self.ports = free_ports(n)
        self.mav = MavlinkVehicles(self.ap, QRSIM_ORIGIN, DT_S, self.ports,
                                   preflight=lambda i: self.failed_checks.get(i, []))
        self.clients = [Client(self.ports.api_remote + i, self.ports.api_local + i) for i in range(n)]
        self.gcs = Client(self.ports.gcs_remote, self.ports.gcs_local)

    def fly(self, seconds: float, before_tick: Any = None) -> None:
        def before(t: float) -> None:
            if before_tick is not None:
                before_tick(t)
            self.mav.receive(t)

        def after(t: float, ex: np.ndarray) -> None:
            self.mav.remember(ex)
            self.mav.send(t, ex)
            for c in (*self.clients, self.gcs):  # every tick: a socket's buffer holds about a second
                c.read()

        self.fleet.fly(self.ap, seconds, before_tick=before, after_step=after)

    def close(self) -> None:
        self.mav.close()
        for c in (*self.clients, self.gcs):
            c.close()


@pytest.fixture
def rig():
    r = Rig()
    yield r
    r.close()


def last_ack(client: Client, command: int) -> Any:
    acks = [m for m in client.of("COMMAND_ACK") if m.command == command]
    assert acks, f"no COMMAND_ACK for {command}"
    return acks[-1]


def home_amsl(r: Rig) -> float:
    return QRSIM_ORIGIN.alt_m - float(r.ap.home_ned[0, 2])


def arm_and_take_off(r: Rig, altitude_m: float = 10.0) -> None:
    c = r.clients[0]
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
    r.fly(0.1)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_ACCEPTED
    c.command(mavlink.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, math.nan, math.nan, home_amsl(r) + altitude_m)
    r.fly(15.0)
    assert last_ack(c, mavlink.MAV_CMD_NAV_TAKEOFF).result == mavlink.MAV_RESULT_ACCEPTED


def test_each_vehicle_is_a_px4_quadrotor_with_its_own_system_id_and_ports() -> None:
    r = Rig(3)
    try:
        r.fly(1.1)
        for i, c in enumerate(r.clients):
            beats = c.of("HEARTBEAT")
            assert len(beats) == 2  # 1 Hz, at 0 s and 1 s
            hb = beats[-1]
            assert hb.get_srcSystem() == i + 1 and hb.get_srcComponent() == mavlink.MAV_COMP_ID_AUTOPILOT1
            assert hb.autopilot == mavlink.MAV_AUTOPILOT_PX4 and hb.type == mavlink.MAV_TYPE_QUADROTOR
            assert mavutil.interpret_px4_mode(hb.base_mode, hb.custom_mode) == "LOITER"  # Hold
            assert not hb.base_mode & mavlink.MAV_MODE_FLAG_SAFETY_ARMED
            assert hb.system_status == mavlink.MAV_STATE_STANDBY
            assert c.first_bytes == {mavlink.PROTOCOL_MARKER_V2}
        # the ground station's one port hears all three
        assert {m.get_srcSystem() for m in r.gcs.of("HEARTBEAT")} == {1, 2, 3}
    finally:
        r.close()


MAVROS_COMPONENT = 240  # MAVROS's default component id (its system id defaults to 1)


def test_the_documented_mavros_line_reaches_each_vehicle() -> None:
    """docs/MAVLINK.md's MAVROS row (``fcu_url:=udp://:BIND@HOST:REMOTE``, ``tgt_system:=i+1``): MAVROS binds
    BIND and writes to HOST:REMOTE. The documented numbers are the vehicles' default API layout; over the
    same layout shifted to free ports, a MAVROS-like peer (system 1, component 240, its heartbeat first)
    on vehicle i's pair of ports is answered by system i+1 only."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "MAVLINK.md").read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| MAVROS |"))
    m = re.search(r"fcu_url:=udp://:(\d+)@([\d.]+):(\d+)` for vehicle 0; vehicle i: "
                  r"`udp://:(\d+)\+i@([\d.]+):(\d+)\+i`, `tgt_system:=i\+1`", row)
    assert m, row
    d = MavlinkPorts()
    assert (int(m[1]), m[2], int(m[3])) == (int(m[4]), m[5], int(m[6])) == (d.api_remote, d.host, d.api_local)
    r = Rig(3)
    try:
        for c in r.clients:
            c.mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=MAVROS_COMPONENT)
        r.fly(0.1)
        for i, c in enumerate(r.clients):
            assert c.sock.getsockname()[1] - r.ports.api_remote == c.vehicle[1] - r.ports.api_local == i
            c.send(mavlink.MAVLink_heartbeat_message(mavlink.MAV_TYPE_ONBOARD_CONTROLLER,
                                                     mavlink.MAV_AUTOPILOT_INVALID, 0, 0, 0, 3))
            c.command(mavlink.MAV_CMD_REQUEST_MESSAGE, mavlink.MAVLINK_MSG_ID_AUTOPILOT_VERSION, target=i + 1)
        r.fly(0.1)
        for i, c in enumerate(r.clients):
            assert last_ack(c, mavlink.MAV_CMD_REQUEST_MESSAGE).result == mavlink.MAV_RESULT_ACCEPTED
            assert {v.get_srcSystem() for v in c.of("AUTOPILOT_VERSION")} == {i + 1}
            assert {b.get_srcSystem() for b in c.of("HEARTBEAT")} == {i + 1}
    finally:
        r.close()


def test_arm_and_takeoff_by_command_with_telemetry_from_the_estimate(rig: Rig) -> None:
    arm_and_take_off(rig, 10.0)
    c = rig.clients[0]
    hb = c.of("HEARTBEAT")[-1]
    assert hb.base_mode & mavlink.MAV_MODE_FLAG_SAFETY_ARMED
    assert mavutil.interpret_px4_mode(hb.base_mode, hb.custom_mode) == "LOITER"  # takeoff done: Hold
    assert c.of("EXTENDED_SYS_STATE")[-1].landed_state == mavlink.MAV_LANDED_STATE_IN_AIR
    assert any(m.landed_state == mavlink.MAV_LANDED_STATE_TAKEOFF for m in c.of("EXTENDED_SYS_STATE"))
    gp = c.of("GLOBAL_POSITION_INT")[-1]
    lat, lon, amsl = ned_to_lla(rig.fleet.pos[0], QRSIM_ORIGIN)
    assert gp.lat == pytest.approx(lat * 1e7, abs=2) and gp.lon == pytest.approx(lon * 1e7, abs=2)
    assert gp.relative_alt == pytest.approx(10_000, abs=350)
    assert gp.alt == pytest.approx(amsl * 1e3, abs=2)
    lp = c.of("LOCAL_POSITION_NED")[-1]
    assert lp.z == pytest.approx(rig.fleet.pos[0, 2], abs=0.1)  # (one tick apart at most)
    home = c.of("HOME_POSITION")[-1]
    assert home.x == home.y == home.z == 0.0
    assert c.of("GPS_RAW_INT") == [] and rig.gcs.of("GPS_RAW_INT")  # API link: on new samples only
    assert c.of("ALTITUDE")[-1].altitude_relative == pytest.approx(10.0, abs=0.35)
    att = c.of("ATTITUDE_QUATERNION")[-1]
    assert math.isclose(att.q1 ** 2 + att.q2 ** 2 + att.q3 ** 2 + att.q4 ** 2, 1.0, rel_tol=1e-6)


def test_stream_rates_are_px4s_and_set_message_interval_changes_them(rig: Rig) -> None:
    rig.fly(2.0)
    c = rig.clients[0]
    counts = Counter(m.get_type() for m in c.received)
    assert counts["HEARTBEAT"] == 2
    assert counts["ATTITUDE"] == 100  # PX4's 100 Hz, capped at the 50 Hz tick
    assert counts["LOCAL_POSITION_NED"] == pytest.approx(60, abs=2)  # 30 Hz
    assert counts["SYS_STATUS"] == 10 and counts["EXTENDED_SYS_STATE"] == 10
    gcs = Counter(m.get_type() for m in rig.gcs.received)
    assert gcs["ATTITUDE"] == pytest.approx(30, abs=2) and gcs["GLOBAL_POSITION_INT"] == 10
    c.command(mavlink.MAV_CMD_SET_MESSAGE_INTERVAL, mavlink.MAVLINK_MSG_ID_ATTITUDE, 100_000)  # 10 Hz
    c.command(mavlink.MAV_CMD_SET_MESSAGE_INTERVAL, mavlink.MAVLINK_MSG_ID_LOCAL_POSITION_NED, -1)  # off
    rig.fly(0.02)
    c.received.clear()
    rig.fly(2.0)
    counts = Counter(m.get_type() for m in c.received)
    assert counts["ATTITUDE"] == pytest.approx(20, abs=1) and counts["LOCAL_POSITION_NED"] == 0
    c.command(mavlink.MAV_CMD_REQUEST_MESSAGE, mavlink.MAVLINK_MSG_ID_AUTOPILOT_VERSION)
    rig.fly(0.04)
    version = c.of("AUTOPILOT_VERSION")[-1]
    for cap in (mavlink.MAV_PROTOCOL_CAPABILITY_MISSION_INT, mavlink.MAV_PROTOCOL_CAPABILITY_COMMAND_INT,
                mavlink.MAV_PROTOCOL_CAPABILITY_MAVLINK2):
        assert version.capabilities & cap
    c.command(mavlink.MAV_CMD_SET_MESSAGE_INTERVAL, 9999, 1000)
    rig.fly(0.04)
    assert last_ack(c, mavlink.MAV_CMD_SET_MESSAGE_INTERVAL).result == mavlink.MAV_RESULT_DENIED


def test_offboard_needs_a_stream_and_its_loss_switches_to_hold(rig: Rig) -> None:
    arm_and_take_off(rig)
    c = rig.clients[0]
    offboard = (mavlink.MAV_MODE_FLAG_CUSTOM_MODE_ENABLED, mavutil.PX4_CUSTOM_MAIN_MODE_OFFBOARD, 0)
    c.command(mavlink.MAV_CMD_DO_SET_MODE, *offboard)
    rig.fly(0.1)
    assert last_ack(c, mavlink.MAV_CMD_DO_SET_MODE).result == mavlink.MAV_RESULT_DENIED
    assert any("OFFBOARD denied" in t for t in c.texts())
    velocity_only = 0b110111000111  # ignore position, acceleration, yaw and yaw rate

    def stream(_t: float) -> None:
        c.send(mavlink.MAVLink_set_position_target_local_ned_message(
            0, 1, 1, mavlink.MAV_FRAME_LOCAL_NED, velocity_only, 0, 0, 0, 1.0, 0.0, 0.0, 0, 0, 0, 0, 0))

    rig.fly(0.5, before_tick=stream)
    c.command(mavlink.MAV_CMD_DO_SET_MODE, *offboard)
    north0 = rig.fleet.pos[0, 0]
    rig.fly(4.0, before_tick=stream)
    assert last_ack(c, mavlink.MAV_CMD_DO_SET_MODE).result == mavlink.MAV_RESULT_ACCEPTED
    hb = c.of("HEARTBEAT")[-1]
    assert mavutil.interpret_px4_mode(hb.base_mode, hb.custom_mode) == "OFFBOARD"
    assert rig.fleet.pos[0, 0] - north0 > 3.0 and rig.fleet.vel[0, 0] == pytest.approx(1.0, abs=0.02)
    # the client goes away: after COM_OF_LOSS_T (1 s) the vehicle holds and says why
    c.received.clear()
    rig.fly(2.5)
    assert rig.ap.mode[0] == FlightMode.HOLD
    hb = c.of("HEARTBEAT")[-1]
    assert mavutil.interpret_px4_mode(hb.base_mode, hb.custom_mode) == "LOITER"
    assert any("offboard set points lost" in t for t in c.texts())
    assert mavlink.MAV_SEVERITY_CRITICAL in {m.severity for m in c.of("STATUSTEXT")}
    # a set point in another frame is refused and counted
    c.send(mavlink.MAVLink_set_position_target_local_ned_message(
        0, 1, 1, mavlink.MAV_FRAME_BODY_NED, velocity_only, 0, 0, 0, 1.0, 0, 0, 0, 0, 0, 0, 0))
    rig.fly(0.04)
    assert rig.mav.counters[0].bad_setpoints == 1


def test_a_mission_uploads_downloads_flies_and_reports_its_items(rig: Rig) -> None:
    c = rig.clients[0]
    square = [(20.0, 0.0), (20.0, 20.0), (0.0, 20.0), (0.0, 0.0)]
    items = []
    for seq, (north, east) in enumerate(square):
        lat, lon, _ = ned_to_lla([north, east, 0.0], QRSIM_ORIGIN)
        items.append(mavlink.MAVLink_mission_item_int_message(
            1, 1, seq, mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT, mavlink.MAV_CMD_NAV_WAYPOINT, 0, 1,
            0.0, 1.0, 0.0, math.nan, round(lat * 1e7), round(lon * 1e7), 10.0,
            mavlink.MAV_MISSION_TYPE_MISSION))
    items.append(mavlink.MAVLink_mission_item_int_message(
        1, 1, 4, mavlink.MAV_FRAME_MISSION, mavlink.MAV_CMD_NAV_RETURN_TO_LAUNCH, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        mavlink.MAV_MISSION_TYPE_MISSION))
    c.send(mavlink.MAVLink_mission_count_message(1, 1, len(items), mavlink.MAV_MISSION_TYPE_MISSION))
    for _ in range(20):  # answer each request as it comes
        rig.fly(0.02)
        requests = c.of("MISSION_REQUEST_INT")
        if c.of("MISSION_ACK"):
            break
        if requests:
            c.send(items[requests[-1].seq])
            c.received = [m for m in c.received if m.get_type() != "MISSION_REQUEST_INT"]
    ack = c.of("MISSION_ACK")[-1]
    assert ack.type == mavlink.MAV_MISSION_ACCEPTED
    assert [it.kind.name for it in rig.ap.missions[0]] == ["WAYPOINT"] * 4 + ["RTL"]
    np.testing.assert_allclose(rig.ap.missions[0][1].position_ned_m, (20.0, 20.0, -10.0), atol=0.02)
    # download: the same items back
    c.send(mavlink.MAVLink_mission_request_list_message(1, 1, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    assert c.of("MISSION_COUNT")[-1].count == 5
    c.send(mavlink.MAVLink_mission_request_int_message(1, 1, 2, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    back = c.of("MISSION_ITEM_INT")[-1]
    assert (back.seq, back.command) == (2, mavlink.MAV_CMD_NAV_WAYPOINT)
    assert (back.x, back.y) == pytest.approx((items[2].x, items[2].y), abs=1)
    assert back.z == pytest.approx(10.0, abs=0.01)
    # fly it: arm, MISSION_START
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
    c.command(mavlink.MAV_CMD_MISSION_START, 0, 4)
    rig.ap.params.set("RTL_RETURN_ALT", 0, 15.0)
    for _ in range(40):
        rig.fly(5.0)
        if not rig.ap.armed[0]:
            break
    assert last_ack(c, mavlink.MAV_CMD_MISSION_START).result == mavlink.MAV_RESULT_ACCEPTED
    assert [m.seq for m in c.of("MISSION_ITEM_REACHED")] == [0, 1, 2, 3, 4]
    assert not rig.ap.armed[0] and np.hypot(*rig.fleet.pos[0, 0:2]) < 1.0
    assert c.of("EXTENDED_SYS_STATE")[-1].landed_state == mavlink.MAV_LANDED_STATE_ON_GROUND
    # clear
    c.send(mavlink.MAVLink_mission_clear_all_message(1, 1, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    assert c.of("MISSION_ACK")[-1].type == mavlink.MAV_MISSION_ACCEPTED and rig.ap.missions[0] == ()


def test_a_mission_with_an_unsupported_item_or_a_stalled_upload_is_refused(rig: Rig) -> None:
    c = rig.clients[0]
    c.send(mavlink.MAVLink_mission_count_message(1, 1, 1, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    c.send(mavlink.MAVLink_mission_item_int_message(
        1, 1, 0, mavlink.MAV_FRAME_GLOBAL_RELATIVE_ALT_INT, mavlink.MAV_CMD_DO_SET_SERVO, 0, 1,
        0, 0, 0, 0, 0, 0, 0, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    assert c.of("MISSION_ACK")[-1].type == mavlink.MAV_MISSION_INVALID
    assert any("Mission refused: item 0: command 183 unsupported" in t for t in c.texts())
    c.send(mavlink.MAVLink_mission_count_message(1, 1, 3, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(6.0)  # nothing follows
    assert any("timed out" in t for t in c.texts())
    c.send(mavlink.MAVLink_mission_count_message(1, 1, 10_000, mavlink.MAV_MISSION_TYPE_MISSION))
    rig.fly(0.02)
    assert c.of("MISSION_ACK")[-1].type == mavlink.MAV_MISSION_NO_SPACE


def test_parameters_by_px4_names_are_listed_set_and_checked(rig: Rig) -> None:
    c = rig.clients[0]
    c.send(mavlink.MAVLink_param_request_list_message(1, 1))
    rig.fly(0.02)
    values = {m.param_id: m for m in c.of("PARAM_VALUE")}
    assert set(values) == {s.name for s in SPECS} and {m.param_count for m in values.values()} == {len(SPECS)}
    assert values["MIS_TAKEOFF_ALT"].param_value == pytest.approx(2.5)
    c.send(mavlink.MAVLink_param_set_message(1, 1, b"MIS_TAKEOFF_ALT", 5.0, mavlink.MAV_PARAM_TYPE_REAL32))
    c.send(mavlink.MAVLink_param_set_message(1, 1, b"MPC_XY_VEL_MAX", 50.0, mavlink.MAV_PARAM_TYPE_REAL32))
    land_action = struct.unpack("<f", struct.pack("<i", 4))[0]  # an INT32 travels byte-wise, as PX4 has it
    c.send(mavlink.MAVLink_param_set_message(1, 1, b"COM_OBL_RC_ACT", land_action,
                                             mavlink.MAV_PARAM_TYPE_INT32))
    rig.fly(0.04)
    assert rig.ap.params.value("MIS_TAKEOFF_ALT", 0) == 5.0
    assert rig.ap.params.value("MPC_XY_VEL_MAX", 0) == 2.7  # refused: out of range
    assert rig.ap.params.value("COM_OBL_RC_ACT", 0) == 4.0
    echoed = {m.param_id: m for m in c.of("PARAM_VALUE")[-3:]}
    assert echoed["MPC_XY_VEL_MAX"].param_value == pytest.approx(2.7)
    assert struct.unpack("<i", struct.pack("<f", echoed["COM_OBL_RC_ACT"].param_value))[0] == 4
    assert any("MPC_XY_VEL_MAX=50.0 must be in [0.1, 2.7] m/s" in t for t in c.texts())


def test_arming_is_refused_with_a_reason_when_a_preflight_check_fails(rig: Rig) -> None:
    c = rig.clients[0]
    rig.failed_checks[0] = ["GPS outage"]
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
    rig.fly(1.1)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_DENIED
    assert any(t.startswith("Arming denied") and "GPS outage" in t for t in c.texts())
    status = c.of("SYS_STATUS")[-1]
    assert not status.onboard_control_sensors_health & mavlink.MAV_SYS_STATUS_PREARM_CHECK
    rig.failed_checks.clear()
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 1)
    rig.fly(0.1)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_ACCEPTED
    # a flying vehicle disarms only with PX4's force value
    c.command(mavlink.MAV_CMD_NAV_TAKEOFF, 0, 0, 0, math.nan, math.nan, math.nan, home_amsl(rig) + 5.0)
    rig.fly(6.0)
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 0)
    rig.fly(0.04)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_DENIED
    c.command(mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 0, 21196)
    rig.fly(0.04)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_ACCEPTED
    assert not rig.ap.armed[0]


def arm_command(system: int, component: int) -> Any:
    return mavlink.MAVLink_command_long_message(system, component, mavlink.MAV_CMD_COMPONENT_ARM_DISARM, 0,
                                                1, 0, 0, 0, 0, 0, 0)


def test_bad_input_is_dropped_and_counted(rig: Rig) -> None:
    c = rig.clients[0]
    good = arm_command(1, 1)
    data = bytearray(good.pack(c.mav))
    bad_crc = bytes(data[:-1]) + bytes([data[-1] ^ 0xFF])
    c.send_raw(bad_crc)
    c.send_raw(bytes(data[:10]))  # truncated
    c.send_raw(b"\x00garbage\xff" * 3)
    c.send(arm_command(7, 1))  # another system
    c.send(arm_command(1, 99))  # another component
    rig.fly(0.1)
    link = rig.mav.links[0]["api"].counters
    assert link.bad_crc == 1 and link.truncated == 1 and link.bad_data >= 1
    assert rig.mav.counters[0].foreign_target == 2
    assert not c.of("COMMAND_ACK") and not rig.ap.armed[0]
    # a flood: 2,000 datagrams within one tick (100 kHz for that tick) cost one poll's bound
    heartbeat = mavlink.MAVLink_heartbeat_message(mavlink.MAV_TYPE_GCS, mavlink.MAV_AUTOPILOT_INVALID,
                                                  0, 0, 0, 3)
    raw = heartbeat.pack(c.mav)
    for _ in range(2000):
        c.send_raw(raw)
    before = link.messages
    rig.fly(0.02)
    # one poll handled its bound and read the rest away (what the socket's buffer held of them)
    assert link.messages - before == MAX_DATAGRAMS_PER_POLL and link.flood_dropped > 0
    c.send(good)  # the link still works
    rig.fly(0.04)
    assert last_ack(c, mavlink.MAV_CMD_COMPONENT_ARM_DISARM).result == mavlink.MAV_RESULT_ACCEPTED


def test_px4_mode_encoding_round_trips() -> None:
    for mode in FlightMode:
        cm = px4.custom_mode(mode)
        main, sub = (cm >> 16) & 0xFF, (cm >> 24) & 0xFF
        assert px4.mode_of(main, sub) == mode
        assert mavutil.interpret_px4_mode(px4.base_mode(True), cm) == px4.mode_name(mode)
    assert px4.mode_of(mavutil.PX4_CUSTOM_MAIN_MODE_MANUAL, 0) is None
    assert px4.base_mode(True) & mavlink.MAV_MODE_FLAG_SAFETY_ARMED
