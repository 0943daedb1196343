"""The fleet topics: the simulator's own per-tick traffic, one message per tick for the whole fleet.

Between the simulator's nodes every tick carries one message per sensor (and one for the commands and
one for the wind) instead of one per vehicle (docs/NODE_GRAPH.md "Fleet topics"): the per-message
cost of rclpy and DDS, times the vehicles, was what limited the graph at 50-100 vehicles. A row of a
``qrsim_ros/FleetSamples`` holds what the vehicle's own topic carries for the tick, in that topic's frames
and units (so the readers convert exactly as they would the per-vehicle message, and get the same bits);
the columns are named here, once, for the publisher and the reader. The per-vehicle topics that users,
autopilots and bags read stay as they are; they are built only for vehicles whose topic has a reader
(``listened``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

#: FleetSamples topics and their columns (the per-vehicle topic each row mirrors, in its frames).
FLEET_IMU_TOPIC = "/sim/fleet/imu"
#: ``uavN/imu/data``: orientation (FLU in ENU, quaternion x y z w), angular velocity and specific force (FLU)
IMU_COLUMNS = ("orientation.x", "orientation.y", "orientation.z", "orientation.w",
               "angular_velocity.x", "angular_velocity.y", "angular_velocity.z",
               "linear_acceleration.x", "linear_acceleration.y", "linear_acceleration.z")
FLEET_ALTIMETER_TOPIC = "/sim/fleet/altimeter"
#: ``uavN/altimeter``: height above ground [m, up], vertical speed [m/s, up]
ALTIMETER_COLUMNS = ("height", "vertical_speed")
FLEET_GPS_TOPIC = "/sim/fleet/gps"
#: ``uavN/gps/fix`` (WGS-84 degrees, ellipsoidal metres; fix: 1 with a fix, 0 without) and ``uavN/gps/vel``
#: (map ENU [m/s])
GPS_COLUMNS = ("latitude", "longitude", "altitude", "fix", "velocity.x", "velocity.y", "velocity.z")
FLEET_WIND_TOPIC = "/sim/fleet/wind"
#: ``uavN/wind``: the air velocity in map ENU [m/s]
WIND_COLUMNS = ("x", "y", "z")
#: FleetAttitudeCommand: flight_controller / mavlink_bridge -> vehicle_dynamics
FLEET_ATTITUDE_COMMAND_TOPIC = "/sim/fleet/attitude_command"


class FleetMessageError(ValueError):
    """A fleet message that cannot be read (its columns, vehicles or values do not fit)."""


def fleet_samples(msg: Any, stamp: Any, run_id: str, columns: Sequence[str], vehicles: ArrayLike,
                  values: ArrayLike) -> Any:
    """Fill ``msg`` (a qrsim_ros/FleetSamples, reused tick after tick) with the rows ``values``
    (len(vehicles), len(columns)) of ``vehicles``; returns it."""
    from qrsim_ros.ros.to_messages import float64_array, uint32_array

    msg.header.stamp = stamp
    msg.run_id = run_id
    if tuple(msg.columns) != tuple(columns):  # (a reused message keeps them)
        msg.columns = list(columns)
    msg.vehicles = uint32_array(vehicles)
    msg.values = float64_array(np.asarray(values, float).reshape(-1))
    return msg


def read_samples(msg: Any, topic: str, columns: Sequence[str],
                 num_vehicles: int) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """The rows of a FleetSamples on ``topic``: (vehicle indices (M,), values (M, len(columns))).
    Raises FleetMessageError naming the topic and what does not fit."""
    if list(msg.columns) != list(columns):
        shown = ", ".join(list(msg.columns)[:12])
        raise FleetMessageError(f"{topic}: columns [{shown[:200]}] are not this version's "
                                f"[{', '.join(columns)}]")
    vehicles = np.asarray(msg.vehicles, np.intp)
    values = np.asarray(msg.values, float)
    if values.size != vehicles.size * len(columns):
        raise FleetMessageError(f"{topic}: {values.size} values for {vehicles.size} vehicles x "
                                f"{len(columns)} columns")
    if vehicles.size and (vehicles.max() >= num_vehicles or np.unique(vehicles).size != vehicles.size):
        raise FleetMessageError(f"{topic}: vehicle indices must be distinct and below {num_vehicles}")
    return vehicles, values.reshape(vehicles.size, len(columns))


def listened(publishers: Sequence[Any], vehicles: ArrayLike) -> NDArray[np.intp]:
    """The positions in ``vehicles`` whose per-vehicle publisher (``publishers[i]``) has a reader now."""
    rows = np.asarray(vehicles, np.intp)
    return np.fromiter((j for j, i in enumerate(rows.tolist()) if publishers[i].get_subscription_count()),
                       np.intp)


class SerialisedPerVehicle:
    """A sensor node's per-vehicle messages of one tick, serialised (``ros.cdr.HeaderFloat64Messages``):
    called as a ``PerVehicle`` with (stamp, vehicles, values), it gives each vehicle whose topic has a
    reader its ``publishers[i]`` and the message whose float64 fields are ``fields(values of those
    vehicles)`` (one row each, ``count`` values) and whose frame id is ``frames[i]``."""

    def __init__(self, publishers: Sequence[Any], frames: Sequence[str], count: int,
                 fields: Callable[[NDArray[np.float64]], NDArray[np.float64]]) -> None:
        from qrsim_ros.ros.cdr import HeaderFloat64Messages

        self._pubs = publishers
        self._messages = HeaderFloat64Messages(frames, count)
        self._fields = fields

    def __call__(self, stamp: Any, rows: NDArray[np.intp],
                 values: NDArray[np.float64]) -> list[tuple[Any, Any]]:
        j = listened(self._pubs, rows)
        heard = rows[j]
        msgs = self._messages.encode(stamp.sec, stamp.nanosec, heard, self._fields(values[j]))
        return list(zip([self._pubs[i] for i in heard.tolist()], msgs, strict=True))


#: What a sensor node publishes per vehicle for one tick: (stamp, vehicles (M,), values (M, columns)) ->
#: (publisher, message) pairs, for the vehicles whose topic has a reader (``listened``).
PerVehicle = Callable[[Any, NDArray[np.intp], NDArray[np.float64]], list[tuple[Any, Any]]]


class SampleOutput:
    """A sensor node's output of one tick: the samples of every present vehicle on its fleet topic (always,
    the flight controller awaits it) and the per-vehicle messages of the topics read now (``per_vehicle``).
    When vehicle_dynamics re-sends the tick (``repeated``) both are built again, the per-vehicle ones for
    the readers matched by then (a late reader's first message would otherwise never come)."""

    def __init__(self, node: Any, topic: str, columns: Sequence[str], run_id: str,
                 per_vehicle: PerVehicle) -> None:
        from qrsim_ros.msg import FleetSamples
        from qrsim_ros.ros.qos import QOS_RELIABLE

        self.topic = topic
        self.columns = tuple(columns)
        self.run_id = run_id
        self.publisher = node.create_publisher(FleetSamples, topic, QOS_RELIABLE)
        self._msg = FleetSamples()
        self._per_vehicle = per_vehicle
        self._last: tuple[int, Any, NDArray[np.intp], NDArray[np.float64]] | None = None

    def outgoing(self, k: int, stamp: Any, vehicles: ArrayLike, values: ArrayLike) -> list[tuple[Any, Any]]:
        """Tick k's messages: ``values`` (M, columns) of ``vehicles`` (M,)."""
        self._last = (k, stamp, np.asarray(vehicles, np.intp),
                      np.asarray(values, float).reshape(-1, len(self.columns)))
        return self._build()

    def repeated(self, k: int, first: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """Tick k again: built anew if it was the last one with samples, else ``first`` (nothing)."""
        return self._build() if self._last is not None and self._last[0] == k else first

    def _build(self) -> list[tuple[Any, Any]]:
        assert self._last is not None
        _, stamp, vehicles, values = self._last
        fleet = fleet_samples(self._msg, stamp, self.run_id, self.columns, vehicles, values)
        return [(self.publisher, fleet), *self._per_vehicle(stamp, vehicles, values)]
