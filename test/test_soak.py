"""Smoke test of scripts/soak.py's pure parts: the seeded fault schedule and the result table.

The soak itself (a launched graph under faults for minutes) is run by hand; see the script's docstring.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest
from rosenv import REPO_ROOT


@pytest.fixture(scope="module")
def soak() -> ModuleType:
    spec = importlib.util.spec_from_file_location("soak_script", REPO_ROOT / "scripts" / "soak.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["soak_script"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_schedule_depends_on_the_seed_alone(soak: ModuleType) -> None:
    a = soak.make_schedule(7, 10.0)
    assert a == soak.make_schedule(7, 10.0)
    assert a != soak.make_schedule(8, 10.0)
    # 10 minutes at one fault per ~20 s: about 30 faults, in time order, all inside the soak
    assert 20 <= len(a) <= 45
    times = [f.at_s for f in a]
    assert times == sorted(times) and times[0] > 0 and times[-1] <= 600.0
    assert [f.index for f in a] == list(range(len(a)))


def test_schedule_covers_every_kind_with_valid_targets(soak: ModuleType) -> None:
    faults = soak.make_schedule(1, 10.0, num_vehicles=10)
    # whole rounds first: the first len(KINDS) faults hold every kind once
    assert sorted(f.kind for f in faults[:len(soak.KINDS)]) == sorted(soak.KINDS)
    vehicles = {f"uav{i}" for i in range(1, 11)}
    for f in faults:
        if f.kind == "kill9":
            assert f.target in soak.SIMULATOR_NODES
        elif f.kind == "sigterm":
            assert f.target in soak.ALL_NODES
        elif f.kind in ("flood", "malformed", "stale_stamp", "future_stamp"):
            assert f.target in vehicles
        if f.kind == "flood":
            assert 2.0 <= f.duration_s <= 4.0
        if f.kind == "autopilot_stop":
            assert f.target == "example_autopilot" and 3.0 <= f.duration_s <= 6.0
        assert (f.variant in soak.MALFORMED_VARIANTS) == (f.kind == "malformed")


def test_schedule_of_chosen_kinds_and_bad_input(soak: ModuleType) -> None:
    faults = soak.make_schedule(3, 5.0, kinds=["flood", "kill9"], mean_gap_s=10.0)
    assert {f.kind for f in faults} == {"flood", "kill9"}
    assert soak.make_schedule(3, 0.0) == []
    with pytest.raises(ValueError, match=r"unknown fault kind.*'fire'"):
        soak.make_schedule(3, 1.0, kinds=["fire"])
    with pytest.raises(ValueError, match="mean_gap_s > 0"):
        soak.make_schedule(3, 1.0, mean_gap_s=0.0)


def test_table_counts_per_kind_and_total(soak: ModuleType) -> None:
    F, R = soak.Fault, soak.FaultResult
    results = [
        R(F(0, "kill9", 10.0, "gps"), injected=True, detected=True, survived=False,
          violations=["orphan node processes: gps (pid 1)"], bag_ticks_lost=12, probe_ticks_missed=3),
        R(F(1, "flood", 30.0, "uav3", 3.0), injected=True, detected=False, survived=True),
        R(F(2, "flood", 50.0, "uav1", 2.0), injected=True, detected=True, survived=True, bag_ticks_lost=1),
        R(F(3, "disk_full", 70.0), injected=False, detected=True),  # not injected: counts nothing
    ]
    rows = soak.tabulate(results)
    assert list(rows) == ["kill9", "flood", "disk_full", "total"]  # KINDS order, total last
    assert rows["flood"] == {"injected": 2, "detected": 1, "survived": 2, "bag_ticks_lost": 1,
                             "probe_ticks_missed": 0, "violations": 0}
    assert rows["disk_full"]["injected"] == 0 and rows["disk_full"]["detected"] == 0
    assert rows["total"] == {"injected": 3, "detected": 2, "survived": 2, "bag_ticks_lost": 13,
                             "probe_ticks_missed": 3, "violations": 1}
    md = soak.markdown_table(rows, 612.4, 4)
    assert "| kill9 | 1 | 1 | 0 | 12 | 3 | 1 |" in md
    assert "| **total** | 3 | 2 | 2 | 13 | 3 | 1 |" in md
    assert "Wall time 612 s, 4 launched run(s)." in md


def test_detection_looks_for_rising_counters_by_name(soak: ModuleType) -> None:
    before = {("/flight_controller", "setpoint_rejected_frame"): 2.0, ("/imu", "late_inputs"): 0.0}
    after = {("/flight_controller", "setpoint_rejected_frame"): 7.0, ("/imu", "late_inputs"): 4.0,
             ("/referee", "ticks_rejected"): 1.0}  # a counter first seen after the fault counts from 0
    found = soak.rising(before, after, soak.DETECT_KEYWORDS["forged_tick"])
    assert found == ["/flight_controller:setpoint_rejected_frame 2->7", "/referee:ticks_rejected 0->1"]
    assert soak.rising(before, before, ("rejected",)) == []
    # a fault aimed at uav3 shows on uav3's own status counters, not on another vehicle's
    status_before = {("/sim/vehicle_status/uav3", "commands_rejected"): 0.0,
                     ("/sim/vehicle_status/uav4", "commands_rejected"): 0.0}
    status_after = {("/sim/vehicle_status/uav3", "commands_rejected"): 0.0,
                    ("/sim/vehicle_status/uav4", "commands_rejected"): 9.0}
    assert soak.rising(status_before, status_after, ("rejected",), vehicle="uav3") == []
    assert soak.rising(status_before, status_after, ("rejected",), vehicle="uav4") == [
        "/sim/vehicle_status/uav4:commands_rejected 0->9"]
    assert soak.missing_in({1, 2, 4, 5}, 1, 6) == 2 and soak.missing_in(set(), 5, 4) == 0
