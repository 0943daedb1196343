"""Plume concentration sensor for N vehicles (spec 3.4, QRSim ``PlumeSensor`` / ``PlumeSensorG``).

Per update of the sensor (period ``dt_s``): ``c = concentration(true position, t) + SIGMA eta`` with
eta ~ N(0, 1) from the vehicle's own stream (``plume_sensor``; reset draws from ``plume_sensor.reset``).
The concentration field is passed in as a callable ``concentration(points_ned (M, 3), t_s) -> (M,)``
(any of the plume models of spec 4.4), evaluated at the vehicles' TRUE NED positions [m] and the
current simulation time [s] (the puff model is time-dependent). Readings are not clipped at zero:
QRSim's additive noise can make them negative. Off (``on=False``): the true concentration,
sampled and held at ``dt_s`` (QRSim's noiseless configs use ``dt_s = 0.02``, see ``noiseless()``).

Difference from QRSim: QRSim's output is empty until the first update after ``setX``; here ``reset``
takes the field and returns a reading at once (NaN only if no field is given to ``reset``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import ConfigError, finite, non_negative, ticks_per_update

#: A concentration field: NED points (M, 3) [m] and time [s] -> concentrations (M,).
ConcentrationField = Callable[[Array, float], ArrayLike]


@dataclass(frozen=True)
class PlumeSensorParams:
    """Plume sensor (spec 3.4; defaults of ``pelican_config_plume_noisy_windy.m:74-77``).

    on: noisy model if true, else the true concentration (sample-and-hold).
    dt_s: update period [s], multiple of 0.02 (0.5 noisy, 0.02 in QRSim's noiseless configs).
    sigma: standard deviation of the additive white noise [concentration units] (QRSim's comment
        calls it a variance; the code uses it as a standard deviation).
    """

    on: bool = True
    dt_s: float = 0.5
    sigma: float = 0.01

    def __post_init__(self) -> None:
        on = self.on
        if not (isinstance(on, (bool, np.bool_)) or (isinstance(on, (int, np.integer)) and on in (0, 1))):
            raise ConfigError(f"plume_sensor.on={on!r} must be a boolean (true/false or 1/0)")
        object.__setattr__(self, "on", bool(on))
        ticks_per_update("plume_sensor.dt_s", self.dt_s)
        sigma = non_negative("plume_sensor.sigma", self.sigma)
        if sigma.ndim != 0:
            raise ConfigError(f"plume_sensor.sigma={self.sigma!r} must be a single number")
        object.__setattr__(self, "sigma", float(sigma))

    @classmethod
    def noiseless(cls) -> PlumeSensorParams:
        """QRSim's noiseless plume-sensor configuration (off, 0.02 s)."""
        return cls(on=False, dt_s=BASE_DT_S)


class PlumeSensor:
    """Noisy concentration readings at the vehicles' true positions, sampled and held at ``dt_s``."""

    def __init__(self, num_vehicles: int, params: PlumeSensorParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "plume_sensor") -> None:
        if num_vehicles < 1:
            raise ValueError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params if params is not None else PlumeSensorParams()
        self.num_vehicles = int(num_vehicles)
        self.stream_name = stream_name
        self.on = self.params.on
        self.dt_s = float(self.params.dt_s)
        #: Base ticks between updates.
        self.ticks_per_update = ticks_per_update("plume_sensor.dt_s", self.dt_s)
        self._reading = np.full(self.num_vehicles, np.nan)
        self.reseed(streams if streams is not None else RandomStreams(0))

    def reseed(self, streams: RandomStreams) -> None:
        """Take fresh generators from ``streams`` (call ``reset`` afterwards)."""
        n, name = self.num_vehicles, self.stream_name
        self._normals = PerVehicleNormals(streams.per_vehicle(name, n), 1) if self.on else None
        self._reset_rngs = streams.per_vehicle(f"{name}.reset", n) if self.on else []

    @property
    def concentration(self) -> Array:
        """Last reading per vehicle (N,) (a copy); NaN before the first reading."""
        return self._reading.copy()

    @property
    def variance(self) -> float:
        """Variance of the reading error, SIGMA^2 (0 when off)."""
        return self.params.sigma**2 if self.on else 0.0

    def due(self, k: int) -> bool:
        """Whether tick ``k`` (>= 1) is an update tick of this sensor."""
        if k < 1:
            raise ValueError(f"tick k must be >= 1 (k = 1 is t = {BASE_DT_S} s), got {k}")
        return k % self.ticks_per_update == 0

    def step(self, k: int, x: ArrayLike, concentration: ConcentrationField, t_s: float | None = None) -> bool:
        """Read the field at the true positions of states ``x`` (N, >=3) if tick k is due.

        ``t_s`` is the simulation time passed to the field (default ``k * 0.02`` s). Returns whether
        the sensor updated.
        """
        if not self.due(k):
            return False
        x = np.asarray(x, float)
        if x.ndim == 1 and self.num_vehicles == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[0] != self.num_vehicles or x.shape[1] < 3:
            raise ValueError(f"x must have shape ({self.num_vehicles}, >=3), got {x.shape}")
        t = k * BASE_DT_S if t_s is None else finite("t_s", t_s)
        truth = _evaluate(concentration, x[:, :3], t)
        if self.on:
            truth = truth + self.params.sigma * self._normals.next()[:, 0]
        self._reading = truth
        return True

    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None, *,
              concentration: ConcentrationField | None = None, t_s: float = 0.0) -> None:
        """Re-initialise vehicles from true states (N or len(vehicles) rows, >=3 columns).

        With ``concentration`` the reading is taken at once (at time ``t_s``, plus one noise sample from
        the reset stream when on); without it the reading is NaN until the next update (QRSim).
        """
        n = self.num_vehicles
        idx = np.arange(n) if vehicles is None else np.atleast_1d(np.asarray(vehicles, np.intp))
        if idx.ndim != 1 or np.any(idx < 0) or np.any(idx >= self.num_vehicles):
            raise ValueError(f"vehicles must be indices in [0, {self.num_vehicles}), got {vehicles!r}")
        rows = np.atleast_2d(np.asarray(x, float))
        if rows.ndim != 2 or rows.shape[1] < 3:
            raise ValueError(f"states must have shape (rows, >=3), got {rows.shape}")
        if rows.shape[0] == self.num_vehicles:
            rows = rows[idx]
        elif rows.shape[0] != idx.size:
            raise ValueError(f"got {rows.shape[0]} state rows for {idx.size} vehicles")
        if concentration is None:
            self._reading[idx] = np.nan
            return
        values = _evaluate(concentration, rows[:, :3], finite("t_s", t_s))
        if self.on:
            eta = np.array([self._reset_rngs[i].standard_normal() for i in idx])
            values = values + self.params.sigma * eta
        self._reading[idx] = values


def _evaluate(concentration: ConcentrationField, points_ned: Array, t_s: float) -> Array:
    values = np.array(concentration(points_ned.copy(), t_s), dtype=float)  # a copy: never alias the model
    if values.shape != (points_ned.shape[0],):
        raise ValueError(
            f"the concentration field returned shape {values.shape} for {points_ned.shape[0]} points "
            f"(expected ({points_ned.shape[0]},))"
        )
    return values
