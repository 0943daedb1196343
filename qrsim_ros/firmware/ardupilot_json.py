"""ArduPilot's JSON SITL interface: a user's own ArduPilot build flies qrsim_ros physics and sensors
(``sim_vehicle.py --model JSON``; docs/FIRMWARE.md).

The protocol, as ArduPilot's SITL JSON backend (libraries/SITL/SIM_JSON) publishes it: the firmware sends
a binary servo packet by UDP to the physics at port 9002 (+10 per instance) -- little-endian ``uint16
magic`` (18458 with 16 PWM channels, 29569 with 32), ``uint16 frame_rate`` [Hz], ``uint32 frame_count``,
``uint16 pwm[16|32]`` [us] -- and the physics answers each to the sender's address with one JSON object
between newlines: ``timestamp`` [s of physics time], ``imu.gyro`` [rad/s] and ``imu.accel_body``
[m/s^2, specific force] in the FRD body, ``position`` and ``velocity`` in NED [m, m/s], ``attitude``
(roll, pitch, yaw) [rad], and optionally ``battery`` (voltage [V], current [A]). Lockstep: every new
``frame_count`` is one physics step; a repeated one is answered again without stepping.

Here one physics step is one 20 ms tick of the in-process ``Simulator`` (set ArduPilot's
``SCHED_LOOP_RATE`` to 50 so that its loop and the physics keep one rate). The vehicle is the rotor
airframe flown in the ``motors`` control mode: PWM ``pwm_min_us``..``pwm_max_us`` maps linearly to the
normalised motor commands 0..1 through ArduPilot's motor order for the airframe's layout
(``firmware.motors``: ``+`` is FRAME_CLASS 1 / FRAME_TYPE 0, whose spin directions are the pelican rotor
set's; ``x`` is FRAME_TYPE 1). The IMU is the simulated one (QRSim's accelerometer and gyroscope, their
noise and faults); position, velocity and attitude are the ground truth, from which ArduPilot makes its
own GPS, barometer and compass.
"""

from __future__ import annotations

import json
import socket
import struct
from collections import Counter
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.pelican import (
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_VELOCITY_FRD,
)
from qrsim_ros.firmware.endpoints import bound_sockets
from qrsim_ros.firmware.motors import flown_motor_order, motor_commands

Array = NDArray[np.float64]

SERVO_MAGIC_16 = 18458
SERVO_MAGIC_32 = 29569
_HEADER = struct.Struct("<HHI")
#: The physics' UDP port of ArduPilot SITL instance i: 9002 + 10 i.
BASE_PORT = 9002
PORT_STRIDE = 10
PWM_MIN_US, PWM_MAX_US = 1000, 2000


class ServoPacketError(ValueError):
    """A datagram that is not a servo packet (its size or magic)."""


@dataclass(frozen=True)
class ServoPacket:
    """What the firmware sends each loop: its loop rate [Hz], frame counter and PWM outputs [us]."""

    frame_rate_hz: int
    frame_count: int
    pwm_us: tuple[int, ...]


def parse_servo_packet(data: bytes) -> ServoPacket:
    """The servo packet in ``data``, else ServoPacketError naming what is wrong."""
    if len(data) < _HEADER.size:
        raise ServoPacketError(f"{len(data)} bytes: shorter than a servo packet's header")
    magic, rate, count = _HEADER.unpack_from(data)
    channels = {SERVO_MAGIC_16: 16, SERVO_MAGIC_32: 32}.get(magic)
    if channels is None:
        raise ServoPacketError(f"magic {magic}: neither {SERVO_MAGIC_16} (16 channels) nor "
                               f"{SERVO_MAGIC_32} (32)")
    size = _HEADER.size + 2 * channels
    if len(data) != size:
        raise ServoPacketError(f"{len(data)} bytes: a {channels}-channel servo packet has {size}")
    pwm = struct.unpack_from(f"<{channels}H", data, _HEADER.size)
    return ServoPacket(rate, count, pwm)


def servo_packet(frame_rate_hz: int, frame_count: int, pwm_us: list[int] | tuple[int, ...]) -> bytes:
    """A 16- or 32-channel servo packet (what the firmware sends; for peers and tests)."""
    magic = SERVO_MAGIC_16 if len(pwm_us) == 16 else SERVO_MAGIC_32
    if len(pwm_us) not in (16, 32):
        raise ValueError(f"a servo packet has 16 or 32 channels, not {len(pwm_us)}")
    return _HEADER.pack(magic, frame_rate_hz, frame_count) + struct.pack(f"<{len(pwm_us)}H", *pwm_us)


def state_message(timestamp_s: float, gyro_frd: Array, accel_frd: Array, position_ned: Array,
                  velocity_ned: Array, attitude_rpy: Array,
                  battery: tuple[float, float] | None = None) -> bytes:
    """One JSON state answer, between newlines (as the firmware reads them)."""
    state: dict[str, object] = {
        "timestamp": float(timestamp_s),
        "imu": {"gyro": [float(v) for v in gyro_frd], "accel_body": [float(v) for v in accel_frd]},
        "position": [float(v) for v in position_ned],
        "velocity": [float(v) for v in velocity_ned],
        "attitude": [float(v) for v in attitude_rpy],
    }
    if battery is not None and np.isfinite(battery).all():
        state["battery"] = {"voltage": float(battery[0]), "current": float(battery[1])}
    return b"\n" + json.dumps(state, separators=(",", ":")).encode() + b"\n"


class ArduPilotJson:
    """The physics end of ArduPilot's JSON interface for ``sim``'s vehicles (module docstring): vehicle i
    on UDP ``host``:``base_port`` + 10 i. ``sim`` flies the rotor airframe in the ``motors`` mode with one
    tick per task step.

    ``serve_once(timeout_s)`` handles what arrived: once every vehicle that has spoken has sent a new frame,
    the simulator steps one tick and each is answered with its state."""

    def __init__(self, sim: Simulator, base_port: int = BASE_PORT, host: str = "127.0.0.1") -> None:
        self.sim = sim
        self.channels = flown_motor_order(sim)
        n = sim.num_vehicles
        self.socks = bound_sockets(socket.SOCK_DGRAM, [(host, base_port + PORT_STRIDE * i) for i in range(n)],
                                   "ArduPilot JSON (UDP)")
        #: per vehicle: "packets", "steps" (physics steps), "repeated" (resent frames answered again),
        #: "restarted" (the frame count went back), "bad" and "bad: <reason>" (dropped datagrams)
        self.counters: list[Counter[str]] = [Counter() for _ in range(n)]
        self._peer: list[tuple[str, int] | None] = [None] * n
        self._frame = np.full(n, -1, np.int64)  # the last frame stepped for, per vehicle
        self._pending: list[ServoPacket | None] = [None] * n  # a new frame waiting for the others
        self._motors = np.full((n, 4), np.nan)  # no command yet: the vehicle holds its hover speed

    def close(self) -> None:
        for s in self.socks:
            s.close()

    def serve_once(self, timeout_s: float = 0.0) -> bool:
        """Read what arrived (waiting up to ``timeout_s`` [s] for the first datagram); step one tick and
        answer if every vehicle that has spoken sent a new frame. Returns whether it stepped."""
        import select

        ready, _, _ = select.select(self.socks, [], [], timeout_s)
        for i, s in enumerate(self.socks):
            if s in ready:
                self._read(i, s)
        speaking = [i for i in range(len(self.socks)) if self._peer[i] is not None]
        if not speaking or any(self._pending[i] is None for i in speaking):
            return False
        for i in speaking:
            packet = self._pending[i]
            assert packet is not None
            self._motors[i] = motor_commands(packet.pwm_us, self.channels, PWM_MIN_US, PWM_MAX_US)
            self._frame[i] = packet.frame_count
            self._pending[i] = None
            self.counters[i]["steps"] += 1
        self.sim.step(self._motors)
        self._answer(speaking)
        return True

    def _read(self, i: int, s: socket.socket) -> None:
        c = self.counters[i]
        while True:
            try:
                data, addr = s.recvfrom(512)
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionRefusedError:
                continue
            try:
                packet = parse_servo_packet(data)
            except ServoPacketError as exc:
                c["bad"] += 1
                c[f"bad: {str(exc).split(':')[0]}"] += 1
                continue
            c["packets"] += 1
            self._peer[i] = addr
            if packet.frame_count == self._frame[i]:  # a resend: the same answer, no step
                c["repeated"] += 1
                self._answer([i])
                continue
            if packet.frame_count < self._frame[i]:  # the firmware restarted: its frames count again
                c["restarted"] += 1
            self._pending[i] = packet

    def _answer(self, vehicles: list[int]) -> None:
        """The JSON state of this tick to each of ``vehicles`` that has a peer (the fleet's rows read
        and converted together)."""
        vehicles = [i for i in vehicles if self._peer[i] is not None]
        if not vehicles:
            return
        sim = self.sim
        rows = np.asarray(vehicles)
        x = sim.true_state()[rows]
        _euler, gyro, accel, _h, _vs = sim.ahars.outputs_view()
        v_ned = body_to_ned(dcm_from_state(x), x[:, STATE_VELOCITY_FRD])
        for j, i in enumerate(vehicles):
            battery = (float(sim.battery.voltage_v[i]), float(sim.battery.current_a[i]))
            msg = state_message(sim.time, gyro[i], accel[i], x[j, STATE_POSITION_NED], v_ned[j],
                                x[j, STATE_EULER], battery)
            try:
                self.socks[i].sendto(msg, self._peer[i])
            except OSError:  # the firmware went away; it will send again
                self.counters[i]["send failed"] += 1
