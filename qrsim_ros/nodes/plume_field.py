"""The ``plume_field`` node: the task's plume and every vehicle's plume sensor (spec 3.4, 4.4).

Subscribes ``uavN/ground_truth/odom`` and ``/sim/vehicle_status`` (the tick's episode;
``ros.ground_truth.GroundTruthSync``); on every plume-sensor tick (2 Hz in the noisy QRSim configs,
50 Hz in the noiseless ones) publishes ``uavN/plume/concentration`` (qrsim_ros/Concentration, frame
``uavN/base_link``) stamped t_k: the concentration at the vehicle's true position plus the sensor
noise, and the noise variance. At every episode start it also publishes ``/plume/markers``
(visualization_msgs/MarkerArray, latched, frame ``map``): one sphere per source.

The plume is built with ``engine.builders.build_scenario_plume``, the function the Simulator's reset
uses, from the scenario, the mean wind at 6 m (``MeanWind`` with the Simulator's ``mean_wind`` stream,
drawn again at every episode start) and ``ContinuingStreams(RandomStreams(seed))``; the puff model is
stepped at its area rate with the base tick, as in the Simulator. So the readings equal the
Simulator's for the same seed and ground truth, episode after episode. The reference locations and
samples of the reward are not computed here (they have their own streams).
Parameters: ``scenario``, ``seed``, ``num_vehicles``, ``field_period_s``, ``field_resolution_m``,
``field_max_points``. A scenario without a plume leaves the node idle with a warning.

Visualisation: ``/plume/field`` (sensor_msgs/PointCloud2, latched, frame ``map``; fields x, y, z,
concentration, float32): the plume's concentration on a regular grid over the area (cell spacing
``field_resolution_m``, coarsened until at most ``field_max_points`` points are evaluated), only the
points with a concentration of at least the plume's support threshold ``c_eps``. Static plumes: once
per episode. Puff plumes: when the puffs moved (the area's 1 s update), at most once per
``field_period_s`` (2 s) of simulated time (0: only at the episode start): a field costs (grid points x
puffs) evaluations, ~50 ms for 3 sources after two minutes (~50 puffs) on the 2-core test machine.
"""

from __future__ import annotations

import sys

import numpy as np

from qrsim_ros.core.common.frames import Array, ned_to_enu
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.engine.builders import (
    PlumeModel,
    build_plume_sensor,
)
from qrsim_ros.core.engine.world import ScenarioWorld
from qrsim_ros.core.sensors.plume_sensor import PlumeSensor
from qrsim_ros.ros import markers as viz
from qrsim_ros.ros.ground_truth import GROUND_TRUTH_NODE_PARAMETERS, GroundTruthNode, Outgoing
from qrsim_ros.ros.names import MAP_FRAME, base_link_frame
from qrsim_ros.ros.node import run_node
from qrsim_ros.ros.parameters import Param, ParamTable
from qrsim_ros.ros.qos import QOS_LATCHED
from qrsim_ros.ros.stamps import stamp_from_tick
from qrsim_ros.ros.to_messages import concentration_message

#: Diameter of the source spheres in RViz [m].
SOURCE_MARKER_SIZE_M = 4.0


PARAMETERS = ParamTable(
    "plume_field", *GROUND_TRUTH_NODE_PARAMETERS,
    Param("field_period_s", 2.0, "least simulated time between two /plume/field clouds of a puff plume "
          "(0: only at the episode start) [s]", lo=0.0, hi=3600.0),
    Param("field_resolution_m", 5.0, "grid spacing of /plume/field [m] (coarsened to field_max_points)",
          lo=0.1, hi=1000.0),
    Param("field_max_points", 5000, "most grid points /plume/field evaluates", lo=1, hi=10_000_000),
)


class PlumeFieldNode(GroundTruthNode):
    """The plume, the mean wind it depends on, and N plume sensors; publishes concentrations and markers."""

    def __init__(self) -> None:
        super().__init__("plume_field", PARAMETERS)
        from visualization_msgs.msg import MarkerArray

        from qrsim_ros.msg import Concentration

        sc, streams, n = self.scenario, self.streams, self.num_vehicles
        self.plume: PlumeModel | None = None
        self.sensor: PlumeSensor | None = None
        if sc.task.type != "plume" or sc.plume is None:
            self.get_logger().warning(f"scenario {sc.name!r} (task {sc.task.type!r}) has no plume: "
                                      "nothing to do")
            return
        self.world = ScenarioWorld(sc, streams, area=False, plume_reference=False)
        self.sensor = build_plume_sensor(sc, streams)
        self._frames = [base_link_frame(i) for i in range(n)]
        self._pubs = self.per_vehicle_publishers(Concentration, "plume/concentration")
        self._markers = self.create_publisher(MarkerArray, "/plume/markers", QOS_LATCHED)
        self._setup_field()
        self.follow_ground_truth(f"{sc.plume.type} plume and plume sensors")

    def on_tick(self, k: int, x: Array, accel: Array | None, present: np.ndarray, valid: np.ndarray,
                 reset: bool) -> Outgoing:
        sensor = self.sensor
        assert sensor is not None
        out: Outgoing = []
        t_s = k * BASE_DT_S
        if reset:  # Simulator.reset: wind direction, plume, then the sensors' first reading
            self.world.new_episode()
            self.plume = self.world.plume
            sensor.reset(x, concentration=self.plume.concentration, t_s=t_s)
            out.append((self._markers, self._marker_array(k)))
            self._field_viz.reset()
            out.append((self._field_pub, self._field_cloud(k)))
        else:
            assert self.plume is not None
            moved = self.plume.step(k)  # puffs move at the area rate (no-op for the static plumes)
            if moved and self.field_period_s > 0 and self._field_viz.due(t_s):
                out.append((self._field_pub, self._field_cloud(k)))
            if not sensor.step(k, x, self.plume.concentration, t_s=t_s):
                return out
        stamp = stamp_from_tick(k)
        c, var = sensor.concentration, sensor.variance
        out += [(self._pubs[i], concentration_message(stamp, self._frames[i], c[i], var))
                for i in np.flatnonzero(present)]
        return out

    def _setup_field(self) -> None:
        from sensor_msgs.msg import PointCloud2

        self.field_period_s = self.params.field_period_s
        self.field_resolution_m = self.params.field_resolution_m
        self.field_max_points = self.params.field_max_points
        self._field_pub = self.create_publisher(PointCloud2, "/plume/field", QOS_LATCHED)
        self._field_viz = viz.VizThrottle(self.field_period_s)
        self._field_sampler: viz.FieldSampler | None = None

    def _field_cloud(self, k: int) -> object:
        """/plume/field at tick k: where the concentration is at least the plume's c_eps (FieldSampler)."""
        plume = self.plume
        assert plume is not None
        if self._field_sampler is None:
            self._field_sampler = sampler = viz.FieldSampler(plume.area_limits_ned, self.field_resolution_m,
                                                             self.field_max_points)
            self.get_logger().info(f"/plume/field: {len(sampler.coarse_ned)} grid points "
                                   f"{sampler.spacing_m:.2f} m apart, refined {sampler.refine}x where the "
                                   "plume is")
        self._field_viz.changed(k * BASE_DT_S, k)  # the period starts here (a field that moved has changed)
        points, c = self._field_sampler.sample(plume.concentration, plume.c_eps)
        return viz.field_cloud(ned_to_enu(points), c, MAP_FRAME, stamp_from_tick(k))

    def _marker_array(self, k: int) -> object:
        from visualization_msgs.msg import Marker, MarkerArray

        assert self.plume is not None
        stamp = stamp_from_tick(k)
        clear = Marker(action=Marker.DELETEALL)
        clear.header.frame_id = MAP_FRAME
        markers = [clear]
        for j, src in enumerate(ned_to_enu(self.plume.sources_ned)):
            m = Marker(ns="plume_sources", id=j, type=Marker.SPHERE, action=Marker.ADD)
            m.header.stamp = stamp
            m.header.frame_id = MAP_FRAME
            m.pose.position.x, m.pose.position.y, m.pose.position.z = (float(v) for v in src)
            m.pose.orientation.w = 1.0
            m.scale.x = m.scale.y = m.scale.z = SOURCE_MARKER_SIZE_M
            m.color.r, m.color.g, m.color.b, m.color.a = 1.0, 0.5, 0.0, 0.8
            markers.append(m)
        return MarkerArray(markers=markers)


def main() -> int:
    return run_node(PlumeFieldNode)


if __name__ == "__main__":
    sys.exit(main())
