"""Sample-and-hold plumbing shared by the per-vehicle sensor models (spec 3.1, 3.4).

A sampled sensor of N vehicles updates every ``dt_s`` seconds (a multiple of the 0.02 s base tick) and
holds its output in between; ``on`` selects the noisy model, else the true value (QRSim's noiseless base
classes, no random draws at all). Its random streams (``RandomStreams`` names, one Generator per vehicle)
are ``<name>`` for the per-update noise and ``<name>.reset`` for the draws of a reset.

This module holds what the AHARS sensors and the plume sensor share: the ``on`` / ``dt_s`` parameters
and their checks (``SampledSensorParams``), the rate gating and stream bookkeeping (``SampledSensor``)
and the shaping of fleet arrays and reset rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import flag, set_frozen_field, ticks_per_update


@dataclass(frozen=True)
class SampledSensorParams:
    """``on`` and ``dt_s`` of a sampled sensor; subclasses add the model's own parameters.

    on: noisy model if true, else the true value (sample-and-hold); true/false or 1/0 (QRSim's ``on: 1``).
    dt_s: update period [s], a multiple of 0.02.
    """

    #: The scenario section the parameters belong to; names them in error messages.
    section: ClassVar[str] = "sensor"

    on: bool = True
    dt_s: float = BASE_DT_S

    def __post_init__(self) -> None:
        set_frozen_field(self, "on", flag(f"{self.section}.on", self.on, allow_01=True))
        ticks_per_update(f"{self.section}.dt_s", self.dt_s)


def check_tick(k: int) -> None:
    """Raise ValueError unless ``k`` is a tick of a running episode (k >= 1, t = 0.02 k s)."""
    if k < 1:
        raise ValueError(f"tick k must be >= 1 (k = 1 is t = {BASE_DT_S} s), got {k}")


def reset_rows(x: ArrayLike, vehicles: ArrayLike | None, num_vehicles: int, min_cols: int
               ) -> tuple[NDArray[np.intp], Array]:
    """Vehicle indices and their rows of ``x``.

    ``x`` is either the whole fleet's array (N rows, indexed by vehicle) or one row per vehicle in
    ``vehicles`` (as ``PelicanFleet.set_state`` takes it); N rows always means the whole fleet.
    """
    idx = np.arange(num_vehicles) if vehicles is None else np.atleast_1d(np.asarray(vehicles, dtype=np.intp))
    if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= num_vehicles):
        raise ValueError(f"vehicles must be indices in [0, {num_vehicles}), got {vehicles!r}")
    arr = np.atleast_2d(np.asarray(x, float))
    if arr.ndim != 2 or arr.shape[1] < min_cols:
        raise ValueError(f"states must have shape (rows, >={min_cols}), got {arr.shape}")
    if arr.shape[0] == num_vehicles:
        return idx, arr[idx]
    if arr.shape[0] == idx.size:
        return idx, arr
    raise ValueError(f"got {arr.shape[0]} state rows for {idx.size} vehicles of a fleet of {num_vehicles}")


def fleet_array(name: str, value: ArrayLike, num_vehicles: int, min_cols: int) -> Array:
    """``value`` as a float array (N, >=min_cols); one row is accepted for a fleet of one."""
    if (type(value) is np.ndarray and value.dtype == np.float64 and value.ndim == 2
            and value.shape[0] == num_vehicles and value.shape[1] >= min_cols):
        return value  # the simulator's per-tick case, without conversions
    arr = np.asarray(value, float)
    if arr.ndim == 1 and num_vehicles == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[0] != num_vehicles or arr.shape[1] < min_cols:
        raise ValueError(f"{name} must have shape ({num_vehicles}, >={min_cols}), got {arr.shape}")
    return arr


class SampledSensor:
    """Rate gating and stream bookkeeping of a sampled sensor of N vehicles.

    ``noise_width`` is the number of standard normals each vehicle draws per update. Subclasses call
    ``reseed`` at the end of their construction (it may use their attributes).
    """

    noise_width: ClassVar[int] = 1

    def __init__(self, num_vehicles: int, dt_s: float, on: bool, name: str) -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.num_vehicles = int(num_vehicles)
        self.stream_name = name
        self.dt_s = float(dt_s)
        self.on = bool(on)
        #: Base ticks between updates (QRSim's Steppable gating with integer ticks).
        self.ticks_per_update = ticks_per_update(f"{name}.dt_s", dt_s)

    def due(self, k: int) -> bool:
        """Whether tick ``k`` (>= 1) is an update tick of this sensor."""
        if k < 1:
            check_tick(k)
        return k % self.ticks_per_update == 0

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards, as after QRSim's resetSeed);
        a sensor that is off takes none."""
        n, name = self.num_vehicles, self.stream_name
        self._normals = PerVehicleNormals(streams.per_vehicle(name, n), self.noise_width) if self.on else None
        self._reset_rngs = streams.per_vehicle(f"{name}.reset", n) if self.on else []
