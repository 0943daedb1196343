"""The ``altimeter`` node: the barometric altimeter of every vehicle (spec 3.1, ``AltimeterGM``).

Subscribes ``uavN/ground_truth/odom`` and ``/sim/vehicle_status`` (the tick's episode;
``ros.ground_truth.GroundTruthSync``); on every update tick of the altimeter (50 Hz with the QRSim
configs) publishes ``uavN/altimeter`` (qrsim_ros/Altitude, frame ``uavN/base_link``) stamped t_k:
height above the scenario's ground [m, up], vertical speed [m/s, up] and the stationary height-error
variance [m^2] (0 for a noiseless altimeter); built only for vehicles whose topic has a reader. The same
values of every vehicle go on ``/sim/fleet/altimeter`` (qrsim_ros/FleetSamples, ``ros.fleet_topics``), one
message per update tick, for the flight controller.

The model is the altimeter of the core's ``Ahars`` built with the Simulator's streams
(``RandomStreams(seed)``, stream ``altimeter``), so with the same seed and ground truth the output
equals the Simulator's. Faults (docs/FAULTS.md): ``altimeter_stuck`` and ``altimeter_offset`` of the
tick's /sim/vehicle_status act as in the Simulator. Parameters: ``scenario``, ``seed``, ``num_vehicles``.
"""

from __future__ import annotations

import sys

import numpy as np

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.engine.builders import build_ahars
from qrsim_ros.core.engine.faults import FaultModels
from qrsim_ros.ros.fleet_topics import (
    ALTIMETER_COLUMNS,
    FLEET_ALTIMETER_TOPIC,
    SampleOutput,
    SerialisedPerVehicle,
)
from qrsim_ros.ros.ground_truth import GroundTruthNode, Outgoing
from qrsim_ros.ros.names import base_link_frame
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import ALTITUDE_FLOAT64_FIELDS


class AltimeterNode(GroundTruthNode):
    """One Ahars altimeter for all vehicles; publishes ``uavN/altimeter``."""

    def __init__(self) -> None:
        super().__init__("altimeter")
        from qrsim_ros.msg import Altitude

        # The composite applies ``ahars.on``; only its altimeter is used here (the imu node has the rest).
        ahars = build_ahars(self.scenario, self.streams)
        self.altimeter = ahars.altimeter
        self._variance_m2 = self.altimeter.variances()[0]
        self._frames = [base_link_frame(i) for i in range(self.num_vehicles)]
        self._pubs = self.per_vehicle_publishers(Altitude, "altimeter")
        # uavN/altimeter serialised: height, vertical speed (the fleet rows) and the height variance
        per_vehicle = SerialisedPerVehicle(self._pubs, self._frames, ALTITUDE_FLOAT64_FIELDS,
                                           lambda v: np.column_stack([v, np.full(len(v), self._variance_m2)]))
        self._output = SampleOutput(self, FLEET_ALTIMETER_TOPIC, ALTIMETER_COLUMNS, self.params.run_id,
                                    per_vehicle)
        self.follow_ground_truth("barometric altimeter", fault_models=FaultModels(ahars=ahars))

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        alt = self.altimeter
        if reset:
            alt.reset(x)
        elif not alt.step(k, x):
            return []
        rows = np.flatnonzero(present)
        values = np.column_stack([alt.height_m[rows], alt.vertical_speed_mps[rows]])
        return self._output.outgoing(k, stamp_from_tick(k), rows, values)

    def on_repeated_tick(self, k: int, first: Outgoing) -> Outgoing:
        return self._output.repeated(k, first)

def main() -> int:
    return run_node(AltimeterNode)


if __name__ == "__main__":
    sys.exit(main())
