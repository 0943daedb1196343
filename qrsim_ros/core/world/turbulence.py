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

The recursion is written once, per vehicle, in the kernels of this module (compiled by numba through
``qrsim_ros.core.common.jit``; plain Python with ``QRSIM_DISABLE_JIT=1``); ``step`` is one kernel call.

Streams: noise from ``streams.per_vehicle(name, N)`` (three normals per vehicle per update); the
random direction and the 1001-iteration spin-up at reset from ``streams.per_vehicle(name + ".reset")``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, F8_3D_IN, njit
from qrsim_ros.core.common.noise import PerVehicleNormals
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import (
    ConfigError,
    between,
    check_fields,
    checked,
    finite,
    flag,
    in_range,
    integer_at_least,
    non_negative,
    optional,
    ticks_per_update,
)
from qrsim_ros.core.vehicles.pelican import dcm_ned_to_body_entries
from qrsim_ros.core.world.wind import FT_M

#: Spin-up iterations at reset (QRSim iterates ``for i = 0:1000``).
SPIN_UP_STEPS = 1001


def _per_vehicle_speeds(name: str, value: float | tuple[float, ...]) -> Array:
    """One speed >= 0 or a list of them [m/s], as a 1-D array."""
    w6 = np.atleast_1d(non_negative(name, value))
    if w6.ndim != 1 or w6.size < 1:
        raise ConfigError(f"{name}={value!r} must be a number or a list of numbers")
    return w6


def _per_vehicle_angles(name: str, value: float | tuple[float, ...]) -> Array:
    """One finite angle or a list of them [rad], as a 1-D array."""
    d = np.atleast_1d(np.asarray(value, float))
    if d.ndim != 1 or d.size < 1 or not np.all(np.isfinite(d)):
        raise ConfigError(f"{name}={value!r} must be finite, or None")
    return d


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

    w6_mps: float | tuple[float, ...] = checked(2.0, _per_vehicle_speeds)
    direction_rad: float | tuple[float, ...] | None = checked(None, optional(_per_vehicle_angles))
    z_origin_m: float = checked(0.0, finite)
    dt_s: float = checked(BASE_DT_S, ticks_per_update)
    velocity_offset_mps: float = checked(0.5, finite, non_negative)
    min_height_ft: float = checked(1.0, between(1e-3, 1000.0))
    max_height_ft: float = checked(1000.0, finite)  # and >= min_height_ft
    max_step_fraction: float = checked(0.5, between(1e-6, 1.0))
    spin_up_steps: int = checked(SPIN_UP_STEPS, integer_at_least(0))
    on: bool = checked(True, flag)

    def __post_init__(self) -> None:
        check_fields(self, "turbulence")
        in_range("turbulence.max_height_ft", self.max_height_ft, float(self.min_height_ft), 1000.0)


# --- kernels (spec 4.2): the recursion's one formula, explicit loops over vehicles ----------------
# Compiled by numba when available (qrsim_ros.core.common.jit), plain Python otherwise.

_ROW_IN, _MAT_IN = F8_1D_IN, F8_2D_IN
_PARAMS = "float64, float64, float64, float64"  # dt_s, min_height_ft, max_height_ft, max_step_fraction


@njit("UniTuple(float64, 4)(float64, float64)")
def _sigma_and_length(height_ft: float, w20_fts: float) -> tuple[float, float, float, float]:
    """(sigma_uv, sigma_w [ft/s], L_uv, L_w [ft]) of the low-altitude model, no clamping."""
    base = 0.177 + 0.000823 * height_ft
    sigma_w = 0.1 * w20_fts
    return sigma_w / base**0.4, sigma_w, height_ft / base**1.2, height_ft


@njit(f"UniTuple(float64, 4)(float64, float64, float64, {_PARAMS})")
def _coefficients(v_fts, h_ft, w20_fts, dt_s, min_h_ft, max_h_ft, max_fraction):
    """(a_uv, a_w, b_uv, b_w) of ``g <- a g + b eta`` with the height clamp and the step-fraction cap
    (module doc); NaN in gives NaN out (as np.clip / np.minimum)."""
    h = h_ft
    if h < min_h_ft:
        h = min_h_ft
    elif h > max_h_ft:
        h = max_h_ft
    sigma_uv, sigma_w, l_uv, l_w = _sigma_and_length(h, w20_fts)
    frac_uv = v_fts * dt_s / l_uv
    if frac_uv > max_fraction:
        frac_uv = max_fraction
    frac_w = v_fts * dt_s / l_w
    if frac_w > max_fraction:
        frac_w = max_fraction
    return 1.0 - frac_uv, 1.0 - frac_w, math.sqrt(2.0 * frac_uv) * sigma_uv, math.sqrt(2.0 * frac_w) * sigma_w


@njit(f"boolean(float64, float64, float64, {_PARAMS}, {_ROW_IN}, float64[:])")
def _advance_into(v_fts, h_ft, w20_fts, dt_s, min_h_ft, max_h_ft, max_fraction, eta, g):
    """One recursion step of one vehicle's gusts g (3) [ft/s], in place; a non-finite V or h, or
    V < 0, holds g. Returns whether it stepped."""
    if not (math.isfinite(v_fts) and math.isfinite(h_ft) and v_fts >= 0.0):
        return False
    a_uv, a_w, b_uv, b_w = _coefficients(v_fts, h_ft, w20_fts, dt_s, min_h_ft, max_h_ft, max_fraction)
    g[0] = a_uv * g[0] + b_uv * eta[0]
    g[1] = a_uv * g[1] + b_uv * eta[1]
    g[2] = a_w * g[2] + b_w * eta[2]
    return True


@njit(f"UniTuple(float64, 2)({_ROW_IN}, float64, float64)")
def _airspeed_and_height(x, velocity_offset_mps, z_origin_m):
    """(V [ft/s], h [ft]) of one state (module doc), before clamping."""
    speed = math.sqrt(x[6] * x[6] + x[7] * x[7] + x[8] * x[8])
    return (velocity_offset_mps + speed) / FT_M, (z_origin_m - x[2]) / FT_M


@njit(f"void({_MAT_IN}, float64, float64, float64[::1], float64[::1])")
def _airspeed_and_height_rows(x, velocity_offset_mps, z_origin_m, v_fts, h_ft):
    for i in range(x.shape[0]):
        v_fts[i], h_ft[i] = _airspeed_and_height(x[i], velocity_offset_mps, z_origin_m)


@njit(f"void({_ROW_IN}, float64, {_ROW_IN}, float64[:])")
def _to_body_into(g_fts, direction_rad, x, v_body):
    """Gusts (3) [ft/s] along the turbulence axes of ``direction_rad`` -> body FRD of state x [m/s]."""
    c, s = math.cos(direction_rad), math.sin(direction_rad)
    n0 = -FT_M * (c * g_fts[0] - s * g_fts[1])
    n1 = -FT_M * (s * g_fts[0] + c * g_fts[1])
    n2 = -FT_M * g_fts[2]
    d00, d01, d02, d10, d11, d12, d20, d21, d22 = dcm_ned_to_body_entries(x[3], x[4], x[5])
    v_body[0] = d00 * n0 + d01 * n1 + d02 * n2
    v_body[1] = d10 * n0 + d11 * n1 + d12 * n2
    v_body[2] = d20 * n0 + d21 * n1 + d22 * n2


@njit(f"void({_MAT_IN}, boolean[::1], {_MAT_IN}, {_ROW_IN}, {_ROW_IN}, float64, float64, {_PARAMS}, "
      "float64[:, ::1], float64[:, ::1])")
def _step_rows(x, active, eta, w20_fts, direction_rad, velocity_offset_mps, z_origin_m, dt_s, min_h_ft,
               max_h_ft, max_fraction, g, v_body):
    """``DrydenTurbulence.step`` on every active vehicle with a finite state (others hold)."""
    for i in range(x.shape[0]):
        if not active[i]:
            continue
        finite = True
        for j in range(9):
            if not math.isfinite(x[i, j]):
                finite = False
        if not finite:
            continue
        v_fts, h_ft = _airspeed_and_height(x[i], velocity_offset_mps, z_origin_m)
        _advance_into(v_fts, h_ft, w20_fts[i], dt_s, min_h_ft, max_h_ft, max_fraction, eta[i], g[i])
        _to_body_into(g[i], direction_rad[i], x[i], v_body[i])


@njit(f"void({_ROW_IN}, {_ROW_IN}, boolean[::1], {_ROW_IN}, {_PARAMS}, {_MAT_IN}, float64[:, ::1])")
def _advance_rows(v_fts, h_ft, active, w20_fts, dt_s, min_h_ft, max_h_ft, max_fraction, eta, g):
    for i in range(g.shape[0]):
        if active[i]:
            _advance_into(v_fts[i], h_ft[i], w20_fts[i], dt_s, min_h_ft, max_h_ft, max_fraction, eta[i], g[i])


@njit(f"void({_ROW_IN}, {_ROW_IN}, {_ROW_IN}, {_PARAMS}, float64[:, ::1], float64[:, ::1])")
def _coefficient_rows(v_fts, h_ft, w20_fts, dt_s, min_h_ft, max_h_ft, max_fraction, a, b):
    for i in range(a.shape[0]):
        a_uv, a_w, b_uv, b_w = _coefficients(v_fts[i], h_ft[i], w20_fts[i], dt_s, min_h_ft, max_h_ft,
                                             max_fraction)
        a[i, 0], a[i, 1], a[i, 2] = a_uv, a_uv, a_w
        b[i, 0], b[i, 1], b[i, 2] = b_uv, b_uv, b_w


@njit(f"void({_MAT_IN}, {_MAT_IN}, {F8_3D_IN}, float64[:, ::1])")
def _spin_up_rows(a, b, eta, g):
    """g (M, 3) <- iterate ``g <- a g + b eta[:, k]`` from zero over k (eta (M, steps, 3))."""
    for i in range(g.shape[0]):
        g0 = g1 = g2 = 0.0
        for k in range(eta.shape[1]):
            g0 = a[i, 0] * g0 + b[i, 0] * eta[i, k, 0]
            g1 = a[i, 1] * g1 + b[i, 1] * eta[i, k, 1]
            g2 = a[i, 2] * g2 + b[i, 2] * eta[i, k, 2]
        g[i, 0], g[i, 1], g[i, 2] = g0, g1, g2


@njit(f"void({_ROW_IN}, {_ROW_IN}, float64[:, ::1], float64[:, ::1])")
def _sigma_and_length_rows(h_ft, w20_fts, sigma, length):
    for i in range(h_ft.shape[0]):
        sigma_uv, sigma_w, l_uv, l_w = _sigma_and_length(h_ft[i], w20_fts[i])
        sigma[i, 0], sigma[i, 1], sigma[i, 2] = sigma_uv, sigma_uv, sigma_w
        length[i, 0], length[i, 1], length[i, 2] = l_uv, l_uv, l_w


def dryden_sigma_and_length(height_ft: ArrayLike, w20_fts: ArrayLike) -> tuple[Array, Array]:
    """MIL-F-8785C low-altitude intensities and scale lengths (spec 4.2), no clamping.

    height_ft (N,) > 0, w20_fts (N,) -> (sigma (N, 3) [ft/s], L (N, 3) [ft]) for axes u, v, w.
    """
    h = np.asarray(height_ft, float)
    w20 = np.broadcast_to(np.asarray(w20_fts, float), h.shape)
    sigma, length = np.empty((h.size, 3)), np.empty((h.size, 3))
    _sigma_and_length_rows(h.reshape(-1), w20.reshape(-1), sigma, length)
    return sigma.reshape((*h.shape, 3)), length.reshape((*h.shape, 3))


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
        # kernel arguments, converted once
        p = self.params
        self._clamps = (float(p.min_height_ft), float(p.max_height_ft), float(p.max_step_fraction))
        self._vof_mps = float(p.velocity_offset_mps)
        self._z_origin_m = float(p.z_origin_m)
        self._all_active = np.ones(n, dtype=bool)
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
    velocity_body = copy_of("_v_body", "Gust air velocity in each body frame FRD [m/s], (N, 3), as of the "
                                       "last update.")

    @property
    def rotational_body(self) -> Array:
        """Rotational turbulence (N, 3) [rad/s]: always zero in this model."""
        return np.zeros((self.num_vehicles, 3))

    gust_windframe_fts = copy_of("_g_fts", "Filter state g (N, 3): gusts along the turbulence axes u, v, w "
                                           "[ft/s].")
    direction_rad = copy_of("_direction", "Per-vehicle turbulence direction (where the wind blows FROM) "
                                          "[rad], (N,).")

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
        v_fts, h_ft = np.empty(x.shape[0]), np.empty(x.shape[0])
        _airspeed_and_height_rows(x, self._vof_mps, self._z_origin_m, v_fts, h_ft)
        return v_fts, h_ft

    def coefficients(self, airspeed_fts: ArrayLike, height_ft: ArrayLike, dt_s: float,
                     rows: ArrayLike | None = None) -> tuple[Array, Array]:
        """Recursion coefficients ``g <- a g + b eta`` (each (M, 3)) with the safety clamps.

        ``rows`` selects the vehicles whose W20 applies (default all, M = N).
        """
        w20 = self._w20_fts if rows is None else self._w20_fts[np.asarray(rows)]
        v = np.broadcast_to(np.asarray(airspeed_fts, float), w20.shape)
        h = np.broadcast_to(np.asarray(height_ft, float), w20.shape)
        a, b = np.empty((w20.size, 3)), np.empty((w20.size, 3))
        _coefficient_rows(v, h, w20, float(dt_s), *self._clamps, a, b)
        return a, b

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
        live = self._all_active if active is None else np.broadcast_to(np.asarray(active, bool), (n,)).copy()
        _advance_rows(v, h, live, self._w20_fts, dt, *self._clamps, self._normals.next(), self._g_fts)
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
        eta = np.stack([self._reset_rngs[i].standard_normal((steps, 3)) for i in idx])  # (M, steps, 3)
        g = np.empty((idx.size, 3))
        _spin_up_rows(a, b, eta, g)
        self._g_fts[idx] = g

    def rewind_updates(self, updates: int = 1) -> None:
        """Take back the random draws of the last ``updates`` updates: the next updates draw the same
        normals again. The filter state is left as it is; call ``reset`` afterwards (it re-initialises
        it). For a caller that steps ahead: the ROS wind_field prepares tick k+1's gust from the state
        of t_k, so when a reset ends the episode at t_k it has updated once more than the Simulator,
        which updates at the start of each tick; rewinding one update keeps the streams aligned.
        """
        self._normals.rewind(int(updates))

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
        for row, i in enumerate(idx):
            _to_body_into(self._g_fts[i], self._direction[i], x[row], self._v_body[i])

    def step(self, k: int, x: ArrayLike, active: ArrayLike | None = None) -> bool:
        """Update on ticks ``k % ticks == 0`` from the true states x (N, 13); returns whether it did.

        ``active`` (N,) bool: vehicles to update (default all); others, and vehicles with a
        non-finite state, keep their last gust.
        """
        if k % self.ticks != 0:
            return False
        if not self.params.on:
            return True
        if type(x) is not np.ndarray or x.dtype != np.float64 or x.ndim != 2:
            x = np.atleast_2d(np.asarray(x, float))
        if x.shape != (self.num_vehicles, x.shape[1]) or x.shape[1] < 9:
            raise ValueError(f"step needs states of shape ({self.num_vehicles}, 13), got {x.shape}")
        if active is None:
            live = self._all_active
        elif type(active) is np.ndarray and active.dtype == np.bool_ and active.shape == (self.num_vehicles,):
            live = active
        else:
            live = np.broadcast_to(np.asarray(active, bool), (self.num_vehicles,)).copy()
        p = self.params
        _step_rows(x, live, self._normals.next(), self._w20_fts, self._direction, self._vof_mps,
                   self._z_origin_m, float(p.dt_s), *self._clamps, self._g_fts, self._v_body)
        return True
