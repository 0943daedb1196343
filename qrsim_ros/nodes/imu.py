"""The ``imu`` node: accelerometer, gyroscope and orientation estimator of every vehicle (spec 3.1).

Subscribes ``uavN/ground_truth/odom``, ``uavN/ground_truth/accel`` and ``/sim/vehicle_status``
(the tick's episode; ``ros.ground_truth.GroundTruthSync``); on every update tick of the
AHARS (50 Hz with the QRSim configs) publishes ``uavN/imu/data`` (sensor_msgs/Imu, frame
``uavN/base_link``, REP-145) stamped t_k:

- orientation: FLU body in ENU from the orientation estimator's ZYX Euler angles;
- angular_velocity: the gyroscope, FLU [rad/s];
- linear_acceleration: the accelerometer's specific force, FLU [m/s^2] (+9.81 on z at rest);
- covariances: diagonal, from the sensors' error variances (all zero for noiseless sensors);

built only for vehicles whose topic has a reader, and the same values of every vehicle on
``/sim/fleet/imu`` (qrsim_ros/FleetSamples, ``ros.fleet_topics``), one message per update tick, for the
flight controller.

The models are the core's ``Ahars`` sensors built with the Simulator's streams (``RandomStreams(seed)``,
stream names ``accelerometer``, ``gyroscope``, ``orientation_estimator``), so with the same seed and
ground truth the output equals the Simulator's AHARS. The altimeter belongs to the ``altimeter`` node.
Faults (docs/FAULTS.md): ``imu_bias_step`` and ``gyro_stuck`` of the tick's /sim/vehicle_status act on the
accelerometer and gyroscope as in the Simulator.
Parameters: ``scenario``, ``seed``, ``num_vehicles`` (``ros.ground_truth.GROUND_TRUTH_NODE_PARAMETERS``).
"""

from __future__ import annotations

import sys

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.engine.builders import build_ahars
from qrsim_ros.core.engine.faults import FaultModels
from qrsim_ros.ros.fleet_topics import FLEET_IMU_TOPIC, IMU_COLUMNS, SampleOutput, SerialisedPerVehicle
from qrsim_ros.ros.ground_truth import GroundTruthNode, Outgoing
from qrsim_ros.ros.names import base_link_frame
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import IMU_FLOAT64_FIELDS, imu_columns, imu_float64_block


class ImuNode(GroundTruthNode):
    """One Ahars (without its altimeter) for all vehicles; publishes ``uavN/imu/data``."""

    def __init__(self) -> None:
        super().__init__("imu")
        from sensor_msgs.msg import Imu

        n = self.num_vehicles
        # The composite applies ``ahars.on`` to every sensor; its altimeter is built but never used.
        self.ahars = build_ahars(self.scenario, self.streams)
        self._sensors = (self.ahars.accelerometer, self.ahars.gyroscope, self.ahars.orientation_estimator)
        self._frames = [base_link_frame(i) for i in range(n)]
        self._pubs = self.per_vehicle_publishers(Imu, "imu/data")
        per_vehicle = SerialisedPerVehicle(self._pubs, self._frames, IMU_FLOAT64_FIELDS, self._imu_fields)
        self._output = SampleOutput(self, FLEET_IMU_TOPIC, IMU_COLUMNS, self.params.run_id, per_vehicle)
        self.follow_ground_truth("accelerometer, gyroscope, orientation estimator", with_accel=True,
                                 fault_models=FaultModels(ahars=self.ahars))

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        acc_sensor, gyro, orient = self._sensors
        assert accel is not None
        if reset:  # Ahars.reset's order (each sensor draws from its own reset streams anyway)
            acc_sensor.reset(x)  # the specific force at rest in the vehicle's attitude (core rule)
            gyro.reset(x)
            orient.reset(x)
        else:
            updated = acc_sensor.step(k, accel)
            updated |= gyro.step(k, x)
            updated |= orient.step(k, x)
            if not updated:
                return []
        rows = np.flatnonzero(present)
        values = imu_columns(orient.measurement[rows], gyro.measurement[rows], acc_sensor.measurement[rows])
        return self._output.outgoing(k, stamp_from_tick(k), rows, values)

    def on_repeated_tick(self, k: int, first: Outgoing) -> Outgoing:
        return self._output.repeated(k, first)

    def _imu_fields(self, values: np.ndarray) -> np.ndarray:
        """``uavN/imu/data``'s float64 fields of the rows ``values`` of ``imu_columns``."""
        acc, gyro, orient = self._sensors
        return imu_float64_block(values, orient.variance(), gyro.variance(), acc.variance())


def main() -> int:
    return run_node(ImuNode)


if __name__ == "__main__":
    sys.exit(main())
