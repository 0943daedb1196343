"""Per-vehicle MIL-F-8785C (Dryden, low-altitude form) turbulence (spec 4.2, QRSim's
``AerodynamicTurbulenceMILF8785``), vectorised over N vehicles.

Per update, for every vehicle (QRSim works in feet, so does this recursion)::

    V   = (Vof + ||X[6:9]||) / 0.3048                [ft/s]  ground-relative body speed + 0.5 m/s
    h   = (z_origin - X[2]) / 0.3048                 [ft]    clamped to [min_height_ft, max_height_ft]
    W20 = W6 / 0.3048                                [ft/s]
    sigma_w = 0.1 W20,   sigma_u = sigma_v = sigma_w / (0.177 + 0.000823 h)^0.4
    L_w = h,             L_u = L_v = h / (0.177 + 0.000823 h)^1.2
    a_k = min(V dt / L_k, max_step_fraction)
    g_k <- (1 - a_k) g_k + sqrt(2 a_k) sigma_k eta_k,     k in {u, v, w}     (gust, wind axes, ft/s)
    v_gust_ned  = -0.3048 R_z(d) g                   [m/s]
    v_gust_body = dcm(X) v_gust_ned

This is the manual's discrete Dryden form ``u_g <- (1 - aT) u_g + sqrt(2 aT) sigma nu``, ``a = V/L``
(forward-Euler; the stationary variance is ``sigma^2 / (1 - a/2)``). Rotational turbulence is zero.
The recursion is written here rather than with ``noise.GaussMarkov`` because its coefficients
change at every step with each vehicle's speed and height; the normals come from
``noise.PerVehicleNormals``.

Low-altitude safety (QRSim's recursion blows up as h -> 0 and returns complex numbers below
ground): the height used by the formulas is clamped to [1 ft, 1000 ft]. 1 ft (0.30 m) keeps every
height of the original's PSD test (>= 5 ft) untouched while bounding L away from 0; 1000 ft is the
top of the low-altitude model's validity, where the formulas meet the isotropic medium-altitude
form (L_u = L_w = 1000 ft, sigma_u = sigma_w), so clamping there is continuous. The step fraction
``a = V dt / L`` is additionally capped at 0.5: the pole ``1 - a`` stays in [0.5, 1) (no
oscillation, no blow-up, which happens for a >= 2) and the stationary variance inflation
``1 / (1 - a/2)`` stays <= 4/3. With the clamps the cap only acts below ~0.6 m at 15 m/s.

Axes: the longitudinal gust axis lies along the mean wind of the same direction ``d`` (where the
wind blows FROM, clockwise from north, as ``wind.MeanWind``): -R_z(d) [1, 0, 0] = [-cos d, -sin d, 0],
so a positive longitudinal gust strengthens the mean wind; a positive vertical gust is upwards.
(QRSim's ``Cte`` is R_z(d) transposed, which mirrors the axis about north.)

Streams: noise from ``streams.per_vehicle(name, N)`` (three normals per vehicle per update); the
random direction and the 1001-iteration spin-up at reset from ``streams.per_vehicle(name + ".reset")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.frames import Array, dcm_from_state, ned_to_body
from qrsim_ros.core.noise import PerVehicleNormals
from qrsim_ros.core.rng import RandomStreams
from qrsim_ros.core.validation import (
    BASE_DT_S,
    ConfigError,
    finite,
    in_range,
    non_negative,
    ticks_per_update,
)
from qrsim_ros.core.wind import FT_M

#: Spin-up iterations at reset (QRSim iterates ``for i = 0:1000``).
SPIN_UP_STEPS = 1001


@dataclass(frozen=True)
class TurbulenceParams:
    """Configuration of the per-vehicle turbulence (spec 4.2; QRSim ``aerodynamicturbulence``).

    on: False gives QRSim's ``AerodynamicTurbulence`` base class: zero gusts, no random draws.
    w6_mps: W6 = W20 [m/s], one value or one per vehicle (>= 0). QRSim's noisy config: 2.
    direction_rad: main turbulence direction (where the wind blows FROM, clockwise from north)
        [rad], one value or one per vehicle; None = uniform in [0, 2 pi) per vehicle at each reset.
    z_origin_m: NED z of the ground plane [m] (QRSim ``area.limits(6)``).
    dt_s: update period [s], a multiple of 0.02 (QRSim: the platform dt, 0.02).
    velocity_offset_mps: Vof added to the body speed [m/s] (QRSim 0.5; the PSD test uses 0).
    min_height_ft, max_height_ft: clamp of the height used by the formulas [ft] (see module doc).
    max_step_fraction: cap of V dt / L, in (0, 1].
    spin_up_steps: iterations of the recursion at reset (QRSim 1001).
    """

    w6_mps: float | tuple[float, ...] = 2.0
    direction_rad: float | tuple[float, ...] | None = None
    z_origin_m: float = 0.0
    dt_s: float = BASE_DT_S
    velocity_offset_mps: float = 0.5
    min_height_ft: float = 1.0
    max_height_ft: float = 1000.0
    max_step_fraction: float = 0.5
    spin_up_steps: int = SPIN_UP_STEPS
    on: bool = True

    def __post_init__(self) -> None:
        w6 = np.atleast_1d(non_negative("turbulence.w6_mps", self.w6_mps))
        if w6.ndim != 1 or w6.size < 1:
            raise ConfigError(f"turbulence.w6_mps={self.w6_mps!r} must be a number or a list of numbers")
        if self.direction_rad is not None:
            d = np.atleast_1d(np.asarray(self.direction_rad, float))
            if d.ndim != 1 or d.size < 1 or not np.all(np.isfinite(d)):
                raise ConfigError(f"turbulence.direction_rad={self.direction_rad!r} must be finite, or None")
        finite("turbulence.z_origin_m", self.z_origin_m)
        ticks_per_update("turbulence.dt_s", self.dt_s)
        non_negative("turbulence.velocity_offset_mps", finite("turbulence.velocity_offset_mps",
                                                              self.velocity_offset_mps))
        lo = in_range("turbulence.min_height_ft", self.min_height_ft, 1e-3, 1000.0)
        in_range("turbulence.max_height_ft", self.max_height_ft, lo, 1000.0)
        in_range("turbulence.max_step_fraction", self.max_step_fraction, 1e-6, 1.0)
        if isinstance(self.spin_up_steps, bool) or not isinstance(self.spin_up_steps, (int, np.integer)) \
                or self.spin_up_steps < 0:
            raise ConfigError(f"turbulence.spin_up_steps={self.spin_up_steps!r} must be an integer >= 0")
        if not isinstance(self.on, (bool, np.bool_)):
            raise ConfigError(f"turbulence.on={self.on!r} must be a bool")


def dryden_sigma_and_length(height_ft: ArrayLike, w20_fts: ArrayLike) -> tuple[Array, Array]:
    """MIL-F-8785C low-altitude intensities and scale lengths (spec 4.2), no clamping.

    height_ft (N,) > 0, w20_fts (N,) -> (sigma (N, 3) [ft/s], L (N, 3) [ft]) for axes u, v, w.
    """
    h = np.asarray(height_ft, float)
    w20 = np.broadcast_to(np.asarray(w20_fts, float), h.shape)
    base = 0.177 + 0.000823 * h
    sigma_w = 0.1 * w20
    sigma_uv = sigma_w / base**0.4
    l_uv = h / base**1.2
    return np.stack([sigma_uv, sigma_uv, sigma_w], axis=-1), np.stack([l_uv, l_uv, h], axis=-1)


class DrydenTurbulence:
    """Per-vehicle Dryden turbulence for N vehicles (spec 4.2), sample-and-hold at ``dt_s``.

    Use: ``reset(x)`` after the vehicles' states are set (direction draw + spin-up), then
    ``step(k, x)`` every base tick before the dynamics read ``velocity_body``.
    """

    def __init__(
        self,
        num_vehicles: int,
        params: TurbulenceParams | None = None,
        streams: RandomStreams | None = None,
        name: str = "turbulence",
    ) -> None:
        if num_vehicles < 1:
            raise ConfigError(f"turbulence num_vehicles={num_vehicles!r} must be >= 1")
        self.params = params or TurbulenceParams()
        self.num_vehicles = n = int(num_vehicles)
        self.name = name
        self.ticks = ticks_per_update("turbulence.dt_s", self.params.dt_s)
        self._w20_fts = self._per_vehicle("turbulence.w6_mps", self.params.w6_mps) / FT_M
        self._fixed_direction = (
            None if self.params.direction_rad is None
            else self._per_vehicle("turbulence.direction_rad", self.params.direction_rad)
        )
        self._direction = np.zeros(n) if self._fixed_direction is None else self._fixed_direction.copy()
        self._g_fts = np.zeros((n, 3))
        self._v_body = np.zeros((n, 3))
        self.reseed(streams or RandomStreams(0))

    def _per_vehicle(self, label: str, value: ArrayLike) -> Array:
        v = np.atleast_1d(np.asarray(value, float))
        if v.size == 1:
            return np.full(self.num_vehicles, float(v[0]))
        if v.shape != (self.num_vehicles,):
            raise ConfigError(f"{label} has {v.size} values for {self.num_vehicles} vehicles")
        return v.copy()

    def reseed(self, streams: RandomStreams) -> None:
        """Replace the random streams (QRSim ``resetSeed``); call ``reset`` afterwards."""
        self._normals = PerVehicleNormals(streams.per_vehicle(self.name, self.num_vehicles), width=3)
        self._reset_rngs = streams.per_vehicle(f"{self.name}.reset", self.num_vehicles)

    # --- outputs ------------------------------------------------------------------------------
    @property
    def velocity_body(self) -> Array:
        """Gust air velocity in each body frame FRD [m/s], (N, 3), as of the last update."""
        return self._v_body.copy()

    @property
    def rotational_body(self) -> Array:
        """Rotational turbulence (N, 3) [rad/s]: always zero in this model."""
        return np.zeros((self.num_vehicles, 3))

    @property
    def gust_windframe_fts(self) -> Array:
        """Filter state g (N, 3): gusts along the turbulence axes u, v, w [ft/s]."""
        return self._g_fts.copy()

    @property
    def direction_rad(self) -> Array:
        """Per-vehicle turbulence direction (where the wind blows FROM) [rad], (N,)."""
        return self._direction.copy()

    def set_direction(self, direction_rad: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Set the direction of the given vehicles (e.g. to tie it to the mean wind); held until
        the next reset, which draws a new one unless a direction was configured."""
        idx = self._indices(vehicles)
        d = np.broadcast_to(np.asarray(direction_rad, float), idx.shape)
        if not np.all(np.isfinite(d)):
            raise ValueError(f"direction_rad must be finite, got {np.asarray(direction_rad).tolist()!r}")
        self._direction[idx] = d

    def _indices(self, vehicles: ArrayLike | None) -> NDArray[np.intp]:
        if vehicles is None:
            return np.arange(self.num_vehicles)
        idx = np.atleast_1d(np.asarray(vehicles, dtype=np.intp))
        if idx.ndim != 1 or np.any((idx < 0) | (idx >= self.num_vehicles)):
            raise ValueError(
                f"vehicle indices {np.asarray(vehicles).tolist()!r} outside 0..{self.num_vehicles - 1}"
            )
        return idx

    # --- the recursion ------------------------------------------------------------------------
    def airspeed_and_height(self, x: ArrayLike) -> tuple[Array, Array]:
        """(V [ft/s], h [ft]) of states (N, >=9) as QRSim computes them, before clamping.

        V = (Vof + ||body velocity||) / 0.3048 (ground-relative, the original's choice);
        h = (z_origin - pz) / 0.3048.
        """
        x = np.atleast_2d(np.asarray(x, float))
        speed = np.sqrt(np.einsum("ij,ij->i", x[:, 6:9], x[:, 6:9]))
        v_fts = (self.params.velocity_offset_mps + speed) / FT_M
        h_ft = (self.params.z_origin_m - x[:, 2]) / FT_M
        return v_fts, h_ft

    def coefficients(self, airspeed_fts: ArrayLike, height_ft: ArrayLike, dt_s: float,
                     rows: ArrayLike | None = None) -> tuple[Array, Array]:
        """Recursion coefficients ``g <- a g + b eta`` (each (M, 3)) with the safety clamps.

        ``rows`` selects the vehicles whose W20 applies (default all, M = N).
        """
        p = self.params
        h = np.clip(np.asarray(height_ft, float), p.min_height_ft, p.max_height_ft)
        w20 = self._w20_fts if rows is None else self._w20_fts[np.asarray(rows)]
        sigma, length = dryden_sigma_and_length(h, w20)
        v = np.asarray(airspeed_fts, float)
        frac = np.minimum(v[:, None] * dt_s / length, p.max_step_fraction)
        return 1.0 - frac, np.sqrt(2.0 * frac) * sigma

    def advance(self, airspeed_fts: ArrayLike, height_ft: ArrayLike, dt_s: float | None = None,
                active: ArrayLike | None = None) -> Array:
        """One recursion step of every vehicle at the given airspeed [ft/s] and height [ft].

        The raw MIL-F-8785C filter in the original's units, used by ``step``; tests drive it directly
        with a prescribed V, h and dt. Draws three normals per vehicle (also for inactive ones, so
        each vehicle's stream stays aligned with the tick count). Vehicles with ``active`` False or a
        non-finite V or h hold their gusts. Returns the new g (N, 3) [ft/s].
        """
        dt = self.params.dt_s if dt_s is None else float(dt_s)
        if not (math.isfinite(dt) and dt > 0):
            raise ValueError(f"dt_s={dt_s!r} must be finite and > 0")
        n = self.num_vehicles
        v = np.broadcast_to(np.asarray(airspeed_fts, float), (n,))
        h = np.broadcast_to(np.asarray(height_ft, float), (n,))
        live = np.isfinite(v) & np.isfinite(h) & (v >= 0)
        if active is not None:
            live &= np.broadcast_to(np.asarray(active, bool), (n,))
        eta = self._normals.next()
        a, b = self.coefficients(np.where(live, v, 0.0), np.where(live, h, 1.0), dt)
        self._g_fts = np.where(live[:, None], a * self._g_fts + b * eta, self._g_fts)
        return self._g_fts.copy()

    def spin_up(self, airspeed_fts: ArrayLike, height_ft: ArrayLike, vehicles: ArrayLike | None = None,
                dt_s: float | None = None) -> None:
        """Restart the given vehicles' filters from zero and iterate ``spin_up_steps`` times at a
        fixed airspeed [ft/s] and height [ft] (per selected vehicle), with their reset streams."""
        idx = self._indices(vehicles)
        dt = self.params.dt_s if dt_s is None else float(dt_s)
        v = np.broadcast_to(np.asarray(airspeed_fts, float), idx.shape)
        h = np.broadcast_to(np.asarray(height_ft, float), idx.shape)
        ok = np.isfinite(v) & np.isfinite(h) & (v >= 0)
        a, b = self.coefficients(np.where(ok, v, 0.0), np.where(ok, h, 1.0), dt, rows=idx)
        steps = int(self.params.spin_up_steps)
        eta = np.stack([self._reset_rngs[i].standard_normal((steps, 3)) for i in idx], axis=1)
        g = np.zeros((idx.size, 3))
        for e in eta:  # (steps, M, 3): one vectorised update per iteration
            g = a * g + b * e
        self._g_fts[idx] = g

    # --- simulator interface ------------------------------------------------------------------
    def reset(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Re-initialise vehicles from their true states (N or len(vehicles) rows of (.., 13)).

        Draws a random direction (if none configured), then spins the filter up from zero at the
        state's airspeed and height (QRSim ``setState`` -> ``reset``), all from the reset stream.
        """
        idx = self._indices(vehicles)
        x = np.atleast_2d(np.asarray(x, float))
        if x.shape[0] != idx.size or x.shape[1] < 9:
            raise ValueError(f"reset needs {idx.size} states of >= 9 elements, got shape {x.shape}")
        if not self.params.on:
            self._g_fts[idx] = 0.0
            self._v_body[idx] = 0.0
            return
        if self._fixed_direction is None:
            self._direction[idx] = [2.0 * math.pi * self._reset_rngs[i].random() for i in idx]
        else:
            self._direction[idx] = self._fixed_direction[idx]
        v, h = self.airspeed_and_height(x)
        self.spin_up(v, h, idx)
        self._v_body[idx] = self._to_body(self._g_fts[idx], self._direction[idx], x)

    def step(self, k: int, x: ArrayLike, active: ArrayLike | None = None) -> bool:
        """Update on ticks ``k % ticks == 0`` from the true states x (N, 13); returns whether it did.

        ``active`` (N,) bool: vehicles to update (default all); others, and vehicles with a
        non-finite state, keep their last gust.
        """
        if k % self.ticks != 0:
            return False
        if not self.params.on:
            return True
        x = np.atleast_2d(np.asarray(x, float))
        if x.shape != (self.num_vehicles, x.shape[1]) or x.shape[1] < 9:
            raise ValueError(f"step needs states of shape ({self.num_vehicles}, 13), got {x.shape}")
        live = np.all(np.isfinite(x[:, :9]), axis=1)
        if active is not None:
            live &= np.broadcast_to(np.asarray(active, bool), (self.num_vehicles,))
        v, h = self.airspeed_and_height(np.where(live[:, None], x, 0.0))
        g = self.advance(v, h, active=live)
        self._v_body[live] = self._to_body(g[live], self._direction[live], x[live])
        return True

    @staticmethod
    def _to_body(g_fts: Array, direction_rad: Array, x: Array) -> Array:
        """Gusts (M, 3) [ft/s] along the turbulence axes -> body FRD [m/s] (module doc)."""
        c, s = np.cos(direction_rad), np.sin(direction_rad)
        v_ned = -FT_M * np.stack([c * g_fts[:, 0] - s * g_fts[:, 1], s * g_fts[:, 0] + c * g_fts[:, 1],
                                  g_fts[:, 2]], axis=-1)
        return ned_to_body(dcm_from_state(x), v_ned)
