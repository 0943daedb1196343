"""The three plume concentration models of QRSim's plume tasks (spec 4.4, tasks 3A-3G of spec 5.4).

- ``GaussianPlume``: a static 3-D Gaussian blob (task 3A).
- ``GaussianDispersionPlume``: the steady Gaussian dispersion plume of Stockie (2011) with ground
  reflection, one or more point sources (tasks 3B-3D).
- ``GaussianPuffPlume``: puffs emitted at exponentially distributed times, advected downwind and spread
  by the same dispersion law (tasks 3E-3G).

Frames and units: every position is NED [m] in the flight-area frame (z down, ground at z = 0, so a
source 10 m above ground has z = -10); concentrations are in the units of the emission rate / puff mass
(QRSim uses arbitrary units); time in seconds of simulated time.

Wind enters the dispersion models as ``wind_speed_mps`` (> 0; QRSim requires the mean wind on) and
``wind_direction_rad``: the direction the wind blows FROM, clockwise from north, as in the mean-wind model,
so the wind velocity is ``speed * [-cos(dir), -sin(dir), 0]`` NED. QRSim evaluates the mean wind at 6 m
above ground with zero attitude (speed 0.99676 W6); the scenario layer passes that value in. Points are
expressed in the downwind frame of each source with ``C = [[vx, vy], [-vy, vx]] / u``:
``[x', y'] = C (p_xy - s_xy)``, x' downwind, y' crosswind.

Every model can be built from explicit parameters (replay, tests, users) or drawn the way QRSim's area
``reset()`` draws it (``sample``). Each offers ``concentration(points_ned, t)`` (one value per point,
vectorised over points and sources/puffs), ``reference_locations`` (the M points at which an agent must
predict the concentration) and ``reference_samples`` (the "true" samples the task reward compares against).

Random draws: the ``rng`` arguments take a ``numpy.random.Generator`` (used as is; QRSim draws everything
of a plume area from one stream, so passing the same Generator to ``sample``, ``reference_locations`` and
``reference_samples`` reproduces that structure) or a ``RandomStreams`` (a fresh Generator of a named
stream, ``f"{stream_name}.<purpose>"``; identical for identical seeds, so keep and pass a Generator to get a
different plume at every episode reset).

Source indices in puff lists are 0-based (QRSim's are 1-based).
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import dcm_ned_to_body
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.common.validation import (
    ConfigError,
    area_limits,
    finite,
    non_negative,
    positive,
    shape,
    ticks_per_update,
)

Array = NDArray[np.float64]
RngLike = np.random.Generator | RandomStreams | int

#: The flight area of every QRSim plume task, [xmin xmax ymin ymax zmin zmax] NED [m] (spec 5.4).
PLUME_AREA_LIMITS_NED: tuple[float, ...] = (-140.0, 140.0, -140.0, 140.0, -80.0, 0.0)
#: Fraction of the reference locations drawn uniformly in the whole box (the rest inside the support).
UNIFORM_LOCATION_FRACTION = 0.2
#: Support threshold factor: c_eps = 1e-3 x (peak / smallest emission rate) (spec 4.4).
C_EPS_FACTOR = 1e-3
#: Interval between the reference samples of the puff model [s] (QRSim's TIME_BETWEEN_REF_SAMPLES).
TIME_BETWEEN_REF_SAMPLES_S = 60.0
#: Puff "1 % width": a puff's trailing edge is where its Gaussian has fallen to 1 % of the peak.
PUFF_EDGE_FRACTION = 0.01
#: Safety cap on the rejection rounds of ``reference_locations`` (each round redraws all missing points).
MAX_REJECTION_ROUNDS = 100_000

# Task values (spec 5.4).
DEFAULT_A = 0.33
DEFAULT_B = 0.86
DEFAULT_Q_RANGE = (0.1, 2.5)
DEFAULT_MU_S = 5.0
DEFAULT_SIGMA_RANGE_M = (3.0, 20.0)
DEFAULT_STREAM = "plume_area"


# --- helpers -------------------------------------------------------------------------------------------

def _streams_if_seed(rng: RngLike) -> np.random.Generator | RandomStreams:
    """An integer seed becomes the scenario's RandomStreams (named streams); other values pass."""
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return RandomStreams(int(rng))
    return rng


def _generator(rng: RngLike, stream: str) -> np.random.Generator:
    """The Generator to draw from: ``rng`` itself, or the named stream of a RandomStreams (or seed)."""
    rng = _streams_if_seed(rng)
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, RandomStreams):
        return rng.get(stream)
    raise TypeError(f"rng must be a numpy.random.Generator or a RandomStreams, got {type(rng).__name__}")


def _points(points_ned: ArrayLike) -> Array:
    """Query points as an (M, 3) float array; a single (3,) point becomes (1, 3)."""
    p = np.asarray(points_ned, dtype=float)
    if p.ndim == 1:
        p = p[None, :]
    if p.ndim != 2 or p.shape[1] != 3:
        raise ValueError(f"points_ned must have shape (M, 3) or (3,), got {np.shape(points_ned)}")
    return p


def _sources(name: str, value: ArrayLike) -> Array:
    """Source positions as a finite (S, 3) NED array with S >= 1; a single (3,) source becomes (1, 3)."""
    try:
        s = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a numeric (S, 3) NED array") from None
    if s.ndim == 1 and s.shape == (3,):
        s = s[None, :]
    if s.ndim != 2 or s.shape[1] != 3 or s.shape[0] < 1 or not np.all(np.isfinite(s)):
        raise ConfigError(f"{name} must be a finite (S, 3) NED array with S >= 1, "
                          f"got shape {np.shape(value)}")
    return s


def _range(name: str, value: ArrayLike, *, integer: bool = False, minimum: float = 0.0) -> Array:
    """A [lo, hi] pair with minimum < lo <= hi (integers >= minimum if ``integer``)."""
    r = shape(name, value, (2,))
    if integer:
        if np.any(r != np.round(r)) or r[0] < minimum or r[0] > r[1]:
            raise ConfigError(f"{name}={r.tolist()} must be integers [lo, hi] with {minimum:g} <= lo <= hi")
    elif not (minimum < r[0] <= r[1]):
        raise ConfigError(f"{name}={r.tolist()} must be [lo, hi] with {minimum:g} < lo <= hi")
    return r


def _positive_scalar(name: str, value: float) -> float:
    v = finite(name, value)
    if v <= 0:
        raise ConfigError(f"{name}={value!r} must be > 0")
    return v


def uniform_in_box(rng: np.random.Generator, limits_ned: Array, n: int, fraction: float = 1.0) -> Array:
    """``n`` points uniform in the central ``fraction`` of the box ``limits_ned`` (lph + f·range·(U − ½)).

    Draws point by point (x, y, z of point 1, then of point 2, ...) as MATLAB's ``rand(3, n)``.
    """
    lim = np.asarray(limits_ned, float).reshape(3, 2)
    centre = 0.5 * (lim[:, 0] + lim[:, 1])
    extent = fraction * (lim[:, 1] - lim[:, 0])
    return centre + extent * (rng.random((int(n), 3)) - 0.5)


def downwind_matrix(wind_speed_mps: float, wind_direction_rad: float) -> Array:
    """QRSim's ``C`` (2, 2): NED x/y offsets -> downwind x', crosswind y' (spec 4.4)."""
    vx = -wind_speed_mps * math.cos(wind_direction_rad)
    vy = -wind_speed_mps * math.sin(wind_direction_rad)
    return np.array([[vx, vy], [-vy, vx]]) / wind_speed_mps


# --- common base ---------------------------------------------------------------------------------------

class _PlumeModel:
    """Shared parts: area, support threshold, reference-location sampling, Steppable no-op."""

    #: The location selection keeps points with c >= c_eps (puff model) instead of c > c_eps.
    _inclusive_support: ClassVar[bool] = False

    area_limits_ned: Array
    c_eps: float

    def concentration(self, points_ned: ArrayLike, t: float | None = None) -> Array:  # pragma: no cover
        raise NotImplementedError

    def support_concentration(self, points_ned: ArrayLike) -> Array:
        """The concentration that decides whether a point lies in the plume's support (spec 4.4)."""
        return self.concentration(points_ned)

    def reference_locations(self, num_locations: int, rng: RngLike,
                            stream_name: str = DEFAULT_STREAM) -> Array:
        """The M locations (M, 3) NED [m] at which an agent must predict the concentration (spec 4.4).

        The first ``ceil(0.2 M)`` are uniform in the whole area box; the remaining ones are drawn
        uniformly in the box and kept only inside the support (``c > c_eps``; puff model: average
        model ``>= c_eps``), in draw order, each round redrawing as many points as are still missing.
        """
        m = int(num_locations)
        if m != num_locations or m < 1:
            raise ConfigError(f"num_locations={num_locations!r} must be an integer >= 1")
        gen = _generator(rng, f"{stream_name}.locations")
        n_uniform = math.ceil(UNIFORM_LOCATION_FRACTION * m)
        locations = np.empty((m, 3))
        locations[:n_uniform] = uniform_in_box(gen, self.area_limits_ned, n_uniform)
        filled = n_uniform
        for _ in range(MAX_REJECTION_ROUNDS):
            if filled == m:
                return locations
            candidates = uniform_in_box(gen, self.area_limits_ned, m - filled)
            c = self.support_concentration(candidates)
            keep = c >= self.c_eps if self._inclusive_support else c > self.c_eps
            kept = candidates[keep]
            locations[filled:filled + len(kept)] = kept
            filled += len(kept)
        raise RuntimeError(f"could not find {m - n_uniform} locations with concentration above c_eps="
                           f"{self.c_eps:g} in {MAX_REJECTION_ROUNDS} rounds: is the plume inside the area?")

    def step(self, k: int) -> bool:
        """Static models have nothing to update (QRSim's 72 s no-op area update); always False."""
        return False


class _StaticPlume(_PlumeModel):
    def reference_samples(self, locations_ned: ArrayLike) -> Array:
        """The reference samples (1, M): the concentration at the locations (one sample per location)."""
        return self.concentration(locations_ned)[None, :]


# --- static Gaussian (task 3A) -------------------------------------------------------------------------

class GaussianPlume(_StaticPlume):
    """Static 3-D Gaussian concentration ``c(p) = Q0 exp(-½ (p − s)ᵀ Σ⁻¹ (p − s))`` (spec 4.4, task 3A).

    ``Σ = Rᵀ diag(σ)² R`` with ``R`` the NED->body rotation of yaw ``yaw_rad`` only (the principal axis of
    ``σ[0]`` points along bearing ``yaw_rad`` in the horizontal plane, ``σ[2]`` is vertical).

    Args:
        source_ned: source position (3,) or (1, 3), NED [m].
        sigmas_m: standard deviations along the three principal axes (3,) [m], > 0.
        yaw_rad: bearing of the first principal axis, clockwise from north [rad].
        q0: peak concentration (QRSim: 1), > 0.
        area_limits_ned: flight area [xmin xmax ymin ymax zmin zmax] used by ``reference_locations``.

    ``c_eps = 1e-3 Q0``; ``concentration`` ignores ``t`` (static plume).
    """

    def __init__(self, source_ned: ArrayLike, sigmas_m: ArrayLike, yaw_rad: float, q0: float = 1.0, *,
                 area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED) -> None:
        src = _sources("source_ned", source_ned)
        if src.shape[0] != 1:
            raise ConfigError(f"source_ned must be a single source (3,), got shape {np.shape(source_ned)}")
        self.sources_ned: Array = src
        sig = shape("sigmas_m", sigmas_m, (3,))
        self.sigmas_m: Array = positive("sigmas_m", sig)
        self.yaw_rad = finite("yaw_rad", yaw_rad)
        self.q0 = _positive_scalar("q0", q0)
        self.area_limits_ned = area_limits("area_limits_ned", area_limits_ned)
        self.c_eps = C_EPS_FACTOR * self.q0
        r = dcm_ned_to_body(0.0, 0.0, self.yaw_rad)
        sqrt_cov = r.T @ np.diag(self.sigmas_m)
        self.covariance_m2: Array = sqrt_cov @ sqrt_cov.T
        self._inv_cov = np.linalg.inv(self.covariance_m2)

    @classmethod
    def sample(cls, rng: RngLike, area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED, *,
               sigma_range_m: ArrayLike = DEFAULT_SIGMA_RANGE_M, q0: float = 1.0,
               stream_name: str = DEFAULT_STREAM) -> GaussianPlume:
        """A plume drawn as QRSim's reset does: yaw = π·U, σ_i ~ U(sigma_range), source uniform in the
        central 80 % of the box (all three axes); Q0 = 1."""
        rng = _streams_if_seed(rng)
        lim = area_limits("area_limits_ned", area_limits_ned)
        lo, hi = _range("sigma_range_m", sigma_range_m)
        gen = _generator(rng, f"{stream_name}.reset")
        yaw = math.pi * gen.random()
        sigmas = lo + gen.random(3) * (hi - lo)
        source = uniform_in_box(gen, lim, 1, fraction=0.8)
        return cls(source, sigmas, yaw, q0, area_limits_ned=lim)

    def concentration(self, points_ned: ArrayLike, t: float | None = None) -> Array:
        """Concentration (M,) at points (M, 3) NED [m]; ``t`` is ignored (static plume)."""
        d = _points(points_ned) - self.sources_ned[0]
        mahalanobis2 = np.einsum("mi,ij,mj->m", d, self._inv_cov, d)
        return self.q0 * np.exp(-0.5 * mahalanobis2)


# --- Gaussian dispersion (tasks 3B-3D) -----------------------------------------------------------------

class _WindFrame:
    """Sources, wind and dispersion law shared by the two dispersion models."""

    sources_ned: Array
    wind_speed_mps: float
    wind_direction_rad: float
    a: float
    b: float
    _C: Array

    def _init_wind(self, sources_ned: ArrayLike, wind_speed_mps: float, wind_direction_rad: float,
                   a: float, b: float) -> None:
        self.sources_ned = _sources("sources_ned", sources_ned)
        u = finite("wind_speed_mps", wind_speed_mps)
        if u <= 0:
            raise ConfigError(f"wind_speed_mps={wind_speed_mps!r} must be > 0: the dispersion plumes need "
                              "the mean wind on (QRSim asserts a positive wind at 6 m)")
        self.wind_speed_mps = u
        self.wind_direction_rad = finite("wind_direction_rad", wind_direction_rad)
        self.a = _positive_scalar("a", a)
        self.b = _positive_scalar("b", b)
        self._C = downwind_matrix(u, self.wind_direction_rad)

    @property
    def num_sources(self) -> int:
        return int(self.sources_ned.shape[0])

    @property
    def wind_velocity_ned(self) -> Array:
        """The mean wind used by the plume, speed·[−cos dir, −sin dir, 0] NED [m/s]."""
        return np.array([self._C[0, 0], self._C[0, 1], 0.0]) * self.wind_speed_mps

    @property
    def downwind_unit_ned(self) -> Array:
        """Unit vector (2,) of the downwind direction in the NED x/y plane (the x' axis)."""
        return self._C[0].copy()

    def _source_frame(self, points: Array) -> tuple[Array, Array, Array, Array]:
        """x', y', z − z_s, z + z_s for every (source, point): four (S, M) arrays."""
        dx = points[None, :, 0] - self.sources_ned[:, 0, None]
        dy = points[None, :, 1] - self.sources_ned[:, 1, None]
        xp = self._C[0, 0] * dx + self._C[0, 1] * dy
        yp = self._C[1, 0] * dx + self._C[1, 1] * dy
        z = points[None, :, 2]
        zs = self.sources_ned[:, 2, None]
        return xp, yp, z - zs, z + zs


class GaussianDispersionPlume(_WindFrame, _StaticPlume):
    """Steady Gaussian dispersion plume with ground reflection (Stockie 2011; spec 4.4, tasks 3B-3D).

    ``c(p) = Σ_s Q_s / (π u D) · exp(−y'²/D) · [exp(−(z − z_s)²/D) + exp(−(z + z_s)²/D)]``,
    ``D = 2 a x'^b`` (i.e. σ_y² = σ_z² = a x'^b), ``[x', y'] = C (p_xy − s_xy)``; zero where x' <= 0 (no
    upwind concentration; at x' = 0 the formula is singular and its limit off the source is 0).
    The image term reflects about the ground z = 0, so ∂c/∂z = 0 at ground level.

    Args:
        sources_ned: (S, 3) NED source positions [m] (z < 0 above ground), S >= 1.
        emission_rates: (S,) emission rates Q_s > 0.
        wind_speed_mps: mean wind speed u > 0 [m/s] (QRSim: evaluated at 6 m above ground).
        wind_direction_rad: direction the wind blows FROM, clockwise from north [rad].
        a, b: dispersion parameters (> 0; tasks: 0.33, 0.86).
        area_limits_ned: flight area used by ``reference_locations``.

    ``c_eps = 1e-3 min(Q_s)``; ``concentration`` ignores ``t`` (steady plume).
    """

    def __init__(self, sources_ned: ArrayLike, emission_rates: ArrayLike, wind_speed_mps: float,
                 wind_direction_rad: float, a: float = DEFAULT_A, b: float = DEFAULT_B, *,
                 area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED) -> None:
        self._init_wind(sources_ned, wind_speed_mps, wind_direction_rad, a, b)
        q = np.atleast_1d(np.asarray(emission_rates, dtype=float))
        q = shape("emission_rates", q, (self.num_sources,))
        self.emission_rates: Array = positive("emission_rates", q)
        self.area_limits_ned = area_limits("area_limits_ned", area_limits_ned)
        self.c_eps = C_EPS_FACTOR * float(self.emission_rates.min())

    @classmethod
    def sample(cls, rng: RngLike, area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED, *,
               wind_speed_mps: float, wind_direction_rad: float,
               num_sources_range: ArrayLike = (1, 1), q_range: ArrayLike = DEFAULT_Q_RANGE,
               a: float = DEFAULT_A, b: float = DEFAULT_B,
               stream_name: str = DEFAULT_STREAM) -> GaussianDispersionPlume:
        """A plume drawn as QRSim's reset does: S ~ uniform integer in num_sources_range (no draw when
        fixed), Q_s ~ U(q_range), sources uniform in the central 80 % of the box (all three axes)."""
        rng = _streams_if_seed(rng)
        lim = area_limits("area_limits_ned", area_limits_ned)
        s_lo, s_hi = (int(v) for v in _range("num_sources_range", num_sources_range, integer=True, minimum=1))
        q_lo, q_hi = _range("q_range", q_range)
        gen = _generator(rng, f"{stream_name}.reset")
        n = s_lo if s_lo == s_hi else int(gen.integers(s_lo, s_hi + 1))
        rates = q_lo + (q_hi - q_lo) * gen.random(n)
        sources = uniform_in_box(gen, lim, n, fraction=0.8)
        return cls(sources, rates, wind_speed_mps, wind_direction_rad, a, b, area_limits_ned=lim)

    def concentration(self, points_ned: ArrayLike, t: float | None = None) -> Array:
        """Concentration (M,) at points (M, 3) NED [m], summed over sources; ``t`` is ignored."""
        xp, yp, zm, zp = self._source_frame(_points(points_ned))
        downwind = xp > 0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            den = 2.0 * self.a * np.where(downwind, xp, 1.0) ** self.b
            c = (self.emission_rates[:, None] / (math.pi * self.wind_speed_mps * den)
                 * np.exp(-(yp**2) / den) * (np.exp(-(zm**2) / den) + np.exp(-(zp**2) / den)))
        return np.where(downwind, c, 0.0).sum(axis=0)


# --- Gaussian puff dispersion (tasks 3E-3G) ------------------------------------------------------------

class GaussianPuffPlume(_WindFrame, _PlumeModel):
    """Puffs emitted at exponential inter-emission times, advected downwind (spec 4.4, tasks 3E-3G).

    A puff is ``[source index (0-based), emission time T [s], mass q]``. The concentration at time t:
    ``c(p, t) = Σ_puffs q / (2π D)^{3/2} · exp(−((x' − u (t − T))² + y'²)/D) · [exp(−(z − z_s)²/D) +
    exp(−(z + z_s)²/D)]``, ``D = 2 a x'^b`` with x' of the query point (not of the puff), zero where
    x' <= 0 (QRSim: x' < 0, and NaN -> 0, which covers x' = 0).

    Emission (``propagate_to(t)``): first drop the puffs whose trailing edge
    ``s_xy + (u (t − T) − w) ê_downwind``, ``w = sqrt(−ln 0.01 · 2a (u (t − T))^b)``, has left the x/y
    limits of the area; then for every source, while its next emission time ``T_s < t``: emit a puff of mass
    ``q ~ U(q_range)`` at ``T_s`` and advance ``T_s += Exp(mean mu_s)``. The emission source is either
    ``rng`` (random, as QRSim) or ``emissions`` (an explicit schedule of puffs, e.g. a recorded
    ``emission_log``, replayed exactly: each call emits the not yet emitted entries with ``T < t`` in
    schedule order, which reproduces the original puff list when stepped at the same times). With neither,
    nothing is emitted: only the given ``puffs`` move downwind and are dropped.

    Args:
        sources_ned: (S, 3) NED source positions [m].
        wind_speed_mps, wind_direction_rad, a, b: as ``GaussianDispersionPlume``.
        mu_s: mean inter-emission time [s] (> 0; tasks: 5).
        q_range: [lo, hi] of the uniform puff mass (0 < lo <= hi; tasks: [0.1, 2.5]).
        area_limits_ned: flight area; its x/y limits decide when a puff is dropped.
        rng: Generator (or RandomStreams -> stream ``f"{stream_name}.emissions"``) of the emission process.
        emissions: (E, 3) explicit emission schedule [source, T, q] instead of ``rng``.
        puffs: (P, 3) initially active puffs (default none), e.g. a recorded puff list.
        next_emission_times_s: (S,) first emission times; default drawn from ``rng`` (Exp(mu_s)).
        time_s: the model's initial time [s] (time of the last propagation).
        area_dt_s: update period of ``step`` [s] (QRSim: area.dt = 1 s).

    ``c_eps = 1e-3 q_range[0]``; the locations are selected with the average model (``average_model``).
    """

    _inclusive_support: ClassVar[bool] = True

    def __init__(self, sources_ned: ArrayLike, wind_speed_mps: float, wind_direction_rad: float,
                 a: float = DEFAULT_A, b: float = DEFAULT_B, mu_s: float = DEFAULT_MU_S,
                 q_range: ArrayLike = DEFAULT_Q_RANGE, *,
                 area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED,
                 rng: RngLike | None = None, emissions: ArrayLike | None = None,
                 puffs: ArrayLike | None = None, next_emission_times_s: ArrayLike | None = None,
                 time_s: float = 0.0, area_dt_s: float = 1.0,
                 stream_name: str = DEFAULT_STREAM) -> None:
        self._init_wind(sources_ned, wind_speed_mps, wind_direction_rad, a, b)
        self.mu_s = _positive_scalar("mu_s", mu_s)
        self.q_range: Array = _range("q_range", q_range)
        self.area_limits_ned = area_limits("area_limits_ned", area_limits_ned)
        self.c_eps = C_EPS_FACTOR * float(self.q_range[0])
        self.area_dt_s = finite("area_dt_s", area_dt_s)
        self._ticks = ticks_per_update("area_dt_s", self.area_dt_s)
        self.time_s = finite("time_s", time_s)
        if rng is not None and emissions is not None:
            raise ConfigError("GaussianPuffPlume takes either rng (random emissions) or emissions "
                              "(replayed schedule), not both")
        self._rng = None if rng is None else _generator(rng, f"{stream_name}.emissions")
        self._schedule: Array | None = None
        self._scheduled: NDArray[np.bool_] | None = None
        if emissions is not None:
            self._schedule = self._puff_array("emissions", emissions)
            self._scheduled = np.zeros(len(self._schedule), dtype=bool)  # nothing emitted yet
        self._puffs = self._puff_array("puffs", np.empty((0, 3)) if puffs is None else puffs)
        self._log: list[Array] = []
        self._average: GaussianDispersionPlume | None = None
        if next_emission_times_s is not None:
            if self._rng is None:
                raise ConfigError("next_emission_times_s needs rng= (the random emission process)")
            nxt = np.atleast_1d(np.asarray(next_emission_times_s, dtype=float))
            self._next_emission_s: Array = shape("next_emission_times_s", nxt, (self.num_sources,)).copy()
        elif self._rng is not None:
            self._next_emission_s = self._rng.exponential(self.mu_s, self.num_sources)
        else:
            self._next_emission_s = np.full(self.num_sources, np.inf)

    @classmethod
    def sample(cls, rng: RngLike, area_limits_ned: ArrayLike = PLUME_AREA_LIMITS_NED, *,
               wind_speed_mps: float, wind_direction_rad: float,
               num_sources_range: ArrayLike = (1, 1), q_range: ArrayLike = DEFAULT_Q_RANGE,
               a: float = DEFAULT_A, b: float = DEFAULT_B, mu_s: float = DEFAULT_MU_S,
               area_dt_s: float = 1.0, stream_name: str = DEFAULT_STREAM) -> GaussianPuffPlume:
        """A plume drawn as QRSim's reset does: S ~ uniform integer in num_sources_range (no draw when
        fixed), sources uniform in the central 80 % of the box, empty puff list, first emission times
        Exp(mu_s). A Generator ``rng`` also drives the emissions (QRSim's single area stream); a
        RandomStreams gives the streams ``.reset`` and ``.emissions``."""
        rng = _streams_if_seed(rng)
        lim = area_limits("area_limits_ned", area_limits_ned)
        s_lo, s_hi = (int(v) for v in _range("num_sources_range", num_sources_range, integer=True, minimum=1))
        gen = _generator(rng, f"{stream_name}.reset")
        n = s_lo if s_lo == s_hi else int(gen.integers(s_lo, s_hi + 1))
        sources = uniform_in_box(gen, lim, n, fraction=0.8)
        emission_rng = rng if isinstance(rng, RandomStreams) else gen
        return cls(sources, wind_speed_mps, wind_direction_rad, a, b, mu_s, q_range, area_limits_ned=lim,
                   rng=emission_rng, area_dt_s=area_dt_s, stream_name=stream_name)

    def _puff_array(self, name: str, value: ArrayLike) -> Array:
        p = np.asarray(value, dtype=float)
        if p.size == 0:
            return np.empty((0, 3))
        if p.ndim != 2 or p.shape[1] != 3 or not np.all(np.isfinite(p)):
            raise ConfigError(f"{name} must be a finite (P, 3) array [source index, emission time s, mass], "
                              f"got shape {p.shape}")
        src = p[:, 0]
        if np.any(src != np.round(src)) or np.any(src < 0) or np.any(src >= self.num_sources):
            raise ConfigError(f"{name}: source indices must be integers in [0, {self.num_sources - 1}] "
                              f"(0-based), got {np.unique(src).tolist()}")
        non_negative(f"{name} masses", p[:, 2])
        return p.copy()

    # -- state ------------------------------------------------------------------------------------------

    puffs = copy_of("_puffs", "The active puffs (P, 3): [source index (0-based), emission time [s], "
                              "mass] (a copy).")

    def set_puffs(self, puffs: ArrayLike) -> None:
        """Replace the active puff list (e.g. with a recorded one, for exact replay)."""
        self._puffs = self._puff_array("puffs", puffs)

    @property
    def emission_log(self) -> Array:
        """Every puff emitted by this model so far (E, 3), in emission order; replay with ``emissions=``."""
        return np.concatenate(self._log) if self._log else np.empty((0, 3))

    next_emission_times_s = copy_of("_next_emission_s", "Next emission time of each source [s] (a copy; inf "
                                                        "when no emission source).")

    def average_model(self) -> GaussianDispersionPlume:
        """The steady model used to select the locations: dispersion formula with Q = q_range[1]/mu_s."""
        rates = np.full(self.num_sources, self.q_range[1] / self.mu_s)
        return GaussianDispersionPlume(self.sources_ned, rates, self.wind_speed_mps, self.wind_direction_rad,
                                       self.a, self.b, area_limits_ned=self.area_limits_ned)

    def support_concentration(self, points_ned: ArrayLike) -> Array:
        if self._average is None:  # built once: the rejection loop calls this every round
            self._average = self.average_model()
        return self._average.concentration(points_ned)

    # -- dynamics ---------------------------------------------------------------------------------------

    def propagate_to(self, t: float) -> None:
        """Advance the puff list to time ``t`` [s] (>= the current time): drop, then emit (spec 4.4)."""
        t = finite("t", t)
        if t < self.time_s:
            raise ValueError(f"propagate_to({t}) would go back in time (model time {self.time_s} s)")
        self._drop_puffs_outside(t)
        if self._schedule is not None:
            self._emit_from_schedule(t)
        else:
            self._emit_random(t)
        self.time_s = t

    def step(self, k: int) -> bool:
        """Base tick ``k`` (t = 0.02 k s): propagate to t on ticks that are multiples of ``area_dt_s``."""
        if k % self._ticks != 0:
            return False
        self.propagate_to(k * BASE_DT_S)
        return True

    def _drop_puffs_outside(self, t: float) -> None:
        if len(self._puffs) == 0:
            return
        src = self._puffs[:, 0].astype(int)
        travelled = self.wind_speed_mps * np.maximum(t - self._puffs[:, 1], 0.0)
        width = np.sqrt(-math.log(PUFF_EDGE_FRACTION) * 2.0 * self.a * travelled**self.b)
        edge = self.sources_ned[src, :2] + (travelled - width)[:, None] * self._C[0]
        lim = self.area_limits_ned
        outside = ((edge[:, 0] < lim[0]) | (edge[:, 0] > lim[1])
                   | (edge[:, 1] < lim[2]) | (edge[:, 1] > lim[3]))
        self._puffs = self._puffs[~outside]

    def _emit_random(self, t: float) -> None:
        new: list[tuple[float, float, float]] = []
        lo, hi = float(self.q_range[0]), float(self.q_range[1])
        for s in range(self.num_sources):
            while self._next_emission_s[s] < t:
                assert self._rng is not None  # next times are inf without an emission process
                q = lo + (hi - lo) * self._rng.random()
                new.append((float(s), float(self._next_emission_s[s]), q))
                self._next_emission_s[s] += self._rng.exponential(self.mu_s)
        self._append(np.array(new).reshape(-1, 3))

    def _emit_from_schedule(self, t: float) -> None:
        assert self._schedule is not None and self._scheduled is not None
        due = ~self._scheduled & (self._schedule[:, 1] < t)
        self._scheduled |= due
        self._append(self._schedule[due])

    def _append(self, new: Array) -> None:
        if len(new):
            self._puffs = np.concatenate([self._puffs, new])
            self._log.append(new)

    # -- outputs ----------------------------------------------------------------------------------------

    def concentration(self, points_ned: ArrayLike, t: float | None = None) -> Array:
        """Concentration (M,) at points (M, 3) NED [m] at time ``t`` [s] (default: the model time) from the
        active puffs (puffs emitted between the last propagation and ``t`` are not yet in the list, as in
        QRSim, where the area updates every 1 s and the sensors sample at the current time)."""
        pts = _points(points_ned)
        t = self.time_s if t is None else finite("t", t)
        if len(self._puffs) == 0:
            return np.zeros(len(pts))
        xp, yp, zm, zp = self._source_frame(pts)
        src = self._puffs[:, 0].astype(int)
        xp, yp, zm, zp = xp[src], yp[src], zm[src], zp[src]
        centre = self.wind_speed_mps * (t - self._puffs[:, 1])[:, None]
        mass = self._puffs[:, 2][:, None]
        downwind = xp > 0
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            den = 2.0 * self.a * np.where(downwind, xp, 1.0) ** self.b
            c = (mass / (2.0 * math.pi * den) ** 1.5 * np.exp(-((xp - centre) ** 2 + yp**2) / den)
                 * (np.exp(-(zm**2) / den) + np.exp(-(zp**2) / den)))
        c = np.where(downwind & ~np.isnan(c), c, 0.0)
        return c.sum(axis=0)

    def reference_samples(self, locations_ned: ArrayLike, num_samples: int, rng: RngLike,
                          stream_name: str = DEFAULT_STREAM) -> Array:
        """The K x M reference samples (spec 4.4): from an empty puff list with its own emission draws
        (first emission times, masses, intervals from ``rng``), propagate to t = 60, 120, ..., 60 K s and
        sample the concentration at the locations each time. This model's own puffs are not touched."""
        k = int(num_samples)
        if k != num_samples or k < 1:
            raise ConfigError(f"num_samples={num_samples!r} must be an integer >= 1")
        locs = _points(locations_ned)
        gen = _generator(rng, f"{stream_name}.reference")
        clone = GaussianPuffPlume(self.sources_ned, self.wind_speed_mps, self.wind_direction_rad, self.a,
                                  self.b, self.mu_s, self.q_range, area_limits_ned=self.area_limits_ned,
                                  rng=gen)
        samples = np.empty((k, len(locs)))
        for i in range(k):
            t = TIME_BETWEEN_REF_SAMPLES_S * (i + 1)
            clone.propagate_to(t)
            samples[i] = clone.concentration(locs, t)
        return samples
