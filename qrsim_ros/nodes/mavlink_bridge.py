"""mavlink_bridge: every agent vehicle of the graph as a PX4 vehicle on MAVLink (scenario ``mavlink.on``;
docs/MAVLINK.md).

The flight controller of a MAVLink run: the ``flight_controller`` node's intake (the sensor topics
assembled into the estimated state eX, /sim/vehicle_status, lockstep by tick) and controllers, with the
vehicles' onboard autopilots (``core.onboard.OnboardAutopilot``) in front of them, stepped in the same
place of the tick as the in-process Simulator steps them (``core.onboard.flight``), and their MAVLink
face (``mavlink.vehicles.MavlinkVehicles``: vehicle i is PX4 SITL instance i, system i+1, API link UDP
14580+i -> 14540+i, ground-station link 18570+i -> 14550). One process holds the autopilots and their
links, as a PX4 holds its commander and its mavlink module.

Per computed tick k (the flight controller's, at t_k): what arrived on the links becomes autopilot calls;
the autopilots step on eX; their velocity set points and headings replace the agent vehicles' set points
(issued at t_k); after the controllers, offboard attitude set points replace the attitude commands and
disarmed vehicles' motors stop (throttle 0); then the telemetry that is due goes out, reporting eX (never
the ground truth). What a vehicle says beyond eX: the battery (its pack's voltage and charge, the values
``uavN/battery`` carries, read from /sim/vehicle_status: one message for the fleet), the GPS fix status
(``/sim/fleet/gps``, as ``uavN/gps/fix``'s status), and, for arming, the vehicle's validity and invalid
reason from /sim/vehicle_status.

Parameters: the flight controller's, and ``mavlink_instance_offset`` (vehicle i is PX4 instance offset + i:
its ports), ``mavlink_network`` (bind every interface instead of loopback; the scenario's
``mavlink.network`` too).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.onboard.autopilot import OnboardAutopilot, Setpoints
from qrsim_ros.core.onboard.flight import onboard_controls, onboard_targets
from qrsim_ros.core.vehicles.airframes import placed_on_ground, rest_z_ned_m
from qrsim_ros.mavlink.vehicles import MavlinkPorts, MavlinkVehicles, Telemetry
from qrsim_ros.msg import VehicleStatus
from qrsim_ros.nodes.flight_controller import PARAMETERS as FLIGHT_CONTROLLER_PARAMETERS
from qrsim_ros.nodes.flight_controller import FlightControllerNode
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.parameters import Param, ParamTable

#: GPS satellites reported with a fix (the receiver model tracks no count).
SATELLITES_WITH_FIX = 10

PARAMETERS = ParamTable(
    "mavlink_bridge", *FLIGHT_CONTROLLER_PARAMETERS,
    Param("mavlink_instance_offset", 0, "vehicle i is PX4 SITL instance offset + i (its UDP ports)",
          lo=0, hi=1000),
    Param("mavlink_network", False,
          "bind the MAVLink links on every interface (default: loopback only; or the scenario's "
          "mavlink.network)"),
)


class MavlinkBridgeNode(FlightControllerNode):
    """The flight controller with the agent vehicles' onboard autopilots and their MAVLink links (module
    docstring)."""

    def __init__(self) -> None:
        super().__init__("mavlink_bridge", PARAMETERS)
        sc = self.scenario
        if not sc.mavlink.on:
            raise ConfigError(f"mavlink_bridge: scenario {sc.name!r} has no onboard autopilots: set "
                              "mavlink.on: true")
        modes = self.modes
        self.onboard_rows = np.array([i for i in self.controlled if i != self.mouse
                                      and modes[i] == "velocity"], int)
        m = len(self.onboard_rows)
        self.onboard = OnboardAutopilot(m, BASE_DT_S, sc.mavlink.parameter_table(m))
        offset = self.params.mavlink_instance_offset
        defaults = MavlinkPorts()
        host = "0.0.0.0" if (self.params.mavlink_network or sc.mavlink.network) else defaults.bind_host
        ports = MavlinkPorts(defaults.api_local + offset, defaults.api_remote + offset,
                             defaults.gcs_local + offset, defaults.gcs_remote, defaults.host, host)
        self.mavlink = MavlinkVehicles(self.onboard, sc.origin, BASE_DT_S, ports, preflight=self._preflight)
        self._rest_z_m = rest_z_ned_m(sc.ground_z_ned_m)
        self._battery_v = np.full(m, np.nan)
        self._battery_fraction = np.full(m, np.nan)
        self._invalid_reason = [""] * m
        self._battery_empty = np.zeros(m, bool)
        self._setpoints: Setpoints | None = None
        self._reset_onboard()
        self.get_logger().info(f"MAVLink: {m} vehicle(s), API links from UDP {ports.api_local}.. to "
                               f"{ports.host}:{ports.api_remote}.., ground station {ports.host}:"
                               f"{ports.gcs_remote}; bound on {host}")

    # --- episodes ---------------------------------------------------------------------------------------
    def _draw_placement(self) -> None:
        super()._draw_placement()
        if hasattr(self, "onboard"):  # (the flight controller draws the launch's placement first)
            self._reset_onboard()

    def _reset_onboard(self) -> None:
        """A new episode: the autopilots restart (a vehicle placed in the air armed in Hold, as in the
        Simulator), their parameters and missions kept."""
        in_air = ~placed_on_ground(np.asarray(self._initial_states, float), self._rest_z_m)[self.onboard_rows]
        self.onboard.reset(in_air=in_air)

    # --- the tick ---------------------------------------------------------------------------------------
    def controls(self, ex: np.ndarray, now_s: float | None = None) -> np.ndarray:
        t = 0.0 if now_s is None else now_s
        rows = self.onboard_rows
        sp = onboard_targets(self.onboard, self.mavlink, rows, t, ex, self._valid, self._velocity_sp,
                             self._headings)
        self._sp_stamp_s[rows] = t  # issued now, as the Simulator's autopilot rows
        u = super().controls(ex, now_s)
        onboard_controls(sp, rows, u)
        ex_rows = ex[rows]
        self.mavlink.remember(ex_rows)
        gps_updated = np.full(len(rows), round(t / BASE_DT_S) % self._sensors.gps_ticks == 0)
        self.mavlink.send(t, ex_rows, self._telemetry(), gps_updated)
        return u

    # --- what the vehicle knows besides eX ----------------------------------------------------------
    def _status_accepted(self, msg: VehicleStatus) -> None:
        # the flight controller's own subscription (run and fleet checked): the invalid reasons for arming
        if len(msg.invalid_reason) != self.num_vehicles:
            return
        rows = self.onboard_rows
        self._invalid_reason = [msg.invalid_reason[i] for i in rows.tolist()]
        # the packs (empty with the battery off): one fleet message, no subscription per vehicle
        if len(msg.battery_fraction) == self.num_vehicles == len(msg.battery_voltage_v):
            self._battery_fraction = np.asarray(msg.battery_fraction, float)[rows]
            self._battery_v = np.asarray(msg.battery_voltage_v, float)[rows]
            self._battery_empty = self._battery_fraction <= 0.0

    def _telemetry(self) -> Telemetry:
        from pymavlink.dialects.v20 import common as mavlink

        fix = self.assembler.gps_fix[self.onboard_rows]  # as the fleet GPS message said
        return Telemetry(battery_v=self._battery_v.copy(), battery_fraction=self._battery_fraction.copy(),
                         gps_fix=fix.copy(), satellites=np.where(fix, SATELLITES_WITH_FIX, 0),
                         unhealthy_bits=np.where(fix, 0, mavlink.MAV_SYS_STATUS_SENSOR_GPS))

    def _preflight(self, j: int) -> list[str]:
        failed = []
        if not self.assembler.gps_fix[self.onboard_rows[j]]:
            failed.append("GPS: no fix")
        if self._invalid_reason[j]:
            failed.append(f"vehicle: {self._invalid_reason[j]}")
        if self._battery_empty[j]:
            failed.append("battery empty")
        return failed

    def destroy_node(self) -> Any:
        self.mavlink.close()
        return super().destroy_node()


def main(argv: list[str] | None = None) -> int:
    return run_node(MavlinkBridgeNode, argv)


if __name__ == "__main__":
    sys.exit(main())
