"""The identified AscTec Pelican model of QRSim, vectorised over vehicles (spec sections 2.1-2.7).

State ``X`` per vehicle (13): ``[px py pz  phi theta psi  u v w  p q r  thrust]`` -- NED position [m],
ZYX Euler angles [rad], FRD body velocity [m/s], body rates [rad/s], total thrust [N].
Controls ``U`` per vehicle (5): ``[pitch, roll, throttle, yaw_rate, battery]`` -- attitude commands [rad]
(positive pitch = nose up, which accelerates the vehicle towards -x body; positive roll = right side
down), throttle [0..1], yaw-rate command [rad/s] (positive = clockwise seen from above), battery [V].

The rotational part is the identified closed loop of vehicle + on-board attitude controller, the
translational part a point mass with linear drag; there is no inertia tensor or rotor model.
Fleet arrays have a leading vehicle axis: ``X`` is (N, 13), ``U`` is (N, 5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.frames import Array, dcm_from_state

# --- constants of the identified model (spec 2.2, 2.4) ------------------------------------------
DT_S = 0.02
G_MS2 = 9.81
MASS_KG = 1.68
HOVER_THRUST_N = MASS_KG * G_MS2
HOVER_THROTTLE = 0.59004353928  # throttle whose steady thrust equals m*g

STATE_SIZE = 13
CONTROL_SIZE = 5
STATE_NAMES = ("px", "py", "pz", "phi", "theta", "psi", "u", "v", "w", "p", "q", "r", "thrust")
CONTROL_NAMES = ("pitch", "roll", "throttle", "yaw_rate", "battery")

#: Allowed control ranges (the code's values, spec 2.1), rows in CONTROL_NAMES order: [lo, hi].
CONTROL_LIMITS = np.array([[-0.9, 0.9], [-0.9, 0.9], [0.0, 1.0], [-4.5, 4.5], [9.0, 12.0]])

#: SI -> firmware units: 1 pitch/roll unit = 0.025 deg, throttle 0..4096, 1 yaw unit = 254.760/2047 deg/s.
SI_TO_FIRMWARE = np.array(
    [
        -1.0 / np.deg2rad(0.025),
        -1.0 / np.deg2rad(0.025),
        4097.0,
        -1.0 / np.deg2rad(254.760 / 2047.0),
        1.0,
    ]
)
FIRMWARE_TO_SI = 1.0 / SI_TO_FIRMWARE

LOW_THROTTLE_LIMIT_RAW = 300.0
MAX_ANGVEL_RADS = np.deg2rad(150.0)
PQ0 = -3.25060e-04
PQ1 = 1.79797e02
PQ2 = -24.3536
R0 = -4.81783e-03
R1 = -5.08944
CTH0, CTH1, CTH2 = 6.63881e-01, 7.44649e-04, 2.39855e-06
CVB0, CVB1 = -18.0007, 4.23754
TAU0 = 3.07321
TAU1 = 46.8004
KUV = -4.97391e-01
KW = -1.35341


class PelicanInputError(ValueError):
    """A control or state given to the model is malformed, non-finite or out of range."""


def default_state_limits(area_limits_ned: ArrayLike, rate_limit_rads: float = 3.0) -> Array:
    """State limits (12, 2) of the default pelican configuration (spec 2.7).

    ``area_limits_ned`` = [xmin xmax ymin ymax zmin zmax] (NED, m). Angles +/-pi (yaw +/-10 pi),
    body velocities +/-15 m/s, body rates +/-``rate_limit_rads``. Thrust is never checked.
    """
    a = np.asarray(area_limits_ned, float).reshape(3, 2)
    rate = float(rate_limit_rads)
    return np.vstack(
        [
            a,
            [[-np.pi, np.pi], [-np.pi, np.pi], [-10 * np.pi, 10 * np.pi]],
            [[-15.0, 15.0]] * 3,
            [[-rate, rate]] * 3,
        ]
    )


@dataclass(frozen=True)
class PelicanParams:
    """Configuration of a fleet of Pelicans (one value shared by all vehicles).

    dt_s: integration step [s] (0.02 in every QRSim configuration).
    mass_kg: vehicle mass [kg].
    state_limits: (12, 2) limits of X[0:12]; leaving them invalidates (and freezes) the vehicle.
    collision_distance_m: vehicles closer than this (3-D, true positions) are both invalid.
    dyn_noise: (6,) std of the dynamic noise added to [du dv dw dp dq dr] [m/s^2, rad/s^2].
    """

    dt_s: float = DT_S
    mass_kg: float = MASS_KG
    state_limits: Array = field(
        default_factory=lambda: default_state_limits([-1000, 1000, -1000, 1000, -1000, 0])
    )
    collision_distance_m: float = 2.0
    dyn_noise: Array = field(default_factory=lambda: np.zeros(6))


def check_controls(u: ArrayLike) -> Array:
    """Validate SI controls (N, 5); raise PelicanInputError naming vehicle and control."""
    u = np.atleast_2d(np.asarray(u, float))
    if u.ndim != 2 or u.shape[1] != CONTROL_SIZE:
        raise PelicanInputError(f"controls must have shape (N, 5) {CONTROL_NAMES}, got {u.shape}")
    bad = ~np.isfinite(u) | (u < CONTROL_LIMITS[:, 0]) | (u > CONTROL_LIMITS[:, 1])
    if bad.any():
        i, j = np.argwhere(bad)[0]
        lo, hi = CONTROL_LIMITS[j]
        raise PelicanInputError(
            f"vehicle {i}: control {CONTROL_NAMES[j]}={float(u[i, j])!r} outside [{lo}, {hi}]"
        )
    return u


def expand_state(x: ArrayLike, mass_kg: float = MASS_KG) -> Array:
    """Expand states of length 6, 12 or 13 to full (N, 13) states (spec 2.7, setX).

    6: position and attitude, velocities and rates zero, thrust m*g; 12: thrust m*g; 13: as given.
    """
    x = np.atleast_2d(np.asarray(x, float))
    n, k = x.shape
    if k not in (6, 12, 13):
        raise PelicanInputError(f"a state must have 6, 12 or 13 elements, got {k}")
    full = np.zeros((n, STATE_SIZE))
    full[:, :k] = x
    if k < 13:
        full[:, 12] = mass_kg * G_MS2
    return full


def pelican_derivative(
    x: Array, u_fw: Array, wind_body: Array, noise: Array, mass_kg: float, dt_s: float
) -> tuple[Array, Array]:
    """ODE right-hand side of the identified model (spec 2.3) for N vehicles.

    x: (N, 13) states; u_fw: (N, 5) controls in firmware units (see SI_TO_FIRMWARE);
    wind_body: (N, 3) air velocity in body FRD [m/s]; noise: (N, 6) accelerations added to
    [du dv dw dp dq dr]. Returns (xdot (N, 13), a (N, 3)); ``a`` is body acceleration minus gravity,
    computed before the noise (QRSim's accelerometer input; it omits the omega x v term).
    """
    phi, theta = x[:, 3], x[:, 4]
    u, v, w = x[:, 6], x[:, 7], x[:, 8]
    p, q, r = x[:, 9], x[:, 10], x[:, 11]
    fth = x[:, 12]
    pt, rl, th, ya, vb = u_fw.T

    sph, cph = np.sin(phi), np.cos(phi)
    tth, cth = np.tan(theta), np.cos(theta)
    d = dcm_from_state(x)

    xdot = np.empty_like(x)
    xdot[:, 0:3] = np.einsum("nji,nj->ni", d, x[:, 6:9])
    xdot[:, 3] = p + q * sph * tth + r * cph * tth
    xdot[:, 4] = q * cph - r * sph
    xdot[:, 5] = q * sph / cth + r * cph / cth

    pdot = PQ1 * (PQ0 * rl - phi) + PQ2 * p
    pdot = np.where(((p > MAX_ANGVEL_RADS) & (pdot > 0)) | ((p < -MAX_ANGVEL_RADS) & (pdot < 0)), 0.0, pdot)
    qdot = PQ1 * (PQ0 * pt - theta) + PQ2 * q
    qdot = np.where(((q > MAX_ANGVEL_RADS) & (qdot > 0)) | ((q < -MAX_ANGVEL_RADS) & (qdot < 0)), 0.0, qdot)
    rdot = R0 * ya + R1 * r

    # thrust: low-throttle first order, else slew-limited towards the polynomial, capped by battery
    df = (CTH0 + CTH1 * th + CTH2 * th * th) - fth
    tau = np.where(np.abs(df) < TAU1 * dt_s, df / dt_s, np.sign(df) * TAU1)
    f_max = CVB0 + CVB1 * vb
    fdot_high = np.where(fth + tau * dt_s > f_max, (f_max - fth) / dt_s, tau)
    fdot = np.where(th < LOW_THROTTLE_LIMIT_RAW, TAU0 * df, fdot_high)

    g_body = G_MS2 * d[:, :, 2]
    ra = g_body.copy()
    ra[:, 2] -= (fth + fdot * dt_s) / mass_kg

    acc = np.empty((x.shape[0], 3))
    acc[:, 0] = -q * w + r * v + ra[:, 0] + KUV * (u - wind_body[:, 0])
    acc[:, 1] = -r * u + p * w + ra[:, 1] + KUV * (v - wind_body[:, 1])
    acc[:, 2] = -p * v + q * u + ra[:, 2] + KW * (w - wind_body[:, 2])
    a = acc - g_body

    xdot[:, 6:9] = acc + noise[:, 0:3]
    xdot[:, 9] = pdot + noise[:, 3]
    xdot[:, 10] = qdot + noise[:, 4]
    xdot[:, 11] = rdot + noise[:, 5]
    xdot[:, 12] = fdot
    return xdot, a


def heun_step(
    x: Array, u_fw: Array, wind_body: Array, noise: Array, mass_kg: float, dt_s: float
) -> tuple[Array, Array]:
    """One Heun (explicit RK2) step with inputs held over the step (spec 2.5).

    Returns (x_next (N, 13), a (N, 3)) where ``a`` is the mean of the two stages' ``a``.
    """
    k1, a1 = pelican_derivative(x, u_fw, wind_body, noise, mass_kg, dt_s)
    k2, a2 = pelican_derivative(x + k1 * dt_s, u_fw, wind_body, noise, mass_kg, dt_s)
    return x + (k1 + k2) * (0.5 * dt_s), 0.5 * (a1 + a2)


class PelicanFleet:
    """N Pelicans integrated together (spec 2.7 update order, vectorised).

    Per ``step``: controls are checked and scaled, dynamic noise drawn (one seeded stream per
    vehicle), every valid vehicle integrated with Heun RK2, then validity is evaluated: a vehicle
    whose state is non-finite, outside ``state_limits`` or closer than ``collision_distance_m`` to
    any other vehicle becomes invalid and stays frozen at that state until ``set_state``.
    """

    def __init__(
        self,
        num_vehicles: int,
        params: PelicanParams | None = None,
        noise_rngs: list[np.random.Generator] | None = None,
    ) -> None:
        if num_vehicles < 1:
            raise PelicanInputError(f"num_vehicles must be >= 1, got {num_vehicles}")
        self.params = params or PelicanParams()
        self.num_vehicles = int(num_vehicles)
        limits = np.asarray(self.params.state_limits, float)
        if limits.shape != (12, 2):
            raise PelicanInputError(f"state_limits must have shape (12, 2), got {limits.shape}")
        self._limits = limits
        self._dyn_noise = np.broadcast_to(np.asarray(self.params.dyn_noise, float), (6,)).copy()
        if noise_rngs is None:
            noise_rngs = [np.random.default_rng(s) for s in np.random.SeedSequence().spawn(num_vehicles)]
        if len(noise_rngs) != num_vehicles:
            raise PelicanInputError("one dynamic-noise generator per vehicle is required")
        self._noise_rngs = noise_rngs
        self._x = expand_state(np.zeros((num_vehicles, 6)), self.params.mass_kg)
        self._a = np.zeros((num_vehicles, 3))
        self._valid = np.zeros(num_vehicles, bool)
        self._invalid_reason = [""] * num_vehicles

    # --- accessors --------------------------------------------------------------------------
    @property
    def state(self) -> Array:
        """True states (N, 13) (a copy)."""
        return self._x.copy()

    @property
    def accel_body(self) -> Array:
        """RK2-averaged ``a`` (N, 3) of the last step: body acceleration minus gravity [m/s^2]."""
        return self._a.copy()

    @property
    def valid(self) -> NDArray[np.bool_]:
        """Per-vehicle validity (N,)."""
        return self._valid.copy()

    @property
    def invalid_reason(self) -> list[str]:
        """Per-vehicle reason the vehicle became invalid ('' while valid)."""
        return list(self._invalid_reason)

    # --- state setting ----------------------------------------------------------------------
    def set_state(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Set states of length 6, 12 or 13 (spec 2.7 setX) and mark those vehicles valid.

        ``vehicles`` selects which rows (default: all, and ``x`` must have N rows). A state outside
        the limits raises PelicanInputError naming the vehicle and element.
        """
        idx = np.arange(self.num_vehicles) if vehicles is None else np.atleast_1d(vehicles)
        full = expand_state(x, self.params.mass_kg)
        if full.shape[0] != idx.size:
            raise PelicanInputError(f"got {full.shape[0]} states for {idx.size} vehicles")
        bad = ~np.isfinite(full[:, :12]) | (full[:, :12] < self._limits[:, 0]) | (
            full[:, :12] > self._limits[:, 1]
        )
        if bad.any():
            i, j = np.argwhere(bad)[0]
            lo, hi = self._limits[j]
            raise PelicanInputError(
                f"vehicle {int(idx[i])}: initial {STATE_NAMES[j]}={float(full[i, j])!r} outside [{lo}, {hi}]"
            )
        if not np.all(np.isfinite(full[:, 12])):
            raise PelicanInputError("initial thrust must be finite")
        self._x[idx] = full
        self._a[idx] = 0.0
        self._valid[idx] = True
        for i in idx:
            self._invalid_reason[int(i)] = ""

    # --- stepping ---------------------------------------------------------------------------
    def step(self, controls: ArrayLike, wind_body: ArrayLike | None = None) -> None:
        """Advance every valid vehicle by ``dt_s``.

        controls: (N, 5) SI controls (see module doc); wind_body: (N, 3) air velocity in body FRD
        [m/s] (mean wind + turbulence), default still air.
        """
        n = self.num_vehicles
        u = np.atleast_2d(np.asarray(controls, float))
        if u.ndim != 2 or u.shape[1] != CONTROL_SIZE:
            raise PelicanInputError(f"controls must have shape (N, 5) {CONTROL_NAMES}, got {u.shape}")
        if u.shape[0] != n:
            raise PelicanInputError(f"controls for {u.shape[0]} vehicles, fleet has {n}")
        wind = np.zeros((n, 3)) if wind_body is None else np.asarray(wind_body, float).reshape(n, 3)
        live = self._valid.copy()
        if not live.any():
            return
        # Invalid vehicles are frozen and ignore their controls, as in QRSim (no check either).
        try:
            check_controls(u[live])
        except PelicanInputError as exc:
            vehicle = np.flatnonzero(live)[int(str(exc).split()[1].rstrip(":"))]
            raise PelicanInputError(f"vehicle {vehicle}:" + str(exc).split(":", 1)[1]) from None
        noise = np.zeros((n, 6))
        if np.any(self._dyn_noise):
            for i in np.flatnonzero(live):
                noise[i] = self._dyn_noise * self._noise_rngs[i].standard_normal(6)
        x_next, a = heun_step(
            self._x[live], u[live] * SI_TO_FIRMWARE, wind[live], noise[live],
            self.params.mass_kg, self.params.dt_s,
        )
        self._x[live] = x_next
        self._a[live] = a
        self._update_validity(live)

    def _in_collision(self, pos_ned: Array) -> NDArray[np.bool_]:
        """Per vehicle: another vehicle (valid or not) is closer than the collision distance."""
        d_m = self.params.collision_distance_m
        near = np.zeros(len(pos_ned), bool)
        if not np.all(np.isfinite(pos_ned)):
            pos_ned = np.where(np.isfinite(pos_ned), pos_ned, np.inf)
        if len(pos_ned) <= 64:  # dense distances are cheaper than a tree for small fleets
            diff = pos_ned[:, None, :] - pos_ned[None, :, :]
            with np.errstate(invalid="ignore"):
                dist = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            np.fill_diagonal(dist, np.inf)
            return np.any(dist < d_m, axis=1)
        from scipy.spatial import cKDTree  # only large fleets need it; keeps CLI start-up light

        finite = np.all(np.isfinite(pos_ned), axis=1)
        idx = np.flatnonzero(finite)
        pairs = cKDTree(pos_ned[idx]).query_pairs(np.nextafter(d_m, 0.0), output_type="ndarray")
        near[idx[pairs.ravel()]] = True
        return near

    def _update_validity(self, moved: NDArray[np.bool_]) -> None:
        x = self._x
        lo, hi = self._limits[:, 0], self._limits[:, 1]
        with np.errstate(invalid="ignore"):
            finite = np.all(np.isfinite(x), axis=1)
            outside = (x[:, :12] < lo) | (x[:, :12] > hi)
            near = self._in_collision(x[:, 0:3]) if self.num_vehicles > 1 else np.zeros(1, bool)
        for i in np.flatnonzero(moved):
            if not finite[i]:
                reason = "non-finite state"
            elif outside[i].any():
                j = int(np.argmax(outside[i]))
                reason = f"{STATE_NAMES[j]}={x[i, j]:.6g} outside [{lo[j]:.6g}, {hi[j]:.6g}]"
            elif near[i]:
                reason = f"collision (closer than {self.params.collision_distance_m} m to another vehicle)"
            else:
                continue
            self._valid[i] = False
            self._invalid_reason[i] = reason
