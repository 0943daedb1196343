"""One fleet whatever the vehicles' airframes: the object both front ends step.

``Airframes`` has ``PelicanFleet``'s interface -- ``state`` (N, 13), ``accel_body`` (N, 3), ``valid``,
``invalid_reason``, ``set_state``, ``disarm``, ``step(controls (N, 5), wind_body (N, 3))`` -- and holds one
``PelicanFleet`` for the vehicles whose ``vehicle.airframe`` is ``pelican`` and one ``RotorFleet`` (with its
onboard controller, ``rotor_control.RotorControl``) for those flown as ``rotor``. Every vehicle is given
the Pelican control row ``[pitch, roll, throttle, yaw_rate, battery]`` (what ``FleetControl`` produces
and ``cmd/attitude`` carries); a rotor vehicle may instead be given one of the two lower-level inputs of
the rotor airframe, per tick: body rates + collective thrust or normalised motor commands (``step``'s
``rates_thrust`` and ``motors``).

- A fleet of Pelicans only (every shipped scenario's default) delegates every call to its
  ``PelicanFleet`` unchanged: its results are bit for bit those of a bare ``PelicanFleet``.
- Vehicle i of a mixed fleet behaves exactly as vehicle i of a single-airframe fleet of the same
  scenario: each sub-fleet draws vehicle i's own dynamic-noise stream; collisions are checked across
  airframes after both sub-fleets stepped (the same rule: closer than ``collision_distance_m``, true
  positions, only vehicles still valid are invalidated, other reasons first).
- Rotor vehicles ignore ``dyn_noise`` (the Pelican's identified process noise; the rotor model has none).

``rotor_speeds_radps`` (N, 4) [rad/s]: every vehicle's rotor speeds (rotor numbering of
``rotor_params``), NaN rows for Pelican vehicles (the identified model has no rotors): the power model's
input (docs/ENERGY.md ``rotor_power``).

Emergency landing (``set_emergency_land``; ``emergency_land``, ireland_2016 section 5.3.4): a vehicle
told its failed rotor flies the emergency controller from the next ``step`` on, whatever it is given
(its control row or lower-level input is ignored): rotor vehicles get the eq. 26 thrusts through the
speed loop (``RotorControl.from_rotor_thrusts``), Pelican vehicles the control row ``[0, 0, throttle,
yaw, battery]`` with the throttle whose steady thrust, at the vehicle's thrust scale (2/4 with the pair
off, ``set_thrust_fault``), is eq. 22's collective, and the yaw rate of the approximation's imbalance
(``emergency_land.unbalanced_yaw_rate_radps``). On touchdown it is disarmed (``LANDED_REASON``).
Latched until ``clear_emergency_land`` (a new episode).

Motor supply (``set_motor_supply``, from ``energy.FleetEnergy.apply`` each tick with the battery on): per
vehicle the pack's terminal voltage over its reference voltage. A rotor vehicle's speed commands, however
produced (control row, lower-level input, emergency landing, stuck motor), are clipped to omega_max
min(fraction, 1) in ``RotorFleet``'s kernel (bit for bit unchanged where that is not binding); a vehicle
without supply (an empty pack) flies no emergency landing, and a rotor vehicle without supply becomes
invalid (``EMPTY_PACK_REASON``) once its contact sphere touches the ground.

Ground rest (``ground_rest``, on for vehicles flown by the onboard autopilot, docs/MAVLINK.md): QRSim's
Pelican has no ground, a vehicle that reaches it leaves the area and becomes invalid. With ground rest a
Pelican whose centre of mass comes down to the rest height (the ground less the pelican rotor set's
contact radius) at a descent of at most ``MAX_TOUCHDOWN_MPS`` rests there instead: level, its heading
kept, velocities and rates zero, its thrust state kept (the motors spool on), the accelerometer reading
the ground's support (-g on body z); resting on, it neither slides nor turns. It stays valid, its sensors
read on, and it lifts off when its thrust carries it above the rest height. A faster touchdown is a
crash (``GROUND_CRASH_REASON``). Rotor vehicles have their own contact model and are not touched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.frames import Array, body_to_ned, dcm_from_state
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, all_finite, njit
from qrsim_ros.core.common.rng import clock_generators
from qrsim_ros.core.vehicles.controllers import is_f8
from qrsim_ros.core.vehicles.emergency_land import (
    LANDED_REASON,
    EmergencyLandParams,
    collective_thrust_n,
    pair_factors,
    pair_thrusts_n,
    pelican_throttle,
    touched_down,
    unbalanced_yaw_rate_radps,
)
from qrsim_ros.core.vehicles.pelican import (
    CONTROL_LIMITS,
    CONTROL_NAMES,
    CONTROL_SIZE,
    G_MS2,
    STATE_DOWN,
    STATE_HEADING,
    STATE_NORTH_EAST,
    STATE_RATES_FRD,
    STATE_ROLL_PITCH,
    STATE_VELOCITY_FRD,
    PelicanFleet,
    PelicanInputError,
    PelicanParams,
    body_to_ned_rows,
    check_live_controls,
    collision_reason,
    collisions_into,
    first_bad_control,
    initial_states,
)
from qrsim_ros.core.vehicles.rotor import RotorFleet, rotor_fleet_step
from qrsim_ros.core.vehicles.rotor_control import (
    RotorControl,
    RotorControlInputError,
    RotorControlParams,
    control_rows_to_speeds,
)
from qrsim_ros.core.vehicles.rotor_params import RotorParams, pelican_rotor_params

#: The airframe names (``vehicle.airframe``).
PELICAN = "pelican"
ROTOR = "rotor"
AIRFRAME_NAMES = (PELICAN, ROTOR)
#: ``invalid_reason`` of a rotor vehicle whose pack is empty once it touches the ground (``set_motor_supply``;
#: a Pelican's empty-pack fall ends as any vehicle through the ground: ``pz=... outside [...]``).
EMPTY_PACK_REASON = "battery empty: motors stopped, fell to the ground"
#: Ground rest (module doc): the fastest descent [m/s] a Pelican's landing gear takes (an assumption: a
#: free fall from about 0.5 m); faster is a crash with ``GROUND_CRASH_REASON``.
MAX_TOUCHDOWN_MPS = 3.0
GROUND_CRASH_REASON = "crashed into the ground"
#: ``on_ground``: a centre of mass within this of the rest height [m] is on the ground.
ON_GROUND_TOLERANCE_M = 0.05


@njit(f"int64({F8_2D_IN}, {F8_2D_IN}, {F8_2D_IN}, {F8_1D_IN}, {F8_1D_IN}, float64, float64, float64[:, ::1], "
      "float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], float64[:, ::1], boolean[::1], "
      f"int64[::1], boolean[::1], {F8_1D_IN}, {F8_1D_IN}, float64, int64, {F8_2D_IN}, float64)",
      writable_twins=True)
def _rotor_tick_kernel(u, wind_body, health, si_to_fw, c, ctl_dt_s, hover_omega, omega_cmd, wind_live,
                       wind_ned, x, omega, accel, valid, reason, near, prm, cap, dt_s, substeps, limits,
                       collision_distance_m):
    """``Airframes.step`` of a rotor-only fleet flying its control rows (no lower-level input, emergency
    landing or stuck motor) in one call: the general path's kernels in its order (``check_live_controls``,
    ``RotorControl.from_controls``, the frozen vehicles' wind zeroed, ``RotorFleet.step``); ``omega_cmd``,
    ``wind_live``, ``wind_ned``: scratch. Returns the number of vehicles that became invalid, or -1 on a
    bad input before anything changed (the general path then raises its error)."""
    if first_bad_control(u, valid, CONTROL_LIMITS) >= 0:
        return -1
    omega_cmd[:, :] = hover_omega  # the rows of frozen vehicles (``RotorControl._out``)
    control_rows_to_speeds(u, x, omega, valid, si_to_fw, c, ctl_dt_s, omega_cmd)
    for i in range(wind_body.shape[0]):  # frozen vehicles ignore the wind; a NaN row there is no error
        for j in range(3):
            wind_live[i, j] = wind_body[i, j] if valid[i] else 0.0
    body_to_ned_rows(x, wind_live, wind_ned)
    if not all_finite(wind_ned):
        return -1
    bad, invalid = rotor_fleet_step(x, omega, accel, valid, reason, near, omega_cmd, health, wind_ned, prm,
                                     cap, dt_s, substeps, limits, collision_distance_m)
    return -1 if bad >= 0 else invalid


@njit(f"int64({F8_1D_IN}, int64[::1], float64, float64[::1], boolean[::1])")
def _supply_kernel(fraction, rotor_rows, omega_max, cap, unpowered):
    """``Airframes.set_motor_supply`` in one pass: ``unpowered`` (N,) = fraction <= 0, the rotor vehicles'
    speed caps ``cap`` (R,) = omega_max min(fraction, 1) of their rows ``rotor_rows`` (R,). Returns the
    number of unpowered vehicles, or -1 - i for a NaN fraction at i (nothing written)."""
    for i in range(fraction.shape[0]):
        if math.isnan(fraction[i]):
            return -1 - i
    off = 0
    for i in range(fraction.shape[0]):
        unpowered[i] = fraction[i] <= 0.0
        if unpowered[i]:
            off += 1
    for j in range(rotor_rows.shape[0]):
        f = fraction[rotor_rows[j]]
        cap[j] = 0.0 if f <= 0.0 else (omega_max if f >= 1.0 else omega_max * f)
    return off


@njit(f"int64({F8_1D_IN}, Array(boolean, 1, 'A', readonly=True), float64, int64[::1], float64, float64[::1], "
      "boolean[::1])", writable_twins=True)
def _pack_supply_kernel(volts, empty, v_ref, rotor_rows, omega_max, cap, unpowered):
    """``_supply_kernel`` of the fraction volts / v_ref (0 where ``empty``) of finite voltages, in one call
    (``energy.FleetEnergy.apply``'s per-tick path); returns the number of unpowered vehicles."""
    off = 0
    for i in range(volts.shape[0]):
        unpowered[i] = empty[i] or volts[i] <= 0.0
        if unpowered[i]:
            off += 1
    for j in range(rotor_rows.shape[0]):
        r = rotor_rows[j]
        f = 0.0 if unpowered[r] else volts[r] / v_ref
        cap[j] = 0.0 if f <= 0.0 else (omega_max if f >= 1.0 else omega_max * f)
    return off



def rest_z_ned_m(ground_z_ned_m: float, rotor: RotorParams | None = None) -> float:
    """The centre of mass's NED z [m] of a vehicle resting on the ground at ``ground_z_ned_m``: the rotor
    set's contact radius above it (the pelican set's for Pelican vehicles, which have no contact model)."""
    return float(ground_z_ned_m) - (rotor if rotor is not None else pelican_rotor_params()).contact_radius_m


def placed_on_ground(state: Array, rest_z_m: float) -> NDArray[np.bool_]:
    """(N,) vehicles of states ``state`` (N, >=3) at or below the rest height ``rest_z_m`` (NED z [m];
    ``rest_z_ned_m``) within ``ON_GROUND_TOLERANCE_M``: placed on the ground, not flying."""
    return np.asarray(state, float)[:, STATE_DOWN] >= rest_z_m - ON_GROUND_TOLERANCE_M


class Airframes:
    """The fleet of a scenario whose vehicles each have an airframe (module doc).

    airframes: one of AIRFRAME_NAMES per vehicle; pelican_params: the fleet's ``PelicanParams`` (their
    state limits, collision distance and tick apply to the rotor vehicles too); noise_rngs: one
    dynamic-noise generator per vehicle (only the Pelicans' are used); rotor_params: the rotor airframe
    (default ``pelican_rotor_params()``); rotor_gains: its onboard controller's gains;
    ground_z_ned_m: the ground for the rotor airframe's contact model [m, NED z]; ground_rest: Pelican
    vehicles rest on that ground instead of leaving the area through it (module doc).
    """

    def __init__(self, airframes: Sequence[str], pelican_params: PelicanParams | None = None,
                 noise_rngs: list[np.random.Generator] | None = None, *,
                 rotor_params: RotorParams | None = None, rotor_gains: RotorControlParams | None = None,
                 ground_z_ned_m: float = 0.0, ground_rest: bool = False) -> None:
        names = tuple(airframes)
        unknown = sorted(set(names) - set(AIRFRAME_NAMES))
        if unknown:
            raise PelicanInputError(f"unknown airframe(s) {unknown}; one of {', '.join(AIRFRAME_NAMES)}")
        if not names:
            raise PelicanInputError("num_vehicles must be >= 1, got 0")
        self.airframes = names
        self.num_vehicles = n = len(names)
        self.params = pelican_params if pelican_params is not None else PelicanParams()
        if noise_rngs is None:
            noise_rngs = clock_generators(n)
        if len(noise_rngs) != n:
            raise PelicanInputError("one dynamic-noise generator per vehicle is required")
        is_rotor = np.array([a == ROTOR for a in names])
        self._pel = np.flatnonzero(~is_rotor)
        self._rot = np.flatnonzero(is_rotor)
        self._local = np.empty(n, int)
        self._local[self._pel] = np.arange(self._pel.size)
        self._local[self._rot] = np.arange(self._rot.size)
        self._is_rotor = is_rotor
        self.pelican: PelicanFleet | None = None
        self.rotor: RotorFleet | None = None
        self.rotor_control: RotorControl | None = None
        if self._pel.size:
            self.pelican = PelicanFleet(self._pel.size, self.params, [noise_rngs[i] for i in self._pel])
        if self._rot.size:
            rp = rotor_params if rotor_params is not None else pelican_rotor_params()
            self.rotor = RotorFleet(self._rot.size, rp, ground_z_ned_m=ground_z_ned_m,
                                    state_limits=self.params.state_limits,
                                    collision_distance_m=self.params.collision_distance_m,
                                    dt_s=self.params.dt_s)
            self.rotor_control = RotorControl(rp, rotor_gains, self.params.dt_s)
        #: the one sub-fleet when every vehicle has the same airframe (calls are delegated to it)
        self._only: PelicanFleet | RotorFleet | None = None
        if self.rotor is None:
            self._only = self.pelican
        elif self.pelican is None:
            self._only = self.rotor
        self._limits = np.asarray(self.params.state_limits, float)
        self._near = np.zeros(n, bool)
        #: the rotor vehicles' rotor health (rotor faults; None: all healthy)
        self._rotor_health: Array | None = None
        self._stuck_speeds: Array | None = None  # (rotor vehicles, 4) [rad/s]; NaN: free (set_stuck_motors)
        #: per vehicle the failed rotor of an emergency landing (-1: none; ``set_emergency_land``)
        self._emergency = np.full(n, -1, np.int64)
        self._any_emergency = False  # (self._emergency >= 0).any(), kept by the two setters below
        self._touchdown_mps = np.full(n, np.nan)
        self.emergency_params = EmergencyLandParams()
        self.ground_z_ned_m = float(ground_z_ned_m)
        # the centre of mass at rest on the ground: the rotor set's contact radius (that of the pelican
        # set for Pelican vehicles, which have no contact model)
        self._landed_z_ned_m = rest_z_ned_m(self.ground_z_ned_m,
                                            self.rotor.params if self.rotor is not None else None)
        self.ground_rest = bool(ground_rest) and self.pelican is not None
        #: (Pelican vehicles,) which rest on the ground after the last step (``ground_rest``)
        self._resting = np.zeros(self._pel.size, bool)
        self._rest_pose = np.zeros((self._pel.size, 3))  # where each rests: north, east [m], heading [rad]
        # a rotor-only fleet's per-tick kernel (``_rotor_tick_kernel``) and its scratch arrays
        self._rotor_tick = self.rotor is not None and self._only is self.rotor
        self._scratch = (np.empty((n, 4)), np.empty((n, 3)), np.empty((n, 3)))
        #: the motor supply (``set_motor_supply``): vehicles whose motors have no power (an empty pack)
        self._unpowered = np.zeros(n, bool)
        self._any_unpowered = False
        self._no_rotor_rows = np.zeros(0, np.int64)
        self._no_cap = np.zeros(0)

    # --- accessors ------------------------------------------------------------------------------
    def _gather(self, name: str, width: int) -> Array:
        out = np.empty((self.num_vehicles, width))
        out[self._pel] = getattr(self.pelican, name)
        out[self._rot] = getattr(self.rotor, name)
        return out

    @property
    def state(self) -> Array:
        """True states (N, 13) (a copy): ``[n e d phi theta psi u v w p q r thrust]``, NED/FRD, SI."""
        if self._only is not None:
            return self._only.state
        return self._gather("state", 13)

    @property
    def accel_body(self) -> Array:
        """Specific force (N, 3) of the last step, body FRD [m/s^2] (a copy; -g on z at hover)."""
        if self._only is not None:
            return self._only.accel_body
        return self._gather("accel_body", 3)

    @property
    def valid(self) -> NDArray[np.bool_]:
        """Per-vehicle validity (N,) (a copy)."""
        if self._only is not None:
            return self._only.valid
        out = np.empty(self.num_vehicles, bool)
        out[self._pel] = self.pelican.valid  # type: ignore[union-attr]
        out[self._rot] = self.rotor.valid  # type: ignore[union-attr]
        return out

    def views(self) -> tuple[Array, NDArray[np.bool_], Array]:
        """``state``, ``valid`` and ``accel_body`` without copies when every vehicle has the same airframe
        (copies otherwise), for a per-tick reader that keeps none of them: they change at the next
        ``step``, ``set_state`` or ``disarm`` (``Simulator._tick``)."""
        o = self._only
        if o is None:
            return self.state, self.valid, self.accel_body
        return o._x, o._valid, o._a  # the sub-fleet's own arrays (made once, updated in place)

    @property
    def invalid_reason(self) -> list[str]:
        """Per-vehicle reason the vehicle became invalid ('' while valid)."""
        if self._only is not None:
            return self._only.invalid_reason
        pel = self.pelican.invalid_reason  # type: ignore[union-attr]
        rot = self.rotor.invalid_reason  # type: ignore[union-attr]
        return [rot[j] if r else pel[j] for r, j in zip(self._is_rotor, self._local, strict=True)]

    @property
    def rotor_speeds_radps(self) -> Array:
        """Rotor speeds (N, 4) [rad/s] (a copy); NaN rows for Pelican vehicles (module doc)."""
        if self._only is not None and self._only is self.rotor:
            return self.rotor.omega
        out = np.full((self.num_vehicles, 4), np.nan)
        if self.rotor is not None:
            out[self._rot] = self.rotor.omega
        return out

    def rotor_speeds_view(self) -> Array:
        """``rotor_speeds_radps`` without a copy when every vehicle is a rotor vehicle, for a per-tick caller
        that only reads it before the next ``step`` (``energy.FleetEnergy``)."""
        if self._only is not None and self._only is self.rotor:
            return self.rotor.omega_view()
        return self.rotor_speeds_radps

    @property
    def rotor_k_m(self) -> float:
        """The rotor airframe's drag-torque coefficient k_m [N m s^2] (NaN without rotor vehicles): with
        ``rotor_speeds_radps``, what ``energy.FleetEnergy`` needs for the rotor power."""
        return float(self.rotor.params.k_m) if self.rotor is not None else float("nan")

    # --- state setting --------------------------------------------------------------------------
    def set_state(self, x: ArrayLike, vehicles: ArrayLike | None = None) -> None:
        """Set states of length 6, 12 or 13 (``PelicanFleet.set_state``) and mark those vehicles valid;
        rotor vehicles start with their rotors at the hover speed. A state outside the limits raises
        PelicanInputError naming the vehicle and element."""
        if self.ground_rest:  # placed anew: not resting until a step finds it on the ground
            placed = np.zeros(self.num_vehicles, bool)
            placed[np.arange(self.num_vehicles) if vehicles is None else vehicles] = True
            self._resting &= ~placed[self._pel]
        if self._any_unpowered:  # fresh vehicles are powered until the next ``set_motor_supply``
            self._unpowered[np.arange(self.num_vehicles) if vehicles is None else vehicles] = False
            self._any_unpowered = bool(self._unpowered.any())
        if self._only is not None:
            self._only.set_state(x, vehicles=vehicles)
            return
        idx = np.arange(self.num_vehicles) if vehicles is None else np.atleast_1d(vehicles).astype(int)
        # checked here, so that an error names the fleet's vehicle index (the sub-fleets know only their own)
        full = initial_states(x, self.params.mass_kg, idx, self._limits, PelicanInputError)
        rot = self._is_rotor[idx]
        if (~rot).any():
            self.pelican.set_state(full[~rot], vehicles=self._local[idx[~rot]])  # type: ignore[union-attr]
        if rot.any():
            self.rotor.set_state(full[rot], vehicles=self._local[idx[rot]])  # type: ignore[union-attr]

    def disarm(self, vehicles: ArrayLike, reason: str = "landed (failsafe land)") -> None:
        """The ``vehicles`` become invalid (frozen) with ``reason`` (``PelicanFleet.disarm``)."""
        idx = np.atleast_1d(np.asarray(vehicles, int))
        if self._only is not None:
            self._only.disarm(idx, reason)
            return
        rot = self._is_rotor[idx]
        if (~rot).any():
            self.pelican.disarm(self._local[idx[~rot]], reason)  # type: ignore[union-attr]
        if rot.any():
            self.rotor.disarm(self._local[idx[rot]], reason)  # type: ignore[union-attr]

    # --- rotor faults (core.engine.faults.FaultEffects) --------------------------------------------
    def set_thrust_fault(self, scale: ArrayLike, offset_n: ArrayLike) -> None:
        """The identified Pelican's rotor-fault approximation (``PelicanFleet.set_thrust_fault``), (N,)
        each; rows of rotor vehicles are ignored: their faults are exact (``set_rotor_health``)."""
        if self.pelican is not None:
            s, b = np.asarray(scale, float), np.asarray(offset_n, float)
            if self._only is self.pelican:
                self.pelican.set_thrust_fault(s, b)
            else:
                self.pelican.set_thrust_fault(s[self._pel], b[self._pel])

    def set_rotor_health(self, health: ArrayLike | None) -> None:
        """Per-rotor thrust and drag factors (N, 4) in [0, 1] of the rotor vehicles (1 healthy, 0 lost;
        ``RotorFleet.step``'s ``health``); rows of Pelican vehicles are ignored; None: all healthy."""
        if self.rotor is None:
            return
        if health is None:
            self._rotor_health = None
            return
        h = np.asarray(health, float).reshape(self.num_vehicles, 4)[self._rot]
        self._rotor_health = None if np.all(h == 1.0) else np.ascontiguousarray(h)

    def set_stuck_motors(self, speeds_radps: ArrayLike | None) -> None:
        """Stuck motors of the rotor vehicles (N, 4) [rad/s]: a finite entry is that rotor's speed command
        whatever the controller (or the emergency landing) asks, NaN a free motor; rows of Pelican
        vehicles are ignored (their stuck motor is ``set_thrust_fault``'s approximation); None: none."""
        if self.rotor is None or speeds_radps is None:
            self._stuck_speeds = None
            return
        s = np.asarray(speeds_radps, float).reshape(self.num_vehicles, 4)[self._rot]
        self._stuck_speeds = None if np.all(np.isnan(s)) else np.ascontiguousarray(s)

    # --- motor supply (the battery: energy.FleetEnergy.apply) ----------------------------------------
    def set_motor_supply(self, fraction: Array) -> None:
        """The motors' supply from the next ``step`` on, per vehicle (N,): the pack's terminal voltage as a
        fraction of its reference voltage V_ref (``energy.FleetEnergy``: the full-charge voltage), 0 for an
        empty pack (no power). A rotor vehicle's attainable motor speed becomes omega_max min(fraction, 1)
        (``RotorFleet.set_speed_cap``: a DC motor's no-load speed scales with its voltage), whatever
        produced its speed commands (controller, lower-level inputs, emergency landing, a stuck motor). A
        vehicle without power (fraction <= 0) flies no emergency landing (a Pelican's zeroed control row
        stays), and a rotor vehicle without power becomes invalid (``EMPTY_PACK_REASON``) once its contact
        sphere touches the ground after a step (a Pelican's fall ends through the ground, as before).
        ``set_state`` powers its vehicles again (fresh packs come with the next call)."""
        f = fraction
        if type(f) is not np.ndarray or f.dtype != np.float64 or f.shape != (self.num_vehicles,):
            f = np.asarray(fraction, np.float64).reshape(self.num_vehicles)
        rotor = self.rotor
        if rotor is not None:
            rows, cap, w_max = self._rot, rotor.speed_cap_view(), rotor.params.omega_max_rads
        else:
            rows, cap, w_max = self._no_rotor_rows, self._no_cap, 0.0
        off = _supply_kernel(f, rows, w_max, cap, self._unpowered)
        if off < 0:
            raise PelicanInputError(f"vehicle {-1 - off}: motor supply fraction must not be NaN")
        self._any_unpowered = off > 0

    def set_pack_supply(self, volts: Array, empty: NDArray[np.bool_], reference_v: float) -> None:
        """``set_motor_supply(where(empty, 0, volts / reference_v))`` for finite terminal voltages ``volts``
        (N,) [V] and a reference ``reference_v`` > 0 [V], in one kernel call (the per-tick path of
        ``energy.FleetEnergy.apply``: the same values bit for bit)."""
        rotor = self.rotor
        if rotor is not None:
            off = _pack_supply_kernel(volts, empty, reference_v, self._rot, rotor.params.omega_max_rads,
                                      rotor.speed_cap_view(), self._unpowered)
        else:
            off = _pack_supply_kernel(volts, empty, reference_v, self._no_rotor_rows, 0.0, self._no_cap,
                                      self._unpowered)
        self._any_unpowered = off > 0

    @property
    def unpowered(self) -> NDArray[np.bool_]:
        """Vehicles whose motors have no supply (an empty pack; ``set_motor_supply``) (N,) (a copy)."""
        return self._unpowered.copy()

    @property
    def speed_cap_radps(self) -> Array:
        """Attainable rotor speed per vehicle (N,) [rad/s] (a copy; NaN for Pelican vehicles): omega_max, or
        less on a sagging or empty pack (``set_motor_supply``)."""
        out = np.full(self.num_vehicles, np.nan)
        if self.rotor is not None:
            out[self._rot] = self.rotor.speed_cap_view()
        return out

    def _ground_unpowered(self) -> None:
        """Rotor vehicles without power that touch the ground (contact sphere at or below it) become
        invalid (``EMPTY_PACK_REASON``)."""
        rotor = self.rotor
        if rotor is None:
            return
        x = rotor.state_view()
        live = rotor.valid
        local = np.flatnonzero(self._unpowered[self._rot] & live
                               & (x[:, STATE_DOWN] >= self._landed_z_ned_m))
        if local.size:
            rotor.disarm(local, EMPTY_PACK_REASON)

    @property
    def resting(self) -> NDArray[np.bool_]:
        """(N,) vehicles resting on the ground after the last step (``ground_rest``; a copy)."""
        out = np.zeros(self.num_vehicles, bool)
        out[self._pel] = self._resting
        return out

    def on_ground(self, state: Array) -> NDArray[np.bool_]:
        """(N,) vehicles of true states ``state`` (N, 13) whose centre of mass is at or below the rest
        height on the ground (within ``ON_GROUND_TOLERANCE_M``): placed on the ground, not flying."""
        return placed_on_ground(state, self._landed_z_ned_m)

    def off_ground(self) -> NDArray[np.bool_]:
        """(N,) vehicles not ``on_ground`` now: the complement of ``on_ground(state)``, with the down
        coordinates read in place (a fault clock asks every tick; ``state`` copies all 13 columns)."""
        if self._only is None:
            return ~self.on_ground(self.state)
        x = self.rotor.state_view() if self._only is self.rotor else self.pelican._x  # type: ignore[union-attr]
        return x[:, STATE_DOWN] < self._landed_z_ned_m - ON_GROUND_TOLERANCE_M  # (a NaN state: grounded)

    def _rest_pelicans(self) -> None:
        """Ground rest (module doc) of the Pelican vehicles after their step."""
        fleet = self.pelican
        x, valid, accel = fleet._x, fleet._valid, fleet._a  # type: ignore[union-attr]
        rest_z = self._landed_z_ned_m
        down = valid & (x[:, STATE_DOWN] >= rest_z)
        was_resting = self._resting & down
        self._resting[:] = False
        if not down.any():
            return
        # still on the ground since the last tick: friction holds it where it lies (no slide, no turn)
        x[was_resting, STATE_NORTH_EAST] = self._rest_pose[was_resting, 0:2]
        x[was_resting, STATE_HEADING] = self._rest_pose[was_resting, 2]
        rows = np.flatnonzero(down)
        v_ned = np.empty((rows.size, 3))
        body_to_ned_rows(np.ascontiguousarray(x[rows]), np.ascontiguousarray(x[rows, STATE_VELOCITY_FRD]),
                         v_ned)
        crashed = rows[v_ned[:, 2] > MAX_TOUCHDOWN_MPS]
        if crashed.size:
            fleet.disarm(crashed, GROUND_CRASH_REASON)  # type: ignore[union-attr]
        rest = rows[v_ned[:, 2] <= MAX_TOUCHDOWN_MPS]
        x[rest, STATE_DOWN] = rest_z
        x[rest, STATE_ROLL_PITCH] = 0.0
        x[rest, STATE_VELOCITY_FRD] = 0.0
        x[rest, STATE_RATES_FRD] = 0.0
        accel[rest] = (0.0, 0.0, -G_MS2)
        self._resting[rest] = True
        self._rest_pose[rest, 0:2] = x[rest, STATE_NORTH_EAST]
        self._rest_pose[rest, 2] = x[rest, STATE_HEADING]

    # --- emergency landing (core.engine.faults.FaultEffects) ----------------------------------------
    @property
    def emergency_land_rotor(self) -> NDArray[np.int64]:
        """Per vehicle the failed rotor of its emergency landing (N,) (a copy; -1: none)."""
        return self._emergency.copy()

    @property
    def any_emergency_land(self) -> bool:
        """Whether a vehicle flies, or flew, an emergency landing this episode."""
        return self._any_emergency

    @property
    def emergency_touchdown_mps(self) -> Array:
        """Per vehicle the NED vertical speed [m/s] (down > 0) at which its emergency landing touched down
        (N,) (a copy; NaN: not yet, or none)."""
        return self._touchdown_mps.copy()

    def set_emergency_land(self, vehicles: ArrayLike, failed_rotor: ArrayLike) -> None:
        """The ``vehicles`` fly the emergency landing controller from the next ``step`` on, with rotor
        ``failed_rotor`` (0..3, one or one per vehicle) lost and its opposite disabled (module doc)."""
        idx = np.atleast_1d(np.asarray(vehicles, np.int64))
        rotor = np.broadcast_to(np.asarray(failed_rotor, np.int64), idx.shape)
        if np.any((rotor < 0) | (rotor > 3)):
            raise PelicanInputError(f"failed rotor must be in 0..3, got {rotor.tolist()}")
        self._emergency[idx] = rotor
        self._any_emergency = bool((self._emergency >= 0).any())

    def clear_emergency_land(self) -> None:
        """No vehicle in emergency landing (a new episode)."""
        self._emergency[:] = -1
        self._any_emergency = False
        self._touchdown_mps[:] = np.nan

    def _emergency_inputs(self, u: Array, valid: NDArray[np.bool_]) -> tuple[Array, Array | None]:
        """The control rows (a copy) with the emergency rows of Pelican vehicles replaced, and the rotor
        thrusts (N, 4) [N] of the emergency rows of rotor vehicles (NaN elsewhere; None: no such row);
        vehicles that touched down are disarmed first."""
        x = self.state
        rows = np.flatnonzero((self._emergency >= 0) & valid & ~self._unpowered)  # no power: nothing to fly
        p = self.emergency_params
        down = touched_down(x[rows, STATE_DOWN], self._landed_z_ned_m, p)
        if down.any():
            landed = rows[down]
            v_ned = body_to_ned(dcm_from_state(x[landed]), x[landed, STATE_VELOCITY_FRD])
            self._touchdown_mps[landed] = v_ned[:, 2]
            self.disarm(landed, LANDED_REASON)
            rows = rows[~down]
        u = u.copy()
        failed = self._emergency[rows]
        rot = self._is_rotor[rows]
        mass = np.where(rot, self.rotor.params.mass_kg if self.rotor is not None else np.nan,
                        self.params.mass_kg)
        thrust = collective_thrust_n(x[rows], self._landed_z_ned_m, mass, p)
        if (~rot).any():  # Pelican: level, the throttle of the collective at the fleet's thrust scale
            pr = rows[~rot]
            scale = self.pelican.thrust_scale[self._local[pr]]  # type: ignore[union-attr]
            u[pr, 0:2] = 0.0
            u[pr, 2] = pelican_throttle(thrust[~rot] / np.maximum(scale, 1e-9))
            u[pr, 3] = unbalanced_yaw_rate_radps(pair_factors(failed[~rot]))
        if not rot.any():
            return u, None
        thrusts = np.full((self.num_vehicles, 4), np.nan)
        thrusts[rows[rot]] = pair_thrusts_n(thrust[rot], failed[rot])
        return u, thrusts

    # --- stepping -------------------------------------------------------------------------------
    def step(self, controls: ArrayLike, wind_body: ArrayLike | None = None, *,
             rates_thrust: ArrayLike | None = None, motors: ArrayLike | None = None) -> None:
        """Advance every valid vehicle by one tick (0.02 s).

        controls: (N, 5) SI Pelican control rows (``pelican`` module doc), checked for valid vehicles as
        on the Pelican; wind_body: (N, 3) air velocity in body FRD [m/s] (mean wind + turbulence) at the
        start of the tick, default still air (non-finite rows are allowed for invalid vehicles only);
        rates_thrust: (N, 4) ``[p, q, r]`` [rad/s] (FRD) + collective thrust [N] >= 0, and motors: (N, 4)
        normalised motor commands in [0, 1]: the rotor airframe's lower-level inputs (``rotor_control``);
        a row with a finite first value replaces that vehicle's control row, NaN rows (or None) fly the
        control row. A lower-level input for a Pelican vehicle, or both for one vehicle, is an error.
        Raises PelicanInputError (``RotorControlInputError`` for the lower-level inputs) before anything
        moves.
        """
        emergency = self._any_emergency
        if self._only is self.pelican and rates_thrust is None and motors is None and not emergency:
            self.pelican.step(controls, wind_body)  # type: ignore[union-attr]
            if self.ground_rest:
                self._rest_pelicans()
            return
        n = self.num_vehicles
        if (self._rotor_tick and rates_thrust is None and motors is None and not emergency
                and self._stuck_speeds is None and is_f8(controls, (n, CONTROL_SIZE))
                and is_f8(wind_body, (n, 3))):  # the per-tick case of a rotor-only fleet: one kernel
            rotor, ctl = self.rotor, self.rotor_control
            healthy, *state = rotor.kernel_state()  # type: ignore[union-attr]
            health = healthy if self._rotor_health is None else self._rotor_health
            invalid = _rotor_tick_kernel(controls, wind_body, health, *ctl.kernel_args(),  # type: ignore[union-attr]
                                         *self._scratch, *state)
            if invalid > 0:
                rotor.record_invalid()  # type: ignore[union-attr]
            if invalid >= 0:
                if self._any_unpowered:
                    self._ground_unpowered()
                return
            # a bad input: nothing changed; the general path below raises its error
        u = np.asarray(controls, np.float64)
        if u.ndim != 2 or u.shape != (n, CONTROL_SIZE):
            raise PelicanInputError(f"controls must have shape ({n}, 5) {CONTROL_NAMES}, got {u.shape}")
        valid = self.valid
        emergency_thrusts = None
        if emergency:
            u, emergency_thrusts = self._emergency_inputs(u, valid)
            valid = self.valid
        low_level = rates_thrust is not None or motors is not None
        if low_level:
            rt, use_rt = self._low_level(rates_thrust, "rates_thrust")
            mo, use_mo = self._low_level(motors, "motors")
            both = use_rt & use_mo & valid
            if both.any():
                raise RotorControlInputError(f"vehicle {int(np.argmax(both))}: rates_thrust and motors given "
                                             "together (one input per vehicle)")
            direct = use_rt | use_mo
            wrong = direct & valid & ~self._is_rotor
            if wrong.any():
                raise RotorControlInputError(f"vehicle {int(np.argmax(wrong))}: a Pelican has no rotor-level "
                                             "input (rates_thrust/motors are for airframe 'rotor')")
            check_live_controls(u, valid & ~direct)
        else:
            check_live_controls(u, valid)
        wind = None if wind_body is None else np.asarray(wind_body, np.float64).reshape(n, 3)
        only_rotor = self._only is self.rotor
        r = self._rot
        omega_cmd = None
        if self.rotor is not None:
            xr, om = self.rotor.state_view(), self.rotor.omega_view()
            live = valid if only_rotor else valid[r]
            ctl = self.rotor_control
            ur = u if only_rotor else u[r]
            if not low_level:
                omega_cmd = ctl.from_controls(ur, xr, om, live)  # type: ignore[union-attr]
            else:
                omega_cmd = ctl.from_controls(ur, xr, om, live & ~direct[r])  # type: ignore[union-attr]
                if use_rt[r].any():
                    sel = live & use_rt[r]
                    omega_cmd[sel] = ctl.from_rates_thrust(rt[r], xr, om, sel)[sel]  # type: ignore[union-attr]
                if use_mo[r].any():
                    sel = live & use_mo[r]
                    omega_cmd[sel] = ctl.from_motors(mo[r], sel)[sel]  # type: ignore[union-attr]
            if emergency_thrusts is not None:  # the emergency controller wins over every input
                et = emergency_thrusts if only_rotor else emergency_thrusts[r]
                sel = live & np.isfinite(et[:, 0])
                omega_cmd[sel] = ctl.from_rotor_thrusts(et[sel], om[sel])  # type: ignore[union-attr]
            if self._stuck_speeds is not None:  # a stuck motor holds its speed whatever is commanded
                omega_cmd = np.where(np.isnan(self._stuck_speeds), omega_cmd, self._stuck_speeds)
        if self.pelican is not None:
            p = self._pel
            self.pelican.step(u[p], None if wind is None else wind[p])
            if self.ground_rest:
                self._rest_pelicans()
        if self.rotor is not None:
            wind_r = None
            if wind is not None:
                wind_r = wind if only_rotor else wind[r]
                if not live.all():  # frozen vehicles ignore the wind; a NaN row there is no error
                    wind_r = np.where(~live[:, None], 0.0, wind_r)
            self.rotor.step(omega_cmd, health=self._rotor_health, wind_body=wind_r)
            if self._any_unpowered:
                self._ground_unpowered()
        if self._only is None:
            self._cross_collisions(valid)

    def _low_level(self, value: ArrayLike | None, name: str) -> tuple[Array, NDArray[np.bool_]]:
        """A lower-level input (N, 4) and which rows are given (a finite first value)."""
        n = self.num_vehicles
        if value is None:
            return np.zeros((0, 4)), np.zeros(n, bool)
        a = np.asarray(value, np.float64)
        if a.shape != (n, 4):
            raise RotorControlInputError(f"{name} must have shape ({n}, 4), got {a.shape}")
        return a, np.isfinite(a[:, 0])

    def _cross_collisions(self, moved_from: NDArray[np.bool_]) -> None:
        """Invalidate the still-valid vehicles closer than the collision distance to a vehicle of the
        other airframe (each sub-fleet checks its own vehicles)."""
        if self.num_vehicles < 2 or not moved_from.any():
            return
        d = float(self.params.collision_distance_m)
        collisions_into(np.ascontiguousarray(self.state), d, self._near)
        hit = self._near & self.valid
        if hit.any():
            self.disarm(np.flatnonzero(hit), collision_reason(d))
