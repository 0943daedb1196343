"""wind_field: the air velocity at every vehicle: mean wind + per-vehicle Dryden turbulence (spec 4.1, 4.2).

The core's ``MeanWind`` (shear profile, one shared field, direction from the ``mean_wind`` stream) and
``DrydenTurbulence`` (one filter per vehicle, streams ``turbulence`` / ``turbulence.reset``), built with
the Simulator's named streams (``RandomStreams(seed)``), so a lockstep run reproduces the Simulator.

Topics (docs/NODE_GRAPH.md "Per tick k", step 2):
  in   ``uavN/ground_truth/odom`` of every vehicle and ``/sim/vehicle_status`` (validity and episode of
       the tick) through ``ros.ground_truth.GroundTruthSync``: one handler call per tick with the whole
       fleet; a new episode counter (or a lower tick) starts an episode; a repeated tick re-sends its
       outputs without stepping again.
  out  ``/sim/fleet/wind`` (qrsim_ros/FleetSamples, ``ros.fleet_topics``: every vehicle's row, one
       message per tick, for vehicle_dynamics) and ``uavN/wind`` (geometry_msgs/Vector3Stamped, frame
       ``map``, the same ENU air velocity [m/s]), both stamped t_k:
       the air velocity for the step t_k -> t_k+1, i.e. the mean wind at the vehicle's height plus its
       turbulence stepped with tick k+1 on the states of t_k, as ``Simulator._tick`` does at the start
       of tick k+1. The gust is the turbulence model's body-frame output rotated into the world with the
       state of t_k; vehicle_dynamics rotates the sum back with its exact state (a residual of a few
       1e-16 m/s against the Simulator's body-frame sum; with a turbulence period longer than 0.02 s
       the held body-frame gust is carried the same way). A vehicle's ``uavN/wind`` is built only while
       its topic has a reader (RViz, a bag or a user).

At an episode start (and on the first ground truth) the mean wind draws its direction and the
turbulence spins up from the states of tick 0, as ``Simulator.reset``; the gusts drawn for the step
the reset pre-empted (t_K -> t_K+1, never integrated) are taken back first (``rewind_updates``), so
the turbulence streams stay aligned with the Simulator's episode after episode. Invalid vehicles, and vehicles
whose ground truth is missing or non-finite, hold their gust (the Simulator steps the valid ones).
Parameters (table ``PARAMETERS``): ``scenario``, ``seed``, ``num_vehicles``, ``ground_truth_source``,
``viz_period_s``.

Visualisation: ``/viz/wind`` (visualization_msgs/MarkerArray, latched, ``markers.arrow_markers``): an
arrow per vehicle from its position along the air velocity (1 m per m/s), at most once per
``viz_period_s`` of simulated time (0: off) and only when changed.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from geometry_msgs.msg import Vector3Stamped
from visualization_msgs.msg import MarkerArray

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state, ned_to_enu
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.engine.builders import build_mean_wind, build_turbulence
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.fleet_topics import FLEET_WIND_TOPIC, WIND_COLUMNS, SampleOutput, listened
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS, GroundTruthNode, Outgoing
from qrsim_ros.ros.names import MAP_FRAME
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.parameters import ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick

PARAMETERS = ParamTable("wind_field", *GROUND_TRUTH_NODE_PARAMETERS, viz.viz_period_param("/viz/wind"))


class WindFieldNode(GroundTruthNode):
    """Mean wind + Dryden turbulence for all vehicles; publishes ``uavN/wind`` every tick."""

    def __init__(self) -> None:
        super().__init__("wind_field", PARAMETERS)
        sc = self.scenario
        self.wind = build_mean_wind(sc, self.streams)
        self.turbulence = build_turbulence(sc, self.streams)
        self._updated_ahead = False  # the last handled tick drew the gusts of the following step
        self._pubs = self.per_vehicle_publishers(Vector3Stamped, "wind")
        self._all = np.arange(self.num_vehicles)
        self._output = SampleOutput(self, FLEET_WIND_TOPIC, WIND_COLUMNS, self.params.run_id,
                                    self._per_vehicle)
        self._viz = viz.VizThrottle(self.params.viz_period_s)
        self._viz_pub = self.create_publisher(MarkerArray, "/viz/wind", QOS_LATCHED)
        w, t = sc.wind, sc.vehicle.turbulence
        mean = f"W6 {w.w6_mps:g} m/s" if w.on else "off"
        gusts = f"W6 {t.w6_mps:g} m/s" if t.on else "off"
        self.follow_ground_truth(f"mean wind {mean}, turbulence {gusts}")

    def air_velocity_ned(self, x: Array) -> Array:
        """Air velocity (N, 3) NED [m/s] at states x (N, 13): mean wind at each height + the gusts."""
        mean = self.wind.velocity_ned(self.wind.heights_m(x))
        return mean + body_to_ned(dcm_from_state(x), self.turbulence.velocity_body)

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        if reset:
            if self._updated_ahead:
                # the gust of the step the reset pre-empted was drawn, the Simulator never draws it
                self.turbulence.rewind_updates(1)
            # Simulator.reset's order: the wind's direction, then the turbulence's spin-up
            self.wind.reset()
            self.turbulence.reset(x)
        # as the Simulator at the start of tick k+1: the valid vehicles of t_k (invalid ones hold)
        updated = self.turbulence.step(k + 1, x, active=valid)
        self._updated_ahead = updated and self.turbulence.params.on
        v_enu = ned_to_enu(self.air_velocity_ned(x))
        stamp = stamp_from_tick(k)
        out = self._output.outgoing(k, stamp, self._all, v_enu)
        if self._viz.period_s > 0 and self._viz.due(k * BASE_DT_S):
            p_enu = ned_to_enu(np.where(present[:, None], x[:, STATE_POSITION_NED], np.nan))
            if self._viz.changed(k * BASE_DT_S, viz.content_key(p_enu, v_enu, resolution=0.05)):
                out.append((self._viz_pub, viz.arrow_markers(p_enu, v_enu, MAP_FRAME, stamp)))
        return out

    def _per_vehicle(self, stamp: Any, vehicles: np.ndarray, v_enu: np.ndarray) -> Outgoing:
        """``uavN/wind`` of every vehicle whose topic has a reader now (vehicle_dynamics reads the fleet
        topic: RViz, a bag or a user may)."""
        out: Outgoing = []
        for j in listened(self._pubs, vehicles).tolist():
            m = Vector3Stamped()
            m.header.stamp = stamp
            m.header.frame_id = MAP_FRAME
            m.vector.x, m.vector.y, m.vector.z = v_enu[j].tolist()
            out.append((self._pubs[int(vehicles[j])], m))
        return out

    def on_repeated_tick(self, k: int, first: Outgoing) -> Outgoing:
        """Built again, the per-vehicle ones for the readers matched now: vehicle_dynamics re-sends a tick
        whose wind it misses (a reader matched only after the first answer must get one too)."""
        return self._output.repeated(k, first)


def main(argv: list[str] | None = None) -> int:
    return run_node(WindFieldNode, argv)


if __name__ == "__main__":
    sys.exit(main())
