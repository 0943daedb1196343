"""ArduPilot's JSON SITL interface at the protocol level: a peer written from the published protocol (binary
servo packets out, JSON state in, lockstep) stands in for the firmware -- no ArduPilot build can be had
here -- and closes a hover-then-step loop through the rotor airframe using nothing but the JSON it gets.
"""

from __future__ import annotations

import json
import random
import socket
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import pytest

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.firmware.ardupilot_json import (
    PWM_MAX_US,
    PWM_MIN_US,
    ArduPilotJson,
    ServoPacketError,
    parse_servo_packet,
    servo_packet,
)
from qrsim_ros.firmware.motors import motor_commands, outputs_of_rotors

T = TypeVar("T")
ROTOR_IN_THE_AIR = {"seed": 3, "task": {"duration_steps": 5000},
                    "vehicle": {"airframe": "rotor", "control": "motors", "turbulence": {"on": False},
                                "initial_states": [[0.0, 0.0, -10.0, 0.0, 0.0, 0.0]]}}


class Peer:
    """The firmware's side: sends servo packets, reads the JSON answers."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(5.0)
        self.frame = 0

    def send(self, pwm: list[int], frame: int | None = None) -> None:
        if frame is None:
            self.frame += 1
            frame = self.frame
        self.sock.sendto(servo_packet(50, frame, pwm), ("127.0.0.1", self.port))

    def state(self) -> dict:
        data = self.sock.recv(65536)
        assert data.startswith(b"\n") and data.endswith(b"\n")
        return json.loads(data)


def on_free_port(make: Callable[[int], T]) -> T:
    """``make(base_port)`` on the first random base port it can bind (the firmwares' own ports may be
    taken by a running simulator)."""
    for _ in range(50):
        try:
            return make(random.randrange(20000, 60000))
        except OSError:
            continue
    raise AssertionError("no free port in 50 tries")


def rotor_in_the_air_served(server: Callable[[Simulator, int], T]) -> tuple[T, Simulator]:
    """A rotor vehicle hovering at 10 m (``ROTOR_IN_THE_AIR``) and ``server(sim, port)`` on a free port."""
    sim = Simulator.from_scenario("keep_spot", ROTOR_IN_THE_AIR)
    return on_free_port(lambda port: server(sim, port)), sim


@pytest.fixture
def link() -> Iterator[tuple[ArduPilotJson, Peer, Simulator]]:
    server, sim = rotor_in_the_air_served(lambda sim, port: ArduPilotJson(sim, base_port=port))
    peer = Peer(server.socks[0].getsockname()[1])
    yield server, peer, sim
    server.close()
    peer.sock.close()


def exchange(server: ArduPilotJson, peer: Peer, pwm: list[int], frame: int | None = None) -> dict:
    peer.send(pwm, frame)
    server.serve_once(2.0)
    return peer.state()


def controller(state: dict, z_target: float, integral: list[float]) -> list[int]:
    """The peer's autopilot, from the JSON state alone: height (PID) and level attitude (PD) through the
    '+' frame's mixing in ArduPilot's motor order (1 right, 2 left, 3 front, 4 back; front and back turn
    clockwise)."""
    z, (vn, ve, vd) = state["position"][2], state["velocity"]
    roll, pitch, _ = state["attitude"]
    p, q, r = state["imu"]["gyro"]
    integral[0] += (z - z_target) * 0.02
    collective = 0.5 + 0.08 * (z - z_target) + 0.08 * vd + 0.03 * integral[0]
    u_roll = 0.3 * (-0.1 * ve - roll) - 0.05 * p
    u_pitch = 0.3 * (0.1 * vn - pitch) - 0.05 * q
    u_yaw = -0.05 * r
    motors = [collective - u_roll + u_yaw, collective + u_roll + u_yaw,
              collective + u_pitch - u_yaw, collective - u_pitch - u_yaw]
    return [round(1000 + 1000 * min(max(m, 0.0), 1.0)) for m in motors] + [1000] * 12


def test_a_peer_flies_hover_then_a_step_through_the_rotor_model(link) -> None:
    server, peer, sim = link
    integral = [0.0]
    state = exchange(server, peer, [1000] * 16)
    heights, stamps = [], [state["timestamp"]]
    for k in range(2000):  # 40 s: hold 10 m, then climb to 15 m at 20 s
        z_target = -10.0 if k < 1000 else -15.0
        state = exchange(server, peer, controller(state, z_target, integral))
        stamps.append(state["timestamp"])
        heights.append(-state["position"][2])
    assert np.allclose(np.diff(stamps), 0.02)  # one 20 ms physics step per frame, lockstep
    assert sim.valid[0] and server.counters[0]["steps"] == 2001
    assert np.abs(np.array(heights[500:1000]) - 10.0).max() < 0.3  # hovering
    assert np.abs(np.array(heights[1600:]) - 15.0).max() < 0.3  # 12 s after the step
    assert max(heights[1000:1600]) > 15.0  # it climbed
    # the JSON is the simulation's: truth for position and attitude, the simulated IMU for rates
    assert state["position"] == pytest.approx(sim.true_state()[0, 0:3].tolist())
    assert state["imu"]["accel_body"][2] == pytest.approx(-9.81, abs=1.0)


def test_the_motor_order_is_ardupilots_for_the_plus_frame(link) -> None:
    server, peer, _sim = link
    hover = 1708  # about the hover command of the pelican rotor set
    exchange(server, peer, [hover] * 4 + [1000] * 12)
    for _ in range(10):  # channel 2 (left) up: the right side goes down, a positive roll
        state = exchange(server, peer, [hover, hover + 60, hover, hover] + [1000] * 12)
    assert state["attitude"][0] > 0.01
    pwm = tuple(range(1100, 1900, 50))
    commands = motor_commands(pwm, outputs_of_rotors("+"), PWM_MIN_US, PWM_MAX_US)
    assert commands.tolist() == pytest.approx([0.2, 0.1, 0.25, 0.15])  # front, right, back, left
    with pytest.raises(ValueError, match="layout='h'"):
        outputs_of_rotors("h")


def test_an_x_airframe_is_flown_in_the_firmwares_quad_x_order_only_with_its_spins() -> None:
    """Quad X (motor 1 front-right, 2 back-left, 3 front-left, 4 back-right; 1 and 2 anticlockwise):
    motor 2 up rolls right and pitches down; motors 3 and 4 (clockwise) up yaw the vehicle left (their
    drag turns it anticlockwise seen from above). An x airframe whose rotors turn otherwise is refused."""
    x_frame = {"layout": "x", "spin": [-1.0, 1.0, -1.0, 1.0]}
    scenario = {**ROTOR_IN_THE_AIR, "vehicle": {**ROTOR_IN_THE_AIR["vehicle"], "rotor": x_frame}}
    sim = Simulator.from_scenario("keep_spot", scenario)
    server = on_free_port(lambda port: ArduPilotJson(sim, base_port=port))
    peer = Peer(server.socks[0].getsockname()[1])
    try:
        hover = 1708
        exchange(server, peer, [hover] * 4 + [1000] * 12)
        for _ in range(10):
            state = exchange(server, peer, [hover, hover + 60, hover, hover] + [1000] * 12)
        roll, pitch, _ = state["attitude"]
        assert roll > 0.01 and pitch < -0.01
        for _ in range(25):
            state = exchange(server, peer, [hover - 40, hover - 40, hover + 40, hover + 40] + [1000] * 12)
        assert state["imu"]["gyro"][2] < -0.05
    finally:
        server.close()
        peer.sock.close()
    wrong = {**ROTOR_IN_THE_AIR, "vehicle": {**ROTOR_IN_THE_AIR["vehicle"], "rotor": {"layout": "x"}}}
    with pytest.raises(ValueError, match=r"rotor.spin=\[1.0, -1.0, 1.0, -1.0\]: the firmwares' 'x' frame"):
        ArduPilotJson(Simulator.from_scenario("keep_spot", wrong), base_port=0)


def test_repeated_frames_and_bad_packets_are_answered_or_counted_not_stepped(link) -> None:
    server, peer, sim = link
    first = exchange(server, peer, [1500] * 16)
    again = exchange(server, peer, [1500] * 16, frame=peer.frame)  # a resend: same answer, no step
    assert again == first and server.counters[0]["repeated"] == 1 and server.counters[0]["steps"] == 1
    peer.sock.sendto(b"\x00\x01garbage", ("127.0.0.1", peer.port))
    peer.sock.sendto(servo_packet(50, 99, [1500] * 16)[:-2], ("127.0.0.1", peer.port))
    assert not server.serve_once(0.5)
    assert server.counters[0]["bad"] == 2 and sim.tick == 1
    with pytest.raises(ServoPacketError, match="magic 1"):
        parse_servo_packet(b"\x01\x00" + bytes(38))
    packet = parse_servo_packet(servo_packet(400, 7, list(range(32))))
    assert (packet.frame_rate_hz, packet.frame_count, packet.pwm_us[31]) == (400, 7, 31)


def test_a_scenario_the_firmware_cannot_fly_is_refused_with_one_line() -> None:
    with pytest.raises(ValueError, match="one tick per task step"):
        ArduPilotJson(Simulator.from_scenario("search_rescue_2a"))
    with pytest.raises(ValueError, match=r"vehicle\.airframe: rotor and vehicle\.control: motors"):
        ArduPilotJson(Simulator.from_scenario("keep_spot"))


def two_rotors_in_the_air_served(server: Callable[[Simulator, int], T]) -> tuple[T, Simulator]:
    """Two rotor vehicles hovering at 10 m and 12 m, 5 m apart, and ``server(sim, port)`` on a free port."""
    starts = [[0.0, 0.0, -10.0, 0.0, 0.0, 0.0], [5.0, 0.0, -12.0, 0.0, 0.0, 0.0]]
    two = {**ROTOR_IN_THE_AIR, "num_vehicles": 2,
           "vehicle": {**ROTOR_IN_THE_AIR["vehicle"], "initial_states": starts}}
    sim = Simulator.from_scenario("keep_spot", two)
    return on_free_port(lambda port: server(sim, port)), sim


def test_two_firmwares_step_one_shared_physics_in_lockstep() -> None:
    """Vehicle i on UDP base + 10 i, each its own firmware: the physics steps once both have sent a new
    frame (the first alone waits), and both are answered with the same time and their own states."""
    server, sim = two_rotors_in_the_air_served(lambda sim, port: ArduPilotJson(sim, base_port=port))
    peers = [Peer(s.getsockname()[1]) for s in server.socks]
    try:
        assert [p.port - peers[0].port for p in peers] == [0, 10]
        hover = [1708] * 4 + [1000] * 12
        for p in peers:  # both speak (loopback datagrams are queued when sendto returns)
            p.send(hover)
        assert server.serve_once(2.0)
        states = [p.state() for p in peers]
        for _ in range(3):
            peers[0].send(hover)
            assert not server.serve_once(0.2)  # vehicle 1 has not sent its frame yet
            peers[1].send(hover)
            assert server.serve_once(2.0)
            before = states[0]["timestamp"]
            states = [p.state() for p in peers]
            assert states[0]["timestamp"] == states[1]["timestamp"] == pytest.approx(before + 0.02)
        assert [s["position"][2] for s in states] == pytest.approx(sim.true_state()[:, 2].tolist())
        assert all(c["steps"] == server.counters[0]["steps"] for c in server.counters)
    finally:
        server.close()
        for p in peers:
            p.sock.close()
