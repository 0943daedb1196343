"""The graph's MAVLink face: ``qrsim launch px4_sitl --mavlink`` runs the ``mavlink_bridge`` node (the flight
controller with every agent vehicle's onboard autopilot and its MAVLink links) in place of the flight
controller, and MAVSDK (its C++ core, from the package index) flies three vehicles of the launched graph
from the ground and back exactly as it flies the in-process Simulator's (``mavsdk_flight``): each by its
own port and system id, through takeoff, Offboard, a mission with RTL, landing and disarming. The ground
truth comes from the graph's /sim/vehicle_status, read by an rclpy node in this process.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mavsdk_flight import FLIGHT_PARAMETERS, NUM_VEHICLES, Client, fly_three_from_the_ground_and_back
from rosenv import TestProcess, qrsim_launch, require_ros, scenario_file, wait_until

from qrsim_ros.core.vehicles.airframes import ON_GROUND_TOLERANCE_M, rest_z_ned_m
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.mavlink.vehicles import MavlinkPorts

pytestmark = [pytest.mark.graph, pytest.mark.timeout(420)]
REAL_TIME_FACTOR = 3.0
#: wall seconds allowed per simulated second of a wait (a loaded machine paces slower than real time)
WALL_CAP = 10.0
#: the graph's start-up, to its first tick [s, wall]
START_BUDGET_S = 180.0


def free_instance_offset(num_vehicles: int) -> int:
    """A ``mavlink_instance_offset`` k whose ports (API 14580+k+i -> 14540+k+i, ground station 18570+k+i)
    are free on loopback for every vehicle i, so that a test never meets a real PX4 SITL or another run."""
    d = MavlinkPorts()
    rng = np.random.default_rng()
    for _ in range(50):
        k = int(rng.integers(100, 1000))
        socks = []
        try:
            for i in range(num_vehicles):
                for base in (d.api_local, d.api_remote, d.gcs_local):
                    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    socks.append(s)
                    s.bind(("127.0.0.1", base + k + i))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return k
    raise RuntimeError("no free MAVLink port range on loopback")


class GraphRig:
    """``qrsim launch px4_sitl --mavlink`` with three vehicles, in lockstep (the bridge's attitude commands
    of every tick are awaited), paced at three times real time; the ground truth from
    /sim/vehicle_status."""

    def __init__(self, tmp_path: Path, context: Any) -> None:
        import rclpy
        from qrsim_ros.msg import VehicleStatus
        from rclpy.executors import SingleThreadedExecutor

        from qrsim_ros.core.config.scenario import load_scenario
        from qrsim_ros.ros.from_messages import fleet_arrays
        from qrsim_ros.ros.qos import QOS_LATEST

        def flight_parameters(data: dict[str, Any]) -> None:
            data["mavlink"]["parameters"] = {**data["mavlink"].get("parameters", {}), **FLIGHT_PARAMETERS}

        scenario = scenario_file(tmp_path, "px4_sitl", "px4_sitl_flight", flight_parameters)
        self.origin = load_scenario(str(scenario)).origin
        self.rest_z_m = rest_z_ned_m(load_scenario(str(scenario)).ground_z_ned_m)
        self.offset = free_instance_offset(NUM_VEHICLES)
        self.api_ports = [MavlinkPorts().api_remote + self.offset + i for i in range(NUM_VEHICLES)]
        self._lock = threading.Lock()
        self._time_s = -1.0
        self._state = np.full((NUM_VEHICLES, 13), np.nan)
        self._valid = np.zeros(NUM_VEHICLES, bool)
        self._battery_v = np.full(NUM_VEHICLES, np.nan)

        def on_status(msg: Any) -> None:
            arrays = fleet_arrays(msg, NUM_VEHICLES)
            if isinstance(arrays, str):
                return
            with self._lock:
                self._time_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
                self._state = arrays[0]
                self._valid = np.array(msg.valid, bool)
                if len(msg.battery_voltage_v) == NUM_VEHICLES:
                    self._battery_v = np.array(msg.battery_voltage_v, float)

        self.node = rclpy.create_node("mavlink_graph_test", context=context, start_parameter_services=False)
        # the latest tick only: a queue would hand a test process that falls behind old states
        self.node.create_subscription(VehicleStatus, "/sim/vehicle_status", on_status, QOS_LATEST)
        self._executor = SingleThreadedExecutor(context=context)
        self._executor.add_node(self.node)
        self._spin = threading.Thread(target=self._executor.spin, name="truth", daemon=True)
        self._spin.start()
        self.launch: TestProcess = qrsim_launch(
            tmp_path, [str(scenario), "--mavlink", "--num-vehicles", str(NUM_VEHICLES), "--seed", "11",
                       "--lockstep", "--real-time-factor", f"{REAL_TIME_FACTOR:g}",
                       "--param", f"mavlink_bridge:mavlink_instance_offset={self.offset}"],
            domain_id=context.get_domain_id())
        self.launch.wait_for_line(r"started: tick 0 published", START_BUDGET_S)
        wait_until(lambda: self.time() >= 0.0, 60, "the ground truth on /sim/vehicle_status")

    def time(self) -> float:
        with self._lock:
            return self._time_s

    def wait(self, condition: Callable[[], bool], sim_seconds: float, what: str) -> None:
        """As the in-process rig's: at most ``sim_seconds`` of the graph's simulated time."""
        deadline = self.time() + sim_seconds
        wait_until(lambda: condition() or self.time() > deadline or self.launch.proc.poll() is not None,
                   WALL_CAP * sim_seconds, what, poll_s=0.05, detail=self.launch.tail)
        assert self.launch.proc.poll() is None, self.launch.tail()
        with self._lock:
            invalid = [i for i in range(NUM_VEHICLES) if not self._valid[i]]
            where = np.round(self._state[:, STATE_POSITION_NED], 2).tolist()
        assert condition(), (f"not within {sim_seconds:g} s of simulated time: {what} (invalid: {invalid}; "
                             f"true positions NED {where} at {self.time():.2f} s)\n{self.launch.tail(3000)}")

    def truth(self, i: int) -> np.ndarray:
        with self._lock:
            return self._state[i, STATE_POSITION_NED].copy()

    def estimate(self, i: int) -> None:
        return None  # inside the bridge's process; MAVSDK's reports are checked against the truth

    def battery_v(self, i: int) -> float:
        with self._lock:
            return float(self._battery_v[i])

    def landed_and_valid(self, i: int) -> bool:
        with self._lock:
            z, valid = float(self._state[i, 2]), bool(self._valid[i])
        return valid and abs(z - self.rest_z_m) <= ON_GROUND_TOLERANCE_M

    def close(self) -> str:
        self.launch.close()
        self._executor.shutdown()
        self.node.destroy_node()
        return self.launch.output


@pytest.fixture
def rig(tmp_path: Path, rclpy_context: Any) -> Iterator[GraphRig]:
    require_ros()
    r = GraphRig(tmp_path, rclpy_context)
    try:
        yield r
    finally:
        output = r.close()
    assert "Traceback" not in output, output[-6000:]


def test_mavsdk_flies_three_vehicles_of_the_graph_from_the_ground_and_back(rig: GraphRig) -> None:
    out = rig.launch.output
    assert "started mavlink_bridge" in out and "started flight_controller" not in out, out[-6000:]
    assert "started example_autopilot" not in out  # MAVLink clients fly the vehicles
    clients = [Client(port, i) for i, port in enumerate(rig.api_ports)]
    fly_three_from_the_ground_and_back(rig, clients)
