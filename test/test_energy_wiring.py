"""The battery wired into the simulator: pure core, in process.

``FleetEnergy`` steps every vehicle's pack with the power its airframe draws and feeds the terminal
voltage back into the identified Pelican's battery input; an empty pack stops the motors; a vehicle
resting on a charging base charges; a low battery makes the vehicle return to a base or land.
Expected figures are derived by hand in each test's docstring (from the pack's datasheet-style
parameters and the momentum-theory hover power stated in docs/ENERGY.md), not by the code under test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from qrsim_ros.core.common.jit import JIT_ENABLED
from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.ticks import BASE_DT_S
from qrsim_ros.core.config.loader import ScenarioError
from qrsim_ros.core.config.scenario import Scenario, load_scenario, scenario_from_mapping
from qrsim_ros.core.engine.builders import build_fleet
from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles import energy as energy_module
from qrsim_ros.core.vehicles.energy import BatterySettings, ChargingBase, FleetEnergy
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL, PelicanFleet

#: One Pelican at 10 m, velocity control (the PID holds it), still air; the episode is long enough.
BASE_SCENARIO: dict[str, Any] = {
    "name": "energy_test", "seed": 7, "num_vehicles": 1,
    "task": {"type": "keep_velocity", "dt_s": 0.02, "duration_steps": 200000, "start_z_ned_m": -10.0,
             "target_velocity_ned": [0.0, 0.0, 0.0]},
    "area": {"type": "box", "limits_ned": [-100.0, 100.0, -100.0, 100.0, -40.0, 0.0]},
    "wind": {"on": False},
    "vehicle": {"control": "velocity", "command_timeout_s": 0.0, "dyn_noise": [0.0] * 6,
                "turbulence": {"on": False}},
}


def scenario(**battery: Any) -> Scenario:
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE_SCENARIO.items()}
    bases = battery.pop("bases", None)
    if bases is not None:
        data["bases"] = bases
    data["vehicle"] = {**data["vehicle"], "battery": battery}
    return scenario_from_mapping(data)


def quiet_fleet(sc: Scenario, z_ned_m: float = -10.0) -> PelicanFleet:
    """The scenario's fleet without dynamic noise, hovering level at ``z_ned_m``."""
    fleet = build_fleet(sc, RandomStreams(sc.seed))
    fleet.set_state(np.array([[0.0, 0.0, z_ned_m, 0.0, 0.0, 0.0]]))
    return fleet


# --- scenario keys -----------------------------------------------------------------------------------

def test_battery_is_on_by_default_with_the_pelican_pack_and_can_be_turned_off() -> None:
    sc = load_scenario("keep_spot")
    b = sc.vehicle.battery
    assert b.on and b.model == "lipo" and b.cells == 3 and b.capacity_ah == 6.0 and b.initial_soc == 0.85
    assert sc.bases == ()
    off = load_scenario("keep_spot", {"vehicle": {"battery": {"on": False}}})
    assert not off.vehicle.battery.on
    sim = Simulator(off)
    assert not sim.battery.on and np.isnan(sim.battery.voltage_v).all()


def test_battery_keys_are_validated_with_their_key_path() -> None:
    with pytest.raises(ScenarioError, match=r"vehicle\.battery\.capacity_ah"):
        load_scenario("keep_spot", {"vehicle": {"battery": {"capacity_ah": "big"}}})
    with pytest.raises(ScenarioError, match=r"vehicle\.battery.*capacity_ah"):
        load_scenario("keep_spot", {"vehicle": {"battery": {"capacity_ah": -1.0}}})
    with pytest.raises(ScenarioError, match=r"vehicle\.battery.*model"):
        load_scenario("keep_spot", {"vehicle": {"battery": {"model": "nimh"}}})
    with pytest.raises(ScenarioError, match=r"vehicle\.battery\.colour: unknown key"):
        load_scenario("keep_spot", {"vehicle": {"battery": {"colour": "red"}}})
    with pytest.raises(ScenarioError, match=r"vehicle\.battery.*land_below <= reserve"):
        load_scenario("keep_spot", {"vehicle": {"battery": {"land_below": 0.3}}})
    with pytest.raises(ScenarioError, match=r"bases\[0\]: radius_m"):
        load_scenario("keep_spot", {"bases": [{"position_ned_m": [0, 0, 0], "radius_m": 0}]})
    with pytest.raises(ScenarioError, match=r"bases\[0\]\.position_ned_m"):
        load_scenario("keep_spot", {"bases": [{"position_ned_m": [0, 0]}]})
    sc = load_scenario("keep_spot", {"bases": [{"position_ned_m": [1, 2, 0], "radius_m": 1.5}],
                                     "vehicle": {"battery": {"model": "linear"}}})
    assert sc.bases == (ChargingBase((1.0, 2.0, 0.0), 1.5),) and sc.vehicle.battery.model == "linear"


# --- endurance, sag, empty -------------------------------------------------------------------------------

def test_hover_endurance_of_the_default_pack() -> None:
    """Hand estimate. Hover thrust m g = 1.68 x 9.81 = 16.48 N; momentum theory (docs/ENERGY.md) with
    10-inch rotors (A = pi 0.127^2 = 0.0507 m^2), rho 1.225, FM 0.55, drive efficiency 0.8: per rotor
    T = 4.12 N, P_ideal = T^1.5 / sqrt(2 rho A) = 8.36 / 0.3524 = 23.7 W, so P = 4 x 23.7 / 0.44 + 10 W
    avionics = 226 W. The pack: 3 cells, 6 Ah, from soc 0.85 down to the cut-off (~soc 0.03); Chen's
    OCV curve averages about 3.79 V per cell over that range (3.98 at 0.85, 3.80 at 0.5, 3.72 at 0.2,
    3.52 at 0.05), so the usable energy is about 0.82 x 6 Ah x 3600 x 3 x 3.79 V = 201 kJ; the series
    resistance (0.03 ohm at ~20 A: 12 W, 5 %) leaves ~191 kJ for the motors: 191 kJ / 226 W = 845 s.
    The estimate's rough points (the mean voltage, the empty soc) are worth +-8 %."""
    sc = scenario(low_battery_failsafe="off")
    fleet = quiet_fleet(sc)
    energy = FleetEnergy(1, sc.vehicle.battery)
    energy.reset()
    ticks = 0
    while not energy.empty[0]:
        fleet.step(energy.apply(HOVER_CONTROL[None, :].copy()))
        energy.step(fleet, BASE_DT_S)
        ticks += 1
        assert ticks < 2000 / BASE_DT_S
    endurance_s = ticks * BASE_DT_S
    print(f"\nhover endurance of the default pack: {endurance_s:.1f} s ({endurance_s / 60:.2f} min)")
    assert endurance_s == pytest.approx(845.0, rel=0.08)
    assert fleet.valid[0]  # it hovered all the time: the voltage never capped the hover thrust


def test_voltage_sags_under_a_throttle_step() -> None:
    """Hand estimate. Throttle 0.59 -> 0.7 (firmware 2867.9): the identified thrust polynomial gives
    0.664 + 7.446e-4 x 2867.9 + 2.399e-6 x 2867.9^2 = 0.66 + 2.14 + 19.73 = 22.53 N (below the cap
    -18.0 + 4.2375 x 11 V = 28.6 N; at 0.8 the cap of the sagged voltage binds); momentum power scales as
    F^1.5: (226 - 10) x (22.53 / 16.48)^1.5 + 10 = 216 x 1.598 + 10 = 355 W. The pack's OCV at soc 0.85
    is 3 x 3.9797 = 11.94 V; at hover V = 11.94 - 0.03 I with V I = 226 W gives I = 19.9 A; at 355 W,
    I = 32.4 A; the terminal voltage drops by R dI = 0.03 x 12.5 = 0.375 V (the OCV moves by about a
    millivolt in the two seconds)."""
    sc = scenario(low_battery_failsafe="off")
    fleet = quiet_fleet(sc, -20.0)
    energy = FleetEnergy(1, sc.vehicle.battery)
    u = HOVER_CONTROL[None, :].copy()
    for _ in range(50):
        fleet.step(energy.apply(u.copy()))
        energy.step(fleet, BASE_DT_S)
    v_hover, i_hover = energy.voltage_v[0], energy.current_a[0]
    u[0, 2] = 0.7
    for _ in range(50):  # 1 s: the thrust slews up at 46.8 N/s (0.13 s)
        fleet.step(energy.apply(u.copy()))
        energy.step(fleet, BASE_DT_S)
    v_step, i_step = energy.voltage_v[0], energy.current_a[0]
    print(f"\nsag under throttle 0.59 -> 0.7: {v_hover:.3f} V ({i_hover:.1f} A) -> {v_step:.3f} V "
          f"({i_step:.1f} A): {v_hover - v_step:.3f} V")
    assert fleet.state[0, 12] == pytest.approx(22.53, abs=0.02)
    assert i_hover == pytest.approx(19.9, rel=0.02) and i_step == pytest.approx(32.4, rel=0.02)
    assert v_hover - v_step == pytest.approx(0.375, rel=0.05)


def test_the_battery_voltage_reaches_the_pelican_and_caps_its_thrust() -> None:
    """Full throttle: the identified cap is Cvb0 + Cvb1 Vb = -18.0007 + 4.23754 Vb; with the pack's
    loaded voltage (below 12 V) the thrust settles at that cap of the voltage the vehicle received, not
    at the 32.85 N of the 12 V that the control row carried."""
    sc = scenario(low_battery_failsafe="off")
    fleet = quiet_fleet(sc, -30.0)
    energy = FleetEnergy(1, sc.vehicle.battery)
    u = np.array([[0.0, 0.0, 1.0, 0.0, 12.0]])
    for _ in range(40):
        applied = energy.apply(u.copy())
        fleet.step(applied)
        energy.step(fleet, BASE_DT_S)
    vb = applied[0, 4]
    assert 10.0 < vb < 11.6
    # Heun's two stages reach the (slowly falling) cap within millinewtons
    assert fleet.state[0, 12] == pytest.approx(-18.0007 + 4.23754 * vb, abs=0.01)
    assert fleet.state[0, 12] < 32.85 - 2.0


def test_an_empty_battery_stops_the_motors_and_the_vehicle_falls_to_the_ground() -> None:
    sc = scenario(initial_soc=0.04, low_battery_failsafe="off")
    sim = Simulator(sc)
    hover = np.zeros((1, 3))
    emptied_at = fell_at = None
    z_empty = None
    while fell_at is None:
        sim.step(hover)
        if emptied_at is None and sim.battery.empty[0]:
            emptied_at, z_empty = sim.time, sim.true_state()[0, 2]
            assert sim.valid[0]
        if not sim.valid[0]:
            fell_at = sim.time
        assert sim.time < 60.0
    assert emptied_at is not None and z_empty is not None and z_empty < -9.0
    # free fall from 10 m takes sqrt(2 h / g) = 1.43 s; the thrust decays first (TAU0 = 3.07 /s) and drag
    # slows it: between 1.4 and 4 s
    assert 1.4 < fell_at - emptied_at < 4.0, (emptied_at, fell_at)
    assert sim.fleet.invalid_reason[0].startswith("pz=")  # through the ground (the area's zmax)
    assert sim.battery.percentage[0] < 0.04 and sim.battery.current_a[0] == 0.0


# --- charging, linear model -------------------------------------------------------------------------------

def test_a_vehicle_resting_on_a_base_charges() -> None:
    """Two disarmed vehicles on the ground, one on the base (within its radius, 0.2 m above it), one 5 m
    away, both packs at soc 0.5 (OCV 3 x 3.8034 = 11.41 V): the first charges at the constant-current
    phase's 6 A (1 C; its terminal voltage 11.41 + 6 x 0.03 = 11.59 V stays below the 12 V of the CV
    phase), +6 A x 10 s / (6 Ah x 3600) = +0.00278 soc in 10 s; the second drains its avionics (10 W)."""
    sc = scenario(initial_soc=0.5, bases=[{"position_ned_m": [3.0, 0.0, 0.0], "radius_m": 1.0}])
    fleet = build_fleet(replace_vehicles(sc, 2), RandomStreams(1))
    fleet.set_state(np.array([[3.5, 0.3, -0.2, 0, 0, 0], [8.0, 0.0, -0.2, 0, 0, 0]]))
    fleet.disarm([0, 1])
    energy = FleetEnergy(2, sc.vehicle.battery, sc.bases)
    p0 = energy.percentage
    for _ in range(500):  # 10 s
        energy.step(fleet, BASE_DT_S)
    assert energy.charging.tolist() == [True, False]
    gain = energy.percentage - p0
    assert gain[0] == pytest.approx(10.0 * 6.0 / (3600 * 6.0), rel=1e-6)
    assert energy.current_a[0] == pytest.approx(-6.0) and 0 < energy.current_a[1] < 1.0
    assert gain[1] < 0


def replace_vehicles(sc: Scenario, n: int) -> Scenario:
    from dataclasses import replace

    return replace(sc, num_vehicles=n)


def test_linear_model_rates() -> None:
    """ireland_2016 eq. 9: -0.005 V/s in flight, +0.025 V/s on a base, whatever the power."""
    sc = scenario(model="linear", linear_initial_v=10.5,
                  bases=[{"position_ned_m": [0.0, 50.0, 0.0], "radius_m": 1.0}])
    fleet = build_fleet(replace_vehicles(sc, 2), RandomStreams(1))
    fleet.set_state(np.array([[0.0, 0.0, -10.0, 0, 0, 0], [0.0, 50.0, -0.1, 0, 0, 0]]))
    fleet.disarm([1])
    energy = FleetEnergy(2, sc.vehicle.battery, sc.bases)
    v0 = energy.voltage_v
    u = np.tile(HOVER_CONTROL, (2, 1))
    for _ in range(500):  # 10 s
        fleet.step(energy.apply(u.copy()))
        energy.step(fleet, BASE_DT_S)
    dv = energy.voltage_v - v0
    assert dv[0] == pytest.approx(-0.005 * 10.0, abs=1e-9)
    assert dv[1] == pytest.approx(+0.025 * 10.0, abs=1e-9)
    assert energy.charging.tolist() == [False, True]


# --- battery off: nothing changes ------------------------------------------------------------------------

def test_battery_off_flies_exactly_the_open_loop() -> None:
    """Off, the Simulator's trace equals a fleet integrated with the controls as given (12 V); on, the
    states differ only once the cap binds (a full-throttle climb), and not at hover."""
    off = scenario(on=False)
    sim = Simulator(off)
    sim_on = Simulator(scenario())
    for _ in range(100):
        sim.step(np.zeros((1, 3)))
        sim_on.step(np.zeros((1, 3)))
    # the hover controller never asks for more than the cap at the pack's voltage: identical hover
    np.testing.assert_array_equal(sim.true_state(), sim_on.true_state())
    assert np.isnan(sim.battery.voltage_v[0]) and 11.0 < sim_on.battery.voltage_v[0] < 12.0


def test_attitude_agents_battery_column_is_replaced_by_the_pack() -> None:
    """Attitude mode: the agent's battery column (here 9 V, which would cap the thrust at 20.1 N) is
    replaced by the pack's voltage when the battery is on, and flown as given when it is off."""
    data = {"vehicle": {"control": "attitude"}}
    on = Simulator(load_scenario("keep_spot", {"seed": 3, **data}))
    off = Simulator(load_scenario("keep_spot", {"seed": 3, "vehicle": {"control": "attitude",
                                                                        "battery": {"on": False}}}))
    full = np.array([[0.0, 0.0, 1.0, 0.0, 9.0]])
    for _ in range(25):
        on.step(full)
        off.step(full)
    assert off.true_state()[0, 12] == pytest.approx(-18.0007 + 4.23754 * 9.0, abs=1e-6)
    assert on.true_state()[0, 12] > 26.0


# --- low-battery failsafe -------------------------------------------------------------------------------

def test_low_battery_lands_in_place_at_the_land_threshold() -> None:
    sc = scenario(initial_soc=0.07, low_battery_failsafe="land")
    sim = Simulator(sc)
    cmd = np.zeros((1, 3))
    history = [sim.battery.percentage[0]]  # the charge at the end of each step (one tick per step)
    while not sim.failsafe[0]:
        sim.step(cmd)
        history.append(sim.battery.percentage[0])
        assert sim.time < 60
    assert sim.failsafe[0] == "battery_land"
    # the tick of the onset decided on the charge of the tick before: the first at or below 5 %
    assert history[-2] <= 0.05 < history[-3], history[-3:]
    x_onset = sim.true_state()[0, :2]
    while sim.valid[0]:
        sim.step(cmd)
        assert sim.failsafe[0] == "battery_land"
        assert sim.time < 120
    assert sim.fleet.invalid_reason[0].startswith("landed")
    assert not sim.battery.empty[0]
    assert np.linalg.norm(sim.true_state()[0, :2] - x_onset) < 2.0


def test_low_battery_returns_to_the_nearest_base_lands_and_charges() -> None:
    """Base 40 m away: the return is planned below 60 %; it starts once the charge no longer covers
    margin x drain x (40 m / 2 m/s + 10 m / 0.5 m/s) = 1.5 x 9.2e-4 /s x 40 s = 5.5 % above the 10 %
    reserve, i.e. near 15.5 %."""
    sc = scenario(initial_soc=0.17, bases=[{"position_ned_m": [40.0, 0.0, 0.0], "radius_m": 2.0},
                                            {"position_ned_m": [-90.0, 0.0, 0.0], "radius_m": 2.0}])
    sim = Simulator(sc)
    cmd = np.zeros((1, 3))
    seen: list[str] = []
    pct_at_return = None
    while sim.valid[0]:
        sim.step(cmd)
        f = sim.failsafe[0]
        if f and (not seen or seen[-1] != f):
            seen.append(f)
            if f == "return":
                pct_at_return = sim.battery.percentage[0]
        assert sim.time < 200
    assert seen == ["return", "battery_land"]
    assert pct_at_return is not None and 0.14 < pct_at_return < 0.17, pct_at_return
    x = sim.true_state()[0]
    assert np.hypot(x[0] - 40.0, x[1]) <= 2.0 and x[2] > -0.5
    p_landed = sim.battery.percentage[0]
    assert p_landed > 0.1 - 0.02  # the reserve was (nearly) kept
    # the episode is over (its only vehicle landed): the pack charges on the base from the landing tick
    assert sim.battery.charging[0] and sim.battery.current_a[0] < 0
    for _ in range(50):
        sim.battery.step(sim.fleet, BASE_DT_S)
    assert sim.battery.charging[0] and sim.battery.percentage[0] > p_landed


def test_vehicles_launched_from_one_base_return_each_to_its_own_launch_point() -> None:
    """Four vehicles launched 4 m apart on one base (team_search's grid, radius 20 m) fly 40 m north and
    hover until their low-battery return: each lands on its own launch point (within
    RETURN_HOME_ARRIVAL_M and the descent's drift), not at the base's rim or centre, where their returns
    converged before."""
    from qrsim_ros.core.vehicles.fleet_control import RETURN_HOME_ARRIVAL_M

    sim = Simulator.from_scenario("team_search", {
        "num_vehicles": 4, "seed": 3, "task": {"duration_steps": 2000},
        "scene": {"generate": {"count": 0}}, "comms": {"on": False},
        "vehicle": {"battery": {"low_battery_failsafe": "return", "initial_soc": 0.3},
                    "camera": {"on": False}}})
    sim.reset()
    launch_ne = sim.true_state()[:, 0:2].copy()
    seen: list[set[str]] = [set() for _ in range(4)]
    while not sim.done and sim.valid.any():
        cmd = np.zeros((4, 3))
        if sim.time < 20.0:
            cmd[:, 0] = 2.0  # north
        sim.step(cmd)
        for i, f in enumerate(sim.failsafe):
            seen[i].add(f)
    assert all(s_ >= {"return", "battery_land"} for s_ in seen), seen
    assert all(r.startswith("landed") for r in sim.fleet.invalid_reason), sim.fleet.invalid_reason
    x = sim.true_state()
    off = np.hypot(*(x[:, 0:2] - launch_ne).T)
    assert np.all(off < RETURN_HOME_ARRIVAL_M + 0.3), off
    assert np.all(sim.battery.charging)


def test_a_return_that_starts_low_climbs_in_place_before_it_flies_home() -> None:
    """The vehicle descends to 3 m (below the 10 m flight height) before its return starts: the return
    climbs where it started to within 1 m of the flight height, and only then flies the 40 m home (an
    autopilot's return-to-launch; the diagonal from a low hover met obstacles)."""
    sc = scenario(initial_soc=0.17, bases=[{"position_ned_m": [40.0, 0.0, 0.0], "radius_m": 2.0}])
    sim = Simulator(sc)
    onset = None
    track = []
    while sim.valid[0] and sim.failsafe[0] != "battery_land":
        x = sim.true_state()[0]
        descend = 0.7 if -x[2] > 3.0 else 0.0
        sim.step(np.array([[0.0, 0.0, descend]]))
        x = sim.true_state()[0]
        if sim.failsafe[0] == "return":
            if onset is None:
                onset = x[0:3].copy()
            track.append(x[0:3].copy())
        assert sim.time < 200
    assert onset is not None and -onset[2] < 4.0, onset  # the return started low
    track_a = np.array(track)
    climbing = track_a[-track_a[:, 2] < 9.0]
    assert len(climbing) > 50  # more than a second of climb
    assert np.max(np.hypot(climbing[:, 0] - onset[0], climbing[:, 1] - onset[1])) < 1.0
    assert track_a[-1, 0] > 38.0 and -track_a[-1, 2] > 8.5  # home at the flight height


def test_the_return_starts_exactly_when_the_charge_no_longer_covers_the_way_home() -> None:
    """FleetControl alone. Vehicle at (0, 0), 10 m high; base at (40, 0); drain 1e-3 /s; margin 1.5;
    return speed 2 m/s; land rate 0.5 m/s: t_return = 40/2 + 10/0.5 = 40 s, needed 1.5 x 1e-3 x 40 =
    0.06, so the return starts at 0.1 + 0.06 = 0.16 (and never above return_below 0.6); at 0.05 the
    vehicle lands where it is. Both are latched: a fresh set point does not end them."""
    from qrsim_ros.core.vehicles.estimated_state import HEIGHT, empty_estimated_state
    from qrsim_ros.core.vehicles.fleet_control import FleetControl

    settings = BatterySettings()
    bases = (ChargingBase((40.0, 0.0, 0.0), 2.0),)
    ex = np.nan_to_num(empty_estimated_state(1))  # level, at rest
    ex[0, 0:3] = [0.0, 0.0, -10.0]
    ex[0, HEIGHT] = 10.0
    valid = np.ones(1, bool)

    def onset(pct: float, drain: float = 1e-3) -> str:
        fc = FleetControl(["velocity"], -10.0, 0.5, "hold", 0.5, settings, bases)
        fc.update_battery([pct], [drain], ex, valid)
        return fc.failsafe[0]

    assert onset(0.1601) == "" and onset(0.1599) == "return"
    assert onset(0.6001, drain=1.0) == "" and onset(0.5999, drain=1.0) == "return"
    assert onset(0.1001, drain=0.0) == "" and onset(0.0999, drain=0.0) == "return"  # the reserve itself
    assert onset(0.0501, drain=0.0) == "return" and onset(0.05, drain=0.0) == "battery_land"
    # without bases: land at the reserve
    fc = FleetControl(["velocity"], -10.0, 0.5, "hold", 0.5, settings, ())
    fc.update_battery([0.1001], [1.0], ex, valid)
    assert fc.failsafe[0] == ""
    fc.update_battery([0.0999], [1.0], ex, valid)
    assert fc.failsafe[0] == "battery_land"
    # latched: a fresh set point (issued now) does not end it
    u = fc.controls(np.zeros((1, 5)), ex, valid, np.zeros(1), 1.0, np.array([1.0]))
    assert fc.failsafe[0] == "battery_land" and u[0, 2] < 0.59  # descending


def test_a_rotor_airframe_draws_its_shaft_power_from_the_pack() -> None:
    """A rotor-level vehicle (``vehicle.airframe: rotor``, pelican preset) hovering for 2 s: its pack
    delivers sum(k_m w^3) / eta + P_avionics (docs/ENERGY.md, rotor level) at the rotors' speeds, and
    at hover that is the shaft power of four rotors each carrying m g / 4 at w = sqrt(m g / (4 k_f))."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE_SCENARIO.items()}
    data["vehicle"] = {**data["vehicle"], "airframe": "rotor"}
    sim = Simulator(scenario_from_mapping(data))
    for _ in range(100):
        sim.step(np.zeros((1, 3)))
    fleet, battery = sim.fleet, sim.battery
    rotor = fleet.rotor.params
    eta = battery.settings.rotor_motor_efficiency
    avionics = 10.0  # W, the default avionics draw (docs/ENERGY.md)
    w = fleet.rotor_speeds_radps[0]
    shaft = float(np.sum(rotor.k_m * w ** 3))
    expected_w = shaft / eta + avionics
    drawn_w = float(battery.voltage_v[0] * battery.current_a[0])
    assert drawn_w == pytest.approx(expected_w, rel=0.02)
    hover_w = np.sqrt(rotor.mass_kg * 9.81 / (4 * rotor.k_f))
    assert 4 * rotor.k_m * hover_w ** 3 / eta + avionics == pytest.approx(expected_w, rel=0.05)


def test_the_one_call_step_of_a_pelican_fleet_equals_the_step_by_step_path() -> None:
    """``FleetEnergy.step`` given the fleet's state and validity takes one fused kernel call (what the
    plant does every tick); without them it goes kernel by kernel. Bit-identical, tick by tick, for
    Pelicans flying, climbing, resting on a base and disarmed (charging, thrust 0, a pack draining)."""
    sc = scenario(initial_soc=0.5, bases=[{"position_ned_m": [3.0, 0.0, 0.0], "radius_m": 1.0}])
    fleet = build_fleet(replace_vehicles(sc, 3), RandomStreams(1))
    fleet.set_state(np.array([[0.0, 0.0, -10.0, 0, 0, 0], [3.5, 0.3, -0.2, 0, 0, 0],
                              [8.0, 0.0, -5.0, 0, 0, 0]]))
    fleet.disarm([1])
    by_kernel = FleetEnergy(3, sc.vehicle.battery, sc.bases)
    fused = FleetEnergy(3, sc.vehicle.battery, sc.bases)
    # given the fleet's own arrays (``views``: the same objects every tick) it keeps the kernel's call
    # and checks only their identity; it must still follow new bases, another tick length, another fleet
    kept = FleetEnergy(3, sc.vehicle.battery, sc.bases)
    twin = build_fleet(replace_vehicles(sc, 3), RandomStreams(1))
    other_base = [ChargingBase((8.0, 0.0, 0.0), 1.0)]  # none under vehicle 2 (disarmed on the first)
    u = np.repeat(HOVER_CONTROL[None, :], 3, axis=0)
    for k in range(300):
        u[2, 2] = 0.59 + 0.2 * np.sin(k / 20.0)  # a throttle that swings the power draw
        fleet.step(by_kernel.apply(u.copy()))
        if k == 120:
            for energy in (by_kernel, fused, kept):
                energy.set_bases(other_base)
        dt_s = BASE_DT_S if k < 220 else 2 * BASE_DT_S
        state, valid = np.array(fleet.state, float), np.array(fleet.valid, bool)
        by_kernel.step(fleet, dt_s)
        fused.step(fleet, dt_s, state, valid)
        stepped = fleet
        if k % 50 == 25:  # now and then another fleet in the same state
            stepped = twin
            twin.set_state(np.array(fleet.state, float))
            twin.disarm(np.flatnonzero(~fleet.valid).tolist())
        views = stepped.views()
        assert k < 2 or views[0] is stepped.views()[0]  # what keeping the call relies on
        kept.step(stepped, dt_s, views[0], views[1])
        for name in ("voltage_v", "current_a", "percentage", "empty", "charging"):
            assert np.array_equal(getattr(fused, name), getattr(by_kernel, name)), (k, name)
            assert np.array_equal(getattr(kept, name), getattr(by_kernel, name)), (k, name)
        assert (fused.low, fused._any_empty) == (by_kernel.low, by_kernel._any_empty)
        assert (kept.low, kept._any_empty) == (by_kernel.low, by_kernel._any_empty)
        assert by_kernel.charging.tolist() == [False, k < 120, False]  # every branch was taken
    if JIT_ENABLED:  # the kept call ran the kernel's compiled code directly (``jit.overload_for``)
        assert kept._tick_entry not in (None, energy_module._energy_tick_kernel)
