"""Battery packs of a fleet: a LiPo equivalent circuit or ireland_2016's linear voltage model.

Two models, one per ``BatteryParams.model``, both vectorised over N vehicles (``BatteryBank``):

``"lipo"`` -- open-circuit voltage source plus a series resistance (the simplest equivalent circuit):

    OCV   = cells * ocv_cell(soc) - drop            [V]  (``drop``: cell-failure steps, ``cell_failure``)
    V_t   = OCV - I R                               [V]  terminal voltage
    P     = V_t I   =>   R I^2 - OCV I + P = 0      (P: electrical power drawn by the vehicle [W])
    I     = (OCV - sqrt(OCV^2 - 4 R P)) / (2 R) = 2 P / (OCV + sqrt(OCV^2 - 4 R P))     [A]
    d soc / dt = -I / (3600 capacity_ah)            (coulomb counting, forward Euler over the step)

  Of the quadratic's two roots the smaller current is the physical one: it is the one that tends to
  P / OCV as R -> 0 (the other tends to OCV / R, a short circuit) and the one a pack reaches by raising
  its load from zero. The second form is the same root without the 0/0 at R = 0. If the power asked for
  exceeds the most the pack can deliver, OCV^2 / (4 R) (then V_t = OCV / 2), the pack delivers that
  maximum: the discriminant is clamped at 0 (V_t is then far below any cut-off, so the pack is empty).
  ``ocv_cell`` interpolates a table of (soc, volts per cell) points linearly.

  Charging (``charging[i]`` true: landed on a charging base) is a constant-current / constant-voltage
  charger, the standard LiPo charge cycle: current ``-charge_current_a`` until the terminal voltage reaches
  ``cells * charge_v_per_cell``, then that voltage held (I = (OCV - V_cv) / R, tapering) until the current
  falls below ``capacity_ah / 20`` A (C/20 termination), then 0. The charger also powers the vehicle: the
  load does not drain the pack while it charges.

``"linear"`` -- ireland_2016 section 4.5.4, eq. (9) and Table 3: the pack voltage itself is the state,

    dV/dt = +0.025 V/s  while charging and V < 11 V (capped at V_max = 11 V exactly)
    dV/dt = -0.005 V/s  otherwise (not charging; the paper's "pursuing its mission")

  The power drawn does not change the voltage (the paper's stated simplification); ``current_a`` still
  reports P / V while discharging so the two models publish the same quantities. ireland_2016 gives no
  empty voltage (only an unstated warning threshold V_th); ``linear_empty_v`` = 9 V is ours (QRSim's
  lowest accepted battery input, spec 2.1).

Both models: values reported (``voltage_v``, ``current_a``) are those at the end of the last step, under
that step's power. A pack is ``empty`` once its terminal voltage reaches the cut-off (lipo:
``cells * cutoff_v_per_cell``; linear: ``linear_empty_v``) or its state of charge reaches 0; empty is
latched (charging does not revive it; ``reset`` does). An empty pack delivers no current and reports its
unloaded voltage (the motors are off). Currents are positive when discharging (sensor_msgs/BatteryState's
``current`` is the negative of ``current_a``).

Default pack (the Pelican's): 3 LiPo cells in series ("3S", 11.1 V nominal), 6.0 Ah -- the capacity
AscTec's Pelican is commonly flown with (an assumed figure; set ``capacity_ah`` for another pack). The
open-circuit curve is Chen and Rincon-Mora's fit for a polymer Li-ion cell, "Accurate electrical battery
model capable of predicting runtime and I-V performance", IEEE Trans. Energy Conversion 21(2), 2006,
eq. (7): V_oc(soc) = -1.031 exp(-35 soc) + 3.685 + 0.2156 soc - 0.1178 soc^2 + 0.3201 soc^3 [V],
sampled at the points of ``DEFAULT_OCV_TABLE`` (denser where the curve bends at low charge).
QRSim's identified Pelican accepts a battery voltage in [9, 12] V (spec 2.1, CONTROL_LIMITS): the cut-off,
3.0 V per cell, puts the empty pack at 9.0 V, and the charger stops at 4.0 V per cell (12.0 V, also a
common longevity charge limit), which a fresh pack starts just below: ``initial_soc`` 0.85 gives an
open-circuit 3 * 3.9797 = 11.94 V. The internal resistance, 0.030 ohm for the pack (10 mohm per cell), is
an assumed typical value for a pack of this size, not a datasheet figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from qrsim_ros.core.common.accessors import copy_of
from qrsim_ros.core.common.frames import Array
from qrsim_ros.core.common.jit import F8_1D_IN, njit
from qrsim_ros.core.common.limits import LIMITS
from qrsim_ros.core.common.validation import (
    ConfigError,
    between,
    check_fields,
    checked,
    finite,
    in_range,
    integer_at_least,
    set_frozen_field,
    single_non_negative,
    single_positive,
)

#: Models ``BatteryParams.model`` accepts.
MODELS = ("lipo", "linear")

#: Open-circuit voltage per cell [V] vs state of charge [0..1]: Chen & Rincon-Mora 2006, eq. (7), sampled
#: (see the module doc). Rows (soc, volts).
DEFAULT_OCV_TABLE: tuple[tuple[float, float], ...] = (
    (0.0, 2.654), (0.01, 2.9606), (0.02, 3.1773), (0.03, 3.3306), (0.05, 3.5164), (0.075, 3.626),
    (0.1, 3.6746), (0.15, 3.7104), (0.2, 3.725), (0.3, 3.7477), (0.4, 3.7729), (0.5, 3.8034),
    (0.6, 3.8411), (0.7, 3.888), (0.8, 3.946), (0.85, 3.9797), (0.9, 4.017), (0.95, 4.058), (1.0, 4.1029),
)

#: Full-charge termination current of the CC/CV charger, as a fraction of the capacity per hour (C/20).
CHARGE_TERMINATION_C = 1.0 / 20.0

_PREFIX = "battery."


def _model(name: str, value: str) -> str:
    """One of MODELS."""
    if value not in MODELS:
        raise ConfigError(f"{name}={value!r} must be one of {MODELS}")
    return value


def _discharge_rate(name: str, value: float) -> float:
    """A finite rate < 0 [V/s], as a float."""
    vd = finite(name, value)
    if vd >= 0:
        raise ConfigError(f"{name}={vd!r} must be < 0 (a discharge rate)")
    return vd


def _cells_limit(name: str, value: int) -> int:
    """Rule: at most ``LIMITS["battery_cells"]`` cells (a pack of a million cells is no vehicle's)."""
    return int(LIMITS["battery_cells"].check(value, name))


@dataclass(frozen=True)
class BatteryParams:
    """One battery configuration shared by every vehicle of a bank (see the module doc for the models).

    model: "lipo" (equivalent circuit) or "linear" (ireland_2016 eq. 9).
    LiPo: cells [-] in series; capacity_ah [Ah]; ocv_table ((soc, volts per cell) rows, soc strictly
    increasing from 0 to 1, volts non-decreasing); internal_resistance_ohm [ohm] of the whole pack;
    cutoff_v_per_cell [V]; initial_soc [0..1]; charge_current_a [A] (constant-current phase);
    charge_v_per_cell [V] (constant-voltage phase).
    Linear: linear_max_v [V]; linear_charge_v_per_s [V/s] (> 0); linear_discharge_v_per_s [V/s] (< 0);
    linear_empty_v [V]; linear_initial_v [V].
    A bad value raises ConfigError naming ``battery.<field>``.
    """

    model: str = checked("lipo", _model)
    cells: int = checked(3, integer_at_least(1), _cells_limit, store=True)
    capacity_ah: float = checked(6.0, single_positive, store=True)
    ocv_table: Any = DEFAULT_OCV_TABLE
    internal_resistance_ohm: float = checked(0.030, single_non_negative, store=True)
    cutoff_v_per_cell: float = checked(3.0, single_positive, store=True)
    initial_soc: float = checked(0.85, between(0.0, 1.0), store=True)
    charge_current_a: float = checked(6.0, single_positive, store=True)  # 1C, the usual LiPo charge rate
    charge_v_per_cell: float = checked(4.0, single_positive, store=True)
    linear_max_v: float = checked(11.0, single_positive, store=True)
    linear_charge_v_per_s: float = checked(0.025, single_positive, store=True)
    linear_discharge_v_per_s: float = checked(-0.005, _discharge_rate, store=True)
    linear_empty_v: float = checked(9.0, single_positive, store=True)
    linear_initial_v: float = 11.0  # in [linear_empty_v, linear_max_v]
    #: (K, 2) float array of ``ocv_table`` (derived, read-only).
    ocv: Array = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_fields(self, "battery", BatteryParams)  # BatterySettings checks its own fields
        if self.linear_empty_v >= self.linear_max_v:
            raise ConfigError(f"{_PREFIX}linear_empty_v={self.linear_empty_v!r} must be below "
                              f"linear_max_v={self.linear_max_v!r}")
        v0 = in_range(_PREFIX + "linear_initial_v", self.linear_initial_v, self.linear_empty_v,
                      self.linear_max_v)
        set_frozen_field(self, "linear_initial_v", v0)
        ocv = _ocv_table(self.ocv_table)
        if not self.cutoff_v_per_cell < ocv[-1, 1]:
            raise ConfigError(f"{_PREFIX}cutoff_v_per_cell={self.cutoff_v_per_cell!r} must be below the "
                              f"ocv_table's full-charge voltage {ocv[-1, 1]}")
        ocv.flags.writeable = False
        set_frozen_field(self, "ocv_table", tuple(map(tuple, ocv.tolist())))
        set_frozen_field(self, "ocv", ocv)

    @property
    def cutoff_v(self) -> float:
        """Empty threshold of the pack's terminal voltage [V] (lipo: cells x cut-off; linear: its own)."""
        return self.cells * self.cutoff_v_per_cell if self.model == "lipo" else self.linear_empty_v


def _ocv_table(value: Any) -> Array:
    name = _PREFIX + "ocv_table"
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a list of [soc, volts] pairs") from None
    if a.ndim != 2 or a.shape[1] != 2 or a.shape[0] < 2:
        raise ConfigError(f"{name} must be a list of at least two [soc, volts] pairs, got shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a[:, 1] <= 0):
        raise ConfigError(f"{name} must hold finite socs and positive voltages")
    if a[0, 0] != 0.0 or a[-1, 0] != 1.0 or np.any(np.diff(a[:, 0]) <= 0):
        raise ConfigError(f"{name}: soc must increase strictly from 0 to 1, got {a[:, 0].tolist()}")
    if np.any(np.diff(a[:, 1]) < 0):
        raise ConfigError(f"{name}: voltage must not decrease with soc, got {a[:, 1].tolist()}")
    return a


def ocv_per_cell(params: BatteryParams, soc: ArrayLike) -> Array:
    """Open-circuit voltage of one cell [V] at state of charge ``soc`` [0..1] (linear interpolation)."""
    return np.interp(np.asarray(soc, float), params.ocv[:, 0], params.ocv[:, 1])


# --- kernels: one vehicle at a time, explicit loops (qrsim_ros.core.common.jit) -------------------------

_BOOL_IN = "Array(boolean, 1, 'A', readonly=True)"


@njit(f"int64({F8_1D_IN}, {_BOOL_IN}, float64[:], boolean[:])")
def _take_inputs(power_in, charging_in, power, charging):
    """Copy a step's inputs into the bank (all or nothing); index of the first bad power, else -1."""
    for i in range(power_in.shape[0]):
        if not (math.isfinite(power_in[i]) and power_in[i] >= 0.0):
            return i
    for i in range(power_in.shape[0]):
        power[i] = power_in[i]
        charging[i] = charging_in[i]
    return -1


@njit(f"float64(float64, {F8_1D_IN}, {F8_1D_IN})")
def _interp(x, xs, ys):
    """Linear interpolation in a table with strictly increasing ``xs``, clamped at its ends."""
    n = xs.shape[0]
    if x <= xs[0]:
        return ys[0]
    if x >= xs[n - 1]:
        return ys[n - 1]
    k = 1
    while xs[k] < x:
        k += 1
    t = (x - xs[k - 1]) / (xs[k] - xs[k - 1])
    return ys[k - 1] + t * (ys[k] - ys[k - 1])


@njit("float64(float64, float64, float64)")
def _discharge_current(ocv, r_ohm, power_w):
    """Physical root of R I^2 - OCV I + P = 0 [A] (discriminant clamped at 0, see the module doc)."""
    disc = ocv * ocv - 4.0 * r_ohm * power_w
    if disc < 0.0:
        disc = 0.0
    den = ocv + math.sqrt(disc)
    return 2.0 * power_w / den if den > 0.0 else 0.0


@njit("float64(float64, float64, float64, float64, float64)")
def _charge_current(ocv, r_ohm, i_cc, v_cv, i_term):
    """CC/CV charger current [A] (negative = into the pack)."""
    if ocv >= v_cv:
        return 0.0
    i = i_cc
    if r_ohm > 0.0 and (v_cv - ocv) / r_ohm < i:
        i = (v_cv - ocv) / r_ohm
    return -i if i >= i_term else 0.0


@njit(f"void(float64[:], {F8_1D_IN}, boolean[:], float64[:], float64[:], {F8_1D_IN}, {_BOOL_IN}, float64, "
      f"{F8_1D_IN}, {F8_1D_IN}, float64, float64, float64, float64, float64, float64, float64)")
def _lipo_step(soc, drop, empty, volts, amps, power, charging, dt_s, tab_soc, tab_v, cells, r_ohm,
               capacity_as, cutoff_v, i_cc, v_cv, i_term):
    """Advance every pack by ``dt_s`` (0: only re-evaluate) and write the end-of-step V_t and I."""
    for i in range(soc.shape[0]):
        if not empty[i] and dt_s > 0.0:
            ocv = cells * _interp(soc[i], tab_soc, tab_v) - drop[i]
            if charging[i]:
                cur = _charge_current(ocv, r_ohm, i_cc, v_cv, i_term)
            else:
                cur = _discharge_current(ocv, r_ohm, power[i])
            soc[i] = min(1.0, max(0.0, soc[i] - cur * dt_s / capacity_as))
        ocv = cells * _interp(soc[i], tab_soc, tab_v) - drop[i]
        if empty[i]:
            cur = 0.0
        elif charging[i]:
            cur = _charge_current(ocv, r_ohm, i_cc, v_cv, i_term)
        else:
            cur = _discharge_current(ocv, r_ohm, power[i])
        v = ocv - cur * r_ohm
        if not empty[i] and (v <= cutoff_v or soc[i] <= 0.0):
            empty[i] = True
            cur, v = 0.0, ocv
        volts[i] = v
        amps[i] = cur


@njit(f"void(float64[:], {F8_1D_IN}, boolean[:], float64[:], float64[:], {F8_1D_IN}, {_BOOL_IN}, float64, "
      "float64, float64, float64, float64, float64[:])")
def _linear_step(v_state, drop, empty, volts, amps, power, charging, dt_s, v_max, v_c, v_d, v_empty, pct):
    """ireland_2016 eq. (9) for every pack over ``dt_s`` (0: only re-evaluate); ``pct``: the charge left
    (V - V_empty) / (V_max - V_empty) clipped into [0, 1] (NaN stays NaN, as ``np.clip``)."""
    for i in range(v_state.shape[0]):
        if not empty[i] and dt_s > 0.0:
            if charging[i]:
                if v_state[i] < v_max:
                    v_state[i] = min(v_max, v_state[i] + v_c * dt_s)
            else:
                v_state[i] += v_d * dt_s
        v = v_state[i] - drop[i]
        if not empty[i] and v <= v_empty:
            empty[i] = True
        volts[i] = v
        amps[i] = power[i] / v if not (empty[i] or charging[i]) and v > 0.0 else 0.0
        f = (v_state[i] - drop[i] - v_empty) / (v_max - v_empty)
        if f < 0.0:
            f = 0.0
        elif f > 1.0:
            f = 1.0
        pct[i] = f


@njit(f"int64({F8_1D_IN}, {_BOOL_IN}, float64, boolean, float64[:], boolean[:], float64[:], float64[:], "
      f"{F8_1D_IN}, boolean[:], float64[:], float64[:], float64[:], {F8_1D_IN}, {F8_1D_IN}, {F8_1D_IN})")
def bank_step(power_in, charging_in, dt_s, lipo, power, charging, soc, v_state, drop, empty, volts, amps,
               pct, tab_soc, tab_v, c):
    """``BatteryBank.step`` after its argument checks, in one call: take the inputs (all or nothing) and
    advance every pack by ``dt_s`` with the bank's model (``lipo`` or linear; ``c``: its constants, as
    ``BatteryBank._consts``). Returns the index of the first bad power (nothing changed), else -1."""
    bad = _take_inputs(power_in, charging_in, power, charging)
    if bad >= 0:
        return bad
    if lipo:
        _lipo_step(soc, drop, empty, volts, amps, power, charging, dt_s, tab_soc, tab_v, c[0], c[1], c[2],
                   c[3], c[4], c[5], c[6])
    else:
        _linear_step(v_state, drop, empty, volts, amps, power, charging, dt_s, c[0], c[1], c[2], c[3], pct)
    return -1


#: The rows of a bank's float block (``BatteryBank``, each row a pack's value per vehicle): lipo state of
#: charge [0..1], linear model voltage before cell-failure drops [V], cumulative cell-failure voltage
#: steps [V], terminal voltage [V], current [A], last step's power [W], linear charge left [0..1].
SOC_ROW, V_STATE_ROW, DROP_ROW, VOLTS_ROW, AMPS_ROW, POWER_ROW, LINEAR_PCT_ROW = range(7)
BANK_FLOAT_ROWS = 7
#: The rows of its bool block: empty (latched), charging during the last step.
EMPTY_ROW, CHARGING_ROW = range(2)
BANK_BOOL_ROWS = 2


class BatteryBank:
    """The battery packs of N vehicles (one ``BatteryParams`` for all), advanced together.

    ``step(power_w, dt_s, charging)`` once per simulation step; read ``voltage_v``, ``current_a``,
    ``percentage`` and ``empty`` afterwards. Arrays are (N,), copies.

    The packs' state lives in two blocks, a float (``BANK_FLOAT_ROWS``, N) and a bool (``BANK_BOOL_ROWS``,
    N) one, updated in place, never replaced. ``blocks``: C-contiguous (R, N) float64 and bool arrays of
    at least those rows, zeros, whose first rows the bank takes (a caller that steps the bank inside its
    own kernel passes it the blocks, with rows of its own after the bank's: ``energy.FleetEnergy``).
    """

    def __init__(self, num_vehicles: int, params: BatteryParams | None = None,
                 blocks: tuple[Array, NDArray[np.bool_]] | None = None) -> None:
        if isinstance(num_vehicles, bool) or not isinstance(num_vehicles, (int, np.integer)) \
                or num_vehicles < 1:
            raise ConfigError(f"num_vehicles={num_vehicles!r} must be an integer >= 1")
        self.params = params if params is not None else BatteryParams()
        n = int(num_vehicles)
        self.num_vehicles = n
        if blocks is None:
            blocks = (np.zeros((BANK_FLOAT_ROWS, n)), np.zeros((BANK_BOOL_ROWS, n), np.bool_))
        floats, flags = blocks
        for block, rows, dtype in ((floats, BANK_FLOAT_ROWS, np.float64), (flags, BANK_BOOL_ROWS, np.bool_)):
            if (block.dtype != dtype or block.ndim != 2 or block.shape[0] < rows or block.shape[1] != n
                    or not block.flags.c_contiguous):
                raise ValueError(f"a bank's {np.dtype(dtype).name} block must be C-contiguous "
                                 f"(>= {rows}, {n}), got {block.dtype} {block.shape}")
        self._soc, self._v_state, self._drop = floats[SOC_ROW], floats[V_STATE_ROW], floats[DROP_ROW]
        self._volts, self._amps, self._power = floats[VOLTS_ROW], floats[AMPS_ROW], floats[POWER_ROW]
        self._empty, self._charging = flags[EMPTY_ROW], flags[CHARGING_ROW]
        # the charge left [0..1] ``percentage`` reads: lipo the state of charge itself, linear its own row
        # (``_linear_step`` writes it)
        self._pct = self._soc if self.params.model == "lipo" else floats[LINEAR_PCT_ROW]
        self._no_charging = np.zeros(n, np.bool_)
        self._no_charging.flags.writeable = False
        self._tab_soc = np.ascontiguousarray(self.params.ocv[:, 0])
        self._tab_v = np.ascontiguousarray(self.params.ocv[:, 1])
        p = self.params
        # the kernel's scalar arguments, once
        if p.model == "lipo":
            self._consts: tuple[float, ...] = (
                float(p.cells), p.internal_resistance_ohm, 3600.0 * p.capacity_ah, p.cutoff_v,
                p.charge_current_a, p.cells * p.charge_v_per_cell, CHARGE_TERMINATION_C * p.capacity_ah)
        else:
            self._consts = (p.linear_max_v, p.linear_charge_v_per_s, p.linear_discharge_v_per_s,
                            p.linear_empty_v)
        self._lipo = p.model == "lipo"
        #: the model's constants (``_consts``) as an array, for a caller's kernel
        self.constants = np.array(self._consts, float)
        self.constants.flags.writeable = False
        # ``bank_step``'s arguments after the inputs and dt (arrays updated in place, never replaced)
        self._step_args = (self._lipo, self._power, self._charging, self._soc, self._v_state, self._drop,
                           self._empty, self._volts, self._amps, self._pct, self._tab_soc, self._tab_v,
                           self.constants)
        self.reset()

    voltage_v = copy_of("_volts", "Terminal voltage of each pack at the end of the last step [V], (N,).")
    current_a = copy_of("_amps", "Pack current [A], (N,), positive when discharging, negative when charging.")
    empty = copy_of("_empty", "True once a pack has reached its cut-off (latched until reset), (N,) bool.")

    @property
    def percentage(self) -> Array:
        """Charge left, 0..1, (N,): lipo the state of charge; linear (V - V_empty) / (V_max - V_empty)
        (a copy)."""
        return self._pct.copy()

    def readings_view(self) -> tuple[Array, Array, NDArray[np.bool_]]:
        """``voltage_v``, ``percentage`` and ``empty`` without copies, for a per-tick reader that only
        reads them (``energy.FleetEnergy``, the fault conditions): the same arrays for the bank's life,
        updated in place by ``step``, ``reset`` and ``cell_failure``."""
        return self._volts, self._pct, self._empty

    def reset(self, vehicles: ArrayLike | None = None) -> None:
        """Fresh packs (``initial_soc`` / ``linear_initial_v``, no failures, not empty) for ``vehicles``
        (indices; all when None)."""
        idx = slice(None) if vehicles is None else np.asarray(vehicles, int)
        self._soc[idx] = self.params.initial_soc
        self._v_state[idx] = self.params.linear_initial_v
        self._drop[idx] = 0.0
        self._empty[idx] = False
        self._power[idx] = 0.0
        self._charging[idx] = False
        self._run(0.0)

    def step(self, power_w: ArrayLike, dt_s: float, charging: ArrayLike | None = None) -> None:
        """Draw ``power_w`` (N,) [W] (>= 0, electrical, see ``power.py``) for ``dt_s`` [s] (> 0);
        ``charging`` (N,) bool marks vehicles resting on a charging base (default: none)."""
        n = self.num_vehicles
        p = np.asarray(power_w, float)
        c = self._no_charging if charging is None else np.asarray(charging)
        if p.shape != (n,) or c.shape != (n,) or c.dtype != np.bool_:
            raise ValueError(f"power_w must have shape ({n},) and charging be a bool array of shape ({n},), "
                             f"got {p.shape}, {c.dtype} {c.shape}")
        if not (math.isfinite(dt_s) and dt_s > 0):
            raise ValueError(f"dt_s={dt_s!r} must be finite and > 0")
        self.step_checked(p, float(dt_s), c)

    def step_checked(self, power_w: Array, dt_s: float, charging: NDArray[np.bool_] | None = None) -> None:
        """``step`` on inputs already checked for shape and type (float (N,), bool (N,) or None) and a
        finite ``dt_s`` > 0, for a per-tick caller; the power values are still checked."""
        c = self._no_charging if charging is None else charging
        bad = bank_step(power_w, c, dt_s, *self._step_args)
        if bad >= 0:
            raise ValueError(f"power_w[{bad}]={power_w[bad]!r} must be finite and >= 0 [W]")

    def cell_failure(self, vehicle: int, volts_drop: float) -> None:
        """A cell failure of ``vehicle``: its pack voltage steps down by ``volts_drop`` [V] (> 0), from now
        on (cumulative over failures; it persists through charging, so the pack's full voltage is lower too;
        cleared by ``reset``). The pack is re-evaluated at once under the last power, so the drop
        can make it empty immediately."""
        i = int(vehicle)
        if not 0 <= i < self.num_vehicles:
            raise IndexError(f"vehicle {vehicle!r} outside 0..{self.num_vehicles - 1}")
        d = float(volts_drop)
        if not (math.isfinite(d) and d > 0):
            raise ValueError(f"volts_drop={volts_drop!r} must be finite and > 0 [V]")
        self._drop[i] += d
        self._run(0.0)

    def _run(self, dt_s: float) -> None:
        if self.params.model == "lipo":
            _lipo_step(self._soc, self._drop, self._empty, self._volts, self._amps, self._power,
                       self._charging, dt_s, self._tab_soc, self._tab_v, *self._consts)
        else:
            _linear_step(self._v_state, self._drop, self._empty, self._volts, self._amps, self._power,
                         self._charging, dt_s, *self._consts, self._pct)
