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
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import finite, set_frozen_field, single_non_negative
from qrsim_ros.core.sensors.sampled import SampledSensor, SampledSensorParams, fleet_array, reset_rows
from qrsim_ros.core.vehicles.pelican import STATE_POSITION_NED

#: A concentration field: NED points (M, 3) [m] and time [s] -> concentrations (M,).
ConcentrationField = Callable[[Array, float], ArrayLike]


@dataclass(frozen=True)
class PlumeSensorParams(SampledSensorParams):
    """Plume sensor (spec 3.4; defaults of ``pelican_config_plume_noisy_windy.m:74-77``).

    on: noisy model if true, else the true concentration (sample-and-hold).
    dt_s: update period [s], multiple of 0.02 (0.5 noisy, 0.02 in QRSim's noiseless configs).
    sigma: standard deviation of the additive white noise [concentration units] (QRSim's comment
        calls it a variance; the code uses it as a standard deviation).
    """

    section: ClassVar[str] = "plume_sensor"

    dt_s: float = 0.5
    sigma: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        set_frozen_field(self, "sigma", single_non_negative("plume_sensor.sigma", self.sigma))

    @classmethod
    def noiseless(cls) -> PlumeSensorParams:
        """QRSim's noiseless plume-sensor configuration (off, 0.02 s)."""
        return cls(on=False, dt_s=BASE_DT_S)


class PlumeSensor(SampledSensor):
    """Noisy concentration readings at the vehicles' true positions, sampled and held at ``dt_s``."""

    def __init__(self, num_vehicles: int, params: PlumeSensorParams | None = None,
                 streams: RandomStreams | None = None, stream_name: str = "plume_sensor") -> None:
        self.params = params if params is not None else PlumeSensorParams()
        super().__init__(num_vehicles, self.params.dt_s, self.params.on, stream_name)
        self._reading = np.full(self.num_vehicles, np.nan)
        self.reseed(streams if streams is not None else RandomStreams(0))

    concentration = copy_of("_reading", "Last reading per vehicle (N,) (a copy); NaN before the first "
                                        "reading.")

    @property
    def variance(self) -> float:
        """Variance of the reading error, SIGMA^2 (0 when off)."""
        return self.params.sigma**2 if self.on else 0.0

    def step(self, k: int, x: ArrayLike, concentration: ConcentrationField, t_s: float | None = None) -> bool:
        """Read the field at the true positions of states ``x`` (N, >=3) if tick k is due.

        ``t_s`` is the simulation time passed to the field (default ``k * 0.02`` s). Returns whether
        the sensor updated.
        """
        if not self.due(k):
            return False
        x = fleet_array("x", x, self.num_vehicles, 3)
        t = k * BASE_DT_S if t_s is None else finite("t_s", t_s)
        truth = _evaluate(concentration, x[:, STATE_POSITION_NED], t)
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
        idx, rows = reset_rows(x, vehicles, self.num_vehicles, 3)
        if concentration is None:
            self._reading[idx] = np.nan
            return
        values = _evaluate(concentration, rows[:, STATE_POSITION_NED], finite("t_s", t_s))
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
