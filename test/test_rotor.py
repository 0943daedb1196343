"""The rotor-level airframe: parameters, mixer and the vectorised model against closed forms.

Every expected value is worked out here from the physics (hover speed, Euler's equation, first-order
lag, spring equilibrium, free fall with and without linear drag), never taken from the code under test.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest

from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.vehicles.rotor import RotorFleet, RotorInputError, default_substeps
from qrsim_ros.core.vehicles.rotor_mixer import (
    mixer_matrices,
    normalised_to_speeds,
    thrusts_to_wrench,
    wrench_to_speeds,
    wrench_to_thrusts,
)
from qrsim_ros.core.vehicles.rotor_params import (
    PRESETS,
    RotorParams,
    crazyflie_2_params,
    ireland_2016_params,
    pelican_rotor_params,
    rotor_preset,
)

DT = 0.02
G = 9.81


def hover_omega(p: RotorParams) -> float:
    return math.sqrt(p.mass_kg * G / (4.0 * p.k_f))


def fleet_at(p: RotorParams, x: list[float] | np.ndarray, omega: float | np.ndarray,
             **kw: object) -> RotorFleet:
    x = np.atleast_2d(np.asarray(x, float))
    fleet = RotorFleet(x.shape[0], p, **kw)  # type: ignore[arg-type]
    fleet.set_state(x, np.broadcast_to(np.asarray(omega, float), (x.shape[0], 4)))
    return fleet


# --- hover ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PRESETS))
def test_hover_speed_holds_a_hover_for_10_s(name: str) -> None:
    p = rotor_preset(name)
    assert p.hover_omega_rads == pytest.approx(hover_omega(p), rel=1e-12)
    w = hover_omega(p)
    fleet = fleet_at(p, [5.0, -3.0, -20.0, 0.0, 0.0, 0.7], w)
    for _ in range(500):
        fleet.step(np.full((1, 4), w))
    x = fleet.state[0]
    assert np.abs(x[0:3] - [5.0, -3.0, -20.0]).max() < 1e-9
    assert np.abs(x[3:6] - [0.0, 0.0, 0.7]).max() < 1e-12
    assert np.abs(x[6:12]).max() < 1e-10
    assert x[12] == pytest.approx(p.mass_kg * G, rel=1e-12)  # element 12: the rotors' thrust
    np.testing.assert_allclose(fleet.accel_body[0], [0.0, 0.0, -G], atol=1e-12)  # accelerometer: -g on z
    assert fleet.valid[0]


# --- mixer ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["x", "+"])
def test_mixer_inverts_exactly_both_ways(layout: str) -> None:
    p = pelican_rotor_params().replace(layout=layout)
    m, m_inv = mixer_matrices(p)
    np.testing.assert_allclose(m @ m_inv, np.eye(4), atol=1e-12)
    rng = np.random.default_rng(14)
    thrusts = rng.uniform(0.5, 8.0, (200, 4))
    back = wrench_to_thrusts(p, thrusts_to_wrench(p, thrusts), clip=False)
    np.testing.assert_allclose(back, thrusts, rtol=1e-12, atol=1e-12)
    wrench = np.column_stack([rng.uniform(5, 25, 200), rng.uniform(-0.5, 0.5, (200, 2)),
                              rng.uniform(-0.05, 0.05, 200)])
    np.testing.assert_allclose(thrusts_to_wrench(p, wrench_to_thrusts(p, wrench, clip=False)), wrench,
                               rtol=1e-12, atol=1e-12)


def test_mixer_plus_layout_matches_the_hand_allocation() -> None:
    p = pelican_rotor_params()  # "+": 0 front, 1 right, 2 back, 3 left; spins +1 -1 +1 -1
    big_t, tx, ty, tz, arm = 16.0, 0.3, -0.2, 0.04, 0.2
    ratio = p.k_m / p.k_f
    # roll: tau_x = -y1 F1 - y3 F3 = L (F3 - F1); pitch: tau_y = L (F0 - F2);
    # yaw: tau_z = -ratio (F0 - F1 + F2 - F3)
    expected = big_t / 4 + np.array([ty / (2 * arm) - tz / (4 * ratio), -tx / (2 * arm) + tz / (4 * ratio),
                                     -ty / (2 * arm) - tz / (4 * ratio), tx / (2 * arm) + tz / (4 * ratio)])
    np.testing.assert_allclose(wrench_to_thrusts(p, [big_t, tx, ty, tz], clip=False), expected, rtol=1e-12)


def test_mixer_x_layout_matches_the_hand_allocation() -> None:
    p = crazyflie_2_params()  # "x": 0 front-right, 1 back-right, 2 back-left, 3 front-left
    a = 0.046 / math.sqrt(2.0)
    big_t, tx, ty = 0.3, 1e-3, -2e-3
    # roll: -a (F0 + F1) + a (F2 + F3) = tx; pitch: a (F0 + F3) - a (F1 + F2) = ty
    expected = big_t / 4 + np.array([-tx + ty, -tx - ty, tx - ty, tx + ty]) / (4 * a)
    np.testing.assert_allclose(wrench_to_thrusts(p, [big_t, tx, ty, 0.0], clip=False), expected, rtol=1e-12)


def test_mixer_clips_to_the_motor_range() -> None:
    p = pelican_rotor_params()
    f_max = p.k_f * p.omega_max_rads ** 2
    f = wrench_to_thrusts(p, [10.0, 5.0, 0.0, 0.0])  # 5 N m of roll: rotor 1 would need negative thrust
    assert f[1] == 0.0 and f[3] == f_max
    speeds = wrench_to_speeds(p, [p.mass_kg * G, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(speeds, hover_omega(p), rtol=1e-12)
    np.testing.assert_allclose(normalised_to_speeds(p, [0.0, 0.5, 1.0, 2.0]),
                               [0.0, 0.5 * p.omega_max_rads, p.omega_max_rads, p.omega_max_rads])


# --- rotational response --------------------------------------------------------------------------

#: The roll torque of the step responses [N m].
ROLL_TAU = 0.02


def roll_torque_step(ticks: int, *, speeds_already_there: bool) -> Iterator[tuple[float, np.ndarray]]:
    """A Pelican rotor vehicle 50 m up, level, commanded the speeds of its weight's thrust plus a roll
    torque ``ROLL_TAU``, from those speeds (``speeds_already_there``) or from the hover speed: (t, state)
    after each of ``ticks`` ticks."""
    p = pelican_rotor_params()
    speeds = wrench_to_speeds(p, [p.mass_kg * G, ROLL_TAU, 0.0, 0.0])
    fleet = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, 0.0], speeds if speeds_already_there else hover_omega(p))
    for k in range(1, ticks + 1):
        fleet.step(speeds[None, :])
        yield k * DT, fleet.state[0]


def test_roll_torque_step_with_speeds_already_there_gives_tau_over_ixx() -> None:
    alpha = ROLL_TAU / pelican_rotor_params().inertia_kgm2[0]
    for t, x in roll_torque_step(10, speeds_already_there=True):
        assert x[9] == pytest.approx(alpha * t, rel=1e-9)
        assert x[3] == pytest.approx(0.5 * alpha * t * t, rel=1e-9)
        assert abs(x[10]) < 1e-12 and abs(x[11]) < 1e-12


def test_roll_torque_step_through_the_motor_lag_matches_the_linearised_model() -> None:
    p = pelican_rotor_params()
    lag, alpha = p.motor_tau_s, ROLL_TAU / p.inertia_kgm2[0]
    for t, x in roll_torque_step(15, speeds_already_there=False):
        # torque tau (1 - exp(-t/T)) -> p(t) = tau/I (t - T (1 - exp(-t/T)))
        expected = alpha * (t - lag * (1.0 - math.exp(-t / lag)))
        assert x[9] == pytest.approx(expected, rel=0.01)


def test_motor_step_reaches_63_percent_at_one_time_constant() -> None:
    p = pelican_rotor_params().replace(motor_tau_s=0.1)  # 5 ticks
    fleet = fleet_at(p, [0.0, 0.0, -500.0, 0.0, 0.0, 0.0], 0.0, state_limits=None)
    target = 600.0
    for k in range(1, 16):
        fleet.step(np.full((1, 4), target))
        np.testing.assert_allclose(fleet.omega[0], target * (1.0 - math.exp(-k * DT / 0.1)), rtol=1e-6)
        if k == 5:
            np.testing.assert_allclose(fleet.omega[0] / target, 1.0 - math.exp(-1.0), rtol=1e-6)  # 63.2 %


def test_commands_above_omega_max_saturate() -> None:
    p = pelican_rotor_params()
    fleet = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, 0.0], p.omega_max_rads)
    fleet.step(np.full((1, 4), 5.0 * p.omega_max_rads))
    np.testing.assert_allclose(fleet.omega[0], p.omega_max_rads, rtol=1e-12)


# --- ground contact ---------------------------------------------------------------------------------

@pytest.mark.parametrize("ground_z", [0.0, -3.0])
def test_resting_on_the_ground_with_motors_off_stays_put(ground_z: float) -> None:
    p = ireland_2016_params()
    z_eq = ground_z - 0.2 + p.mass_kg * G / 3775.0  # spring carries the weight: k d = m g
    fleet = fleet_at(p, [1.0, 2.0, z_eq, 0.0, 0.0, 0.3], 0.0, ground_z_ned_m=ground_z)
    for _ in range(250):
        fleet.step(np.zeros((1, 4)))
    x = fleet.state[0]
    np.testing.assert_allclose(x[:6], [1.0, 2.0, z_eq, 0.0, 0.0, 0.3], atol=1e-12)
    assert np.abs(x[6:13]).max() < 1e-12
    # the contact force equals the weight: the accelerometer reads g upwards (-z body)
    np.testing.assert_allclose(fleet.accel_body[0], [0.0, 0.0, -G], atol=1e-9)
    assert fleet.valid[0]


def test_a_drop_settles_at_the_spring_equilibrium() -> None:
    p = ireland_2016_params()
    z_eq = -0.2 + p.mass_kg * G / 3775.0
    fleet = fleet_at(p, [0.0, 0.0, -0.7, 0.0, 0.0, 0.0], 0.0)
    lowest = -math.inf
    for _ in range(250):
        fleet.step(np.zeros((1, 4)))
        lowest = max(lowest, fleet.state[0, 2])
    assert fleet.state[0, 2] == pytest.approx(z_eq, abs=1e-6)
    assert lowest < 0.0 and fleet.valid[0]  # the centre of mass never went through the ground


# --- rotor loss -------------------------------------------------------------------------------------

@pytest.mark.parametrize("params", [ireland_2016_params(), crazyflie_2_params()], ids=["+", "x"])
def test_losing_one_rotor_at_hover_spins_yaw_and_loses_a_quarter_of_the_thrust(params: RotorParams) -> None:
    p = params.replace(drag_per_s=np.zeros(3))
    w = hover_omega(p)
    fleet = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, 0.0], w)
    fleet.step(np.full((1, 4), w), health=[[0.0, 1.0, 1.0, 1.0]])
    x = fleet.state[0]
    # rotor 0 turns clockwise (spin +1): its drag reaction was -k_m w^2; the other three leave +k_m w^2
    r_dot = +p.k_m * w * w / p.inertia_kgm2[2]
    assert x[11] == pytest.approx(r_dot * DT, rel=1e-6)
    assert x[11] > 0.0  # clockwise seen from above, the direction the lost rotor turned
    assert x[12] == pytest.approx(0.75 * p.mass_kg * G, rel=1e-12)
    # a quarter of the weight unbalanced: the vehicle starts to sink at g/4; the tilt the lost rotor
    # causes within the tick (up to 0.03 rad on the small quad) costs 3/4 (1 - cos) < 0.1 % of that
    assert x[8] == pytest.approx(0.25 * G * DT, rel=3e-3)
    # the lost rotor's thrust at (x0, y0) is gone: tau_x = +y0 F, tau_y = -x0 F; Euler's equations add
    # the gyroscopic coupling -(I_z - I_y) q r / I_x (and likewise on y), which integrates to
    # -(I_z - I_y) / I_x * q_dot r_dot dt^3 / 3 over the tick
    ixx, iyy, izz = p.inertia_kgm2
    f_h = p.k_f * w * w
    x0, y0 = p.rotor_positions_m[0]
    p_dot, q_dot = y0 * f_h / ixx, -x0 * f_h / iyy
    p_expected = p_dot * DT - (izz - iyy) / ixx * q_dot * r_dot * DT ** 3 / 3
    q_expected = q_dot * DT - (ixx - izz) / iyy * r_dot * p_dot * DT ** 3 / 3
    assert x[9] == pytest.approx(p_expected, rel=1e-2)
    assert x[10] == pytest.approx(q_expected, rel=1e-2)


# --- free fall, drag and wind -----------------------------------------------------------------------

def test_free_fall_with_motors_off_accelerates_at_g() -> None:
    p = pelican_rotor_params().replace(drag_per_s=np.zeros(3))
    fleet = fleet_at(p, [0.0, 0.0, -100.0, 0.0, 0.0, 0.0], 0.0)
    for _ in range(50):
        fleet.step(np.zeros((1, 4)))
    x = fleet.state[0]
    assert x[8] == pytest.approx(G * 1.0, rel=1e-12)
    assert x[2] == pytest.approx(-100.0 + 0.5 * G, rel=1e-12)
    np.testing.assert_allclose(fleet.accel_body[0], 0.0, atol=1e-12)  # an accelerometer reads nothing


def test_free_fall_with_linear_drag_follows_the_closed_form() -> None:
    p = pelican_rotor_params()
    c = p.drag_per_s[2]
    fleet = fleet_at(p, [0.0, 0.0, -100.0, 0.0, 0.0, 0.0], 0.0)
    for _ in range(50):
        fleet.step(np.zeros((1, 4)))
    t = 1.0
    assert fleet.state[0, 8] == pytest.approx(G / c * (1 - math.exp(-c * t)), rel=1e-8)
    z = -100 + G / c * t - G / c ** 2 * (1 - math.exp(-c * t))
    assert fleet.state[0, 2] == pytest.approx(z, rel=1e-8)


@pytest.mark.parametrize("use_body", [False, True])
def test_hover_in_a_steady_wind_is_carried_by_the_linear_drag(use_body: bool) -> None:
    p = pelican_rotor_params()
    c = p.drag_per_s[0]
    w = hover_omega(p)
    fleet = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, math.pi / 2], w)  # nose east
    for _ in range(50):
        if use_body:  # a north wind seen from a vehicle facing east comes from its left: body -y
            fleet.step(np.full((1, 4), w), wind_body=[[0.0, -3.0, 0.0]])
        else:
            fleet.step(np.full((1, 4), w), wind_ned=[[3.0, 0.0, 0.0]])
    x = fleet.state[0]
    assert x[7] == pytest.approx(-3.0 * (1 - math.exp(-c * 1.0)), rel=1e-8)  # body v (right) drifts to -3
    assert x[0] == pytest.approx(3.0 * (1.0 - (1 - math.exp(-c)) / c), rel=1e-8)  # moves north
    assert abs(x[6]) < 1e-12 and abs(x[8]) < 1e-12


# --- vectorisation, inputs, parameters --------------------------------------------------------------

def test_a_fleet_of_n_equals_n_fleets_of_one() -> None:
    p = crazyflie_2_params()
    rng = np.random.default_rng(7)
    n = 5
    x0 = np.column_stack([10.0 * np.arange(n), rng.uniform(-5, 5, n), rng.uniform(-20, -5, n),
                          rng.uniform(-0.2, 0.2, (n, 3)), rng.uniform(-1, 1, (n, 6))])
    om0 = rng.uniform(1000, 2000, (n, 4))
    cmds = rng.uniform(1200, 1800, (40, n, 4))
    health = rng.uniform(0.5, 1.0, (n, 4))
    wind = rng.uniform(-2, 2, (n, 3))
    fleet = RotorFleet(n, p, state_limits=np.tile([-1e4, 1e4], (12, 1)))
    fleet.set_state(x0, om0)
    singles = []
    for i in range(n):
        f = RotorFleet(1, p, state_limits=np.tile([-1e4, 1e4], (12, 1)))
        f.set_state(x0[i:i + 1], om0[i:i + 1])
        singles.append(f)
    for k in range(40):
        fleet.step(cmds[k], wind, health)
        for i, f in enumerate(singles):
            f.step(cmds[k, i:i + 1], wind[i:i + 1], health[i:i + 1])
    assert np.array_equal(fleet.state, np.vstack([f.state for f in singles]))
    assert np.array_equal(fleet.omega, np.vstack([f.omega for f in singles]))
    assert np.array_equal(fleet.accel_body, np.vstack([f.accel_body for f in singles]))


def test_step_normalised_maps_commands_onto_the_speed_range() -> None:
    p = pelican_rotor_params().replace(omega_min_rads=100.0)
    a = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, 0.0], 500.0)
    b = fleet_at(p, [0.0, 0.0, -50.0, 0.0, 0.0, 0.0], 500.0)
    c = np.array([[0.0, 0.25, 0.7, 1.0]])
    a.step_normalised(c)
    b.step(100.0 + c * (p.omega_max_rads - 100.0))
    assert np.array_equal(a.state, b.state)
    with pytest.raises(RotorInputError, match="normalised"):
        a.step_normalised([[0.0, 0.0, 1.2, 0.0]])


def test_bad_inputs_raise_naming_vehicle_and_input() -> None:
    p = pelican_rotor_params()
    fleet = fleet_at(p, [[0.0, 0.0, -50.0, 0.0, 0.0, 0.0], [10.0, 0.0, -50.0, 0.0, 0.0, 0.0]], 600.0)
    before = fleet.state
    with pytest.raises(RotorInputError, match=r"vehicle 1: omega_cmd\[2\]=-1.0"):
        fleet.step([[600.0] * 4, [600.0, 600.0, -1.0, 600.0]])
    with pytest.raises(RotorInputError, match=r"vehicle 0: health\[3\]=1.5"):
        fleet.step(np.full((2, 4), 600.0), health=[[1.0, 1.0, 1.0, 1.5], [1.0] * 4])
    with pytest.raises(RotorInputError, match="wind"):
        fleet.step(np.full((2, 4), 600.0), wind_ned=[[np.nan, 0.0, 0.0], [0.0, 0.0, 0.0]])
    with pytest.raises(RotorInputError, match=r"shape \(2, 4\)"):
        fleet.step(np.full((3, 4), 600.0))
    assert np.array_equal(fleet.state, before)


def test_leaving_the_limits_invalidates_and_freezes() -> None:
    p = pelican_rotor_params()
    fleet = fleet_at(p, [0.0, 0.0, -1.0, 0.0, 0.0, 0.0], 0.0,
                     state_limits=np.vstack([[[-10, 10]] * 2, [[-10, -0.5]], np.tile([-100, 100], (9, 1))]))
    for _ in range(20):
        fleet.step(np.zeros((1, 4)))
    assert not fleet.valid[0] and fleet.invalid_reason[0].startswith("pz=")
    frozen = fleet.state
    fleet.step(np.zeros((1, 4)))
    assert np.array_equal(fleet.state, frozen)


@pytest.mark.parametrize(("changes", "key"), [
    ({"mass_kg": -1.0}, "rotor.mass_kg"),
    ({"inertia_kgm2": [0.01, 0.01]}, "rotor.inertia_kgm2"),
    ({"inertia_kgm2": [0.01, 0.0, 0.02]}, "rotor.inertia_kgm2"),
    ({"arm_m": 0.0}, "rotor.arm_m"),
    ({"layout": "h"}, "rotor.layout"),
    ({"spin": [1, 1, -1, -1]}, "rotor.spin"),
    ({"spin": [1, -1, 1, 0]}, "rotor.spin"),
    ({"k_f": float("nan")}, "rotor.k_f"),
    ({"k_m": -1e-7}, "rotor.k_m"),
    ({"motor_tau_s": 0.0}, "rotor.motor_tau_s"),
    ({"omega_min_rads": 950.0}, "rotor.omega_min_rads"),
    ({"omega_max_rads": 300.0}, "rotor.omega_max_rads"),
    ({"drag_per_s": [0.1, -0.1, 0.1]}, "rotor.drag_per_s"),
    ({"contact_damping_n_s_m": -1.0}, "rotor.contact_damping_n_s_m"),
    ({"contact_radius_m": "big"}, "rotor.contact_radius_m"),
    ({"name": 3}, "rotor.name"),
    ({"k_F": 1.0}, "unknown key"),
])
def test_bad_parameters_raise_a_config_error_naming_the_key(changes: dict[str, object], key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        pelican_rotor_params().replace(**changes)


def test_unknown_preset_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"rotor\.preset='zeppelin' unknown .*pelican"):
        rotor_preset("zeppelin")


def test_parameter_sets_carry_their_sources_figures() -> None:
    pel, ire, cf = pelican_rotor_params(), ireland_2016_params(), crazyflie_2_params()
    assert pel.mass_kg == 1.68 and pel.arm_m == 0.2 and pel.layout == "+"
    assert pel.max_thrust_n == pytest.approx(-18.0007 + 4.23754 * 12.0, rel=1e-12)  # identified, 12 V
    w_h = hover_omega(pel)
    assert 2 * pel.k_f * w_h * (pel.omega_max_rads - w_h) / pel.motor_tau_s == pytest.approx(46.8004)
    assert (ire.mass_kg, ire.arm_m) == (1.51, 0.2)
    assert (ire.contact_stiffness_n_m, ire.contact_damping_n_s_m) == (3775.0, 75.5)
    np.testing.assert_array_equal(ire.inertia_kgm2, [0.03, 0.03, 0.04])
    assert cf.k_f == pytest.approx(3.1582e-10 * (60 / (2 * math.pi)) ** 2, rel=1e-12)
    assert cf.layout == "x" and cf.mass_kg == 0.027
    for p in (pel, ire, cf):
        assert p.inertia_kgm2.flags.writeable is False
        assert default_substeps(p) == 2  # half of 1/50 s (contact) or of tau per sub-step
