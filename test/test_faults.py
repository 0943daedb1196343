"""The fault schedule: the scenario's ``faults:`` items parsed and checked for every
kind, the four triggers (time, task step, probabilistic, condition), timed and permanent faults, the
once / repeat rule, seeded determinism and independent streams, and run-time injection and clearing.

Expected values come from the definitions written here: ticks of 0.02 s (a fault at t = 1 s starts at
tick 50), and ireland_2016 section 4.8.2's per-tick probability 1 - (1 - P)^(dt/T), whose product over
K ticks gives the chance 1 - (1 - P)^(K dt / T) of having fired by t = K dt.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from qrsim_ros.core.common.rng import RandomStreams
from qrsim_ros.core.common.validation import ConfigError
from qrsim_ros.core.faults import (
    KINDS,
    NO_EVENTS,
    AtStep,
    AtTime,
    FaultConditions,
    FaultSchedule,
    FaultSpec,
    Probabilistic,
    parse_faults,
)

DT = 0.02
AT_1S = {"at_time_s": 1.0}


def _one(item: dict[str, Any], num_vehicles: int = 3) -> FaultSpec:
    (spec,) = parse_faults([item], num_vehicles=num_vehicles)
    return spec


def _run(schedule: FaultSchedule, ticks: int, conditions: Any = None) -> list[tuple[int, str, str, int]]:
    """Step ticks 1..ticks; the events as (tick, 'start'|'end', id, vehicle)."""
    out = []
    for k in range(1, ticks + 1):
        c = conditions(k) if conditions is not None else FaultConditions()
        ev = schedule.step(k, k * DT, c)
        out += [(k, "start", a.id, a.vehicle) for a in ev.started]
        out += [(k, "end", a.id, a.vehicle) for a in ev.ended]
    return out


# --- parsing: every kind, good ----------------------------------------------------------------------

GOOD = [
    ({"kind": "rotor_loss", "rotor": 3}, {"rotor": 3}),
    ({"kind": "rotor_degradation", "rotor": 0, "factor": 0.6}, {"rotor": 0, "factor": 0.6}),
    ({"kind": "motor_stuck", "rotor": 1}, {"rotor": 1, "command": None}),
    ({"kind": "motor_stuck", "rotor": 1, "command": 0.8}, {"rotor": 1, "command": 0.8}),
    ({"kind": "gps_outage"}, {}),
    ({"kind": "gps_degradation", "sigma_factor": 3}, {"sigma_factor": 3.0, "bias_ned_m": (0.0, 0.0, 0.0),
                                                       "satellites_lost": 0}),
    ({"kind": "gps_degradation", "bias_ned_m": [1, -2, 0.5], "satellites_lost": 4},
     {"sigma_factor": 1.0, "bias_ned_m": (1.0, -2.0, 0.5), "satellites_lost": 4}),
    ({"kind": "imu_bias_step", "gyro_bias_radps": [0.01, 0, 0]},
     {"accelerometer_bias_mps2": (0.0, 0.0, 0.0), "gyro_bias_radps": (0.01, 0.0, 0.0)}),
    ({"kind": "imu_bias_step", "accelerometer_bias_mps2": [0, 0, 0.2]},
     {"accelerometer_bias_mps2": (0.0, 0.0, 0.2), "gyro_bias_radps": (0.0, 0.0, 0.0)}),
    ({"kind": "gyro_stuck"}, {}),
    ({"kind": "altimeter_stuck"}, {}),
    ({"kind": "altimeter_offset", "offset_m": -1.5}, {"offset_m": -1.5}),
    ({"kind": "camera_off"}, {}),
    ({"kind": "lidar_off"}, {}),
    ({"kind": "battery_cell_failure"}, {"cells_failed": 1, "voltage_step_v": None}),
    ({"kind": "battery_cell_failure", "cells_failed": 2}, {"cells_failed": 2, "voltage_step_v": None}),
    ({"kind": "battery_cell_failure", "voltage_step_v": 3.7}, {"cells_failed": None, "voltage_step_v": 3.7}),
    ({"kind": "grasper_release"}, {}),
    ({"kind": "comm_loss"}, {}),
    ({"kind": "self_test_failure"}, {}),
]


def test_the_good_items_cover_every_kind() -> None:
    assert {item["kind"] for item, _ in GOOD} == set(KINDS)
    assert len(KINDS) == 15


@pytest.mark.parametrize(("item", "params"), GOOD, ids=[f"{g[0]['kind']}-{i}" for i, g in enumerate(GOOD)])
def test_every_kind_parses_with_its_parameters_and_defaults(item: dict, params: dict) -> None:
    spec = _one({**item, "trigger": AT_1S})
    assert spec.kind == item["kind"]
    assert dict(spec.params) == params
    assert spec.vehicles == "all" and spec.duration_s is None and spec.repeat is False
    assert spec.id == f"{item['kind']}.0"
    assert spec.trigger == AtTime(1.0)
    # the scenario mapping of a spec parses back to the same spec
    assert FaultSpec.from_dict(spec.as_dict(), num_vehicles=3) == spec


def test_common_keys_parse() -> None:
    spec = _one({"kind": "gps_outage", "vehicles": [2, 0], "trigger": {"at_step": 4}, "duration_s": 2.5,
                 "id": "gps-2"})
    assert (spec.vehicles, spec.trigger, spec.duration_s, spec.id) == ((2, 0), AtStep(4), 2.5, "gps-2")
    assert _one({"kind": "gps_outage", "vehicles": 1, "trigger": AT_1S}).vehicles == (1,)
    p = _one({"kind": "comm_loss", "trigger": {"probabilistic": {"probability": 0.2, "period_s": 60}},
              "repeat": True})
    assert p.trigger == Probabilistic(0.2, 60.0) and p.repeat
    box = _one({"kind": "lidar_off", "trigger": {"condition": {"inside_box_ned_m": [0, 1, 2, 3, -4, 0]}}})
    assert box.trigger.value == (0.0, 1.0, 2.0, 3.0, -4.0, 0.0)
    assert parse_faults(None) == () and parse_faults([]) == ()


# --- parsing: every kind, bad (one ConfigError naming the key) ---------------------------------------

BAD = [
    ({"kind": "rotor_los", "rotor": 1}, "faults[0].kind"),
    ({"rotor": 1}, "faults[0].kind"),
    ({"kind": "rotor_loss"}, "faults[0].rotor"),
    ({"kind": "rotor_loss", "rotor": 4}, "faults[0].rotor"),
    ({"kind": "rotor_loss", "rotor": 1.5}, "faults[0].rotor"),
    ({"kind": "rotor_loss", "rotor": True}, "faults[0].rotor"),
    ({"kind": "rotor_degradation", "rotor": 1}, "faults[0].factor"),
    ({"kind": "rotor_degradation", "rotor": 1, "factor": 1.2}, "faults[0].factor"),
    ({"kind": "motor_stuck"}, "faults[0].rotor"),
    ({"kind": "motor_stuck", "rotor": 0, "command": -0.1}, "faults[0].command"),
    ({"kind": "gps_outage", "rotor": 1}, "faults[0].rotor"),
    ({"kind": "gps_degradation"}, "faults[0]: gps_degradation needs at least one"),
    ({"kind": "gps_degradation", "sigma_factor": 0.5}, "faults[0].sigma_factor"),
    ({"kind": "gps_degradation", "bias_ned_m": [1, 2]}, "faults[0].bias_ned_m"),
    ({"kind": "gps_degradation", "satellites_lost": -1}, "faults[0].satellites_lost"),
    ({"kind": "imu_bias_step"}, "faults[0]: imu_bias_step needs at least one"),
    ({"kind": "imu_bias_step", "gyro_bias_radps": [0, float("nan"), 0]}, "faults[0].gyro_bias_radps"),
    ({"kind": "gyro_stuck", "factor": 2}, "faults[0].factor"),
    ({"kind": "altimeter_stuck", "offset_m": 1}, "faults[0].offset_m"),
    ({"kind": "altimeter_offset"}, "faults[0].offset_m"),
    ({"kind": "altimeter_offset", "offset_m": "up"}, "faults[0].offset_m"),
    ({"kind": "camera_off", "colour": 1}, "faults[0].colour"),
    ({"kind": "lidar_off", "rotor": 0}, "faults[0].rotor"),
    ({"kind": "battery_cell_failure", "cells_failed": 0}, "faults[0].cells_failed"),
    ({"kind": "battery_cell_failure", "voltage_step_v": -1}, "faults[0].voltage_step_v"),
    ({"kind": "battery_cell_failure", "cells_failed": 1, "voltage_step_v": 2}, "faults[0].voltage_step_v"),
    ({"kind": "grasper_release", "rotor": 0}, "faults[0].rotor"),
    ({"kind": "comm_loss", "duration": 3}, "faults[0].duration"),
    ({"kind": "self_test_failure", "probability": 0.1}, "faults[0].probability"),
]


def test_the_bad_items_cover_every_kind() -> None:
    assert {item.get("kind") for item, _ in BAD} >= set(KINDS)


@pytest.mark.parametrize(("item", "key"), BAD, ids=[f"{b[0].get('kind')}-{i}" for i, b in enumerate(BAD)])
def test_every_kind_refuses_bad_parameters_naming_the_key(item: dict, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_faults([{"trigger": AT_1S, **item}], num_vehicles=3)
    assert str(err.value).startswith(key), str(err.value)


@pytest.mark.parametrize(("extra", "key"), [
    ({"vehicles": [3]}, "faults[1].vehicles[0]"),
    ({"vehicles": [0, 0]}, "faults[1].vehicles"),
    ({"vehicles": []}, "faults[1].vehicles"),
    ({"vehicles": "some"}, "faults[1].vehicles"),
    ({"vehicles": [-1]}, "faults[1].vehicles[0]"),
    ({"trigger": None}, "faults[1].trigger"),
    ({"trigger": {"at_time_s": -1}}, "faults[1].trigger.at_time_s"),
    ({"trigger": {"at_time_s": 1, "at_step": 2}}, "faults[1].trigger"),
    ({"trigger": {"at_stp": 2}}, "faults[1].trigger.at_stp"),
    ({"trigger": {"at_step": 2.5}}, "faults[1].trigger.at_step"),
    ({"trigger": {"probabilistic": {"probability": 1.5, "period_s": 1}}},
     "faults[1].trigger.probabilistic.probability"),
    ({"trigger": {"probabilistic": {"probability": 0.5, "period_s": 0}}},
     "faults[1].trigger.probabilistic.period_s"),
    ({"trigger": {"probabilistic": {"period_s": 1}}}, "faults[1].trigger.probabilistic.probability"),
    ({"trigger": {"probabilistic": {"probability": 0.5, "rate": 1}}}, "faults[1].trigger.probabilistic.rate"),
    ({"trigger": {"probabilistic": {"probability": 0.5, "period_s": 1, "clock": "flying"}}},
     "faults[1].trigger.probabilistic.clock"),
    ({"trigger": {"probabilistic": {"probability": 0.5, "clock": "airborne"}}},  # a one-shot has no clock
     "faults[1].trigger.probabilistic.clock"),
    ({"trigger": {"condition": {"battery_below_v": -1}}}, "faults[1].trigger.condition.battery_below_v"),
    ({"trigger": {"condition": {"battery_below_fraction": 1.5}}},
     "faults[1].trigger.condition.battery_below_fraction"),
    ({"trigger": {"condition": {"inside_box_ned_m": [0, 1, 2]}}},
     "faults[1].trigger.condition.inside_box_ned_m"),
    ({"trigger": {"condition": {"altitude_below_m": 3}}}, "faults[1].trigger.condition.altitude_below_m"),
    ({"duration_s": 0}, "faults[1].duration_s"),
    ({"duration_s": "long"}, "faults[1].duration_s"),
    ({"repeat": "yes"}, "faults[1].repeat"),
    ({"repeat": True}, "faults[1].repeat"),  # a time trigger fires once
    ({"id": "has space"}, "faults[1].id"),
    ({"id": "a"}, "faults[1].id"),  # already faults[0]'s id
])
def test_common_keys_refuse_bad_values_naming_the_key(extra: dict, key: str) -> None:
    items = [{"kind": "gps_outage", "trigger": AT_1S, "id": "a"},
             {"kind": "gps_outage", "trigger": AT_1S, **extra}]
    with pytest.raises(ConfigError) as err:
        parse_faults(items, num_vehicles=3)
    assert str(err.value).startswith(key), str(err.value)


def test_a_missing_trigger_and_a_non_list_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^faults\[0\]\.trigger: missing"):
        parse_faults([{"kind": "gps_outage"}])
    with pytest.raises(ConfigError, match=r"^faults=.* must be a list"):
        parse_faults({"kind": "gps_outage"})
    with pytest.raises(ConfigError, match=r"^faults\[0\]=.* must be a mapping"):
        parse_faults(["gps_outage"])


def test_a_spec_built_directly_is_validated_too() -> None:
    with pytest.raises(ConfigError, match=r"fault\.factor"):
        FaultSpec("x", "rotor_degradation", {"rotor": 0, "factor": 2.0}, "all", AtTime(0.0))
    with pytest.raises(ConfigError, match=r"fault\.kind"):
        FaultSpec("x", "rotor_gone", {}, "all", AtTime(0.0))
    with pytest.raises(ConfigError, match=r"trigger\.at_time_s"):
        AtTime(-0.5)


def test_the_schedule_checks_indices_against_the_fleet() -> None:
    (spec,) = parse_faults([{"kind": "rotor_loss", "rotor": 3, "vehicles": [4], "trigger": AT_1S}])
    with pytest.raises(ConfigError, match=r"^faults\[0\]\.vehicles\[0\]=4"):
        FaultSchedule([spec], 3)
    (spec,) = parse_faults([{"kind": "rotor_loss", "rotor": 3, "trigger": AT_1S}])
    with pytest.raises(ConfigError, match=r"^faults\[0\]\.rotor=3"):
        FaultSchedule([spec], 3, num_rotors=3)


# --- time and step triggers, durations -----------------------------------------------------------------

def test_a_time_trigger_fires_at_exactly_its_tick_and_ends_after_its_duration() -> None:
    specs = parse_faults([{"kind": "rotor_degradation", "rotor": 2, "factor": 0.25, "vehicles": [1],
                           "trigger": AT_1S, "duration_s": 0.5}], num_vehicles=3)
    sched = FaultSchedule(specs, 3, RandomStreams(1))
    active_ticks = []
    events = []
    for k in range(1, 201):
        ev = sched.step(k, k * DT)
        events += [(k, "start") for _ in ev.started] + [(k, "end") for _ in ev.ended]
        if sched.active:
            active_ticks.append(k)
    # t = 1.0 s is tick 50; 0.5 s later is tick 75, when it ends: active at ticks 50..74 (25 ticks = 0.5 s)
    assert events == [(50, "start"), (75, "end")]
    assert active_ticks == list(range(50, 75))


def test_ends_and_clears_are_seen_while_only_permanent_faults_are_active() -> None:
    """``step`` skips its look while no fault is armed or clearing (the per-tick case of permanent faults):
    a timed end, a clear, an injection and a reset must still be seen at their tick."""
    specs = parse_faults([{"kind": "gps_outage", "vehicles": [0], "trigger": {"at_time_s": 0.1}},
                          {"kind": "lidar_off", "vehicles": [1], "trigger": {"at_time_s": 0.2},
                           "duration_s": 1.0}], num_vehicles=2)
    sched = FaultSchedule(specs, 2)
    events = _run(sched, 300)  # lidar_off from tick 10 to tick 60 (1 s later), the outage from tick 5 on
    assert events == [(5, "start", "gps_outage.0", 0), (10, "start", "lidar_off.1", 1),
                      (60, "end", "lidar_off.1", 1)]
    assert [a.id for a in sched.clear("gps_outage.0")] == ["gps_outage.0"]
    assert [(a.id, a.vehicle) for a in sched.step(301, 301 * DT).ended] == [("gps_outage.0", 0)]
    sched.inject({"kind": "altimeter_offset", "offset_m": 1.0, "vehicles": [0], "duration_s": 0.1},
                 t_s=301 * DT)
    ev = sched.step(302, 302 * DT)
    assert [a.kind for a in ev.started] == ["altimeter_offset"]
    ended_at = [k for k in range(303, 320) if sched.step(k, k * DT).ended]
    assert ended_at == [307]  # 0.1 s = 5 ticks after tick 302
    sched.reset()
    assert _run(sched, 12) == [(5, "start", "gps_outage.0", 0), (10, "start", "lidar_off.1", 1)]


def test_an_active_fault_carries_its_vehicle_kind_params_and_times() -> None:
    specs = parse_faults([{"kind": "rotor_degradation", "rotor": 2, "factor": 0.25, "vehicles": [1],
                           "trigger": AT_1S, "duration_s": 0.5}], num_vehicles=3)
    sched = FaultSchedule(specs, 3)
    _run(sched, 50)
    (a,) = sched.active
    assert (a.id, a.vehicle, a.kind, dict(a.params)) == ("rotor_degradation.0", 1, "rotor_degradation",
                                                         {"rotor": 2, "factor": 0.25})
    assert a.since_s == pytest.approx(1.0) and a.until_s == pytest.approx(1.5)
    assert a.as_dict()["params"] == {"rotor": 2, "factor": 0.25}
    np.testing.assert_array_equal(sched.active_mask("rotor_degradation"), [False, True, False])
    np.testing.assert_array_equal(sched.active_mask("rotor_loss"), [False, False, False])
    expected = np.ones((3, 4))
    expected[1, 2] = 0.25
    np.testing.assert_array_equal(sched.rotor_thrust_factors(), expected)


def test_a_step_trigger_fires_at_the_first_tick_of_that_task_step_and_permanent_faults_stay() -> None:
    specs = parse_faults([{"kind": "gps_outage", "trigger": {"at_step": 7}}], num_vehicles=2)
    sched = FaultSchedule(specs, 2, ticks_per_task_step=5)
    events = _run(sched, 400)
    # task step 7 begins at tick 7 * 5 = 35; both vehicles; permanent: no end
    assert events == [(35, "start", "gps_outage.0", 0), (35, "start", "gps_outage.0", 1)]
    assert len(sched.active) == 2 and all(a.until_s is None for a in sched.active)


def test_rotor_faults_multiply_on_the_thrust_factors() -> None:
    specs = parse_faults([
        {"kind": "rotor_degradation", "rotor": 0, "factor": 0.5, "vehicles": [0], "trigger": AT_1S},
        {"kind": "rotor_degradation", "rotor": 0, "factor": 0.5, "vehicles": [0], "trigger": AT_1S},
        {"kind": "rotor_loss", "rotor": 3, "vehicles": [1], "trigger": {"at_time_s": 2.0}},
    ], num_vehicles=2)
    sched = FaultSchedule(specs, 2)
    _run(sched, 60)
    np.testing.assert_array_equal(sched.rotor_thrust_factors(), [[0.25, 1, 1, 1], [1, 1, 1, 1]])
    for k in range(61, 101):
        sched.step(k, k * DT)
    np.testing.assert_array_equal(sched.rotor_thrust_factors(), [[0.25, 1, 1, 1], [1, 1, 1, 0]])


def test_no_faults_cost_nothing() -> None:
    sched = FaultSchedule([], 5)
    assert sched.step(1, DT) is NO_EVENTS and not NO_EVENTS and sched.active == []


# --- probabilistic triggers ------------------------------------------------------------------------------

def test_the_per_tick_probability_is_ireland_2016s() -> None:
    # P = 0.5 per T = 10 s, dt = 0.02 s: 1 - 0.5^(0.002) by hand = 1.3853e-3
    assert Probabilistic(0.5, 10.0).per_tick(0.02) == pytest.approx(1.0 - 0.5 ** 0.002, rel=1e-12)
    assert Probabilistic(0.5, 10.0).per_tick(0.02) == pytest.approx(1.3853e-3, rel=1e-4)
    assert Probabilistic(1e-9, 3600.0).per_tick(0.02) == pytest.approx(1e-9 * 0.02 / 3600, rel=1e-6)
    assert Probabilistic(1.0, 5.0).per_tick(0.02) == 1.0
    assert Probabilistic(0.3).per_tick(0.02) == 0.3  # one-shot


def _first_firings(seed: int, items: list[dict], n: int, ticks: int, fault_id: str) -> np.ndarray:
    """Tick of the first start of ``fault_id`` per vehicle (0: never within ``ticks``)."""
    sched = FaultSchedule(parse_faults(items, num_vehicles=n), n, RandomStreams(seed))
    first = np.zeros(n, int)
    for k in range(1, ticks + 1):
        for a in sched.step(k, k * DT).started:
            if a.id == fault_id and first[a.vehicle] == 0:
                first[a.vehicle] = k
    return first


PROB = {"kind": "rotor_loss", "rotor": 0, "trigger": {"probabilistic": {"probability": 0.4, "period_s": 2.0}},
        "id": "prob"}


def test_probabilistic_firing_frequency_is_within_the_binomial_interval() -> None:
    n, seeds, ticks = 40, 60, 250  # 2400 vehicle runs of 5 s
    first = np.concatenate([_first_firings(s, [PROB], n, ticks, "prob") for s in range(1, seeds + 1)])
    runs = first.size
    for t in (0.2, 0.5, 1.0, 2.0, 5.0):
        k = round(t / DT)
        fired = int(np.count_nonzero((first > 0) & (first <= k)))
        p = 1.0 - (1.0 - 0.4) ** (t / 2.0)
        lo, hi = stats.binom.interval(0.999, runs, p)
        assert lo <= fired <= hi, (t, fired, runs * p, lo, hi)


def test_a_one_shot_probabilistic_trigger_draws_once_at_the_first_tick() -> None:
    item = {"kind": "self_test_failure", "trigger": {"probabilistic": {"probability": 0.3}}, "id": "st"}
    first = np.concatenate([_first_firings(s, [item], 50, 20, "st") for s in range(1, 41)])
    assert set(np.unique(first)) <= {0, 1}  # only ever at tick 1
    lo, hi = stats.binom.interval(0.999, first.size, 0.3)
    assert lo <= np.count_nonzero(first == 1) <= hi


def test_same_seed_same_firings_different_seed_different_ones() -> None:
    a = _first_firings(7, [PROB], 50, 250, "prob")
    b = _first_firings(7, [PROB], 50, 250, "prob")
    c = _first_firings(8, [PROB], 50, 250, "prob")
    np.testing.assert_array_equal(a, b)
    assert np.count_nonzero(a) > 10  # the comparison is about real firings
    assert not np.array_equal(a, c)


def test_adding_a_fault_does_not_change_an_existing_faults_firings() -> None:
    base = _first_firings(11, [PROB], 30, 250, "prob")
    other = {"kind": "comm_loss", "trigger": {"probabilistic": {"probability": 0.9, "period_s": 1.0}},
             "repeat": True, "duration_s": 0.1}
    after = _first_firings(11, [PROB, other], 30, 250, "prob")
    before = _first_firings(11, [{**other, "id": "first"}, PROB], 30, 250, "prob")  # ids keep the streams
    np.testing.assert_array_equal(base, after)
    np.testing.assert_array_equal(base, before)


AIRBORNE = {**PROB, "trigger": {"probabilistic": {"probability": 0.4, "period_s": 2.0, "clock": "airborne"}}}


def test_an_airborne_clock_round_trips_and_defaults_to_always() -> None:
    spec = _one(AIRBORNE)
    assert spec.trigger == Probabilistic(0.4, 2.0, "airborne") and spec.trigger.airborne_clock
    assert FaultSpec.from_dict(spec.as_dict(), "again").trigger == spec.trigger
    plain = _one(PROB)
    assert plain.trigger.clock == "always" and "clock" not in plain.as_dict()["trigger"]["probabilistic"]


def test_an_airborne_clock_stands_still_on_the_ground() -> None:
    """Each vehicle's first firing tick with the clock held for its first G ticks on the ground is its
    firing tick with the clock always running, plus G: the same draws, counted over airborne ticks."""
    n, ticks = 30, 400
    grounded_ticks = np.arange(n) % 4 * 25  # 0, 25, 50, 75 ticks on the ground, then airborne
    always = _first_firings(13, [PROB], n, ticks, "prob")
    sched = FaultSchedule(parse_faults([AIRBORNE], num_vehicles=n), n, RandomStreams(13))
    first = np.zeros(n, int)
    for k in range(1, ticks + 1):
        airborne = k > grounded_ticks  # tick k starts on the ground while k <= G
        for a in sched.step(k, k * DT, FaultConditions(airborne=airborne)).started:
            first[a.vehicle] = first[a.vehicle] or k
    fired = (always > 0) & (always + grounded_ticks <= ticks)
    assert np.count_nonzero(fired) > 10 and np.count_nonzero(fired & (grounded_ticks > 0)) > 5
    np.testing.assert_array_equal(first[fired], always[fired] + grounded_ticks[fired])
    # airborne throughout: exactly the clock that always runs
    steady = FaultSchedule(parse_faults([AIRBORNE], num_vehicles=n), n, RandomStreams(13))
    flying = np.ones(n, bool)
    first_flying = np.zeros(n, int)
    for k in range(1, ticks + 1):
        for a in steady.step(k, k * DT, FaultConditions(airborne=flying)).started:
            first_flying[a.vehicle] = first_flying[a.vehicle] or k
    np.testing.assert_array_equal(first_flying, always)


def test_an_airborne_clock_without_its_input_is_an_error() -> None:
    sched = FaultSchedule(parse_faults([AIRBORNE], num_vehicles=2), 2, RandomStreams(1))
    with pytest.raises(ValueError, match=r"'prob' \(clock: airborne\) needs FaultConditions\.airborne"):
        sched.step(1, DT, FaultConditions())
    with pytest.raises(ValueError, match=r"airborne must have shape \(2,\)"):
        sched.step(1, DT, FaultConditions(airborne=np.ones(3, bool)))


def test_a_repeating_fault_fires_again_after_it_ends_but_never_while_active() -> None:
    item = {"kind": "comm_loss", "vehicles": [0], "trigger": {"probabilistic": {"probability": 0.9,
            "period_s": 1.0}}, "repeat": True, "duration_s": 0.2}
    events = _run(FaultSchedule(parse_faults([item], num_vehicles=1), 1, RandomStreams(3)), 500)
    starts = [k for k, what, _, _ in events if what == "start"]
    ends = [k for k, what, _, _ in events if what == "end"]
    assert len(starts) > 5
    # alternating start / end, each lasting 0.2 s = 10 ticks
    assert all(e - s == 10 for s, e in zip(starts, ends, strict=False))
    assert all(s2 >= e for e, s2 in zip(ends, starts[1:], strict=False))
    once = {**item, "repeat": False}
    events = _run(FaultSchedule(parse_faults([once], num_vehicles=1), 1, RandomStreams(3)), 500)
    assert [what for _, what, _, _ in events] == ["start", "end"]


def test_reset_starts_a_new_episode_and_the_streams_go_on() -> None:
    sched = FaultSchedule(parse_faults([PROB], num_vehicles=20), 20, RandomStreams(5))
    first = _run(sched, 250)
    sched.reset()
    assert sched.active == []
    second = _run(sched, 250)
    assert first and second and first != second  # fired again (a new episode), other draws


# --- condition triggers ------------------------------------------------------------------------------------

def test_a_battery_voltage_condition_fires_when_it_becomes_true() -> None:
    low = {"kind": "battery_cell_failure", "trigger": {"condition": {"battery_below_v": 10.5}}, "id": "low"}
    specs = parse_faults([low], num_vehicles=3)
    sched = FaultSchedule(specs, 3)
    # vehicle 0 sags linearly from 12 V by 0.01 V per tick: below 10.5 V from tick 151 (12 - 1.51)
    # vehicle 1 is below from the start; vehicle 2 has no battery reading (NaN) and never fires
    def volts(k: int) -> FaultConditions:
        return FaultConditions(battery_v=np.array([12.0 - 0.01 * k, 10.0, np.nan]))
    events = _run(sched, 300, volts)
    assert events == [(1, "start", "low", 1), (151, "start", "low", 0)]


def test_a_battery_fraction_condition_fires_when_it_becomes_true() -> None:
    specs = parse_faults([{"kind": "comm_loss", "trigger": {"condition": {"battery_below_fraction": 0.25}},
                           "vehicles": [1]}], num_vehicles=2)
    sched = FaultSchedule(specs, 2)
    events = _run(sched, 100, lambda k: FaultConditions(battery_fraction=np.full(2, 1.0 - 0.01 * k)))
    assert events == [(76, "start", "comm_loss.0", 1)]  # 1 - 0.76 = 0.24 < 0.25; vehicle 0 not listed


def test_a_region_condition_fires_on_entry_and_repeats_on_reentry_only() -> None:
    box = [10, 20, -5, 5, -30, 0]
    def track(k: int) -> FaultConditions:
        # north position goes 0 -> 30 m at 0.2 m per tick then back; inside [10, 20] on ticks 50..100
        north = 0.2 * k if k <= 150 else 0.2 * (300 - k)
        return FaultConditions(position_ned_m=np.array([[north, 0.0, -10.0], [0.0, 0.0, -10.0]]))
    item = {"kind": "camera_off", "trigger": {"condition": {"inside_box_ned_m": box}}, "id": "zone",
            "duration_s": 0.2, "repeat": True}
    events = _run(FaultSchedule(parse_faults([item], num_vehicles=2), 2), 300, track)
    # in at tick 50 (10 m), out after tick 100 (20 m); back in at tick 200 (20 m on the way back)
    assert events == [(50, "start", "zone", 0), (60, "end", "zone", 0),
                      (200, "start", "zone", 0), (210, "end", "zone", 0)]
    once = {**item, "repeat": False}
    events = _run(FaultSchedule(parse_faults([once], num_vehicles=2), 2), 300, track)
    assert events == [(50, "start", "zone", 0), (60, "end", "zone", 0)]


def test_a_condition_without_its_input_is_an_error() -> None:
    specs = parse_faults([{"kind": "comm_loss", "trigger": {"condition": {"battery_below_v": 10}}}])
    sched = FaultSchedule(specs, 2)
    with pytest.raises(ValueError, match="battery_v"):
        sched.step(1, DT)
    with pytest.raises(ValueError, match=r"shape \(2,\)"):
        sched.step(2, 2 * DT, FaultConditions(battery_v=[1.0, 2.0, 3.0]))


# --- run time: inject and clear --------------------------------------------------------------------------

def test_inject_starts_at_the_next_step_and_clear_ends_at_the_next_step() -> None:
    sched = FaultSchedule([], 3)
    _run(sched, 10)
    fid = sched.inject({"kind": "gps_degradation", "sigma_factor": 4, "vehicles": [0, 2], "duration_s": 10},
                       t_s=10 * DT)
    assert fid == "gps_degradation.injected1" and sched.active == []
    ev = sched.step(11, 11 * DT)
    assert [(a.id, a.vehicle, a.since_s) for a in ev.started] == [(fid, 0, 11 * DT), (fid, 2, 11 * DT)]
    assert ev.started[0].until_s == pytest.approx(11 * DT + 10)
    cleared = sched.clear(kind="gps_degradation", vehicle=2)
    assert [(a.id, a.vehicle) for a in cleared] == [(fid, 2)]
    ev = sched.step(12, 12 * DT)
    assert [(a.id, a.vehicle) for a in ev.ended] == [(fid, 2)]
    assert [(a.id, a.vehicle) for a in sched.active] == [(fid, 0)]
    assert [a.vehicle for a in sched.clear(fid)] == [0]
    assert sched.clear(fid) == []  # already on its way out
    ev = sched.step(13, 13 * DT)
    assert [a.vehicle for a in ev.ended] == [0] and sched.active == []
    assert _run(sched, 100) == []  # fired once, cleared: never again


def test_inject_with_a_trigger_and_an_id_and_reset_drops_it() -> None:
    lidar = {"kind": "lidar_off", "trigger": {"at_time_s": 0.5}}
    sched = FaultSchedule(parse_faults([lidar], num_vehicles=1), 1)
    assert sched.inject({"kind": "altimeter_offset", "offset_m": 2.0, "id": "alt",
                         "trigger": {"at_time_s": 1.0}}, t_s=0.0) == "alt"
    events = _run(sched, 60)
    assert events == [(25, "start", "lidar_off.0", 0), (50, "start", "alt", 0)]
    sched.reset()
    assert [s.id for s in sched.specs] == ["lidar_off.0"]
    assert _run(sched, 60) == [(25, "start", "lidar_off.0", 0)]


def test_inject_and_clear_refuse_bad_requests() -> None:
    sched = FaultSchedule([], 2)
    with pytest.raises(ConfigError, match=r"^inject\.kind"):
        sched.inject({"kind": "meteor"}, 0.0)
    with pytest.raises(ConfigError, match=r"^inject\.vehicles\[0\]=2"):
        sched.inject({"kind": "gps_outage", "vehicles": [2]}, 0.0)
    with pytest.raises(ConfigError, match=r"^inject\.rotor"):
        sched.inject({"kind": "rotor_loss"}, 0.0)
    sched.inject({"kind": "gps_outage", "id": "g"}, 0.0)
    with pytest.raises(ConfigError, match=r"^inject\.id='g' is already"):
        sched.inject({"kind": "gps_outage", "id": "g"}, 0.0)
    with pytest.raises(ValueError, match="fault id or a kind"):
        sched.clear()
    with pytest.raises(ValueError, match="unknown fault kind"):
        sched.clear(kind="meteor")
    with pytest.raises(ValueError, match="vehicle 5"):
        sched.clear(kind="gps_outage", vehicle=5)


def test_a_spec_can_be_injected_as_is() -> None:
    spec = FaultSpec("manual", "grasper_release", {}, (1,), AtStep(0), duration_s=None)
    sched = FaultSchedule([], 2)
    sched.inject(spec, 0.0)
    assert _run(sched, 3) == [(1, "start", "manual", 1)]
    assert math.isclose(sched.active[0].since_s, DT)


def test_the_quiet_ticks_give_the_firings_of_the_rules_drawn_from_the_streams() -> None:
    """A schedule that skips the ticks where nothing can happen (module docstring, "Quiet ticks") starts
    and ends every fault at the ticks the trigger rules give, computed here from the streams' own
    waiting times: an airborne clock held on the ground, a repeating voltage condition that dips and
    recovers, a time and a step trigger, and a fault injected mid-run."""
    n, seed, ticks, inject_after = 4, 21, 600, 200
    items = [
        {"kind": "comm_loss", "id": "prob", "repeat": True, "duration_s": 0.1,
         "trigger": {"probabilistic": {"probability": 0.5, "period_s": 1.0, "clock": "airborne"}}},
        {"kind": "battery_cell_failure", "id": "low", "repeat": True, "duration_s": 0.1,
         "trigger": {"condition": {"battery_below_v": 10.5}}},
        {"kind": "gps_outage", "id": "timed", "duration_s": 0.5, "trigger": {"at_time_s": 2.0}},
        {"kind": "lidar_off", "id": "stepped", "trigger": {"at_step": 150}},
    ]
    late = {"kind": "camera_off", "id": "late", "vehicles": [3],
            "trigger": {"probabilistic": {"probability": 0.9, "period_s": 1.0}}}

    def volts(k: int) -> np.ndarray:  # vehicle 0 sags below 10.5 V from tick 301; vehicle 1 dips twice
        dip = 250 <= k <= 260 or 400 <= k <= 402
        return np.array([12.0 - 0.005 * k, 10.4 if dip else 11.0, 12.0, 12.0])

    def airborne(k: int) -> np.ndarray:  # vehicle 2 rests on the ground for ticks 100-160
        return np.array([True, True, not 100 <= k <= 160, True])

    sched = FaultSchedule(parse_faults(items, num_vehicles=n), n, RandomStreams(seed))
    got = []
    for k in range(1, ticks + 1):
        ev = sched.step(k, k * DT, FaultConditions(battery_v=volts(k), airborne=airborne(k)))
        got += [(k, "start", a.id, a.vehicle) for a in ev.started]
        got += [(k, "end", a.id, a.vehicle) for a in ev.ended]
        if k == inject_after:
            sched.inject(late, k * DT)

    expected = [(100, "start", "timed", v) for v in range(n)] + [(125, "end", "timed", v) for v in range(n)]
    expected += [(150, "start", "stepped", v) for v in range(n)]
    streams = RandomStreams(seed)
    p_tick = Probabilistic(0.5, 1.0).per_tick(DT)
    for v in range(n):
        rng, count, until = streams.get("fault.prob", v), 0, None
        rng.geometric(p_tick)  # construction draws twice (the trials, then the reset): the second counts
        success = int(rng.geometric(p_tick))
        was_low = False
        for k in range(1, ticks + 1):
            if until == k:  # ends first, then may start again at once
                expected.append((k, "end", "prob", v))
                until = None
            if airborne(k)[v]:
                count += 1
                if count == success:
                    success += int(rng.geometric(p_tick))
                    if until is None:
                        expected.append((k, "start", "prob", v))
                        until = k + 5
        low_until = None
        for k in range(1, ticks + 1):
            if low_until == k:
                expected.append((k, "end", "low", v))
                low_until = None
            is_low = volts(k)[v] < 10.5
            if is_low and not was_low and low_until is None:
                expected.append((k, "start", "low", v))
                low_until = k + 5
            was_low = is_low
    late_rng, late_p = streams.get("fault.late", 3), Probabilistic(0.9, 1.0).per_tick(DT)
    late_rng.geometric(late_p)  # (as above)
    first_late = inject_after + int(late_rng.geometric(late_p))
    expected.append((first_late, "start", "late", 3))

    def order(e: tuple) -> tuple:
        return e[0], e[1], e[2], e[3]
    assert sorted(got, key=order) == sorted(expected, key=order)
    lows = [e for e in expected if e[2] == "low" and e[1] == "start"]
    assert sorted((k, v) for k, _, _, v in lows) == [(250, 1), (301, 0), (400, 1)]
    assert sum(1 for e in expected if e[2] == "prob" and e[1] == "start") > 20
    assert any(100 <= k <= 160 for k, what, fid, v in expected if fid == "prob" and v != 2)  # vehicle 2 held


def test_fault_parameters_are_numbers_not_booleans_or_strings() -> None:
    """As strict as the rest of the scenario: ``duration_s: true`` is not 1 s and ``offset_m: '12'`` is
    not 12 m; each is refused in one line naming its key."""
    cases = [({"kind": "gps_outage", "duration_s": True}, r"faults\[0\]\.duration_s=True must be a number"),
             ({"kind": "altimeter_offset", "offset_m": "12"}, r"faults\[0\]\.offset_m='12' must be a number"),
             ({"kind": "imu_bias_step", "gyro_bias_radps": [0.01, True, 0]},
              r"faults\[0\]\.gyro_bias_radps=.* must be a number or a list of numbers")]
    for item, message in cases:
        with pytest.raises(ConfigError, match=message) as refused:
            parse_faults([{**item, "trigger": AT_1S}], num_vehicles=2)
        assert "\n" not in str(refused.value)


def test_an_injected_faults_yaml_is_read_as_a_scenario_file_is() -> None:
    """The /sim/inject_fault request's YAML goes through the scenario loader's YAML 1.2 reader with its
    limits: ``1e3`` is a number, and a short request whose aliases would expand into gigabytes is
    refused at once with one line (it froze the clock for 100 s and reached 4.4 GB)."""
    from qrsim_ros.ros.from_messages import fault_request

    item = fault_request("{kind: gps_outage, vehicles: [0], duration_s: 1e3}")
    assert isinstance(item, dict) and item["duration_s"] == 1000.0
    assert parse_faults([{**item, "trigger": AT_1S}], num_vehicles=1)[0].duration_s == 1000.0
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)) + "kind: *i\n"
    assert len(bomb) < 600
    answer = fault_request(bomb)
    assert isinstance(answer, str) and answer.startswith("fault_yaml is not valid YAML: ")
    assert "alias" in answer and "\n" not in answer and len(answer) < 300


def test_huge_values_in_a_fault_request_give_a_short_message() -> None:
    """A 5 MB kind, id or key is named in at most a line of about 80 characters of it, not echoed whole
    (the clear_fault reply echoed a 5 MB id)."""
    huge = "x" * 5_000_000
    sched = FaultSchedule(parse_faults([{"kind": "gps_outage", "trigger": AT_1S}], num_vehicles=1), 1)
    with pytest.raises(ValueError, match="unknown fault kind") as kind:
        sched.clear(kind=huge)
    with pytest.raises(ConfigError, match="unknown key for gps_outage") as key:
        parse_faults([{"kind": "gps_outage", huge: 1, "trigger": AT_1S}], num_vehicles=1)
    with pytest.raises(ConfigError, match="is unknown") as spec_kind:
        FaultSpec("a", huge, {}, "all", AtStep(0))
    with pytest.raises(ConfigError, match="must be 1-64 characters") as fault_id:
        sched.inject({"kind": "gps_outage", "id": huge}, 0.0)
    for refused in (kind, key, spec_kind, fault_id):
        assert len(str(refused.value)) < 400 and "\n" not in str(refused.value)
    assert sched.clear(huge) == []  # an id nothing has: nothing to clear, and nothing echoed
