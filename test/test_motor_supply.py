"""The pack voltage limits the rotor airframe's motors (docs/ENERGY.md "Motor speed").

A DC motor's no-load speed scales with its supply voltage, so each rotor vehicle's attainable speed is
omega_cap = omega_max V_t / V_ref (V_ref: the pack's full-charge voltage, 12.0 V for the default 3S LiPo),
0 with an empty pack, applied to every speed command whatever produced it (the onboard controller, the
``motors`` and ``rates_thrust`` inputs, the emergency landing). In process, through the Simulator:

- an emptying pack stops the motors in every control mode (attitude, velocity, motors, rates_thrust):
  they spin down at their time constant (omega = omega_0 exp(-t / tau)), the vehicle falls from 10 m
  (2.05 s with the set's linear drag) and becomes invalid on touching the ground (``EMPTY_PACK_REASON``);
- a saturated climb at low voltage turns the motors at the cap, and the caps of a low and a full pack
  are in the ratio of their voltages;
- the emergency landing's speed commands are capped too;
- with the battery off the cap is omega_max and the rotor model is unchanged bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from qrsim_ros.core.engine.simulator import Simulator
from qrsim_ros.core.vehicles.airframes import EMPTY_PACK_REASON, Airframes
from qrsim_ros.core.vehicles.energy import reference_voltage_v
from qrsim_ros.core.vehicles.pelican import HOVER_CONTROL, PelicanFleet, PelicanParams
from qrsim_ros.core.vehicles.rotor_control import hover_low_level

QUIET = {"airframe": "rotor", "dyn_noise": [0.0] * 6, "turbulence": {"on": False}}
WIDE = {"limits_ned": [-100.0, 100.0, -100.0, 100.0, -40.0, 0.0]}
V_REF = 12.0  # the default pack's full charge: 3 cells x 4.0 V (its charger's constant-voltage limit)


def rotor_sim(control: str = "attitude", battery: dict[str, Any] | None = None, **vehicle: Any) -> Simulator:
    over: dict[str, Any] = {"seed": 11, "area": WIDE,
                            "vehicle": {**QUIET, "control": control, "battery": battery or {}, **vehicle}}
    return Simulator.from_scenario("keep_spot", over)


def hover_action(sim: Simulator, control: str) -> np.ndarray:
    """The action that holds the vehicle: the hover row, zero velocity, the hover motors or m g."""
    if control == "attitude":
        return HOVER_CONTROL[None, :].copy()
    if control == "velocity":
        return np.zeros((1, 3))
    return hover_low_level(control, sim.fleet.rotor.params)[None, :]


def test_the_reference_voltage_is_the_full_charge() -> None:
    sim = rotor_sim()
    assert sim.battery.reference_v == V_REF == reference_voltage_v(sim.scenario.vehicle.battery.pack)
    linear = rotor_sim(battery={"model": "linear"})
    assert linear.battery.reference_v == 11.0  # ireland_2016's charged pack (linear_max_v)


@pytest.mark.parametrize("control", ["attitude", "velocity", "motors", "rates_thrust"])
def test_an_empty_pack_stops_the_motors_and_the_rotor_vehicle_falls_and_becomes_invalid(control: str) -> None:
    """A pack at soc 0.03 (about 7 s of hover at ~22 A) runs empty in flight at 10 m; from then on its
    motors get no speed (cap 0) whatever the input, spin down at tau (0.073 s, the pelican set), and the
    vehicle falls: invalid on touching the ground (contact sphere of 0.2 m at the ground) after the fall
    from 9.8 m under gravity and the set's linear drag c = 1.353 /s on w (the identified KW), h = (g / c)
    (t - (1 - e^(-c t)) / c): t = 2.05 s (1.41 s in vacuum), plus the spin-down (thrust ~ omega^2 halves
    in tau ln 2 / 2 = 0.025 s): between 1.95 and 2.3 s."""
    sim = rotor_sim(control, {"initial_soc": 0.03, "low_battery_failsafe": "off"})
    action = hover_action(sim, control)
    tau = sim.fleet.rotor.params.motor_tau_s
    radius = sim.fleet.rotor.params.contact_radius_m
    while not sim.battery.empty[0]:
        sim.step(action)
        assert sim.valid[0] and sim.time < 30.0
    emptied_at = sim.time
    assert sim.true_state()[0, 2] < -9.0  # still holding its height when the pack empties
    omega0 = sim.fleet.rotor_speeds_radps[0].max()
    assert omega0 > 500.0
    while sim.valid[0]:
        sim.step(action)
        t = sim.time - emptied_at
        assert sim.fleet.speed_cap_radps[0] == 0.0 and sim.fleet.unpowered[0]
        if sim.valid[0]:  # the motors spin down at their own time constant: omega <= omega_0 e^(-t / tau)
            omega = sim.fleet.rotor_speeds_radps[0]
            assert np.all(omega >= 0.0) and omega.max() <= omega0 * math.exp(-t / tau) * (1 + 1e-3)
        assert t < 5.0
    fell_s = sim.time - emptied_at
    assert 1.95 < fell_s < 2.3, fell_s
    assert sim.fleet.invalid_reason[0] == EMPTY_PACK_REASON
    assert sim.true_state()[0, 2] >= -radius  # on the ground contact
    assert sim.fleet.rotor_speeds_radps[0].max() < 1e-6 * omega0  # stopped


def test_a_saturated_climb_turns_the_motors_at_the_cap_in_the_ratio_of_the_voltages() -> None:
    """Every motor at full command (``motors`` 1.0) from a full (soc 0.85) and a low (soc 0.10) pack:
    each tick's cap is omega_max V_t / 12 V with V_t the terminal voltage of the tick before (hand
    formula), the motors reach it (first order, tau = 0.073 s: within 0.3 % after 0.5 s), the caps of
    the two packs are in the ratio of their voltages, and the low pack climbs less."""
    runs = {}
    for name, soc in (("full", 0.85), ("low", 0.10)):
        sim = rotor_sim("motors", {"initial_soc": soc, "low_battery_failsafe": "off"})
        w_max = sim.fleet.rotor.params.omega_max_rads
        caps, volts, omegas = [], [], []
        for _ in range(25):
            v = float(sim.battery.voltage_v[0])
            sim.step(np.ones((1, 4)))
            caps.append(float(sim.fleet.speed_cap_radps[0]))
            volts.append(v)
            omegas.append(sim.fleet.rotor_speeds_radps[0].copy())
        assert caps == pytest.approx([w_max * v / V_REF for v in volts], rel=1e-14)
        assert caps[-1] < w_max
        np.testing.assert_allclose(omegas[-1], caps[-1], rtol=3e-3)
        runs[name] = (np.array(caps), np.array(volts), sim.true_state()[0, 2])
    (cf, vf, zf), (cl, vl, zl) = runs["full"], runs["low"]
    np.testing.assert_allclose(cl / cf, vl / vf, rtol=1e-14)  # the cap ratio is the voltage ratio
    assert vl[-1] < vf[-1] - 0.5 and cl[-1] < cf[-1] - 30.0
    assert zl > zf + 0.05  # NED: the low pack is lower after 0.5 s


def test_the_controller_at_full_throttle_cannot_exceed_the_cap() -> None:
    """The attitude-mode row at full throttle (the controller asks for the identified thrust cap at the
    row's voltage, which at soc 0.10 needs more speed than the pack allows): no motor accelerates beyond
    the tick's cap (omega_k <= max(cap_k, omega_(k-1)): above a cap that fell as the load sagged the
    pack, a motor only slows down towards it), and the motors reach it."""
    sim = rotor_sim("attitude", {"initial_soc": 0.10, "low_battery_failsafe": "off"})
    full = np.array([[0.0, 0.0, 1.0, 0.0, 12.0]])
    before = sim.fleet.rotor_speeds_radps[0]
    reached = False
    for _ in range(40):
        sim.step(full)
        cap = float(sim.fleet.speed_cap_radps[0])
        omega = sim.fleet.rotor_speeds_radps[0]
        assert np.all(omega <= np.maximum(cap, before) * (1 + 1e-12))
        reached |= bool(omega.max() > 0.995 * cap)
        before = omega
    assert reached and cap < 0.85 * sim.fleet.rotor.params.omega_max_rads


def test_the_emergency_landing_cannot_exceed_the_cap() -> None:
    """ireland_2016's quadrotor (near-instantaneous rotors) loses rotor 0 at 1 s and flies the emergency
    landing: the remaining pair needs omega_max for m g (test_emergency_land, battery off). With the
    default pack the pair is commanded beyond the cap yet never accelerates beyond it (omega_k <=
    max(cap_k, omega_(k-1))), so it descends faster than with the battery off."""
    rotor = {"preset": "ireland_2016", "motor_tau_s": 0.002}
    loss = [{"kind": "rotor_loss", "vehicles": [0], "rotor": 0, "trigger": {"at_time_s": 1.0}}]
    kw = {"rotor": rotor, "rate_limit_rads": 100.0, "initial_states": [[0, 0, -5, 0, 0, 0]],
          "rotor_loss_failsafe": "emergency_land"}

    def fly(battery: dict[str, Any]) -> tuple[Simulator, list[float], float]:
        over = {"seed": 5, "area": WIDE, "faults": loss, "vehicle": {**QUIET, **kw, "battery": battery}}
        s = Simulator.from_scenario("keep_spot", over)
        commands: list[np.ndarray] = []
        step = s.fleet.rotor.step

        def spy(cmd: Any, *a: Any, **k: Any) -> None:
            commands.append(np.array(cmd, float)[0])
            step(cmd, *a, **k)

        s.fleet.rotor.step = spy  # type: ignore[method-assign]
        before, over_cap = s.fleet.rotor_speeds_radps[0], 0
        for _ in range(600):
            if not s.valid[0]:
                break
            n_before = len(commands)
            s.step(HOVER_CONTROL[None, :])
            cap = float(s.fleet.speed_cap_radps[0])
            if len(commands) > n_before and s.fleet.emergency_land_rotor[0] >= 0:
                over_cap += int(commands[-1].max() > cap)
            if s.valid[0]:
                omega = s.fleet.rotor_speeds_radps[0]
                assert np.all(omega <= np.maximum(cap, before) * (1 + 1e-12))
                before = omega
        return s, [over_cap], float(s.fleet.emergency_touchdown_mps[0])

    capped, (over_cap,), touch_capped = fly({})
    _, _, touch_free = fly({"on": False})
    assert over_cap > 10  # the pair asks for more than the pack gives, tick after tick
    assert capped.fleet.speed_cap_radps[0] < capped.fleet.rotor.params.omega_max_rads
    assert not np.isnan(touch_capped) and not np.isnan(touch_free)
    assert touch_capped > touch_free + 0.2  # a harder landing on the capped pair


def test_battery_off_leaves_the_cap_at_omega_max_and_the_model_unchanged() -> None:
    """Battery off: the cap is omega_max every tick and a full-command climb follows the motor's first
    order to omega_max, omega(t) = w_max - (w_max - w_hover) e^(-t / tau) (RK4, to 1e-6)."""
    sim = rotor_sim("motors", {"on": False})
    p = sim.fleet.rotor.params
    for k in range(1, 26):
        sim.step(np.ones((1, 4)))
        assert sim.fleet.speed_cap_radps[0] == p.omega_max_rads
        w_max, w_h = p.omega_max_rads, p.hover_omega_rads
        expected = w_max - (w_max - w_h) * math.exp(-k * 0.02 / p.motor_tau_s)
        np.testing.assert_allclose(sim.fleet.rotor_speeds_radps[0], expected, rtol=1e-6)


def test_a_supply_at_or_above_the_reference_changes_nothing_bit_for_bit() -> None:
    """``set_motor_supply`` with fractions >= 1 (cap = omega_max) flies exactly as never calling it, for
    rotor and Pelican vehicles (mixed fleet), through the control rows and the lower-level inputs; a
    Pelican-only fleet told it equals a bare ``PelicanFleet``."""
    params = PelicanParams()
    x0 = np.array([[0.0, 0.0, -10.0, 0.0, 0.0, 0.0], [5.0, 0.0, -10.0, 0.0, 0.0, 0.0],
                   [10.0, 0.0, -10.0, 0.0, 0.0, 0.0]])
    rows = np.tile(np.array([0.05, -0.03, 0.75, 0.2, 11.0]), (3, 1))
    motors = np.full((3, 4), np.nan)
    motors[2] = [1.0, 0.9, 1.0, 0.95]

    def fleet() -> Airframes:
        f = Airframes(["rotor", "pelican", "rotor"], params, [np.random.default_rng(i) for i in range(3)])
        f.set_state(x0)
        return f

    a, b = fleet(), fleet()
    for k in range(50):
        a.step(rows, motors=motors)
        b.set_motor_supply(np.array([1.0, 2.0, 1.0 + k]))
        b.step(rows, motors=motors)
    np.testing.assert_array_equal(a.state, b.state)
    np.testing.assert_array_equal(a.rotor_speeds_radps, b.rotor_speeds_radps)
    bare = PelicanFleet(1, params, [np.random.default_rng(3)])
    only = Airframes(["pelican"], params, [np.random.default_rng(3)])
    bare.set_state(x0[:1])
    only.set_state(x0[:1])
    for _ in range(50):
        bare.step(rows[:1])
        only.set_motor_supply(np.array([0.9]))
        only.step(rows[:1])
    np.testing.assert_array_equal(bare.state, only.state)
    with pytest.raises(ValueError, match="vehicle 1: motor supply fraction must not be NaN"):
        a.set_motor_supply(np.array([1.0, np.nan, 1.0]))


def test_without_power_the_emergency_landing_stops_and_the_pelican_falls_too() -> None:
    """The identified Pelican in an emergency landing (rotor 0 lost at 0.5 s, from 10 m) whose pack is
    emptied at 2 s by a cell failure (one of three cells: 11.9 V - 4.0 V, below the 9 V cut-off): the
    emergency controller no longer overrides the empty pack's zero throttle, so the vehicle falls through
    the ground (``pz=...``) within 3 s (free fall from under 10 m: 1.4 s, plus the thrust's decay and the
    drag), instead of landing (``landed (emergency land)``) as it does without the cell failure."""
    loss = {"kind": "rotor_loss", "vehicles": [0], "rotor": 0, "trigger": {"at_time_s": 0.5}}
    cell = {"kind": "battery_cell_failure", "vehicles": [0], "cells_failed": 1,
            "trigger": {"at_time_s": 2.0}}

    def fly(faults: list[dict[str, Any]]) -> tuple[Simulator, float | None]:
        over = {"seed": 5, "area": WIDE, "faults": faults,
                "vehicle": {"dyn_noise": [0.0] * 6, "turbulence": {"on": False},
                            "rotor_loss_failsafe": "emergency_land",
                            "battery": {"low_battery_failsafe": "off"}}}
        s = Simulator.from_scenario("keep_spot", over)
        emptied = None
        while s.valid[0] and s.time < 60.0:
            s.step(HOVER_CONTROL[None, :])
            if emptied is None and s.battery.empty[0]:
                emptied = s.time
                assert s.valid[0] and s.fleet.emergency_land_rotor[0] == 0 and s.true_state()[0, 2] < -5.0
        return s, emptied

    empty, emptied = fly([loss, cell])
    assert emptied == pytest.approx(2.0) and empty.fleet.unpowered[0]
    assert empty.fleet.invalid_reason[0].startswith("pz=")
    assert empty.time - emptied < 3.0, empty.time - emptied
    full, never = fly([loss])
    assert never is None and full.fleet.invalid_reason[0] == "landed (emergency land)"
    assert full.time - 2.0 > 3.0  # the landing itself takes longer than the fall
