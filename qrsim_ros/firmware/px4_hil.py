"""PX4's simulator MAVLink interface: a user's own PX4 SITL build flies qrsim_ros physics and sensors
(``make px4_sitl none_iris`` with a ``+`` quadrotor airframe; docs/FIRMWARE.md).

The protocol, as PX4's simulator_mavlink module publishes it: PX4 SITL instance i connects by TCP to the
simulator at port 4560 + i; the simulator sends HIL_SENSOR (IMU, magnetometer, barometer), HIL_GPS and
HIL_STATE_QUATERNION (the ground truth), PX4 answers each sensor frame with HIL_ACTUATOR_CONTROLS, and
the simulator steps once per answer (lockstep: PX4's clock is the sensors' time_usec).

Here one step is one 20 ms tick of the in-process ``Simulator`` flying the rotor airframe in the
``motors`` mode: actuator controls 0..1 (PX4's normalised motor outputs; anything outside is clipped) map
through PX4's motor order of the airframe's layout (``firmware.motors``) to the motor commands. The
sensors: the simulated IMU (QRSim's accelerometer and gyroscope with their noise and faults) and GPS
receiver (QRSim's correlated GPS error; HIL_GPS at each new fix, no fix during an outage); the
magnetometer is the World Magnetic Model's field at the scenario's origin (``pygeomag``) in the body
axes of the true attitude, the barometer the ICAO standard atmosphere's pressure and temperature
(``ambiance``) at the true altitude, both without noise (they have no models of their own here).
"""

from __future__ import annotations

import select
import socket
from collections import Counter
from datetime import date
from typing import Any

import numpy as np
from ambiance import Atmosphere
from numpy.typing import NDArray
from pygeomag import GeoMag
from pymavlink.dialects.v20 import common as mavlink

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state, euler_to_quaternion, ned_to_body
from qrsim_ros.core.common.geodesy import GeodeticOrigin, ned_to_lla
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.pelican import (
    STATE_EULER,
    STATE_POSITION_NED,
    STATE_RATES_FRD,
    STATE_VELOCITY_FRD,
)
from qrsim_ros.firmware.endpoints import bound_sockets
from qrsim_ros.firmware.motors import flown_motor_order, motor_commands

Array = NDArray[np.float64]

#: The simulator's TCP port of PX4 SITL instance i: 4560 + i.
BASE_PORT = 4560
#: HIL_SENSOR fields_updated: accelerometer, gyroscope, magnetometer (bits 0-8), absolute pressure,
#: pressure altitude and temperature (9, 11, 12).
FIELDS_UPDATED = 0x1FF | (1 << 9) | (1 << 11) | (1 << 12)
_NT_PER_GAUSS = 1e5


def earth_field_ned_gauss(origin: GeodeticOrigin, on: date | None = None) -> Array:
    """The World Magnetic Model's field at ``origin`` on ``on`` (default today), NED [gauss]."""
    day = on or date.today()
    year = day.year + (day.timetuple().tm_yday - 1) / 365.25
    r = GeoMag().calculate(glat=origin.lat_deg, glon=origin.lon_deg, alt=origin.alt_m / 1000.0, time=year)
    return np.array([r.x, r.y, r.z]) / _NT_PER_GAUSS


class Px4Hil:
    """The simulator end of PX4's simulator MAVLink interface for ``sim``'s vehicles (module docstring):
    vehicle i on TCP ``host``:``base_port`` + i. ``serve_once(timeout_s)`` accepts PX4, reads its actuator
    controls and, once every connected vehicle answered its last sensor frame, steps one tick and sends the
    next."""

    def __init__(self, sim: Simulator, base_port: int = BASE_PORT, host: str = "127.0.0.1") -> None:
        self.sim = sim
        self.outputs = flown_motor_order(sim)
        self.field_ned_gauss = earth_field_ned_gauss(sim.scenario.origin)
        n = sim.num_vehicles
        self.listeners = bound_sockets(socket.SOCK_STREAM, [(host, base_port + i) for i in range(n)],
                                       "PX4 HIL (TCP)")
        self.conns: list[socket.socket | None] = [None] * n
        self._mav = [mavlink.MAVLink(None, srcSystem=1, srcComponent=mavlink.MAV_COMP_ID_AUTOPILOT1)
                     for _ in range(n)]
        for m in self._mav:
            m.robust_parsing = True
        self._answered = np.zeros(n, bool)  # answered the last sensor frame with actuator controls
        self._motors = np.full((n, 4), np.nan)
        self._gps_fix_seen = -1  # the tick whose GPS sample was sent last
        #: per vehicle: "steps", "actuator_controls", "bad", "ignored" (other messages), "disconnects"
        self.counters: list[Counter[str]] = [Counter() for _ in range(n)]

    def close(self) -> None:
        for s in [*self.listeners, *(c for c in self.conns if c is not None)]:
            s.close()

    def serve_once(self, timeout_s: float = 0.0) -> bool:
        """Accept and read what arrived (waiting up to ``timeout_s`` [s]); step once every connected
        vehicle answered its sensors. Returns whether it stepped."""
        waiting = [*self.listeners, *(c for c in self.conns if c is not None)]
        ready, _, _ = select.select(waiting, [], [], timeout_s)
        for i, s in enumerate(self.listeners):
            if s in ready:
                self._accept(i, s)
        for i, c in enumerate(self.conns):
            if c is not None and c in ready:
                self._read(i, c)
        connected = [i for i, c in enumerate(self.conns) if c is not None]
        if not connected or not self._answered[connected].all():
            return False
        self.sim.step(self._motors)
        for i in connected:
            self.counters[i]["steps"] += 1
            self._answered[i] = False
        self._send_sensors(connected)
        return True

    def _accept(self, i: int, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return
        if self.conns[i] is not None:  # one PX4 per vehicle: a second is refused
            conn.close()
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setblocking(False)
        self.conns[i] = conn
        self._answered[i] = False
        self._send_sensors([i])  # PX4 starts its clock at the first sensor frame

    def _read(self, i: int, conn: socket.socket) -> None:
        c = self.counters[i]
        try:
            data = conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # PX4 went away: the vehicle waits for the next connection
            conn.close()
            self.conns[i] = None
            self._answered[i] = False
            c["disconnects"] += 1
            return
        for msg in self._mav[i].parse_buffer(data) or []:
            name = msg.get_type()
            if name == "BAD_DATA":
                c["bad"] += 1
            elif name == "HIL_ACTUATOR_CONTROLS":
                c["actuator_controls"] += 1
                self._motors[i] = motor_commands(list(msg.controls), self.outputs, 0.0, 1.0)
                self._answered[i] = True
            else:
                c["ignored"] += 1

    def _send(self, i: int, msg: Any) -> None:
        conn = self.conns[i]
        if conn is None:
            return
        try:
            conn.sendall(msg.pack(self._mav[i]))
        except OSError:
            self.counters[i]["send failed"] += 1

    def _send_sensors(self, vehicles: list[int]) -> None:
        """HIL_SENSOR (and HIL_GPS on a new GPS sample) and HIL_STATE_QUATERNION of this tick to each
        of ``vehicles``: the fleet's rows converted together (one geodetic projection, one atmosphere)."""
        if not vehicles:
            return
        sim = self.sim
        rows = np.asarray(vehicles)
        t_us = round(sim.time * 1e6)
        x = sim.true_state()[rows]
        _euler, gyro, accel, _h, _vs = sim.ahars.outputs_view()
        dcm = dcm_from_state(x)
        mag = ned_to_body(dcm, np.broadcast_to(self.field_ned_gauss, (len(rows), 3)))
        lat, lon, amsl = ned_to_lla(x[:, STATE_POSITION_NED], sim.scenario.origin).T
        air = Atmosphere(np.clip(amsl, -5000.0, 80000.0))
        pressure_hpa, temperature_c = air.pressure / 100.0, air.temperature_in_celsius
        v_ned = body_to_ned(dcm, x[:, STATE_VELOCITY_FRD])
        quat = euler_to_quaternion(*x[:, STATE_EULER].T)
        gps_sample = sim.tick % sim.gps.ticks == 0
        for j, i in enumerate(vehicles):
            a, g = accel[i], gyro[i]
            self._send(i, mavlink.MAVLink_hil_sensor_message(
                t_us, *(float(v) for v in a), *(float(v) for v in g), *(float(v) for v in mag[j]),
                float(pressure_hpa[j]), 0.0, float(amsl[j]), float(temperature_c[j]), FIELDS_UPDATED, 0))
            if gps_sample:
                self._send(i, self._hil_gps(i, t_us))
            qx, qy, qz, qw = (float(v) for v in quat[j])
            p, q, r = (float(v) for v in x[j, STATE_RATES_FRD])
            self._send(i, mavlink.MAVLink_hil_state_quaternion_message(
                t_us, [qw, qx, qy, qz], p, q, r, round(float(lat[j]) * 1e7), round(float(lon[j]) * 1e7),
                round(float(amsl[j]) * 1e3), *(round(float(v) * 100) for v in v_ned[j]), 0, 0,
                *(round(float(v) * 1000 / 9.81) for v in a)))

    def _hil_gps(self, i: int, t_us: int) -> Any:
        gps = self.sim.gps
        if not gps.has_fix[i]:
            return mavlink.MAVLink_hil_gps_message(t_us, 1, 0, 0, 0, 65535, 65535, 65535, 0, 0, 0, 65535, 0)
        lat, lon, alt = gps.lla[i]
        vn, ve, vd = gps.velocity_ned[i]
        speed = float(np.hypot(vn, ve))
        cog = round(float(np.degrees(np.arctan2(ve, vn)) % 360.0) * 100) % 36000 if speed > 0 else 65535
        return mavlink.MAVLink_hil_gps_message(
            t_us, 3, round(lat * 1e7), round(lon * 1e7), round(alt * 1e3), 100, 150, round(speed * 100),
            round(vn * 100), round(ve * 100), round(vd * 100), cog, 10)
