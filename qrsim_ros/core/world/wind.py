"""Mean wind with the logarithmic shear profile of MIL-F-8785C (spec 4.1, QRSim's ``WindConstMean``).

One shared field for all vehicles (spec 1.7), evaluated at each vehicle's own height and attitude::

    h_ft = h_m / 0.3048,    W20 = W6                               (W6 is used as the wind at 20 ft)
    speed = W6 * ln(max(h_ft, Z0) / Z0) / ln(20 / Z0),   Z0 = 0.15 ft
    v_ned = speed * [-cos(d), -sin(d), 0]        d = where the wind blows FROM, clockwise from north
    v_body = dcm(X) . v_ned

Units: the profile is QRSim's, written in feet (``Z0`` and the 20 ft reference height); only the
*height* enters the logarithm, so the speed itself needs no conversion and every input and output
here is SI (m, m/s, rad). "W6" is QRSim's name for the reference speed; MIL-F-8785C defines it at
20 ft = 6.096 m, so at 6 m the speed is 0.99676 W6 (spec 4.1 example).

Height is measured above the ground plane ``z_origin_m`` (NED z of the ground, QRSim's
``area.limits(6)``, normally 0): ``h = z_origin_m - pz``. (QRSim computes ``-zOrigin - pz``, which
agrees only for the usual ``zOrigin = 0``; with the ground at z = +20 m it put a vehicle hovering
17 m above the ground 23 m *below* it.)

The field is static: nothing to step. ``reset()`` draws a new random direction when none was given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from qrsim_ros.core.common.accessors import forwarded
from qrsim_ros.core.common.frames import Array, dcm_from_state, ned_to_body
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import check_fields, checked, finite, flag, non_negative, optional
from qrsim_ros.core.vehicles.pelican import STATE_DOWN

#: Metres per foot (QRSim's ``mToFt``/``ftToM``).
FT_M = 0.3048
#: Surface roughness height of the shear profile [ft] (spec 4.1).
Z0_FT = 0.15
#: Reference height of W20 [ft].
H20_FT = 20.0


def shear_factor(heights_m: ArrayLike) -> Array:
    """Ratio speed(h) / W6 of the logarithmic profile for heights above ground [m] (spec 4.1).

    ``ln(h_ft / Z0) / ln(20 / Z0)`` above the roughness height Z0 = 0.15 ft (4.6 cm), 0 at and below
    it. QRSim switches to zero only at 0.05 ft, so between 0.05 and 0.15 ft it returns a *reversed*
    wind (the logarithm is negative there); here the profile is zero up to Z0 and continuous.
    Non-finite heights give 0.
    """
    h_ft = np.asarray(heights_m, float) / FT_M
    # fmax: NaN heights (e.g. a vehicle frozen in a non-finite state) give Z0, i.e. no wind
    return np.log(np.fmax(h_ft, Z0_FT) / Z0_FT) / math.log(H20_FT / Z0_FT)


def _reference_speed(name: str, value: float) -> Array:
    """A finite speed >= 0 [m/s]: both checks of the value as given."""
    finite(name, value)
    return non_negative(name, value)


@dataclass(frozen=True)
class MeanWindParams:
    """Configuration of the mean wind (spec 4.1; QRSim task field ``environment.wind``).

    on: False gives QRSim's ``Wind`` base class: zero wind, no random draws.
    w6_mps: reference speed W6 = W20 [m/s] (>= 0).
    direction_rad: where the wind blows FROM, clockwise from north [rad]; None = uniform in
        [0, 2 pi) drawn at every ``reset()``.
    z_origin_m: NED z of the ground plane [m] (QRSim ``area.limits(6)``).
    """

    w6_mps: float = checked(0.0, _reference_speed)
    direction_rad: float | None = checked(None, optional(finite))
    z_origin_m: float = checked(0.0, finite)
    on: bool = checked(True, flag)

    def __post_init__(self) -> None:
        check_fields(self, "wind")


class MeanWind:
    """The shared mean wind field (spec 4.1): log shear profile, constant direction.

    ``MeanWind(w6_mps, direction_rad=None, z_origin_m=0.0, on=True, streams=None)``. The random
    direction (``direction_rad=None``) comes from the named stream ``name`` of ``streams``
    (``RandomStreams(0)``, i.e. from the clock, if not given). Before the first ``reset()`` a random
    direction is 0, as in QRSim; the simulator resets every environment object after construction.
    """

    def __init__(
        self,
        w6_mps: float,
        direction_rad: float | None = None,
        z_origin_m: float = 0.0,
        on: bool = True,
        streams: RandomStreams | None = None,
        name: str = "mean_wind",
    ) -> None:
        self.params = MeanWindParams(float(w6_mps), direction_rad, float(z_origin_m), bool(on))
        self.name = name
        self._rng = (streams or RandomStreams(0)).get(name)
        self._direction = 0.0 if direction_rad is None else float(direction_rad)

    @classmethod
    def from_params(cls, params: MeanWindParams, streams: RandomStreams | None = None,
                    name: str = "mean_wind") -> MeanWind:
        """Build from a ``MeanWindParams``."""
        return cls(params.w6_mps, params.direction_rad, params.z_origin_m, params.on, streams, name)

    # --- state --------------------------------------------------------------------------------
    on = forwarded("params.on", "Whether the wind blows (False: QRSim's zero-wind base class).")
    w6_mps = forwarded("params.w6_mps", "Reference speed W6 = W20 [m/s].")
    direction_rad = forwarded("_direction", "Current direction the wind blows FROM, clockwise from north "
                                            "[rad].")
    z_origin_m = forwarded("params.z_origin_m", "NED z of the ground plane [m].")

    def reset(self) -> None:
        """Draw a new direction, uniform in [0, 2 pi), if none was configured (QRSim ``reset``)."""
        if self.params.on and self.params.direction_rad is None:
            self._direction = 2.0 * math.pi * float(self._rng.random())

    def reseed(self, streams: RandomStreams) -> None:
        """Replace the random stream (QRSim ``resetSeed``); call ``reset()`` afterwards."""
        self._rng = streams.get(self.name)

    # --- field --------------------------------------------------------------------------------
    def downwind_unit_ned(self) -> Array:
        """Unit vector (3,) of the direction the wind blows TOWARDS, NED: [-cos d, -sin d, 0]."""
        d = self._direction
        return np.array([-math.cos(d), -math.sin(d), 0.0])

    def speed_at(self, heights_m: ArrayLike) -> Array:
        """Wind speed [m/s] at heights above ground [m] (any shape); 0 when off."""
        if not self.params.on:
            return np.zeros(np.shape(heights_m))
        return self.params.w6_mps * shear_factor(heights_m)

    def velocity_ned(self, heights_m: ArrayLike) -> Array:
        """Air velocity in NED [m/s], shape (N, 3), at N heights above ground [m] (spec 4.1)."""
        h = np.atleast_1d(np.asarray(heights_m, float))
        if h.ndim != 1:
            raise ValueError(f"heights_m must have shape (N,), got {h.shape}")
        return self.speed_at(h)[:, None] * self.downwind_unit_ned()

    def heights_m(self, x: ArrayLike) -> Array:
        """Heights above ground [m] of states (N, >=3): ``z_origin_m - pz``."""
        x = np.atleast_2d(np.asarray(x, float))
        return self.params.z_origin_m - x[:, STATE_DOWN]

    def velocity_body(self, x: ArrayLike) -> Array:
        """Air velocity in each vehicle's body frame FRD [m/s], shape (N, 3), for states (N, 13).

        Uses position z (height) and the Euler angles of ``x`` (QRSim ``getLinear``).
        """
        if type(x) is not np.ndarray or x.ndim != 2:  # (the tick loop's states need no conversion)
            x = np.atleast_2d(np.asarray(x, float))
        if x.ndim != 2 or x.shape[1] < 6:
            raise ValueError(f"states must have shape (N, >=6), got {x.shape}")
        if not self.params.on:  # no rotation to do (and the tick loop calls this every 20 ms)
            return np.zeros((x.shape[0], 3))
        x = np.asarray(x, float)
        return ned_to_body(dcm_from_state(x), self.velocity_ned(self.heights_m(x)))

    def rotational_body(self, x: ArrayLike) -> Array:
        """Rotational wind component (N, 3) [rad/s]: always zero in this model."""
        return np.zeros((np.atleast_2d(np.asarray(x)).shape[0], 3))

    def speed_and_direction_at(self, height_m: float) -> tuple[float, float]:
        """(speed [m/s], direction the wind blows FROM [rad, clockwise from north]) at one height.

        What the plume models need (spec 4.4 evaluates the wind at 6 m with zero attitude): the
        downwind unit vector is ``[-cos d, -sin d]`` (``downwind_unit_ned``). Speed 0 when off.
        """
        return float(self.speed_at(float(height_m))), self._direction
