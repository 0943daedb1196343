"""ireland_2016's emergency landing controller after a rotor loss (section 5.3.4, 5.1.17;
``core.vehicles.emergency_land``, docs/FAULTS.md "Failsafe: emergency landing").

Paired runs of the in-process Simulator, the same seed and scenario, ``vehicle.rotor_loss_failsafe``
``emergency_land`` against ``none``, flying the fixed hover row (an attitude-mode agent that does not
react). Expected figures come from the paper's gains and the models' documented constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qrsim_ros.core.common.frames import body_to_ned, dcm_from_state
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.config.scenario import load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.emergency_land import (
    LANDED_REASON,
    opposite_rotor,
    pair_thrusts_n,
    pelican_throttle,
    unbalanced_yaw_rate_radps,
)
from qrsim_ros.core.vehicles.pelican import steady_thrust_si

HOVER = [0.0, 0.0, 0.59004353928, 0.0, 12.0]
QUIET = {"dyn_noise": [0.0] * 6, "turbulence": {"on": False}}
WIDE = {"limits_ned": [-100.0, 100.0, -100.0, 100.0, -40.0, 0.0]}  # room for the drift of a spinning descent
YAW_RATE_GAIN = 0.435803  # steady-state yaw rate / yaw-rate command of the identified loop (test_simulator)
LOSS = [{"kind": "rotor_loss", "vehicles": [0], "rotor": 0, "trigger": {"at_time_s": 1.0}}]
LANDED_Z = -0.2  # ground 0 minus the contact radius (0.2 m, every set used here)


def sim(failsafe: str, faults: list[dict[str, Any]] | None = LOSS, **vehicle: Any) -> Simulator:
    over: dict[str, Any] = {"seed": 5, "area": WIDE,
                            "vehicle": {**QUIET, "rotor_loss_failsafe": failsafe, **vehicle}}
    if faults is not None:
        over["faults"] = faults
    return Simulator.from_scenario("keep_spot", over)


def fly(s: Simulator, ticks: int) -> dict[str, Any]:
    """Fly the hover row until the episode ends or ``ticks``; the largest tilt [rad] while valid, and the
    NED vertical speed [m/s] on first reaching the landed height (within 5 cm)."""
    tilt, touchdown, states = 0.0, float("nan"), []
    for _ in range(ticks):
        if s.done:
            break
        before = s.true_state()[0].copy()
        s.step([HOVER])
        if np.isnan(touchdown) and before[2] >= LANDED_Z - 0.05:
            touchdown = float(body_to_ned(dcm_from_state(before[None]), before[None, 6:9])[0, 2])
        if s.fleet.valid[0]:
            x = s.true_state()[0]
            states.append(x.copy())
            tilt = max(tilt, float(np.arccos(np.cos(x[3]) * np.cos(x[4]))))
    return {"tilt": tilt, "touchdown": touchdown, "states": np.array(states)}


# --- the scenario key and the pieces ------------------------------------------------------------------------

def test_the_scenario_key_defaults_to_none_and_a_bad_value_names_its_path() -> None:
    assert load_scenario("keep_spot").vehicle.rotor_loss_failsafe == "none"
    with pytest.raises(ConfigError,
                       match=r"vehicle\.rotor_loss_failsafe='land' must be one of emergency_land"):
        load_scenario("keep_spot", {"vehicle": {"rotor_loss_failsafe": "land"}})


def test_eq_26_disables_the_failed_rotor_and_its_opposite_and_halves_the_collective() -> None:
    assert opposite_rotor([0, 1, 2, 3]).tolist() == [2, 3, 0, 1]
    np.testing.assert_array_equal(pair_thrusts_n([10.0, 10.0, 6.0, 6.0], [0, 1, 2, 3]),
                                  [[0, 5, 0, 5], [5, 0, 5, 0], [0, 3, 0, 3], [3, 0, 3, 0]])
    # the remaining pair has one spin: the Pelican approximation's full imbalance, +-4.5 rad/s
    assert unbalanced_yaw_rate_radps([[0, 1, 0, 1], [1, 0, 1, 0]]).tolist() == [4.5, -4.5]
    for thrust in (5.0, 10.0, 16.0):  # the throttle inverts the identified thrust map
        assert steady_thrust_si(float(pelican_throttle(thrust))) == pytest.approx(thrust, rel=1e-9)


def test_no_fault_flies_bit_for_bit_as_without_the_failsafe() -> None:
    for airframe in ("pelican", "rotor"):
        a, b = sim("none", None, airframe=airframe), sim("emergency_land", None, airframe=airframe)
        for _ in range(100):
            a.step([HOVER])
            b.step([HOVER])
        np.testing.assert_array_equal(a.true_state(), b.true_state())


# --- the identified Pelican (the approximation) ------------------------------------------------------------

def test_on_the_pelican_it_lands_softly_where_the_hover_row_would_sink_through_the_ground() -> None:
    """keep_spot from 10 m: rotor 0 lost at t = 1 s. With the controller: level, thrust scale 2/4, the
    yaw-rate command of the same-spin pair (+4.5 rad/s, flown 0.435803 x 4.5), a descent at the eq. 20
    loop's speed, touchdown below 0.8 m/s and disarmed there. Without it the 3/4-thrust vehicle sinks at
    the drag's terminal speed g/4 / 1.35341 = 1.81 m/s through the landed height."""
    em, none = sim("emergency_land"), sim("none")
    e, n = fly(em, 1500), fly(none, 1500)
    assert em.fleet.invalid_reason[0] == LANDED_REASON and em.failsafe == ["emergency_land"]
    assert none.failsafe == [""]
    assert em.fleet.pelican.thrust_scale[0] == 0.5
    assert e["states"][-1][11] == pytest.approx(YAW_RATE_GAIN * 4.5, rel=1e-3)
    assert e["tilt"] == 0.0
    assert 0.3 < e["touchdown"] < 0.8
    assert em.fleet.emergency_touchdown_mps[0] == pytest.approx(e["touchdown"])
    assert n["touchdown"] == pytest.approx(9.81 / 4 / 1.35341, rel=0.02)
    assert np.abs(e["states"][100:, 8]).max() <= 1.0 + 1e-9  # never faster than max_descent_mps (body w)
    assert [x.note for x in em.fault_log()] == ["emergency land: rotor 0 lost, rotor 2 disabled"]


def test_the_emergency_landing_is_latched_until_the_next_episode() -> None:
    s = sim("emergency_land", [{**LOSS[0], "duration_s": 0.2}])
    for _ in range(100):
        s.step([HOVER])
    assert not s.active_faults and s.failsafe == ["emergency_land"]
    assert s.fleet.emergency_land_rotor.tolist() == [0]
    assert s.fleet.pelican.thrust_scale[0] == 0.5  # the pair stays off after the fault ended
    s.reset()
    assert s.fleet.emergency_land_rotor.tolist() == [-1] and s.failsafe == [""]
    assert s.fleet.pelican.thrust_scale[0] == 1.0


# --- the rotor airframe -------------------------------------------------------------------------------------

def _speed_commands(s: Simulator) -> list[np.ndarray]:
    """Record every rotor speed command the rotor fleet is stepped with."""
    out: list[np.ndarray] = []
    step = s.fleet.rotor.step

    def spy(cmd: Any, *a: Any, **k: Any) -> None:
        out.append(np.array(cmd, float))
        step(cmd, *a, **k)

    s.fleet.rotor.step = spy  # type: ignore[method-assign]
    return out


def test_on_the_rotor_airframe_the_opposite_rotor_is_commanded_off_and_the_pair_shares_the_thrust() -> None:
    s = sim("emergency_land", airframe="rotor", rate_limit_rads=100.0)
    cmds = _speed_commands(s)
    for _ in range(100):
        s.step([HOVER])
    after = np.array(cmds[49:])[:, 0]  # tick 50 (t = 1 s) on
    assert np.all(after[:, [0, 2]] == 0.0)
    np.testing.assert_array_equal(after[:, 1], after[:, 3])
    omega = s.fleet.rotor_speeds_radps[0]
    assert omega[1] == omega[3] and omega[2] < 1e-3 * omega[1]  # rotor 2 spun down (tau = 0.073 s)


def test_with_the_papers_instantaneous_rotors_it_lands_level_and_the_uncontrolled_one_tumbles() -> None:
    """ireland_2016's quadrotor (Table 3) with near-instantaneous rotors (motor_tau_s 2 ms: the paper's
    rotors have no lag) from 5 m: level within 0.06 rad, touchdown at about the 1 m/s descent limit (two
    rotors give 1.00 m g and the set has no drag: nothing brakes), the yaw rate at most the same-spin
    pair's torque over the flight, (k_m / k_f) T_max t / I_zz. Without the controller the onboard attitude
    loop keeps fighting for three rotors and the vehicle tumbles (tilt > 1 rad). The battery is off, as in
    the paper's set-up: the pair needs omega_max, and a pack's voltage caps the speed below it
    (docs/ENERGY.md "Motor speed"; the capped landing is test_motor_supply's)."""
    rotor = {"preset": "ireland_2016", "motor_tau_s": 0.002}
    kw = {"airframe": "rotor", "rotor": rotor, "rate_limit_rads": 100.0,
          "initial_states": [[0, 0, -5, 0, 0, 0]], "battery": {"on": False}}
    em, none = sim("emergency_land", **kw), sim("none", **kw)
    e, n = fly(em, 1000), fly(none, 1000)
    assert em.fleet.invalid_reason[0] == LANDED_REASON
    assert e["tilt"] < 0.06 and n["tilt"] > 1.0
    assert 0.9 < e["touchdown"] < 1.1
    p = em.fleet.rotor.params
    flight_s = len(e["states"]) * 0.02 - 1.0
    pair_torque_max = (p.k_m / p.k_f) * 2 * p.k_f * p.omega_max_rads ** 2  # [N m]
    assert np.abs(e["states"][:, 11]).max() <= pair_torque_max * flight_s / p.inertia_kgm2[2]


def test_with_the_presets_motor_lag_the_rotor_airframe_still_tips_over() -> None:
    """The documented limitation: the opposite rotor spins down at its motor time constant and nothing can
    counter its pitch torque (the failed rotor was the only one on the other side), so the `pelican` set
    pitches past the default 3 rad/s rate limit within 0.1 s of the loss, with or without the controller."""
    for failsafe in ("emergency_land", "none"):
        s = sim(failsafe, airframe="rotor")
        fly(s, 55)  # the loss at tick 50
        assert s.fleet.invalid_reason[0].startswith("q=")
