"""The fleet's energy: every vehicle's battery pack discharged by the power its airframe draws.

``FleetEnergy`` is the one component both front ends step (the in-process ``Simulator`` and the
``vehicle_dynamics`` node), once per 0.02 s tick, right after the fleet has integrated it:

1. power [W] per vehicle (``power.py``): the identified Pelican's ``momentum_theory_power`` of its total
   thrust (state element 12, [N]); rows of a rotor-level airframe (``Airframes`` with a ``rotor``
   sub-fleet: ``rotor_speeds_radps`` (N, 4) [rad/s], NaN on the Pelican's rows, and ``rotor_k_m``
   [N m s^2]) ``rotor_power`` of their rotor speeds. A fleet without a ``rotor`` sub-fleet is all
   Pelicans. An invalid (frozen, disarmed) vehicle draws only its avionics.
2. charging (N,) bool: a vehicle resting on a charging base (``ChargingBase``: horizontal distance to the
   base's NED point at most its ``radius_m``, at most ``CHARGE_HEIGHT_M`` above it, and disarmed/invalid
   or moving slower than ``CHARGE_SPEED_MPS``).
3. ``BatteryBank.step(power, dt, charging)``: terminal voltage, current, state of charge.

Before the next tick's integration ``apply(controls)`` closes QRSim's open loop: the terminal voltage
replaces the battery column (index 4 [V]) of every control row (QRSim's controllers force 12 V there,
attitude-mode agents pass one), clipped into the model's accepted [9, 12] V. A pack that is ``empty``
stops its motors: its row becomes level attitude, throttle 0, yaw rate 0; the identified model's thrust
then decays (first order, TAU0 = 3.07 /s) to its zero-throttle value CTH0 = 0.66 N, far below the
weight m g = 16.5 N, so the vehicle falls under gravity until it reaches the ground (the area's zmax), where
it leaves the state limits and becomes invalid, as any vehicle that hits the ground.

Given the fleet (``apply(controls, fleet)``, an ``Airframes``), ``apply`` also sets its motor supply
(``Airframes.set_motor_supply``): V_t / V_ref per vehicle, 0 for an empty pack. A rotor-level vehicle's
attainable motor speed is then omega_max min(V_t / V_ref, 1) -- a DC motor's no-load speed is its
voltage over its back-EMF constant (mathiesen_2017 section 3.3.2, eq. 3.3) and the speed controller can
apply at most the pack's voltage -- for every speed command, whatever produced it; with an empty pack it
is 0: the motors spin down at their time constant, the vehicle falls and becomes invalid once it touches
the ground (``airframes.EMPTY_PACK_REASON``). V_ref (``reference_voltage_v``) is the pack's full charge.

``battery.on: false`` (``BatterySettings.on``) builds no bank: ``apply`` and ``step`` do nothing and the
fleet flies exactly as before the battery existed (QRSim's open loop: the battery column as given).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, F8_2D_IN, njit, overload_for
from qrsim_ros.core.common.validation import (
    ConfigError,
    between,
    check_fields,
    checked,
    set_frozen_field,
    single_positive,
)
from qrsim_ros.core.vehicles.battery import (
    AMPS_ROW,
    BANK_BOOL_ROWS,
    BANK_FLOAT_ROWS,
    CHARGING_ROW,
    DROP_ROW,
    EMPTY_ROW,
    LINEAR_PCT_ROW,
    POWER_ROW,
    SOC_ROW,
    V_STATE_ROW,
    VOLTS_ROW,
    BatteryBank,
    BatteryParams,
    bank_step,
)
from qrsim_ros.core.vehicles.pelican import CONTROL_LIMITS, STATE_THRUST
from qrsim_ros.core.vehicles.power import PelicanPowerParams, momentum_theory_power

#: What a vehicle does when its battery runs low (``BatterySettings.low_battery_failsafe``):
#: ``return``: fly to the nearest charging base at the flight height, land, charge (siegemund_2011 4.5;
#: without bases it lands where it is at ``land_below``); ``land``: land where it is at ``land_below``;
#: ``off``: nothing (the pack runs empty and the vehicle falls).
LOW_BATTERY_FAILSAFES = ("return", "land", "off")
#: A vehicle at most this high above a base's point can charge there [m].
CHARGE_HEIGHT_M = 0.5
#: A valid vehicle charges only when slower than this [m/s] (a disarmed one always) (resting).
CHARGE_SPEED_MPS = 0.1
#: The battery column of the control row (``pelican.CONTROL_NAMES``).
BATTERY_COLUMN = 4
_V_MIN, _V_MAX = float(CONTROL_LIMITS[BATTERY_COLUMN, 0]), float(CONTROL_LIMITS[BATTERY_COLUMN, 1])


def _failsafe(name: str, value: str) -> str:
    """One of LOW_BATTERY_FAILSAFES."""
    if value not in LOW_BATTERY_FAILSAFES:
        raise ConfigError(f"{name}={value!r} must be one of {', '.join(LOW_BATTERY_FAILSAFES)}")
    return value


@dataclass(frozen=True)
class BatterySettings(BatteryParams):
    """``vehicle.battery`` of a scenario: the pack (every ``BatteryParams`` field), whether it is on, the
    power model and the low-battery failsafe.

    on: the battery model runs (default: the Pelican's default pack); false: QRSim's open loop.
    pelican_power: momentum-theory figures of the identified Pelican (``power.PelicanPowerParams``).
    low_battery_failsafe: one of LOW_BATTERY_FAILSAFES.
    rotor_motor_efficiency (0, 1]: motor efficiency of rotor-level airframes (``power.rotor_power``).
    Thresholds on the charge left (``percentage``, 0..1), siegemund_2011 section 4.5: ``return_below``
    (0.6: below it the return is planned), ``reserve`` (0.1: the charge that must be left on arrival),
    ``land_below`` (0.05: land where it is).
    The return starts once ``percentage - return_margin * drain * t_return <= reserve``, with t_return
    = horizontal distance to the nearest base / ``return_speed_mps`` + height / the land rate and drain
    the charge used per second at the present draw (``FleetEnergy.drain_per_s``).
    """

    on: bool = True
    pelican_power: PelicanPowerParams = field(default_factory=PelicanPowerParams)
    low_battery_failsafe: str = checked("return", _failsafe)
    rotor_motor_efficiency: float = checked(0.8, between(0.0, 1.0), single_positive, store=True)
    return_below: float = checked(0.6, between(0.0, 1.0), store=True)
    reserve: float = checked(0.1, between(0.0, 1.0), store=True)
    land_below: float = checked(0.05, between(0.0, 1.0), store=True)
    return_margin: float = checked(1.5, single_positive, store=True)
    return_speed_mps: float = checked(2.0, single_positive, store=True)

    def __post_init__(self) -> None:
        super().__post_init__()  # the pack's fields, as battery.<field>
        check_fields(self, "", BatterySettings)
        if not self.land_below <= self.reserve <= self.return_below:
            raise ConfigError(f"thresholds must satisfy land_below <= reserve <= return_below, got "
                              f"{self.land_below}, {self.reserve}, {self.return_below}")

    @property
    def pack(self) -> BatteryParams:
        """The pack's own parameters (``BatteryParams``)."""
        return BatteryParams(**{f.name: getattr(self, f.name) for f in fields(BatteryParams) if f.init})

    @property
    def failsafe_on(self) -> bool:
        """Whether the low-battery failsafe acts (battery on and ``low_battery_failsafe`` not ``off``)."""
        return self.on and self.low_battery_failsafe != "off"


@dataclass(frozen=True)
class ChargingBase:
    """A charging station (scenario ``bases:`` list): ``position_ned_m`` [m] (NED, usually on the ground)
    and ``radius_m`` [m] (horizontal), see the module doc for when a vehicle charges there."""

    position_ned_m: tuple[float, float, float]
    radius_m: float = 1.0

    def __post_init__(self) -> None:
        if not all(math.isfinite(v) for v in self.position_ned_m):
            raise ConfigError(f"position_ned_m={list(self.position_ned_m)!r} must be finite")
        set_frozen_field(self, "radius_m", single_positive("radius_m", self.radius_m))


@njit(f"int64({F8_1D_IN}, {F8_1D_IN}, Array(boolean, 1, 'A', readonly=True), float64[:], float64, float64, "
      "float64)")
def _latch_kernel(volts, percentage, empty, v_in, v_lo, v_hi, low_below):
    """v_in = volts clipped into [v_lo, v_hi]; returns 1 if a pack is empty + 2 if a percentage is at or
    below ``low_below`` (one pass: numpy's reductions cost microseconds each on a few vehicles)."""
    flags = 0
    for i in range(volts.shape[0]):
        v_in[i] = min(max(volts[i], v_lo), v_hi)
        if empty[i]:
            flags |= 1
        if percentage[i] <= low_below:
            flags |= 2
    return flags


@njit(f"void({F8_2D_IN}, Array(boolean, 1, 'A', readonly=True), {F8_2D_IN}, float64, float64, float64, "
      "float64, float64[:])")
def _power_kernel(x, valid, omega, k_m, efficiency, coefficient, avionics_w, out):
    """``FleetEnergy.power_w`` in one pass (module doc, 1): rows with finite rotor speeds ``omega`` (N, 4)
    [rad/s] ``rotor_power`` (an invalid vehicle's rotors count as stopped), the others
    ``momentum_theory_power`` of the thrust x[:, 12] [N]; same arithmetic as those kernels."""
    for i in range(x.shape[0]):
        rotor = True
        for j in range(omega.shape[1]):
            if not np.isfinite(omega[i, j]):
                rotor = False
        if rotor:
            shaft = 0.0
            for j in range(omega.shape[1]):
                w = abs(omega[i, j]) if valid[i] else 0.0
                shaft += k_m * w * w * w
            out[i] = shaft / efficiency + avionics_w
        else:
            f = x[i, 12] if valid[i] and x[i, 12] > 0.0 else 0.0
            out[i] = coefficient * f * math.sqrt(f) + avionics_w


@njit(f"void({F8_2D_IN}, Array(boolean, 1, 'A', readonly=True), {F8_2D_IN}, {F8_1D_IN}, float64, float64, "
      "boolean[:])")
def _charging_kernel(x, valid, bases, radii, charge_height_m, charge_speed_mps, out):
    """``FleetEnergy.charging_now`` in one pass (module doc, 2): on a base (horizontal distance <= its
    radius, at most ``charge_height_m`` above it) and resting (invalid, or slower than
    ``charge_speed_mps``)."""
    for i in range(x.shape[0]):
        on_base = False
        for b in range(bases.shape[0]):
            near = np.hypot(x[i, 0] - bases[b, 0], x[i, 1] - bases[b, 1]) <= radii[b]
            if near and bases[b, 2] - x[i, 2] <= charge_height_m:
                on_base = True
        speed = np.sqrt(x[i, 6] * x[i, 6] + x[i, 7] * x[i, 7] + x[i, 8] * x[i, 8])
        out[i] = on_base and (not valid[i] or speed < charge_speed_mps)


#: ``FleetEnergy``'s blocks: the bank's rows (``battery.BANK_FLOAT_ROWS``, ``BANK_BOOL_ROWS``), then
#: the power drawn [W] and the voltage ``apply`` writes [V] (float), charging now (bool)
_POWER_ROW, _V_IN_ROW = BANK_FLOAT_ROWS, BANK_FLOAT_ROWS + 1
_CHARGING_ROW = BANK_BOOL_ROWS
#: ``_energy_tick_kernel``'s scalars: k_m [N m s^2], motor efficiency, the thrust power coefficient,
#: avionics [W], the failsafe's highest charge threshold, lipo (1) or linear (0); the bank's constants
#: follow (``BatteryBank.constants``)
_SCALARS = ("k_m", "efficiency", "coefficient", "avionics_w", "low_below", "lipo")


@njit(f"int64({F8_2D_IN}, Array(boolean, 1, 'A', readonly=True), {F8_2D_IN}, float64, float64[:, ::1], "
      f"boolean[:, ::1], {F8_1D_IN}, {F8_2D_IN}, {F8_2D_IN})", writable_twins=True)
def _energy_tick_kernel(x, valid, omega, dt_s, f, b, s, ocv, bases):
    """``FleetEnergy.step`` in one call of few arguments (a numba call costs about 0.1 us per argument):
    power (``_power_kernel``) into its row, charging (``_charging_kernel``, if there are ``bases``: (B, 4)
    north, east, down [m], radius [m]) into its row, the bank's step (``bank_step``; the bank's rows of
    the blocks ``f`` and ``b``, the OCV table ``ocv`` (2, K)), the latch (``_latch_kernel``). ``s``:
    ``_SCALARS``, then the bank's constants. Returns the latch's flags, or 4 + the index of a bad power
    (the bank unchanged)."""
    power, charging = f[_POWER_ROW], b[_CHARGING_ROW]
    _power_kernel(x, valid, omega, s[0], s[1], s[2], s[3], power)
    if bases.shape[0] > 0:
        _charging_kernel(x, valid, bases[:, 0:3], bases[:, 3], CHARGE_HEIGHT_M, CHARGE_SPEED_MPS, charging)
    lipo = s[5] != 0.0
    pct = f[SOC_ROW] if lipo else f[LINEAR_PCT_ROW]  # as ``BatteryBank._pct``
    bad = bank_step(power, charging, dt_s, lipo, f[POWER_ROW], b[CHARGING_ROW], f[SOC_ROW], f[V_STATE_ROW],
                    f[DROP_ROW], b[EMPTY_ROW], f[VOLTS_ROW], f[AMPS_ROW], pct, ocv[0], ocv[1],
                    s[len(_SCALARS):])
    if bad >= 0:
        return 4 + bad
    return _latch_kernel(f[VOLTS_ROW], pct, b[EMPTY_ROW], f[_V_IN_ROW], _V_MIN, _V_MAX, s[4])


@njit(f"void({F8_1D_IN}, Array(boolean, 1, 'A', readonly=True), float64, float64[::1])")
def _supply_fraction_kernel(volts, empty, v_ref, out):
    """The motors' supply (``Airframes.set_motor_supply``): terminal voltage / V_ref, 0 for an empty pack."""
    for i in range(volts.shape[0]):
        out[i] = 0.0 if empty[i] else volts[i] / v_ref


def reference_voltage_v(pack: BatteryParams) -> float:
    """V_ref [V], the voltage at which a rotor airframe's motors reach omega_max (docs/ENERGY.md, "Motor
    speed"): the pack's full-charge voltage, lipo ``cells * charge_v_per_cell`` (the charger's
    constant-voltage limit, 12.0 V for the default 3S pack: also the 12 V the identified Pelican's maximum
    thrust, from which the ``pelican`` rotor set's omega_max is derived, was identified at), linear
    ``linear_max_v`` (11 V, ireland_2016's charged pack)."""
    if pack.model == "lipo":
        return float(pack.cells * pack.charge_v_per_cell)
    return float(pack.linear_max_v)


def bases_array(bases: Sequence[ChargingBase]) -> Array:
    """Base positions (B, 3) NED [m] (B may be 0)."""
    return np.array([b.position_ned_m for b in bases], float).reshape(-1, 3)


class FleetEnergy:
    """The packs of a fleet of N vehicles and their wiring (see the module doc).

    ``reset()`` per episode (fresh packs), ``apply(controls)`` before each integration, ``step(fleet,
    dt_s)`` after it. Read ``voltage_v``, ``current_a``, ``percentage``, ``empty``, ``charging``,
    ``drain_per_s`` (N,); all None-free: with the battery off they are NaN / False.
    """

    def __init__(self, num_vehicles: int, settings: BatterySettings | None = None,
                 bases: Sequence[ChargingBase] = ()) -> None:
        self.settings = settings if settings is not None else BatterySettings()
        self.num_vehicles = n = int(num_vehicles)
        self.on = bool(self.settings.on)
        # the packs' state and this wiring's per-tick rows, in two blocks (``_energy_tick_kernel``)
        self._floats = np.zeros((_V_IN_ROW + 1, n))
        self._flags = np.zeros((_CHARGING_ROW + 1, n), np.bool_)
        self._tick_call: tuple[Any, ...] | None = None  # ``step``'s kernel arguments, kept (see there)
        self._tick_entry: Callable[..., int] | None = None  # and the code that takes them, once kept
        self.set_bases(bases)
        self.bank: BatteryBank | None = (BatteryBank(n, self.settings.pack, (self._floats, self._flags))
                                         if self.on else None)
        self._charging = self._flags[_CHARGING_ROW]
        self._power_params = pp = self.settings.pelican_power
        # per tick, from ``step``: the voltage ``apply`` writes, whether a pack is empty, whether a charge
        # is at or below the low-battery failsafe's highest threshold (``low``)
        self._v_in = self._floats[_V_IN_ROW]
        self._v_in[:] = _V_MAX
        self._power_w = self._floats[_POWER_ROW]
        self._any_empty = False
        b = self.settings
        self._low_below = max(b.return_below, b.land_below) if b.failsafe_on else -math.inf
        #: True once some pack is at or below the low-battery failsafe's thresholds (the front ends call
        #: ``FleetControl.update_battery`` only then)
        self.low = False
        self._scalars = np.array([math.nan, b.rotor_motor_efficiency, pp.coefficient, pp.avionics_w,
                                  self._low_below, float(b.pack.model == "lipo"),
                                  *(self.bank.constants if self.bank is not None else ())], float)
        self._ocv = np.ascontiguousarray(b.pack.ocv.T)
        # a fleet without rotor vehicles: no rotor speeds, so the kernel takes the momentum-theory power
        self._no_rotor_speeds = np.full((n, 1), np.nan)
        #: V_ref [V]: a rotor airframe's motors reach omega_max at this voltage (``reference_voltage_v``)
        self.reference_v = reference_voltage_v(self.settings.pack)

    def set_bases(self, bases: Sequence[ChargingBase]) -> None:
        """Replace the charging bases (a task that places its landing site per episode)."""
        self.bases = tuple(bases)
        # (B, 4): north, east, down [m], radius [m] (``_energy_tick_kernel``)
        self._bases_block = np.column_stack([bases_array(self.bases),
                                             np.array([b.radius_m for b in self.bases], float)])
        self._bases, self._radii = self._bases_block[:, 0:3], self._bases_block[:, 3]
        self._tick_call = None

    # --- per episode / per tick ------------------------------------------------------------------------
    def reset(self) -> None:
        """Fresh packs for every vehicle (a new episode)."""
        if self.bank is not None:
            self.bank.reset()
            self._latch()
        self._charging[:] = False

    def _latch(self) -> None:
        """What ``apply`` and the front ends read each tick, from the bank once (its end-of-step values)."""
        bank = self.bank
        assert bank is not None
        volts, percentage, empty = bank.readings_view()
        flags = _latch_kernel(volts, percentage, empty, self._v_in, _V_MIN, _V_MAX, self._low_below)
        self._any_empty, self.low = bool(flags & 1), bool(flags & 2)

    def apply(self, controls: Array, fleet: Any = None) -> Array:
        """Close the loop (in place, returned): the battery column of ``controls`` (N, 5) becomes each
        pack's terminal voltage [V] clipped into [9, 12]; rows of empty packs: level, throttle 0. With the
        ``fleet`` about to be stepped (an ``Airframes``), its motor supply too (module doc): a rotor
        vehicle's attainable motor speed is omega_max V_t / V_ref (0 with an empty pack), whatever input it
        flies; a fleet without rotor vehicles is told only while a pack is empty."""
        bank = self.bank
        if bank is None:
            return controls
        if self.num_vehicles == 1:  # an element costs a tenth of numpy's column assignment (~0.5 us)
            controls[0, BATTERY_COLUMN] = self._v_in[0]
        else:
            controls[:, BATTERY_COLUMN] = self._v_in
        if self._any_empty:
            controls[bank.empty, 0:4] = 0.0
        if fleet is not None and (self._any_empty or getattr(fleet, "rotor", None) is not None):
            setter = getattr(fleet, "set_pack_supply", None)
            if setter is not None:  # an ``Airframes`` (a bare ``PelicanFleet`` has no motor supply)
                volts, _, empty = bank.readings_view()
                setter(volts, empty, self.reference_v)
        return controls

    def supply_fraction(self) -> Array:
        """The motors' supply ``apply`` gives the fleet (N,): terminal voltage / V_ref, 0 for an empty pack
        (NaN with the battery off)."""
        if self.bank is None:
            return np.full(self.num_vehicles, math.nan)
        volts, _, empty = self.bank.readings_view()
        out = np.empty(self.num_vehicles)
        _supply_fraction_kernel(volts, empty, self.reference_v, out)
        return out

    def power_w(self, fleet: Any, state: Array | None = None, valid: NDArray[np.bool_] | None = None
                ) -> Array:
        """Electrical power (N,) [W] each vehicle of ``fleet`` draws now (module doc, 1); ``state`` and
        ``valid``: the fleet's, when the caller has them already."""
        valid = fleet.valid if valid is None else valid
        x = fleet.state if state is None else state
        if getattr(fleet, "rotor", None) is None:  # no rotor-level vehicle: nothing more per tick
            # invalid: only the avionics
            return momentum_theory_power(x[:, STATE_THRUST], self._power_params, valid)
        x = np.asarray(x, float)
        valid = np.asarray(valid, np.bool_)
        if x.shape != (self.num_vehicles, 13) or valid.shape != (self.num_vehicles,):
            raise ValueError(f"state must have shape ({self.num_vehicles}, 13) and valid "
                             f"({self.num_vehicles},), got {x.shape}, {valid.shape}")
        power = np.empty(self.num_vehicles)
        _power_kernel(x, valid, fleet.rotor_speeds_radps, float(fleet.rotor_k_m),
                      self.settings.rotor_motor_efficiency, self._power_params.coefficient,
                      self._power_params.avionics_w, power)
        return power

    def charging_now(self, fleet: Any, state: Array | None = None, valid: NDArray[np.bool_] | None = None
                     ) -> NDArray[np.bool_]:
        """(N,) bool: resting on a charging base (module doc, 2); ``state`` and ``valid``: the fleet's, when
        the caller has them already."""
        n = self.num_vehicles
        if not self.bases:
            return np.zeros(n, bool)
        x = np.asarray(fleet.state if state is None else state, float)
        if x.ndim != 2 or x.shape[0] != n or x.shape[1] < 9:
            raise ValueError(f"state must have shape ({n}, 13), got {x.shape}")
        out = np.empty(n, bool)
        live = np.asarray(fleet.valid if valid is None else valid, np.bool_)
        _charging_kernel(x, live, self._bases, self._radii, CHARGE_HEIGHT_M, CHARGE_SPEED_MPS, out)
        return out

    def step(self, fleet: Any, dt_s: float, state: Array | None = None,
             valid: NDArray[np.bool_] | None = None) -> None:
        """Advance every pack by ``dt_s`` [s] under the power ``fleet`` draws now (after its step);
        ``state`` (N, 13) and ``valid`` (N,): the fleet's, when the caller has them already."""
        bank = self.bank
        if bank is None:
            return
        call = self._tick_call
        if call is not None and state is call[0] and valid is call[1] and dt_s == call[3]:
            entry = self._tick_entry  # the compiled code for their types, called directly
            if entry is None:
                entry = self._tick_entry = overload_for(_energy_tick_kernel, call)
            flags = entry(*call)  # the last tick's arguments, checked then (below)
        else:
            n = self.num_vehicles
            if not (type(state) is np.ndarray and state.dtype == np.float64 and state.shape == (n, 13)
                    and type(valid) is np.ndarray and valid.dtype == np.bool_ and valid.shape == (n,)
                    and math.isfinite(dt_s) and dt_s > 0):
                self._checked_step(fleet, dt_s, state, valid)
                return
            rotor = getattr(fleet, "rotor", None) is not None
            omega = fleet.rotor_speeds_view() if rotor else self._no_rotor_speeds
            self._scalars[0] = float(fleet.rotor_k_m) if rotor else 0.0
            call = (state, valid, omega, float(dt_s), self._floats, self._flags, self._scalars, self._ocv,
                    self._bases_block)
            flags = _energy_tick_kernel(*call)
            # Kept for the next tick when the rotor speeds are an array the fleet updates in place (one
            # airframe for all: ``rotor_speeds_view``, as ``Airframes.views``): then the identity of the
            # fleet's state and validity is the whole check (they are that fleet's own arrays).
            stable = not rotor or fleet.rotor_speeds_view() is omega
            self._tick_call = call if stable else None
            self._tick_entry = None
        if flags == 0:  # every tick but the last ones of a pack
            self._any_empty = self.low = False
            return
        if flags >= 4:  # as ``BatteryBank.step`` raises it
            bank.step_checked(self._power_w, float(dt_s), self._charging if self.bases else None)
        self._any_empty, self.low = bool(flags & 1), bool(flags & 2)

    def _checked_step(self, fleet: Any, dt_s: float, state: Array | None, valid: NDArray[np.bool_] | None
                      ) -> None:
        """``step`` for inputs of other types or shapes (checked and converted by the parts)."""
        bank = self.bank
        assert bank is not None
        power = self.power_w(fleet, state, valid)
        if self.bases:
            self._charging[:] = self.charging_now(fleet, state, valid)
            bank.step(power, dt_s, self._charging)
        else:
            bank.step(power, dt_s)
        self._latch()

    def cell_failure(self, vehicle: int, volts_drop: float) -> None:
        """A cell failure of ``vehicle`` (the fault ``battery_cell_failure``, docs/FAULTS.md): its pack's
        voltage steps down by ``volts_drop`` [V] (``BatteryBank.cell_failure``) and the voltage the next
        ``apply`` writes follows at once. Nothing with the battery off."""
        if self.bank is None:
            return
        self.bank.cell_failure(vehicle, volts_drop)
        self._latch()

    @property
    def params(self) -> BatteryParams:
        """The pack's parameters (cells, capacity, model)."""
        return self.settings.pack

    # --- readings (N,) ----------------------------------------------------------------------------------
    def _read(self, name: str, fill: float) -> Array:
        if self.bank is None:
            return np.full(self.num_vehicles, fill)
        return getattr(self.bank, name)

    @property
    def voltage_v(self) -> Array:
        """Terminal voltage [V] (NaN with the battery off)."""
        return self._read("voltage_v", math.nan)

    @property
    def current_a(self) -> Array:
        """Pack current [A], positive discharging (NaN with the battery off)."""
        return self._read("current_a", math.nan)

    @property
    def percentage(self) -> Array:
        """Charge left 0..1 (NaN with the battery off)."""
        return self._read("percentage", math.nan)

    @property
    def empty(self) -> NDArray[np.bool_]:
        """Packs that reached their cut-off (motors stopped) (False with the battery off)."""
        if self.bank is None:
            return np.zeros(self.num_vehicles, bool)
        return self.bank.empty

    @property
    def charging(self) -> NDArray[np.bool_]:
        """Vehicles charging on a base during the last step."""
        return self._charging.copy()

    @property
    def drain_per_s(self) -> Array:
        """Charge used per second at the last step's draw [1/s] (of ``percentage``; 0 while charging or
        empty; NaN with the battery off). lipo: I / (3600 C); linear: -dV/dt / (V_max - V_empty)."""
        bank = self.bank
        if bank is None:
            return np.full(self.num_vehicles, math.nan)
        p = self.settings
        if p.model == "lipo":
            rate = np.maximum(bank.current_a, 0.0) / (3600.0 * p.capacity_ah)
        else:
            span_v = p.linear_max_v - p.linear_empty_v
            rate = np.full(self.num_vehicles, -p.linear_discharge_v_per_s / span_v)
        return np.where(self._charging | bank.empty, 0.0, rate)
