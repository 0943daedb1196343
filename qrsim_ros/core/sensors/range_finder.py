"""Downward laser range finder of N vehicles over QRSim's flat ground (beyond QRSim; the obstacle-free
case of the range sensors of the AURIS and Mathiesen papers).

The beam points along the body's down axis (FRD +z). Over the flat ground plane of the flight area
(``ground_z_ned_m``, the area's zmax, as the altimeter), the slant range from the vehicle at height
h = ground_z_ned_m - z_ned [m] with ZYX attitude (phi, theta) is

    r = h / (cos(phi) cos(theta))            (the body z axis in NED has down component cos phi cos theta)

A reading is taken every ``dt_s``: ``r + sigma eta`` with eta ~ N(0, 1) from the vehicle's own stream
(``range_finder``), then checked against the sensor's limits: a beam that points at or above the horizon,
a true range beyond ``max_range_m`` or below ``min_range_m``, or a dropout (probability
``dropout_probability``, from the stream ``range_finder.dropout``) gives no return, reported as +inf
(beyond the range) or -inf (closer than the minimum), as sensor_msgs/Range (REP-117) does. Off
(``on=False``): the true range with the same limits, sampled and held at ``dt_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import (
    ConfigError,
    check_fields,
    checked,
    finite,
    flag,
    single_non_negative,
    ticks_per_update,
)
from qrsim_ros.core.vehicles.pelican import STATE_DOWN, STATE_PITCH, STATE_ROLL

#: Name of the noise streams (one per vehicle) and of the dropout streams.
NOISE_STREAM = "range_finder"
DROPOUT_STREAM = "range_finder.dropout"


def _beam_angle(name: str, value: float) -> float:
    """A cone angle in (0, pi) [rad], as a float."""
    fov = finite(name, value)
    if not 0.0 < fov < np.pi:
        raise ConfigError(f"{name}={fov!r} must be in (0, pi)")
    return fov


def _dropout_probability(name: str, value: float) -> float:
    """A probability in [0, 1), as a float."""
    p = finite(name, value)
    if not 0.0 <= p < 1.0:
        raise ConfigError(f"{name}={p!r} must be in [0, 1)")
    return p


@dataclass(frozen=True)
class RangeFinderParams:
    """Downward laser range finder (defaults: a small lidar altimeter, e.g. the LightWare/Garmin class).

    on: noisy model if true, else the true range (sample-and-hold). dt_s: update period [s], a multiple
    of 0.02. min_range_m / max_range_m: measurable range [m]. field_of_view_rad: the beam's full cone
    angle [rad] (reported in sensor_msgs/Range; the model treats the beam as its centre ray). sigma_m:
    standard deviation of the range noise [m]. dropout_probability: chance that an update has no return.
    ground_z_ned_m: the ground plane's NED z [m] (set from the scenario's area).
    """

    on: bool = checked(False, flag, store=True)
    dt_s: float = checked(0.02, ticks_per_update)
    min_range_m: float = checked(0.05, finite)
    max_range_m: float = checked(40.0, finite)
    field_of_view_rad: float = checked(0.05, _beam_angle)
    sigma_m: float = checked(0.02, single_non_negative)
    dropout_probability: float = checked(0.0, _dropout_probability)
    ground_z_ned_m: float = 0.0

    def __post_init__(self) -> None:
        check_fields(self, "range_finder")
        lo, hi = float(self.min_range_m), float(self.max_range_m)  # finite numbers (checked)
        if not 0.0 <= lo < hi:
            raise ConfigError(f"range_finder: min_range_m={lo!r} and max_range_m={hi!r} must satisfy "
                              "0 <= min_range_m < max_range_m")


def true_range_m(x: ArrayLike, ground_z_ned_m: float = 0.0) -> Array:
    """Slant range (N,) [m] along the body's down axis to the ground plane from states x (N, >=6);
    +inf where the beam does not point below the horizon, -inf below the ground plane."""
    x = np.atleast_2d(np.asarray(x, float))
    down = np.cos(x[:, STATE_ROLL]) * np.cos(x[:, STATE_PITCH])
    height = ground_z_ned_m - x[:, STATE_DOWN]
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(down > 1e-9, height / np.where(down > 1e-9, down, 1.0), np.inf)
    return np.where(height >= 0.0, r, -np.inf)  # under the ground plane: no valid return


class RangeFinder:
    """Downward range readings of N vehicles, sampled and held at ``dt_s`` (see the module docstring)."""

    def __init__(self, num_vehicles: int, params: RangeFinderParams | None = None,
                 streams: RandomStreams | None = None) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params if params is not None else RangeFinderParams()
        self.num_vehicles = int(num_vehicles)
        self.ticks_per_update = ticks_per_update("range_finder.dt_s", self.params.dt_s)
        streams = streams if streams is not None else RandomStreams(0)
        self._normals = PerVehicleNormals(streams.per_vehicle(NOISE_STREAM, self.num_vehicles), 1)
        self._dropouts = streams.per_vehicle(DROPOUT_STREAM, self.num_vehicles)
        self._range = np.full(self.num_vehicles, np.nan)

    range_m = copy_of("_range", "Latest reading per vehicle (N,) [m] (a copy): +inf no return / beyond "
                                "range, -inf closer than the minimum, NaN before the first reading.")

    @property
    def variance_m2(self) -> float:
        """Variance of the range error [m^2] (0 when off)."""
        return self.params.sigma_m**2 if self.params.on else 0.0

    def is_update_tick(self, k: int) -> bool:
        return k % self.ticks_per_update == 0

    def reset(self, x: ArrayLike) -> None:
        """A reading at once from the initial states (the episode's tick 0)."""
        self._measure(x)

    def step(self, k: int, x: ArrayLike, valid: ArrayLike | None = None) -> bool:
        """Measure from states x (N, >=6) if tick k is an update tick; invalid vehicles hold their
        reading. Returns whether the sensor updated."""
        if not self.is_update_tick(k):
            return False
        self._measure(x, valid)
        return True

    def _measure(self, x: ArrayLike, valid: ArrayLike | None = None) -> None:
        r = reading_m(true_range_m(x, self.params.ground_z_ned_m), self.params, self._normals, self._dropouts)
        keep = np.ones(self.num_vehicles, bool) if valid is None else np.asarray(valid, bool)
        self._range = np.where(keep, r, self._range)


def reading_m(true_m: Array, params: RangeFinderParams, normals: PerVehicleNormals,
              dropouts: list[np.random.Generator]) -> Array:
    """Readings (N,) [m] from true ranges: Gaussian noise and dropouts when ``on`` (one draw of each per
    vehicle), then the limits: +inf beyond ``max_range_m`` or no return, -inf closer than
    ``min_range_m`` (REP-117)."""
    r = true_m
    if params.on:
        r = r + params.sigma_m * normals.next()[:, 0]
        drop = np.array([g.random() < params.dropout_probability for g in dropouts])
        r = np.where(drop, np.inf, r)
    return np.where(r > params.max_range_m, np.inf, np.where(r < params.min_range_m, -np.inf, r))
