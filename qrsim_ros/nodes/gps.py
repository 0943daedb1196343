"""The ``gps`` node: the GPS space segment and every vehicle's receiver (spec 1.7, 3.2, 3.3).

Subscribes ``uavN/ground_truth/odom`` and ``/sim/vehicle_status`` (the tick's episode;
``ros.ground_truth.GroundTruthSync``); on every receiver tick (5 Hz with the QRSim configs) steps the
shared space segment (one per scenario, in this node) and the receivers, and publishes stamped t_k:

- ``uavN/gps/fix`` (sensor_msgs/NavSatFix, frame ``uavN/base_link``): WGS-84 latitude/longitude
  [deg], ellipsoidal altitude [m], diagonal ENU position covariance [m^2] from the receiver's error
  model (``UERE^2 diag(R Q R^T)``), status NO_FIX when the receiver has no fix (fewer than 4
  satellites; it then repeats its last solution, NaN before the first);
- ``uavN/gps/vel`` (geometry_msgs/TwistStamped, frame ``map``): ground velocity, ENU [m/s];

each built only for vehicles whose topic has a reader; the same values of every vehicle (and the fix
status) go on ``/sim/fleet/gps`` (qrsim_ros/FleetSamples, ``ros.fleet_topics``), one message per receiver
tick, for the flight controller.

Visualisation: ``/viz/gps`` (visualization_msgs/MarkerArray, latched, ``markers.gps_markers``): every
vehicle's latest estimated position and the track of estimates in ``map``, at most once per
``viz_period_s`` of simulated time (0: off) and only when changed.

The models are the core's ``GpsSpaceSegment`` and ``GpsReceiver`` built with the Simulator's streams
(``RandomStreams(seed)``) and the scenario's geodetic origin, so with the same seed and ground truth the
output equals the Simulator's. Faults (docs/FAULTS.md): ``gps_outage`` and ``gps_degradation`` of the
tick's /sim/vehicle_status act on the receivers as in the Simulator (an outage publishes NO_FIX).
Parameters: ``scenario``, ``seed``, ``num_vehicles``.
"""

from __future__ import annotations

import sys

import numpy as np

from qrsim_ros.core.common.frames import Array, ned_to_enu
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.engine.builders import build_gps
from qrsim_ros.core.engine.faults import FaultModels
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.fleet_topics import FLEET_GPS_TOPIC, GPS_COLUMNS, SampleOutput, listened
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS, GroundTruthNode, Outgoing
from qrsim_ros.ros.names import MAP_FRAME, base_link_frame
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.parameters import ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import navsatfix_message, velocity_message

PARAMETERS = ParamTable("gps", *GROUND_TRUTH_NODE_PARAMETERS, viz.viz_period_param("/viz/gps"))


class GpsNode(GroundTruthNode):
    """The space segment and N receivers; publishes ``uavN/gps/fix`` and ``uavN/gps/vel``."""

    def __init__(self) -> None:
        super().__init__("gps", PARAMETERS)
        from geometry_msgs.msg import TwistStamped
        from sensor_msgs.msg import NavSatFix
        from visualization_msgs.msg import MarkerArray

        n = self.num_vehicles
        self.space, self.receiver = build_gps(self.scenario, self.streams)
        self._frames = [base_link_frame(i) for i in range(n)]
        self._fix_pubs = self.per_vehicle_publishers(NavSatFix, "gps/fix")
        self._vel_pubs = self.per_vehicle_publishers(TwistStamped, "gps/vel")
        self._output = SampleOutput(self, FLEET_GPS_TOPIC, GPS_COLUMNS, self.params.run_id, self._per_vehicle)
        self.viz_period_s = self.params.viz_period_s
        self._viz = viz.VizThrottle(self.viz_period_s) if self.viz_period_s > 0 else None
        self._viz_tracks = viz.TrackHistory(n)
        self._viz_pub = self.create_publisher(MarkerArray, "/viz/gps", QOS_LATCHED)
        self.follow_ground_truth("GPS space segment and receivers",
                                 fault_models=FaultModels(gps=self.receiver))

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        rx = self.receiver
        if reset:  # the Simulator's order: space segment, then receivers
            self.space.reset(k)  # k = 0 at an episode start, as the Simulator
            rx.reset(x)
        else:
            self.space.step(k)
            if not rx.step(k, x):
                return []
        rows = np.flatnonzero(present)
        values = np.column_stack([rx.lla[rows], rx.has_fix[rows], ned_to_enu(rx.velocity_ned[rows])])
        out = self._output.outgoing(k, stamp_from_tick(k), rows, values)
        if self._viz is not None and self._viz.due(k * BASE_DT_S):
            out += self._viz_messages(k, reset)
        return out

    def on_repeated_tick(self, k: int, first: Outgoing) -> Outgoing:
        return self._output.repeated(k, first)

    def _per_vehicle(self, stamp: object, rows: np.ndarray, values: np.ndarray) -> Outgoing:
        """``uavN/gps/fix`` and ``uavN/gps/vel`` of the vehicles ``rows`` whose topics have readers."""
        rx = self.receiver
        out: Outgoing = []
        for j in listened(self._fix_pubs, rows).tolist():
            i = int(rows[j])
            fix = navsatfix_message(stamp, self._frames[i], values[j, 0:3], rx.position_variance_ned[i],
                                    bool(values[j, 3]))
            out.append((self._fix_pubs[i], fix))
        for j in listened(self._vel_pubs, rows).tolist():
            i = int(rows[j])
            out.append((self._vel_pubs[i], velocity_message(stamp, MAP_FRAME, values[j, 4:7], enu=True)))
        return out

    def _viz_messages(self, k: int, reset: bool) -> Outgoing:
        """/viz/gps when the estimates changed (at most every viz_period_s); the tracks restart at a reset."""
        assert self._viz is not None
        est = np.where(self.receiver.has_fix[:, None], self.receiver.position_ned, np.nan)
        if reset:
            self._viz_tracks.clear()
        if not self._viz.changed(k * BASE_DT_S, viz.content_key(est)):
            return []
        self._viz_tracks.append(ned_to_enu(est))
        return [(self._viz_pub, viz.gps_markers(est, self._viz_tracks, MAP_FRAME, stamp_from_tick(k)))]


def main() -> int:
    return run_node(GpsNode)


if __name__ == "__main__":
    sys.exit(main())
