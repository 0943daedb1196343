"""The rotor airframe's lower-level inputs in process (docs/ROTOR.md "Lower-level inputs"):
control modes ``rates_thrust`` (FRD body rates + collective thrust) and ``motors`` (normalised motor
commands) of the Simulator, its action checks, failsafe, policies and gym action space. The graph's
cmd/rates_thrust and cmd/motors are test_lowlevel_commands'; both check against the one
``rotor_control.low_level_bounds``.

Checked from physics and the rotor parameters alone: hover thrust m g holds the height, a collective
thrust above the weight climbs at (T - m g) / m, a yaw-rate command turns the heading at that rate,
unequal motor pairs yaw the body in the stronger pair's reaction direction.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.engine.simulator import ActionError, Simulator
from qrsim_ros.core.vehicles.rotor_control import MOTORS_NAMES, RATES_THRUST_NAMES

#: Still air, noiseless dynamics, no battery sag: the physics checks are first-principles.
CALM = {"vehicle": {"airframe": "rotor", "dyn_noise": [0.0] * 6, "turbulence": {"on": False},
                    "battery": {"on": False}}}


def rotor_sim(mode: str, **vehicle: Any) -> Simulator:
    over = {"seed": 3, **CALM}
    over["vehicle"] = {**CALM["vehicle"], "control": mode, **vehicle}
    return Simulator.from_scenario("keep_spot", over)


def test_a_rotor_level_mode_needs_the_rotor_airframe() -> None:
    with pytest.raises(ScenarioError, match=r"vehicle.control: vehicle 0 flies 'motors', a rotor-level "
                                            r"input; its vehicle.airframe must be 'rotor', not 'pelican'"):
        Simulator.from_scenario("keep_spot", {"vehicle": {"control": "motors"}})


def test_the_action_spec_and_the_checks_of_the_limits() -> None:
    sim = rotor_sim("rates_thrust")
    rp = sim.scenario.vehicle.rotor_params()
    spec = sim.action_spec
    assert spec["modes"] == ["rates_thrust"] and spec["columns"] == {"rates_thrust": RATES_THRUST_NAMES}
    max_thrust = 4 * rp.k_f * rp.omega_max_rads ** 2
    with pytest.raises(ActionError, match=r"thrust_n=.* outside \[0.0, "):
        sim.step([[0.0, 0.0, 0.0, max_thrust * 1.01]])
    with pytest.raises(ActionError, match=r"p_rads=3.0 outside \[-2.61"):  # 150 deg/s
        sim.step([[3.0, 0.0, 0.0, 10.0]])
    with pytest.raises(ActionError, match=r"r_rads=-5.0 outside \[-4.5, 4.5\]"):
        sim.step([[0.0, 0.0, -5.0, 10.0]])
    motors = rotor_sim("motors")
    assert motors.action_spec["columns"] == {"motors": MOTORS_NAMES}
    with pytest.raises(ActionError, match=r"motor2=1.2 outside \[0.0, 1.0\]"):
        motors.step([[0.5, 0.5, 1.2, 0.5]])


def test_rates_thrust_hover_climb_and_yaw_follow_physics() -> None:
    sim = rotor_sim("rates_thrust")
    rp = sim.scenario.vehicle.rotor_params()
    weight = rp.mass_kg * rp.gravity_ms2
    z0 = sim.true_state()[0, 2]
    for _ in range(100):  # 2 s at the weight, zero rates
        sim.step([[0.0, 0.0, 0.0, weight]])
    x = sim.true_state()[0]
    assert abs(x[2] - z0) < 0.05 and np.abs(x[3:5]).max() < 1e-3
    # 20 % more thrust than the weight: the climb accelerates at 0.2 g less the linear drag on the vertical
    # speed (rotor_params.drag_per_s[2]), a = -0.2 g - drag_w w (NED/FRD down +, level body)
    w = [sim.true_state()[0, 8]]
    for _ in range(30):
        sim.step([[0.0, 0.0, 0.0, 1.2 * weight]])
        w.append(sim.true_state()[0, 8])
    w_arr = np.array(w)
    accel = np.diff(w_arr) / 0.02
    expected = -0.2 * rp.gravity_ms2 - rp.drag_per_s[2] * 0.5 * (w_arr[1:] + w_arr[:-1])
    np.testing.assert_allclose(accel[2:], expected[2:], rtol=0.05)
    assert w_arr[-1] < -0.5  # climbing
    # a yaw-rate command of 1 rad/s for 1 s turns the heading by about 1 rad (less the onset)
    psi0 = sim.true_state()[0, 5]
    for _ in range(50):
        sim.step([[0.0, 0.0, 1.0, weight]])
    turned = math.remainder(sim.true_state()[0, 5] - psi0, 2 * math.pi)
    assert 0.8 < turned < 1.02
    assert sim.true_state()[0, 11] == pytest.approx(1.0, abs=0.05)


def test_motors_hover_and_a_pair_imbalance_yaws_the_body() -> None:
    sim = rotor_sim("motors")
    rp = sim.scenario.vehicle.rotor_params()
    # the hover speed sqrt(m g / (4 k_f)) as a normalised command (linear in speed, omega_min..max)
    hover = (math.sqrt(rp.mass_kg * rp.gravity_ms2 / (4 * rp.k_f)) - rp.omega_min_rads) / (
        rp.omega_max_rads - rp.omega_min_rads)
    for _ in range(25):
        sim.step([[hover] * 4])
    assert abs(sim.true_state()[0, 8]) < 0.05  # FRD w: neither climbing nor sinking
    # rotors 0 and 2 (spin +1) a little faster, 1 and 3 a little slower: the same total thrust (to first
    # order), a net reaction torque: the body yaws against the faster pair's spin, r of sign -spin_0
    d = 0.02
    for _ in range(10):
        sim.step([[hover + d, hover - d, hover + d, hover - d]])
    r = sim.true_state()[0, 11]
    assert np.sign(r) == -np.sign(rp.spin[0]) and abs(r) > 0.05
    assert np.abs(sim.true_state()[0, 9:11]).max() < 0.05 * abs(r) + 1e-6  # pairs balanced: no roll/pitch


def test_an_expired_low_level_input_flies_the_failsafe() -> None:
    """command_timeout_s 0.5 s: after a silent autopilot (NaN rows) the rotor vehicle flies the hold
    failsafe through its attitude controller, not its last rates/thrust."""
    sim = rotor_sim("rates_thrust", command_timeout_s=0.5, failsafe="hold")
    rp = sim.scenario.vehicle.rotor_params()
    sim.step([[0.0, 0.0, 0.0, 1.3 * rp.mass_kg * rp.gravity_ms2]])  # a strong climb, then silence
    z = []
    for _ in range(100):
        sim.step([[np.nan] * 4])
        z.append(sim.true_state()[0, 2])
    assert sim.failsafe == ["hold"]
    # held on its last thrust it would have climbed ~0.3 g for 2 s (about 6 m); the hold stops the climb
    assert z[-1] - z[0] > -3.0 and abs(z[-1] - z[-10]) < 0.3


def test_hover_policy_and_gym_space_cover_the_low_level_modes() -> None:
    from qrsim_ros.policies.base import SimulatorView, action_bounds
    from qrsim_ros.policies.simple import Hover

    sim = rotor_sim("rates_thrust")
    rp = sim.scenario.vehicle.rotor_params()
    view = SimulatorView(sim)
    a = np.asarray(Hover(view)(view))
    np.testing.assert_allclose(a, [[0.0, 0.0, 0.0, rp.mass_kg * rp.gravity_ms2]])
    lo, hi = action_bounds(sim.action_spec, sim.scenario.area_limits_ned, rp)
    np.testing.assert_allclose(hi[0], [math.radians(150), math.radians(150), 4.5,
                                       4 * rp.k_f * rp.omega_max_rads ** 2])
    np.testing.assert_allclose(lo[0], [-math.radians(150), -math.radians(150), -4.5, 0.0])
    gym = pytest.importorskip("gymnasium", reason="gymnasium is a project dependency; absent here")
    from qrsim_ros.gym.envs import QRSimEnv

    env = QRSimEnv("keep_spot", {**CALM, "vehicle": {**CALM["vehicle"], "control": "motors"}})
    assert isinstance(env.action_space, gym.spaces.Box)
    np.testing.assert_array_equal(env.action_space.low, np.zeros((1, 4), np.float32))
    np.testing.assert_array_equal(env.action_space.high, np.ones((1, 4), np.float32))
