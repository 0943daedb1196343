"""Battery packs and power models (Energy): expected values from hand formulas written here."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.vehicles.battery import DEFAULT_OCV_TABLE, BatteryBank, BatteryParams, ocv_per_cell
from qrsim_ros.core.vehicles.power import PelicanPowerParams, momentum_theory_power, rotor_power

HOVER_THRUST_N = 1.68 * 9.81  # QRSim's Pelican: m g


def flat(volts_per_cell: float = 3.9, **kw: object) -> BatteryParams:
    """A pack whose open-circuit voltage does not depend on the charge, so V and I have closed forms."""
    return BatteryParams(ocv_table=[[0.0, volts_per_cell], [1.0, volts_per_cell]], **kw)  # type: ignore[arg-type]


# --- power models ---------------------------------------------------------------------------------------


def test_momentum_theory_hover_power_by_hand():
    # per rotor T = 16.4808/4 = 4.1202 N; ideal P = T^1.5 / sqrt(2 * 1.225 * pi * 0.127^2)
    t = HOVER_THRUST_N / 4
    ideal = t ** 1.5 / math.sqrt(2 * 1.225 * math.pi * 0.127 ** 2)
    assert ideal == pytest.approx(23.73, abs=0.01)
    expected = 4 * ideal / (0.55 * 0.8) + 10.0
    assert momentum_theory_power([HOVER_THRUST_N])[0] == pytest.approx(expected, rel=1e-12)
    # thrust scaling: doubling thrust multiplies the induced part by 2^1.5; no thrust leaves the avionics
    p = momentum_theory_power([0.0, HOVER_THRUST_N, 2 * HOVER_THRUST_N, -3.0])
    assert p[0] == 10.0 and p[3] == 10.0
    assert (p[2] - 10.0) / (p[1] - 10.0) == pytest.approx(2 ** 1.5, rel=1e-12)


def test_rotor_power_sums_km_omega_cubed():
    omega = np.array([[400.0, -400.0, 400.0, -400.0], [100.0, 200.0, 300.0, 0.0]])
    km = 1.5e-7
    p = rotor_power(omega, km, 0.8, avionics_w=5.0)
    assert p[0] == pytest.approx(4 * km * 400.0 ** 3 / 0.8 + 5.0, rel=1e-12)
    assert p[1] == pytest.approx(km * (100.0 ** 3 + 200.0 ** 3 + 300.0 ** 3) / 0.8 + 5.0, rel=1e-12)
    per_rotor = rotor_power(omega[:1], [1e-7, 2e-7, 3e-7, 4e-7], 1.0)[0]
    assert per_rotor == pytest.approx(10e-7 * 400.0 ** 3, rel=1e-12)


# --- LiPo model -----------------------------------------------------------------------------------------


def test_default_pack_sits_in_the_pelicans_battery_range():
    p = BatteryParams()
    bank = BatteryBank(1, p)
    assert 9.0 <= bank.voltage_v[0] <= 12.0  # QRSim accepts 9..12 V (spec 2.1)
    assert p.cells * p.cutoff_v_per_cell == pytest.approx(9.0)
    assert p.cells * p.charge_v_per_cell == pytest.approx(12.0)


def test_ocv_table_monotonic_and_interpolated_exactly_at_its_points():
    table = np.array(DEFAULT_OCV_TABLE)
    assert np.all(np.diff(table[:, 0]) > 0) and np.all(np.diff(table[:, 1]) > 0)
    # the table samples Chen & Rincon-Mora's fit: check three points against the formula by hand
    for soc in (0.1, 0.5, 1.0):
        v = -1.031 * math.exp(-35 * soc) + 3.685 + 0.2156 * soc - 0.1178 * soc ** 2 + 0.3201 * soc ** 3
        assert ocv_per_cell(BatteryParams(), soc) == pytest.approx(v, abs=5e-5)
    for soc, volts in DEFAULT_OCV_TABLE:
        bank = BatteryBank(1, BatteryParams(initial_soc=soc))
        assert bank.voltage_v[0] == pytest.approx(3 * volts, abs=1e-12)  # at rest V_t = OCV (also when empty)
    # halfway between two points: the mean of the two
    (s0, v0), (s1, v1) = DEFAULT_OCV_TABLE[8], DEFAULT_OCV_TABLE[9]
    assert ocv_per_cell(BatteryParams(), (s0 + s1) / 2) == pytest.approx((v0 + v1) / 2, abs=1e-12)


def test_voltage_sag_under_a_power_step_is_i_times_r():
    r = 0.05
    bank = BatteryBank(1, flat(3.9, internal_resistance_ohm=r))
    ocv = 3 * 3.9
    assert bank.voltage_v[0] == pytest.approx(ocv) and bank.current_a[0] == 0.0
    power = 300.0
    bank.step(np.array([power]), 0.02)
    i = (ocv - math.sqrt(ocv ** 2 - 4 * r * power)) / (2 * r)  # smaller root of r I^2 - ocv I + P = 0
    assert bank.current_a[0] == pytest.approx(i, rel=1e-12)
    assert ocv - bank.voltage_v[0] == pytest.approx(i * r, rel=1e-12)
    assert bank.voltage_v[0] * bank.current_a[0] == pytest.approx(power, rel=1e-12)
    # state of charge fell by I dt / capacity
    assert bank.percentage[0] == pytest.approx(0.85 - i * 0.02 / (3600 * 6.0), rel=1e-12)
    # without resistance no sag at all
    ideal = BatteryBank(1, flat(3.9, internal_resistance_ohm=0.0))
    ideal.step(np.array([power]), 0.02)
    assert ideal.voltage_v[0] == pytest.approx(ocv) and ideal.current_a[0] == pytest.approx(power / ocv)


def test_hover_endurance_of_the_default_pelican_pack():
    p = BatteryParams()
    power = momentum_theory_power([HOVER_THRUST_N])[0]
    bank = BatteryBank(1, p)
    dt, t = 0.1, 0.0
    while not bank.empty[0]:
        bank.step(np.array([power]), dt)
        t += dt
        assert t < 3600
    # hand: energy = cells * capacity * integral of Chen's OCV over [0, initial soc], taken in closed form,
    # spent at the load plus the resistive loss I^2 R at the mean voltage
    s = p.initial_soc
    integral = (3.685 * s + 0.2156 * s ** 2 / 2 - 0.1178 * s ** 3 / 3 + 0.3201 * s ** 4 / 4
                - 1.031 / 35 * (1 - math.exp(-35 * s)))
    energy_j = 3 * 6.0 * 3600 * integral
    i_mean = power / (3 * integral / s)
    t_hand = energy_j / (power + i_mean ** 2 * 0.030)
    assert t == pytest.approx(t_hand, rel=0.05)  # the rest: charge left below the cut-off under load
    assert t < t_hand
    assert bank.voltage_v[0] > 9.0 and bank.current_a[0] == 0.0  # empty: motors off, unloaded voltage


def test_empty_is_latched_and_delivers_nothing():
    bank = BatteryBank(2, BatteryParams(capacity_ah=0.01))
    power = np.array([200.0, 0.0])
    for _ in range(200):
        bank.step(power, 0.1)
        if bank.empty[0]:
            break
    assert bank.empty.tolist() == [True, False]
    soc = bank.percentage[0]
    for charging in (False, True):
        bank.step(power, 10.0, np.array([charging, charging]))
        assert bank.empty[0] and bank.current_a[0] == 0.0 and bank.percentage[0] == soc
    bank.reset([0])
    assert not bank.empty[0] and bank.percentage[0] == 0.85


def test_power_beyond_the_packs_maximum_empties_it():
    r = 0.1
    bank = BatteryBank(1, flat(3.9, internal_resistance_ohm=r))
    ocv = 3 * 3.9
    bank.step(np.array([ocv ** 2 / (4 * r) * 1.5]), 0.02)  # above OCV^2/(4R): V_t would be OCV/2 < cut-off
    assert bank.empty[0]


def test_cc_cv_charging_stops_at_the_charge_voltage():
    p = BatteryParams(initial_soc=0.5, internal_resistance_ohm=0.03)
    bank = BatteryBank(1, p)
    on = np.array([True])
    bank.step(np.array([100.0]), 1.0, on)  # constant-current phase: -6 A, V_t = OCV + 6 A * R
    assert bank.current_a[0] == pytest.approx(-6.0)
    assert bank.voltage_v[0] == pytest.approx(3 * ocv_per_cell(p, bank.percentage[0]) + 6.0 * 0.03)
    assert bank.percentage[0] == pytest.approx(0.5 + 6.0 * 1.0 / (3600 * 6.0), rel=1e-9)
    top = 0.0
    for _ in range(3000):
        bank.step(np.array([100.0]), 2.0, on)
        top = max(top, bank.voltage_v[0])
    assert top <= 12.0 + 1e-9
    assert bank.current_a[0] == 0.0  # terminated below C/20
    assert 3 * ocv_per_cell(p, bank.percentage[0]) == pytest.approx(12.0, abs=6.0 / 20 * 0.03 + 1e-9)


def test_cell_failure_drops_the_voltage_by_the_step():
    bank = BatteryBank(3)
    v0 = bank.voltage_v
    bank.cell_failure(1, 0.7)
    assert bank.voltage_v[1] == pytest.approx(v0[1] - 0.7, abs=1e-12)
    assert bank.voltage_v[[0, 2]].tolist() == v0[[0, 2]].tolist()
    bank.cell_failure(1, 0.3)  # cumulative
    assert bank.voltage_v[1] == pytest.approx(v0[1] - 1.0, abs=1e-12)
    bank.cell_failure(2, 3.0)  # below the 9 V cut-off at once
    assert bank.empty.tolist() == [False, False, True]
    lin = BatteryBank(2, BatteryParams(model="linear"))
    lin.cell_failure(0, 0.5)
    assert lin.voltage_v.tolist() == [10.5, 11.0]
    with pytest.raises(ValueError, match="volts_drop"):
        bank.cell_failure(0, -1.0)
    with pytest.raises(IndexError):
        bank.cell_failure(3, 1.0)


# --- ireland_2016 linear model --------------------------------------------------------------------------


def test_linear_model_rates_and_cap():
    p = BatteryParams(model="linear", linear_initial_v=10.0)
    bank = BatteryBank(2, p)
    charging = np.array([True, False])
    zero = np.zeros(2)
    for _ in range(10):
        bank.step(zero, 1.0, charging)
    assert bank.voltage_v[0] == pytest.approx(10.0 + 0.025 * 10)
    assert bank.voltage_v[1] == pytest.approx(10.0 - 0.005 * 10)
    for _ in range(100):  # 0.25 V more than the 0.75 V to the cap
        bank.step(zero, 1.0, charging)
    assert bank.voltage_v[0] == 11.0
    assert bank.percentage[0] == 1.0
    assert bank.percentage[1] == pytest.approx((10.0 - 0.005 * 110 - 9.0) / 2.0)
    # power does not move the voltage; discharge continues to the 9 V empty threshold and latches
    bank.step(np.array([500.0, 500.0]), 1.0)
    assert bank.voltage_v[0] == pytest.approx(11.0 - 0.005)
    assert bank.current_a[0] == pytest.approx(500.0 / (11.0 - 0.005))
    steps = 0
    while not bank.empty[1]:
        bank.step(zero, 1.0)
        steps += 1
    assert steps == math.ceil((10.0 - 0.005 * 111 - 9.0) / 0.005 - 1e-9)
    bank.step(zero, 100.0, np.array([True, True]))
    assert bank.empty[1] and bank.voltage_v[1] <= 9.0


# --- vectorisation and validation -----------------------------------------------------------------------


@pytest.mark.parametrize("model", ["lipo", "linear"])
def test_vectorised_equals_single_runs(model):
    n, steps = 5, 400
    rng = np.random.default_rng(14)
    power = rng.uniform(50.0, 400.0, (steps, n))
    charging = rng.random((steps, n)) < 0.05
    params = BatteryParams(model=model, capacity_ah=0.3, linear_initial_v=9.5)
    fleet = BatteryBank(n, params)
    singles = [BatteryBank(1, params) for _ in range(n)]
    for k in range(steps):
        fleet.step(power[k], 0.5, charging[k])
        for i, s in enumerate(singles):
            s.step(power[k, i:i + 1], 0.5, charging[k, i:i + 1])
    for attr in ("voltage_v", "current_a", "percentage", "empty"):
        assert getattr(fleet, attr).tolist() == [getattr(s, attr)[0] for s in singles], attr
    assert fleet.empty.any()  # the run reached the interesting part


@pytest.mark.parametrize(("key", "value"), [
    ("model", "nimh"), ("cells", 0), ("cells", 2.5), ("capacity_ah", -1.0), ("capacity_ah", float("nan")),
    ("internal_resistance_ohm", -0.01), ("cutoff_v_per_cell", 5.0), ("initial_soc", 1.2),
    ("charge_current_a", 0.0), ("linear_discharge_v_per_s", 0.005), ("linear_charge_v_per_s", -0.025),
    ("linear_empty_v", 12.0), ("linear_initial_v", 11.5),
    ("ocv_table", [[0.0, 3.0]]), ("ocv_table", [[0.0, 4.0], [1.0, 3.0]]),
    ("ocv_table", [[0.1, 3.0], [1.0, 4.0]]),
    ("ocv_table", [[0.0, 3.0], [0.5, 3.5], [0.5, 3.6], [1.0, 4.0]]), ("ocv_table", "full"),
])
def test_bad_battery_params_name_the_key(key, value):
    with pytest.raises(ConfigError, match=f"battery.{key}"):
        BatteryParams(**{key: value})


@pytest.mark.parametrize(("key", "value"), [
    ("rotor_radius_m", 0.0), ("air_density_kgm3", -1.0), ("figure_of_merit", 1.5), ("drive_efficiency", 0.0),
    ("avionics_w", -1.0),
])
def test_bad_power_params_name_the_key(key, value):
    with pytest.raises(ConfigError, match=f"power.{key}"):
        PelicanPowerParams(**{key: value})


def test_bad_step_inputs():
    bank = BatteryBank(2)
    with pytest.raises(ValueError, match="power_w"):
        bank.step(np.array([1.0, -1.0]), 0.02)
    with pytest.raises(ValueError, match="power_w"):
        bank.step(np.ones(3), 0.02)
    with pytest.raises(ValueError, match="dt_s"):
        bank.step(np.ones(2), 0.0)
    with pytest.raises(ValueError, match="charging"):
        bank.step(np.ones(2), 0.02, np.ones(2))
    with pytest.raises(ConfigError, match="num_vehicles"):
        BatteryBank(0)
