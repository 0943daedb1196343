"""PX4's simulator MAVLink interface at the protocol level: a peer written from the published protocol
(pymavlink over TCP: HIL_SENSOR, HIL_GPS and HIL_STATE_QUATERNION in, HIL_ACTUATOR_CONTROLS out, in
lockstep) stands in for PX4 SITL -- no PX4 build can be had here -- and closes a hover-then-step loop
through the rotor airframe from what the interface sends."""

from __future__ import annotations

import math
import socket
from collections.abc import Iterator
from datetime import date

import numpy as np
import pytest
from pymavlink.dialects.v20 import common as mavlink
from test_ardupilot_json import rotor_in_the_air_served, two_rotors_in_the_air_served

from qrsim_ros.core.common.geodesy import QRSIM_ORIGIN
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.firmware.px4_hil import Px4Hil, earth_field_ned_gauss


class Px4Peer:
    """PX4's side: connects by TCP, reads sensor frames, answers each with actuator controls."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        self.mav = mavlink.MAVLink(None, srcSystem=1, srcComponent=1)
        self.pending: list = []
        self.gps: list = []

    def frame(self, server: Px4Hil) -> dict[str, object]:
        """The next sensor frame: HIL_SENSOR and the HIL_STATE_QUATERNION after it (and any HIL_GPS)."""
        got: dict[str, object] = {}
        while "HIL_STATE_QUATERNION" not in got:
            while not self.pending:
                server.serve_once(0.0)
                try:
                    data = self.sock.recv(65536)
                except TimeoutError:
                    continue
                self.pending += [m for m in self.mav.parse_buffer(data) or [] if m.get_type() != "BAD_DATA"]
            msg = self.pending.pop(0)
            got[msg.get_type()] = msg
            if msg.get_type() == "HIL_GPS":
                self.gps.append(msg)
        return got

    def actuate(self, server: Px4Hil, motors: list[float]) -> None:
        controls = [*motors, *([0.0] * 12)]
        self.sock.sendall(mavlink.MAVLink_hil_actuator_controls_message(0, controls, 0, 0).pack(self.mav))
        for _ in range(200):
            if server.serve_once(0.05):
                return
        raise AssertionError("the simulator did not step on the actuator controls")


@pytest.fixture
def hil() -> Iterator[tuple[Px4Hil, Px4Peer, Simulator]]:
    server, sim = rotor_in_the_air_served(lambda sim, port: Px4Hil(sim, base_port=port))
    peer = Px4Peer(server.listeners[0].getsockname()[1])
    yield server, peer, sim
    peer.sock.close()
    server.close()


def controller(frame: dict[str, object], z_target_amsl_m: float, integral: list[float]) -> list[float]:
    """The peer's autopilot from the interface's messages: height from HIL_STATE_QUATERNION (PID), level
    attitude (PD) through PX4's '+' mixing (1 right, 2 left, 3 front, 4 back)."""
    s = frame["HIL_STATE_QUATERNION"]
    w, x, y, z = s.attitude_quaternion
    roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
    pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
    down_error = z_target_amsl_m - s.alt / 1000.0  # positive: too low
    vn, ve, vd = s.vx / 100.0, s.vy / 100.0, s.vz / 100.0
    integral[0] += down_error * 0.02
    collective = 0.5 + 0.08 * down_error + 0.08 * vd + 0.03 * integral[0]
    u_roll = 0.3 * (-0.1 * ve - roll) - 0.05 * s.rollspeed
    u_pitch = 0.3 * (0.1 * vn - pitch) - 0.05 * s.pitchspeed
    u_yaw = -0.05 * s.yawspeed
    return [collective - u_roll + u_yaw, collective + u_roll + u_yaw,
            collective + u_pitch - u_yaw, collective - u_pitch - u_yaw]


def test_a_px4_peer_flies_hover_then_a_step_through_the_rotor_model(hil) -> None:
    server, peer, sim = hil
    ground_amsl = QRSIM_ORIGIN.alt_m
    integral = [0.0]
    frame = peer.frame(server)
    times, heights = [frame["HIL_SENSOR"].time_usec], []
    for k in range(2000):  # 40 s: hold 10 m, then climb to 15 m at 20 s
        target = ground_amsl + (10.0 if k < 1000 else 15.0)
        peer.actuate(server, controller(frame, target, integral))
        frame = peer.frame(server)
        times.append(frame["HIL_SENSOR"].time_usec)
        heights.append(frame["HIL_STATE_QUATERNION"].alt / 1000.0 - ground_amsl)
    assert np.all(np.diff(times) == 20000)  # one 20 ms step per answer: lockstep
    assert sim.valid[0] and server.counters[0]["steps"] == 2000
    assert np.abs(np.array(heights[500:1000]) - 10.0).max() < 0.3
    assert np.abs(np.array(heights[1600:]) - 15.0).max() < 0.3  # 12 s after the step
    sensor = frame["HIL_SENSOR"]
    assert sensor.zacc == pytest.approx(-9.81, abs=1.0)  # the simulated accelerometer, hovering
    # the barometer: the standard atmosphere 15 m above the origin; the magnetometer: WMM in the body axes
    assert 1000.0 < sensor.abs_pressure < 1020.0
    assert sensor.pressure_alt == pytest.approx(ground_amsl + 15, abs=0.5)
    field = earth_field_ned_gauss(QRSIM_ORIGIN, date.today())
    magnitude = np.linalg.norm([sensor.xmag, sensor.ymag, sensor.zmag])
    assert magnitude == pytest.approx(np.linalg.norm(field), rel=1e-4)
    assert 0.3 < np.linalg.norm(field) < 0.6  # about 0.49 gauss in southern England
    # HIL_GPS at the receiver's rate, from the simulated (correlated, noisy) GPS, not the truth
    assert len(peer.gps) == pytest.approx(2001 / sim.gps.ticks, abs=2)
    gps = peer.gps[-1]
    assert gps.fix_type == 3
    lat, lon = sim.gps.lla[0, 0:2]
    assert (gps.lat, gps.lon) == (round(lat * 1e7), round(lon * 1e7))


def test_a_second_px4_is_refused_and_a_disconnect_is_counted(hil) -> None:
    server, peer, sim = hil
    peer.frame(server)
    other = socket.create_connection(("127.0.0.1", server.listeners[0].getsockname()[1]), timeout=5.0)
    server.serve_once(0.2)
    assert other.recv(10) == b""  # closed by the simulator: one PX4 per vehicle
    other.close()
    peer.sock.sendall(b"garbage-that-is-no-mavlink")  # skipped up to the next start marker
    peer.actuate(server, [0.5, 0.5, 0.5, 0.5])
    assert server.counters[0]["bad"] >= 1 and sim.tick == 1
    peer.sock.close()
    for _ in range(20):
        server.serve_once(0.05)
    assert server.conns[0] is None and server.counters[0]["disconnects"] == 1


def test_two_px4s_step_one_shared_physics_in_lockstep() -> None:
    """Vehicle i on TCP base + i, each its own PX4: one physics step once every connected PX4 answered
    its last sensor frame (the first to answer waits), each then sent its own vehicle's next frame."""
    server, _sim = two_rotors_in_the_air_served(lambda sim, port: Px4Hil(sim, base_port=port))
    peers = [Px4Peer(listener.getsockname()[1]) for listener in server.listeners]
    try:
        frames = [p.frame(server) for p in peers]
        hover = [0.62] * 4
        for _ in range(3):
            peers[0].sock.sendall(mavlink.MAVLink_hil_actuator_controls_message(
                0, [*hover, *([0.0] * 12)], 0, 0).pack(peers[0].mav))
            assert not any(server.serve_once(0.05) for _ in range(4))  # PX4 1 has not answered yet
            peers[1].actuate(server, hover)
            before = frames[0]["HIL_SENSOR"].time_usec
            frames = [p.frame(server) for p in peers]
            assert frames[0]["HIL_SENSOR"].time_usec == frames[1]["HIL_SENSOR"].time_usec == before + 20_000
        alts = [f["HIL_STATE_QUATERNION"].alt / 1000.0 for f in frames]
        assert alts[1] - alts[0] == pytest.approx(2.0, abs=0.1)  # each its own vehicle (12 m and 10 m up)
        assert server.counters[0]["steps"] == server.counters[1]["steps"] == 3
    finally:
        for p in peers:
            p.sock.close()
        server.close()
