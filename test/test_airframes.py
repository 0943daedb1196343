"""The airframes wired into scenarios, the Simulator and the command line: ``vehicle.airframe``
and ``vehicle.rotor`` parsing, the rotor airframe's onboard controller and lower-level inputs, mixed
fleets, and every shipped scenario flown on the rotor airframe.

Expected values come from the identified model's published constants (spec 2.4, written out here), from
the Pelican fleet flown side by side, or from the physics; never from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from qrsim_ros.cli.main import main
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import available_scenarios, load_scenario
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.airframes import Airframes
from qrsim_ros.core.vehicles.pelican import PelicanFleet, PelicanInputError, PelicanParams
from qrsim_ros.core.vehicles.rotor_control import RotorControlInputError
from qrsim_ros.core.vehicles.rotor_params import pelican_rotor_params

G = 9.81
#: Steady-state roll/pitch gain of the identified loop (spec 2.4): -PQ0 / (1 firmware unit in rad).
ATTITUDE_GAIN = 3.25060e-04 / math.radians(0.025)
#: Steady-state yaw-rate gain (spec 2.4): R0 / R1 x firmware scaling.
YAW_RATE_GAIN = 4.81783e-03 / 5.08944 / math.radians(254.760 / 2047.0)
#: Throttle whose identified steady thrust is m g (spec 2.4: C_TH polynomial at 1.68 kg).
HOVER_THROTTLE = 0.59004353928
HOVER_ROW = [0.0, 0.0, HOVER_THROTTLE, 0.0, 12.0]
QUIET = {"dyn_noise": [0.0] * 6, "turbulence": {"on": False}}
ROTOR = {"vehicle": {"airframe": "rotor"}}


def rotor_fleet(n: int = 1, z: float = -10.0) -> Airframes:
    fleet = Airframes(["rotor"] * n)
    fleet.set_state(np.array([[0.0, 30.0 * i, z, 0.0, 0.0, 0.0] for i in range(n)]))
    return fleet


# --- scenario keys ------------------------------------------------------------------------------------

def test_airframe_defaults_to_pelican_and_takes_one_or_a_list() -> None:
    assert load_scenario("keep_spot").airframes() == ("pelican",)
    assert load_scenario("keep_spot", ROTOR).airframes() == ("rotor",)
    sc = load_scenario("keep_spot", {"num_vehicles": 3,
                                     "vehicle": {"airframe": ["pelican", "rotor", "rotor"]}})
    assert sc.airframes() == ("pelican", "rotor", "rotor")


def test_rotor_section_takes_a_preset_and_overrides() -> None:
    assert load_scenario("keep_spot").vehicle.rotor_params().name == "pelican"
    sc = load_scenario("keep_spot", {"vehicle": {"airframe": "rotor", "rotor": {
        "preset": "ireland_2016", "motor_tau_s": 0.05, "inertia_kgm2": [0.02, 0.02, 0.03]}}})
    p = sc.vehicle.rotor_params()
    assert (p.name, p.mass_kg, p.motor_tau_s) == ("ireland_2016", 1.51, 0.05)
    np.testing.assert_array_equal(p.inertia_kgm2, [0.02, 0.02, 0.03])
    assert load_scenario("keep_spot").vehicle.rotor_control_params().lookahead_ticks == 0.5
    gains = load_scenario("keep_spot", {"vehicle": {"rotor_control": {"lookahead_ticks": 1, "speed_gain": 3}}}
                          ).vehicle.rotor_control_params()
    assert (gains.lookahead_ticks, gains.speed_gain) == (1, 3)


def test_the_simulator_builds_the_scenarios_rotor_airframe() -> None:
    sim = Simulator.from_scenario("keep_spot", {"vehicle": {
        "airframe": "rotor", "rotor": {"preset": "ireland_2016"}, "rotor_control": {"lookahead_ticks": 1.0}}})
    assert sim.fleet.rotor.params.name == "ireland_2016"  # type: ignore[union-attr]
    assert sim.fleet.rotor_control.gains.lookahead_ticks == 1.0  # type: ignore[union-attr]
    assert sim.fleet.rotor.ground_z_ned_m == sim.scenario.ground_z_ned_m  # type: ignore[union-attr]


@pytest.mark.parametrize(("vehicle", "message"), [
    ({"airframe": "hexa"}, "vehicle.airframe='hexa' must be one of pelican, rotor"),
    ({"airframe": []}, "vehicle.airframe=[] must name an airframe"),
    ({"airframe": ["rotor", "pelican"]}, "vehicle.airframe lists 2 airframes for 1 vehicles"),
    ({"rotor": {"preset": "bumblebee"}}, "vehicle.rotor.preset='bumblebee' must be one of"),
    ({"rotor": {"k_f": -1.0}}, "vehicle.rotor.k_f"),
    ({"rotor": {"wings": 2}}, "vehicle.rotor: unknown key(s) ['wings']"),
    ({"rotor": {"inertia_kgm2": [1.0, 2.0]}}, "vehicle.rotor.inertia_kgm2"),
    ({"rotor": {"omega_max_rads": 100.0}}, "cannot lift the weight"),
    ({"rotor_control": {"attitude_gain": 0.0}}, "vehicle.rotor_control.attitude_gain"),
    ({"rotor_control": {"lookahead_ticks": -1}}, "vehicle.rotor_control.lookahead_ticks=-1.0 must be >= 0"),
    ({"rotor_control": {"kp": 1}}, "vehicle.rotor_control: unknown key(s) ['kp']"),
    ({"rotor_control": {"rate_gain_per_s": [1.0, 2.0]}}, "vehicle.rotor_control.rate_gain_per_s"),
])
def test_bad_airframe_keys_name_the_key_path(vehicle: dict, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario("keep_spot", {"vehicle": vehicle})
    assert message in str(err.value)
    assert "keep_spot.yaml" in str(err.value)


# --- the onboard controller on the core fleet ---------------------------------------------------------

def test_hover_row_holds_the_rotor_airframe() -> None:
    """The throttle whose identified steady thrust is m g holds the rotor airframe too (the throttle
    meaning is kept): after 10 s it has moved less than 1 mm, rotors at sqrt(m g / 4 k_f)."""
    fleet = rotor_fleet()
    for _ in range(500):
        fleet.step(np.array([HOVER_ROW]))
    x = fleet.state[0]
    assert np.abs(x[0:3] - [0.0, 0.0, -10.0]).max() < 1e-3
    p = pelican_rotor_params()
    np.testing.assert_allclose(fleet.rotor_speeds_radps[0], math.sqrt(p.mass_kg * G / (4 * p.k_f)), rtol=1e-4)
    assert x[12] == pytest.approx(p.mass_kg * G, rel=1e-6)


@pytest.mark.parametrize(("column", "angle"), [(0, 0.3), (1, -0.3), (1, 0.6)])
def test_attitude_step_tracks_the_identified_response(column: int, angle: float) -> None:
    """A roll/pitch step settles at the identified steady angle (0.745 x the command) and follows the
    identified model's response within the motors' lag: the angle after 0.3 s and 2 s is within 10 % /
    0.5 % of the step of the Pelican's (the motor time constant 0.073 s delays the torque)."""
    u = np.array([HOVER_ROW])
    u[0, column] = angle
    fleet = rotor_fleet()
    pelican = PelicanFleet(1, PelicanParams())
    pelican.set_state([[0.0, 0.0, -10.0, 0.0, 0.0, 0.0]])
    state_col = 4 if column == 0 else 3
    for k in range(100):
        fleet.step(u)
        pelican.step(u)
        if k == 14:
            rotor_03, pel_03 = fleet.state[0, state_col], pelican.state[0, state_col]
    steady = ATTITUDE_GAIN * angle
    assert pelican.state[0, state_col] == pytest.approx(steady, rel=1e-3)  # the identified loop
    assert rotor_03 == pytest.approx(pel_03, abs=0.1 * abs(steady))
    assert fleet.state[0, state_col] == pytest.approx(steady, abs=0.005 * abs(steady))
    assert fleet.valid.all()


def test_yaw_rate_command_settles_at_the_identified_rate() -> None:
    u = np.array([[0.0, 0.0, HOVER_THROTTLE, 1.0, 12.0]])
    fleet = rotor_fleet()
    for _ in range(250):
        fleet.step(u)
    assert fleet.state[0, 11] == pytest.approx(YAW_RATE_GAIN * 1.0, rel=0.01)


def test_rates_thrust_input_tracks_the_rates_and_lifts() -> None:
    """Body rates + collective thrust: the P loop settles at the commanded rates (no steady error
    without disturbance torques); a level climb at thrust 1.5 m g follows the closed form with the
    linear drag (KW = 1.35341 1/s, spec 2.4), v(t) = (T/m - g) / KW (1 - exp(-KW t)), up to the motors'
    spin-up (at most 3 % slower after 1 s)."""
    p = pelican_rotor_params()
    fleet = rotor_fleet()
    cmd = np.array([[0.0, 0.0, 0.5, p.mass_kg * G]])
    for _ in range(150):
        fleet.step(np.array([HOVER_ROW]), rates_thrust=cmd)
    assert fleet.state[0, 11] == pytest.approx(0.5, rel=1e-3)
    assert abs(fleet.state[0, 8]) < 1e-3  # no vertical speed while yawing at hover thrust
    fleet = rotor_fleet()
    for _ in range(50):  # 1 s
        fleet.step(np.array([HOVER_ROW]), rates_thrust=np.array([[0.0, 0.0, 0.0, 1.5 * p.mass_kg * G]]))
    kw = 1.35341
    closed_form = 0.5 * G / kw * (1.0 - math.exp(-kw * 1.0))
    assert 0.97 * closed_form < -fleet.state[0, 8] < closed_form


def test_motor_commands_drive_the_rotors() -> None:
    """Normalised motor commands: c = omega_hover / omega_max on every motor hovers; more on the
    clockwise pair (0, 2) than on the other yaws anticlockwise (the drag reaction)."""
    p = pelican_rotor_params()
    c = p.hover_omega_rads / p.omega_max_rads
    fleet = rotor_fleet()
    for _ in range(100):
        fleet.step(np.array([HOVER_ROW]), motors=np.full((1, 4), c))
    assert np.abs(fleet.state[0, 0:3] - [0.0, 0.0, -10.0]).max() < 1e-6
    fleet = rotor_fleet()
    for _ in range(10):
        fleet.step(np.array([HOVER_ROW]), motors=np.array([[c + 0.02, c - 0.02, c + 0.02, c - 0.02]]))
    assert fleet.state[0, 11] < -0.05


def test_lower_level_inputs_are_validated() -> None:
    fleet = rotor_fleet(2)
    u = np.array([HOVER_ROW, HOVER_ROW])
    x0 = fleet.state
    with pytest.raises(RotorControlInputError, match=r"vehicle 1: motor2=1.5 must be in \[0, 1\]"):
        fleet.step(u, motors=np.array([[np.nan] * 4, [0.5, 0.5, 1.5, 0.5]]))
    with pytest.raises(RotorControlInputError, match=r"vehicle 0: thrust_n=-1\.0 must be finite and >= 0"):
        fleet.step(u, rates_thrust=np.array([[0.0, 0.0, 0.0, -1.0], [np.nan] * 4]))
    with pytest.raises(RotorControlInputError, match="vehicle 0: rates_thrust and motors given together"):
        fleet.step(u, rates_thrust=np.array([[0.0, 0.0, 0.0, 1.0], [np.nan] * 4]),
                   motors=np.array([[0.5] * 4, [np.nan] * 4]))
    with pytest.raises(PelicanInputError, match=r"vehicle 1: control throttle=1.5 outside \[0.0, 1.0\]"):
        fleet.step(np.array([HOVER_ROW, [0.0, 0.0, 1.5, 0.0, 12.0]]))
    np.testing.assert_array_equal(fleet.state, x0)  # nothing moved
    mixed = Airframes(["pelican", "rotor"])
    mixed.set_state(np.array([[0.0, 0.0, -10, 0, 0, 0], [0.0, 30.0, -10, 0, 0, 0]]))
    with pytest.raises(RotorControlInputError, match="vehicle 0: a Pelican has no rotor-level input"):
        mixed.step(u, motors=np.array([[0.5] * 4, [np.nan] * 4]))
    with pytest.raises(PelicanInputError, match=r"vehicle 1: initial pz=5.0 outside"):
        mixed.set_state(np.array([[0.0, 0.0, -10, 0, 0, 0], [0.0, 30.0, 5.0, 0, 0, 0]]))


def test_pelican_rows_have_no_rotor_speeds_and_rotor_rows_do() -> None:
    fleet = Airframes(["rotor", "pelican"])
    fleet.set_state(np.array([[0.0, 0.0, -10, 0, 0, 0], [0.0, 30.0, -10, 0, 0, 0]]))
    w = fleet.rotor_speeds_radps
    assert np.isnan(w[1]).all() and np.all(w[0] == pelican_rotor_params().hover_omega_rads)


def test_collisions_are_checked_across_airframes() -> None:
    """A Pelican and a rotor vehicle closer than the collision distance are both invalid."""
    fleet = Airframes(["pelican", "rotor", "pelican"], PelicanParams(collision_distance_m=2.0))
    fleet.set_state(np.array([[0.0, 0.0, -10, 0, 0, 0], [0.0, 1.5, -10, 0, 0, 0], [0.0, 40.0, -10, 0, 0, 0]]))
    fleet.step(np.array([HOVER_ROW] * 3))
    assert fleet.valid.tolist() == [False, False, True]
    assert fleet.invalid_reason[:2] == ["collision (closer than 2.0 m to another vehicle)"] * 2


# --- in the Simulator ---------------------------------------------------------------------------------

def test_pelican_only_fleet_steps_as_a_bare_pelican_fleet() -> None:
    """A fleet of Pelicans only is a bare PelicanFleet bit for bit (dynamic noise, wind, random controls,
    a collision); test_golden checks the same for every scenario through the Simulator."""
    params = PelicanParams(dyn_noise=np.full(6, 0.3), collision_distance_m=2.0)
    rngs = [np.random.default_rng(s) for s in (1, 2, 3)]
    fleet = Airframes(["pelican"] * 3, params, [np.random.default_rng(s) for s in (1, 2, 3)])
    bare = PelicanFleet(3, params, rngs)
    x0 = np.array([[0.0, 0.0, -10, 0, 0, 0], [0.0, 4.0, -10, 0, 0, 0], [0.0, 40.0, -10, 0, 0, 0]])
    fleet.set_state(x0)
    bare.set_state(x0)
    rng = np.random.default_rng(7)
    for _ in range(200):
        u = np.tile(HOVER_ROW, (3, 1))
        u[:, 0:2] = rng.uniform(-0.1, 0.1, (3, 2))
        u[1, 1] = -0.3  # vehicle 1 rolls left into vehicle 0
        wind = rng.normal(0.0, 1.0, (3, 3))
        fleet.step(u, wind)
        bare.step(u, wind)
        np.testing.assert_array_equal(fleet.state, bare.state)
        np.testing.assert_array_equal(fleet.accel_body, bare.accel_body)
    assert fleet.valid.tolist() == bare.valid.tolist() == [False, False, True]
    assert fleet.invalid_reason == bare.invalid_reason
    assert np.isnan(fleet.rotor_speeds_radps).all()


def test_keep_spot_hovers_on_the_rotor_airframe() -> None:
    """keep_spot's hover action (attitude mode, hover throttle) holds the rotor airframe: with no noise
    and no turbulence it stays within 1 cm over 10 s, as the identified Pelican does."""
    sim = Simulator.from_scenario("keep_spot", {"seed": 2, "vehicle": {**QUIET, "airframe": "rotor"}})
    x0 = sim.true_state()
    for _ in range(500):
        sim.step([HOVER_ROW])
    x = sim.true_state()
    assert sim.valid.all()
    assert np.linalg.norm(x[0, 0:3] - x0[0, 0:3]) < 0.01


def test_waypoint_is_reached_on_the_rotor_airframe() -> None:
    """The WaypointPID tuned for the Pelican flies the rotor airframe to a waypoint 71 m away (noisy
    sensors, turbulence): after 40 s it is within 2 m, the tolerance the Simulator's tests give the
    Pelican (test_simulator.test_control_modes_fly_as_intended), and the Pelican flown with the same
    seed ends within 2 m too."""
    target = [-50.0, -50.0, -15.0, 0.5]
    ends = {}
    for airframe in ("pelican", "rotor"):
        sim = Simulator.from_scenario("goto_waypoint", {
            "seed": 5, "task": {"dt_s": 1.0, "duration_steps": 40},
            "vehicle": {"control": "waypoint", "airframe": airframe}})
        for _ in range(40):
            sim.step([target])
        assert sim.valid.all()
        ends[airframe] = sim.true_state()[0]
    for x in ends.values():
        assert np.linalg.norm(x[0:3] - target[:3]) < 2.0
        assert x[5] == pytest.approx(0.5, abs=math.pi / 36)


def test_mixed_fleet_equals_single_airframe_fleets_vehicle_by_vehicle() -> None:
    """Vehicle i of a mixed fleet flies exactly as vehicle i of a fleet of its own airframe (same seed:
    the same dynamic-noise, turbulence and sensor streams per vehicle), bit for bit."""
    base = {"seed": 9, "num_vehicles": 3, "task": {"dt_s": 0.1, "duration_steps": 30},
            "area": {"limits_ned": [-60.0, 60.0, -60.0, 60.0, -40.0, 0.0]}}
    vehicle = {"control": "waypoint",
               "initial_states": [[0, -20, -10, 0, 0, 0], [0, 0, -10, 0, 0, 0], [0, 20, -10, 0, 0, 0]]}
    actions = np.array([[10.0, -20.0, -12.0, 0.0], [10.0, 0.0, -12.0, 0.3], [-10.0, 20.0, -8.0, -0.3]])
    runs = {}
    fleets = (("mixed", ["rotor", "pelican", "rotor"]), ("pelican", "pelican"), ("rotor", "rotor"))
    for name, airframe in fleets:
        sim = Simulator.from_scenario("keep_spot", {**base, "vehicle": {**vehicle, "airframe": airframe}})
        for _ in range(30):
            sim.step(actions)
        runs[name] = (sim.true_state(), sim.fleet.rotor_speeds_radps)
    x, w = runs["mixed"]
    np.testing.assert_array_equal(x[[0, 2]], runs["rotor"][0][[0, 2]])
    np.testing.assert_array_equal(x[1], runs["pelican"][0][1])
    np.testing.assert_array_equal(w[[0, 2]], runs["rotor"][1][[0, 2]])
    assert np.isnan(w[1]).all()
    assert not np.array_equal(runs["rotor"][0][1], runs["pelican"][0][1])  # the airframes do differ


@pytest.mark.parametrize("name", available_scenarios())
def test_every_shipped_scenario_flies_on_the_rotor_airframe(name: str) -> None:
    """A few task steps of every scenario with vehicle.airframe=rotor: every vehicle stays valid and the
    agent's vehicles near where they started (no new set point: hover, then the failsafe's hold; the
    cats-and-mouse task flies its mouse itself)."""
    sim = Simulator.from_scenario(name, {"task": {"duration_steps": 5}, **ROTOR})
    assert set(sim.fleet.airframes) == {"rotor"}
    x0 = sim.true_state()
    spec = sim.action_spec
    for _ in range(3):
        assert not sim.done, (sim.done_reason, sim.fleet.invalid_reason, sim.true_state()[:, :3])
        sim.step(np.full((len(spec["vehicles"]), spec["width"]), np.nan))
    x = sim.true_state()
    assert np.isfinite(x).all() and sim.valid.all(), sim.fleet.invalid_reason
    rows = spec["vehicles"]
    assert np.abs(x[rows, 0:3] - x0[rows, 0:3]).max() < 3.0 * sim.scenario.task.dt_s + 1.0


def test_qrsim_run_set_airframe_rotor(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["run", "keep_spot", "--steps", "50", "--policy", "hover", "--seed", "3",
               "--set", "vehicle.airframe=rotor"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "outcome: time_limit after 50 steps" in out


def test_land_failsafe_touches_down_on_the_rotor_airframe() -> None:
    """Once its set point expired the land failsafe descends at 0.5 m/s (from 10 m: about 20 s) and
    disarms at an estimated height <= 0.3 m (the episode then ends: the vehicle is invalid); the rotor
    airframe stays above its ground contact (the centre of mass 0.2 m above the ground when resting) and
    is disarmed there, not crashed."""
    sim = Simulator.from_scenario("keep_spot", {
        "seed": 3, "task": {"dt_s": 1.0, "duration_steps": 40},
        "vehicle": {**QUIET, "airframe": "rotor", "control": "velocity", "failsafe": "land"}})
    sim.step(np.zeros((1, 3)))  # one set point (hold still), then silence: it expires after 0.5 s
    for _ in range(35):
        if sim.done:
            break
        sim.step(np.full((1, 3), np.nan))
    assert 19.0 < sim.time < 30.0
    x = sim.true_state()[0]
    assert not sim.valid[0] and sim.fleet.invalid_reason == ["landed (failsafe land)"]
    assert -0.4 < x[2] < -0.15
    assert np.abs(x[0:2]).max() < 1.0
